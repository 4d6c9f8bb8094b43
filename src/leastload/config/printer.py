"""The config model -> NetScaler CLI lines, JSON-ready data, and the TOML form.

Each printer writes only what differs from the defaults, in a fixed order
(servers, monitors, services with their monitors, vservers with their
bindings), so its output parses back to an equal model. The [proxy] table
exists in the TOML form only: NetScaler lines say it has one in a comment.
"""
from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from typing import Any, Optional

from .model import DEFAULT_HTTP_REQUEST, DEFAULT_RESP_CODES, PROXY_KEYS, CertKey, Config, Monitor, Service, VServer

PROXY_COMMENT = "# proxy settings: only in the TOML form (leastload show --toml)"


def _quote(text: str) -> str:
    """A name as the CLI reads it back: quoted when it holds a blank."""
    if any(c.isspace() for c in text) or not text:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _port(port: int) -> str:
    return "*" if port == 65535 else str(port)


def _number(x: float) -> str:
    return repr(x)  # float(repr(x)) == x: the round trip is exact


def _always_quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _codes(monitor: Monitor) -> list[str]:
    return [str(low) if low == high else f"{low}-{high}" for low, high in monitor.resp_codes]


def _cli_seconds(seconds: float) -> str:
    """Whole seconds as they are, else milliseconds: `5`, `500 MSEC`."""
    return str(int(seconds)) if seconds == int(seconds) else f"{round(seconds * 1000)} MSEC"


def _monitor_line(m: Monitor) -> str:
    parts = [f"add lb monitor {_quote(m.name)} {m.monitor_type}"]
    if m.monitor_type == "HTTP":
        if m.resp_codes != DEFAULT_RESP_CODES:
            parts.append("-respCode " + " ".join(_codes(m)))
        if m.http_request != DEFAULT_HTTP_REQUEST:
            parts.append("-httpRequest " + _always_quoted(" ".join(m.http_request)))
    if m.interval != 5:
        parts.append(f"-interval {_cli_seconds(m.interval)}")
    if m.resptimeout != 2:
        parts.append(f"-resptimeout {_cli_seconds(m.resptimeout)}")
    if m.retries != 3:
        parts.append(f"-retries {m.retries}")
    if m.success_retries != 1:
        parts.append(f"-successRetries {m.success_retries}")
    return " ".join(parts)


def _service_options(service: Service) -> str:
    parts = []
    if service.state != "ENABLED":
        parts.append(f"-state {service.state}")
    if service.ttfb is not None:
        parts.append(f"-ttfb {_number(service.ttfb)}")
    if service.request_bytes is not None:
        parts.append(f"-requestBytes {service.request_bytes}")
    if service.response_bytes is not None:
        parts.append(f"-responseBytes {service.response_bytes}")
    return "".join(" " + p for p in parts)


def _slow_start(vs: VServer) -> str:
    """The vserver's slow-start options, those that differ from the defaults."""
    parts = []
    if vs.new_service_request or vs.new_service_request_unit != "PER_SECOND":
        parts.append(f"-newServiceRequest {vs.new_service_request} {vs.new_service_request_unit}")
    if vs.new_service_request_increment_interval:
        parts.append(f"-newServiceRequestIncrementInterval {vs.new_service_request_increment_interval}")
    return "".join(" " + p for p in parts)


