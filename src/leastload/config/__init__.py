"""Config input: NetScaler CLI lines or a TOML form, one plain data model.

    from leastload.config import load, build, to_netscaler
    config = load("examples/slowstart.conf")      # .toml files are read as TOML
    print(to_netscaler(config))                    # the model back as CLI lines
    vservers = build(config, clock)                # engine VirtualServers by name

Bad input raises ConfigError, whose text is `file:line: message`. Lines and
options leastload does not model are collected in `config.warnings` (or
raise with strict=True). docs/cli.md describes the syntax.
"""
from __future__ import annotations

from pathlib import Path
from typing import Union

from .build import build, build_vserver, check_supported
from .errors import ConfigError
from .model import LB_METHODS, PROXY_KEYS, Binding, Config, Monitor, Server, Service, VServer
from .netscaler import parse_netscaler
from .printer import to_data, to_json, to_netscaler, to_toml
from .toml_form import parse_toml

__all__ = [
    "Binding", "Config", "ConfigError", "LB_METHODS", "Monitor", "PROXY_KEYS", "Server", "Service", "VServer",
    "build", "build_vserver", "check_supported", "load", "parse", "parse_netscaler", "parse_toml",
    "to_data", "to_json", "to_netscaler", "to_toml",
]


def parse(text: str, source: str = "<config>", *, toml: bool = False, strict: bool = False) -> Config:
    """NetScaler lines, or the TOML form when `toml`."""
    if toml:
        return parse_toml(text, source, strict=strict)
    return parse_netscaler(text, source, strict=strict)


def load(path: Union[str, Path], *, strict: bool = False) -> Config:
    """Reads a config file: TOML when its name ends in .toml, else NetScaler lines."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(source, None, "no such file") from None
    except IsADirectoryError:
        raise ConfigError(source, None, "is a directory, not a config file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(source, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(source, None, f"cannot read: {exc.strerror or exc}") from None
    return parse(text, source, toml=source.lower().endswith(".toml"), strict=strict)