def _vserver_lines(vs: VServer) -> list[str]:
    """`add lb vserver` and its binds. Slow start is set on the add line unless a
    service is bound before it was on (an established service); then a `set lb
    vserver` line switches it on before the first service bound in slow start."""
    name = _quote(vs.name)
    where = "" if vs.address is None or vs.port is None else f" {vs.address} {_port(vs.port)}"
    head = f"add lb vserver {name} {vs.service_type}{where} -lbMethod {vs.lb_method}"
    if vs.hash_length is not None:
        head += f" -hashLength {vs.hash_length}"
    if vs.netmask is not None:
        head += f" -netmask {vs.netmask}"
    on = not vs.bindings or vs.bindings[0].slow_start
    lines = [head + (_slow_start(vs) if on else "")]
    settings_printed = on
    for b in vs.bindings:
        if b.slow_start != on:
            on = b.slow_start
            lines.append(f"set lb vserver {name}" + (_slow_start(vs) if on else " -newServiceRequest 0"))
            settings_printed = settings_printed or on
        weight = "" if b.weight is None else f" -weight {b.weight}"
        lines.append(f"bind lb vserver {name} {_quote(b.service)}{weight}")
    final = _slow_start(vs)
    if final and (not on or not settings_printed):  # the vserver's own settings, last
        lines.append(f"set lb vserver {name}{final}")
    return lines


def to_netscaler(config: Config) -> str:
    """NetScaler CLI lines, one command a line, ending with a newline."""
    lines = [PROXY_COMMENT] if config.proxy else []
    for server in config.servers:
        lines.append(f"add server {_quote(server.name)} {server.address}")
    for monitor in config.monitors:
        lines.append(_monitor_line(monitor))
    for service in config.services:
        lines.append(f"add service {_quote(service.name)} {_quote(service.host)} {service.service_type} "
                     f"{_port(service.port)}{_service_options(service)}")
        if service.weight is not None:
            lines.append(f"set service {_quote(service.name)} -weight {service.weight}")
        for name in service.monitors:
            lines.append(f"bind service {_quote(service.name)} -monitorName {_quote(name)}")
    names = _cert_key_names(config)
    for ck in names:
        lines.append(f"add ssl certKey {_quote(names[ck])} -cert {_quote(ck.cert)} -key {_quote(ck.key)}")
    for vs in config.vservers:
        lines += _vserver_lines(vs)
        for ck in vs.cert_keys:
            lines.append(f"bind ssl vserver {_quote(vs.name)} -certkeyName {_quote(names[_key_of(ck)])}")
    return "".join(line + "\n" for line in lines)


def _key_of(ck: CertKey) -> CertKey:
    return CertKey(ck.cert, ck.key)


def _cert_key_names(config: Config) -> dict[CertKey, str]:
    """Each certificate/key pair once, by its certKey name (the TOML form's have none: one made up)."""
    names: dict[CertKey, str] = {}
    for ck in config.cert_keys + [c for vs in config.vservers for c in vs.cert_keys]:
        key = _key_of(ck)
        if key not in names:
            names[key] = ck.name or f"certkey{len(names) + 1}"
    return names


def _plain(obj: object) -> dict[str, Any]:
    """A dataclass as a dict of its compared fields, None values left out."""
    out: dict[str, Any] = {}
    for f in fields(obj):  # type: ignore[arg-type]
        if not f.compare:
            continue
        value = getattr(obj, f.name)
        if value is None:
            continue
        if isinstance(value, list):
            value = [_plain(v) if is_dataclass(v) else v for v in value]
        elif isinstance(value, tuple):  # a monitor's resp_codes and http_request
            value = [list(v) if isinstance(v, tuple) else v for v in value]
        out[f.name] = value
    return out


def to_data(config: Config) -> dict[str, Any]:
    """The model as plain dicts and lists (what `leastload show --json` prints)."""
    return {"servers": [_plain(s) for s in config.servers],
            "monitors": [_plain(m) for m in config.monitors],
            "services": [_plain(s) for s in config.services],
            "vservers": [_plain(v) for v in config.vservers],
            "proxy": {k: config.proxy[k] for k in _proxy_order(config)}}


def _proxy_order(config: Config) -> list[str]:
    """The [proxy] keys in PROXY_KEYS order (others, which the parsers never make, last)."""
    return [k for k in PROXY_KEYS if k in config.proxy] + [k for k in config.proxy if k not in PROXY_KEYS]


def to_json(config: Config) -> str:
    return json.dumps(to_data(config), indent=2) + "\n"


# ---- the TOML form -------------------------------------------------------------

def _toml_key(key: str) -> str:
    bare = key and all(c.isalnum() and c.isascii() or c in "_-" for c in key)
    return key if bare else _toml_string(key)


class _Raw(str):
    """TOML text written as it is (a list)."""


def _toml_value(value: object) -> str:
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return _toml_string(str(value))


def _toml_string(text: str) -> str:
    """A TOML basic string: ", \\ and the control characters escaped, the rest as it is."""
    out = ['"']
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif c < " " or c == "\x7f":
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out) + '"'


def _toml_table(header: str, items: list[tuple[str, Optional[object]]]) -> list[str]:
    lines = [f"[{header}]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in items if v is not None]
    return lines + [""]


def _toml_seconds(seconds: float) -> float | int:
    return int(seconds) if seconds == int(seconds) else seconds


def _toml_list(items: list[object]) -> str:
    return "[" + ", ".join(_toml_value(v) for v in items) + "]"


def to_toml(config: Config) -> str:
    """The TOML form (docs/cli.md), which leastload.config.parse_toml reads back."""
    out: list[str] = []
    if config.proxy:
        out += _toml_table("proxy", [(k, config.proxy[k]) for k in _proxy_order(config)])
    for server in config.servers:
        out += _toml_table(f"server.{_toml_key(server.name)}", [("address", server.address)])
    for m in config.monitors:
        http = m.monitor_type == "HTTP"
        codes: list[object] = [low if low == high else f"{low}-{high}" for low, high in m.resp_codes]
        out += _toml_table(f"monitor.{_toml_key(m.name)}", [
            ("type", m.monitor_type),
            ("resp_codes", None if not http or m.resp_codes == DEFAULT_RESP_CODES else _Raw(_toml_list(codes))),
            ("http_request", None if not http or m.http_request == DEFAULT_HTTP_REQUEST else " ".join(m.http_request)),
            ("interval", None if m.interval == 5 else _toml_seconds(m.interval)),
            ("resptimeout", None if m.resptimeout == 2 else _toml_seconds(m.resptimeout)),
            ("retries", None if m.retries == 3 else m.retries),
            ("success_retries", None if m.success_retries == 1 else m.success_retries)])
    for s in config.services:
        out += _toml_table(f"service.{_toml_key(s.name)}", [
            ("host", s.host), ("type", s.service_type), ("port", s.port), ("weight", s.weight),
            ("state", None if s.state == "ENABLED" else s.state), ("ttfb", s.ttfb),
            ("request_bytes", s.request_bytes), ("response_bytes", s.response_bytes),
            ("monitors", _Raw(_toml_list(list(s.monitors))) if s.monitors else None)])
    for vs in config.vservers:
        out += _toml_table(f"vserver.{_toml_key(vs.name)}", [
            ("type", vs.service_type), ("address", vs.address), ("port", vs.port),
            ("method", vs.lb_method), ("new_service_request", vs.new_service_request or None),
            ("new_service_request_unit",
             None if vs.new_service_request_unit == "PER_SECOND" else vs.new_service_request_unit),
            ("new_service_request_increment_interval", vs.new_service_request_increment_interval or None),
            ("hash_length", vs.hash_length), ("netmask", vs.netmask),
            ("tls_cert", [c.cert for c in vs.cert_keys] or None), ("tls_key", [c.key for c in vs.cert_keys] or None),
            ("accept_proxy", vs.accept_proxy or None)])
        binds = []
        for b in vs.bindings:
            extra = ("" if b.weight is None else f", weight = {b.weight}") + (", slow_start = true" if b.slow_start else "")
            binds.append("{ service = " + _toml_value(b.service) + extra + " }" if extra else _toml_value(b.service))
        out.insert(len(out) - 1, "services = [" + ", ".join(binds) + "]")
    return "\n".join(out).rstrip("\n") + "\n" if out else ""
