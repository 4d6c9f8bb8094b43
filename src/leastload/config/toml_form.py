"""The TOML form of the config model, for people who do not come from NetScaler.

    [server.web1]
    address = "10.0.0.1"

    [service.S1]
    host = "web1"          # a server's name or an IP address
    type = "HTTP"
    port = 80
    weight = 2             # optional; also state, ttfb, request_bytes, response_bytes
    monitors = ["mon1"]    # optional: monitors bound to it (or the vendor's "http", "tcp")

    [monitor.mon1]
    type = "HTTP"          # or "TCP"; the rest is optional (the vendor's defaults)
    resp_codes = [200, "300-302"]
    http_request = "GET /health"
    interval = 5           # seconds, whole milliseconds (0.5)
    resptimeout = 2        # seconds, less than interval
    retries = 3
    success_retries = 1

    [vserver.vs1]
    type = "HTTP"
    address = "10.0.0.100" # optional, with port
    port = 80
    method = "ROUNDROBIN"
    new_service_request = 4
    new_service_request_unit = "PER_SECOND"
    new_service_request_increment_interval = 10
    services = ["S1", { service = "S2", weight = 3 }, { service = "S3", slow_start = true }]

    [proxy]                # the proxy's own settings (PROXY_KEYS; none in NetScaler lines)
    timeout = 30
    admin = "127.0.0.1:9000"

A service listed with slow_start = true starts in slow start (it joins the
others, as if bound after slow start was set); the others are established.

Tables keep their order (TOML readers keep it), so services bind in the
order written. Errors name the line of the key (or table) at fault.
"""
from __future__ import annotations

import re
import sys
from typing import Any, Callable, Optional

from . import proxy_settings, values
from .errors import ConfigError
from .model import (BUILTIN_MONITOR_TYPES, LB_METHODS, MAX_BYTES, MAX_HASH_LENGTH, MAX_INCREMENT_INTERVAL,
                    MAX_INTERVAL, MAX_NEW_SERVICE_REQUEST, MAX_RESP_CODE, MAX_RESPTIMEOUT, MAX_RETRIES,
                    MAX_SUCCESS_RETRIES, MAX_TTFB, MAX_WEIGHT, MIN_RESP_CODE, MONITOR_TYPES, PROXY_KEYS,
                    SERVICE_STATES, SERVICE_TYPES, UNITS, UNMODELLED_BUILTIN_MONITORS, Binding, CertKey, Config,
                    Monitor, Server, Service, VServer)

TOML_EXTRA_HINT = "reading TOML on Python < 3.11 needs tomli: pip install 'leastload[toml]'"


def _loads(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on old Pythons only
        try:
            import tomli as tomllib
        except ImportError:
            raise ImportError(TOML_EXTRA_HINT) from None
    result: dict[str, Any] = tomllib.loads(text)
    return result


class _Locator:
    """Finds the line of a table or of a key in it, for messages (the TOML reader gives none)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def _header_matches(self, line: str, kind: str, name: str) -> bool:
        m = re.match(r"\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$", line)
        if not m:
            return False
        header = re.sub(r"\s*\.\s*", ".", m.group(1), count=1)
        return header in (f"{kind}.{name}", f'{kind}."{name}"', f"{kind}.'{name}'")

    def line(self, kind: str, name: Optional[str] = None, key: Optional[str] = None) -> Optional[int]:
        start = None
        for i, text in enumerate(self.lines):
            if name is None:
                if re.match(rf"\s*\[\s*{re.escape(kind)}\s*[.\]]", text):
                    return i + 1
                if key is None and re.match(rf"\s*{re.escape(kind)}\s*[=.]", text):
                    return i + 1
            elif self._header_matches(text, kind, name):
                start = i
                break
        if start is None:
            if name is not None:  # `name = ...` inside a [kind] table
                for i, text in enumerate(self.lines):
                    if re.match(rf"\s*[\"']?{re.escape(name)}[\"']?\s*=", text):
                        return i + 1
            return None
        if key is not None:
            for i in range(start + 1, len(self.lines)):
                if re.match(r"\s*\[", self.lines[i]):
                    break
                if re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", self.lines[i]):
                    return i + 1
        return start + 1

    def table_key(self, table: str, key: str) -> Optional[int]:
        """The line of `key` in the [table] table (else of the table, else of `table.key =` or `table =`)."""
        header = None
        for i, text in enumerate(self.lines):
            if re.match(rf"\s*\[\s*{re.escape(table)}\s*\.\s*[\"']?{re.escape(key)}[\"']?\s*\]", text):
                return i + 1  # [table.key]: a table where a value belongs
            if header is None and re.match(rf"\s*\[\s*{re.escape(table)}\s*\]\s*(#.*)?$", text):
                header = i
        if header is not None:
            for i in range(header + 1, len(self.lines)):
                if re.match(r"\s*\[", self.lines[i]):
                    break
                if re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", self.lines[i]):
                    return i + 1
            return header + 1
        for i, text in enumerate(self.lines):
            if re.match(rf"\s*{re.escape(table)}\s*(\.\s*[\"']?{re.escape(key)}[\"']?\s*)?=", text):
                return i + 1
        return None


def _integer(key: str, value: object, low: int, high: int) -> int:
    """A TOML integer (a string of digits is not one)."""
    if isinstance(value, str):
        raise values.fail(key, f"an integer in {low}..{high}", value)
    return values.integer(key, value, low, high)


def _port(key: str, value: object) -> int:
    """0..65535, or "*" (any port)."""
    if isinstance(value, str) and value != "*":
        raise values.fail(key, 'an integer in 0..65535 or "*"', value)
    return values.port(key, value)


def _number(key: str, value: object, low: float, high: float) -> float:
    if isinstance(value, str):
        raise values.fail(key, f"a number in ({low:g}, {high:g}]", value)
    return values.number(key, value, low, high)


def _flag(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise values.fail(key, "true or false", value)
    return value


def _text(key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise values.fail(key, "a non-empty string", value)
    return value


def _files(key: str, value: object) -> list[str]:
    """A list of file names (tls_cert, tls_key): a single string is taken as a list of one."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v for v in items):
        raise values.fail(key, "a file name or a list of file names", value)
    return list(items)


def _header_name(key: str, value: object) -> str:
    if not isinstance(value, str) or not proxy_settings.is_header_name(value):
        raise values.fail(key, "a header name (letters, digits and -)", value)
    return value


def _host_port(key: str, value: object) -> str:
    """"HOST:PORT", an IPv6 host in brackets ("[::1]:9000"); kept as written."""
    if isinstance(value, str):
        host, sep, port = value.rpartition(":")
        bracketed = host.startswith("[") and host.endswith("]") and len(host) > 2
        if (sep and host and port.isdigit() and port.isascii() and int(port) <= 65535
                and (bracketed or ":" not in host) and not any(c.isspace() for c in host)):
            return value
    raise values.fail(key, 'HOST:PORT such as "127.0.0.1:9000" (an IPv6 host in brackets)', value)


def _proxy_check(setting: proxy_settings.ProxySetting) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A [proxy] key's check, from its row of the proxy's settings table: its kind and bounds."""
    kind = setting.kind
    if kind == "int":
        return _integer, (setting.low, setting.high)
    if kind == "seconds":
        return _number, (0.0, float(proxy_settings.SECONDS_MAX))
    if kind == "bool":
        return _flag, ()
    if kind == "choice":
        return values.choice, (setting.choices,)
    if kind == "address":
        return _host_port, ()
    if kind == "files":
        return _files, ()
    if kind == "header":
        return _header_name, ()
    return _text, ()


# The [proxy] table: each key's check (PROXY_KEYS is their order).
_PROXY_CHECKS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    s.toml: _proxy_check(s) for s in proxy_settings.SETTINGS if s.toml is not None}

_SERVICE_KEYS = ("host", "type", "port", "weight", "state", "ttfb", "request_bytes", "response_bytes", "monitors")
_MONITOR_KEYS = ("type", "resp_codes", "http_request", "interval", "resptimeout", "retries", "success_retries")
_VSERVER_KEYS = ("type", "address", "port", "method", "new_service_request", "new_service_request_unit",
                 "new_service_request_increment_interval", "hash_length", "netmask", "services",
                 "tls_cert", "tls_key", "accept_proxy")


class _TomlParser:
    def __init__(self, text: str, source: str, strict: bool) -> None:
        self.source, self.strict = source, strict
        self.where = _Locator(text)
        self.config = Config(source=source)
        self.unmodelled_monitors: set[str] = set()  # [monitor.NAME] tables of other types: warned, ignored

    def error(self, message: str, kind: str, name: Optional[str] = None, key: Optional[str] = None) -> ConfigError:
        return ConfigError(self.source, self.where.line(kind, name, key), message)

    def warn(self, message: str, kind: str, name: Optional[str] = None, key: Optional[str] = None) -> None:
        line = self.where.line(kind, name, key)
        if self.strict:
            raise ConfigError(self.source, line, message + " (--strict)")
        where = self.source if line is None else f"{self.source}:{line}"
        self.config.warnings.append(f"{where}: warning: {message}")

    def value(self, kind: str, name: str, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(key, *args)
        except ValueError as exc:
            raise self.error(f"{kind} {name!r}: {exc}", kind, name, key) from None

    def tables(self, data: dict[str, Any], kind: str) -> list[tuple[str, dict[str, Any]]]:
        section = data.get(kind, {})
        if not isinstance(section, dict):
            raise self.error(f"{kind}: must be a table of [{kind}.NAME] tables", kind)
        out = []
        for name, table in section.items():
            if not isinstance(table, dict):
                raise self.error(f"{kind}.{name}: must be a table", kind, name)
            self.value(kind, name, "name", values.name, name)
            out.append((name, table))
        return out

    def unknown_keys(self, kind: str, name: str, table: dict[str, Any], known: tuple[str, ...]) -> None:
        for key in table:
            if key not in known:
                self.warn(f"{kind} {name!r}: key {key!r} is not modelled by leastload, ignored", kind, name, key)

    def required(self, kind: str, name: str, table: dict[str, Any], key: str) -> Any:
        if key not in table:
            raise self.error(f"{kind} {name!r}: needs {key} =", kind, name)
        return table[key]

    def parse(self, data: dict[str, Any]) -> Config:
        for key in data:
            if key not in ("server", "monitor", "service", "vserver", "proxy"):
                self.warn(f"{key!r} is not modelled by leastload, ignored (tables: server, monitor, service, "
                          "vserver, proxy)", key)
        if "proxy" in data:
            self.config.proxy = self.proxy(data["proxy"])
        for name, t in self.tables(data, "server"):
            self.unknown_keys("server", name, t, ("address",))
            address = self.required("server", name, t, "address")
            if not isinstance(address, str):
                raise self.error(f"server {name!r}: address: must be a string, got {address!r}", "server", name,
                                 "address")
            self.config.servers.append(Server(name=name, address=address, line=self.where.line("server", name) or 0))
        for name, t in self.tables(data, "monitor"):
            monitor = self.monitor(name, t)
            if monitor is not None:
                self.config.monitors.append(monitor)
        for name, t in self.tables(data, "service"):
            self.config.services.append(self.service(name, t))
        for name, t in self.tables(data, "vserver"):
            self.config.vservers.append(self.vserver(name, t))
        return self.config.settle()

    def service(self, name: str, t: dict[str, Any]) -> Service:
        kind = "service"
        self.unknown_keys(kind, name, t, _SERVICE_KEYS)
        host = self.required(kind, name, t, "host")
        try:
            host = values.address("host", host)
        except ValueError:
            if not isinstance(host, str) or self.config.server(host) is None:
                raise self.error(f"service {name!r}: host: must be an IP address or a server's name, got {host!r}",
                                 kind, name, "host") from None
        s = Service(
            name=name, host=host,
            service_type=self.value(kind, name, "type", values.choice, self.required(kind, name, t, "type"),
                                    SERVICE_TYPES),
            port=self.value(kind, name, "port", _port, self.required(kind, name, t, "port")),
            line=self.where.line(kind, name) or 0)
        if "weight" in t:
            s.weight = self.value(kind, name, "weight", _integer, t["weight"], 1, MAX_WEIGHT)
        if "state" in t:
            s.state = self.value(kind, name, "state", values.choice, t["state"], SERVICE_STATES)
        if "ttfb" in t:
            s.ttfb = self.value(kind, name, "ttfb", _number, t["ttfb"], 0.0, MAX_TTFB)
        for key in ("request_bytes", "response_bytes"):
            if key in t:
                setattr(s, key, self.value(kind, name, key, _integer, t[key], 0, MAX_BYTES))
        if "monitors" in t:
            s.monitors = self.service_monitors(name, t["monitors"])
        return s

    def service_monitors(self, name: str, listed: Any) -> list[str]:
        kind, key = "service", "monitors"
        if not isinstance(listed, list):
            raise self.error(f"service {name!r}: monitors: must be a list of monitor names, got {listed!r}",
                             kind, name, key)
        out: list[str] = []
        for item in listed:
            if isinstance(item, str) and self.config.monitor(item) is None and (
                    item in self.unmodelled_monitors or item in UNMODELLED_BUILTIN_MONITORS):
                self.warn(f"service {name!r}: monitor {item!r} is not modelled by leastload, its binding ignored",
                          kind, name, key)
                continue
            if not isinstance(item, str) or self.config.monitor(item) is None:
                raise self.error(f"service {name!r}: monitors: no monitor named {item!r}", kind, name, key)
            if item in out:
                raise self.error(f"service {name!r}: monitors: {item!r} is listed twice", kind, name, key)
            out.append(item)
        return out

    def monitor(self, name: str, t: dict[str, Any]) -> Optional[Monitor]:
        """A [monitor.NAME] table; None for a type leastload does not model (a warning)."""
        kind = "monitor"
        if name in BUILTIN_MONITOR_TYPES or name in UNMODELLED_BUILTIN_MONITORS:
            raise self.error(f"monitor {name!r} is one of the vendor's built-in monitors: give yours another name",
                             kind, name)
        given = self.required(kind, name, t, "type")
        try:
            monitor_type = values.choice("type", given, MONITOR_TYPES)
        except ValueError:
            if not isinstance(given, str):
                raise self.error(f"monitor {name!r}: type: must be a string, got {given!r}", kind, name,
                                 "type") from None
            self.unmodelled_monitors.add(name)
            self.warn(f"monitor {name!r}: type {given!r} is not modelled by leastload (it models "
                      f"{' and '.join(MONITOR_TYPES)}), ignored", kind, name, "type")
            return None
        self.unknown_keys(kind, name, t, _MONITOR_KEYS)
        m = Monitor(name=name, monitor_type=monitor_type, line=self.where.line(kind, name) or 0)
        for key in ("resp_codes", "http_request"):
            if key in t and monitor_type != "HTTP":
                raise self.error(f"monitor {name!r}: {key}: only for HTTP monitors, this one is {monitor_type}",
                                 kind, name, key)
        if "resp_codes" in t:
            codes = t["resp_codes"]
            if not isinstance(codes, list) or not codes:
                raise self.error(f"monitor {name!r}: resp_codes: must be a list of status codes and ranges, "
                                 f"such as [200, \"300-302\"], got {codes!r}", kind, name, "resp_codes")
            m.resp_codes = tuple(self.value(kind, name, "resp_codes", values.resp_code_range, c, MIN_RESP_CODE,
                                            MAX_RESP_CODE) for c in codes)
        if "http_request" in t:
            m.http_request = self.value(kind, name, "http_request", values.http_request, t["http_request"])
        if "interval" in t:
            m.interval = self.value(kind, name, "interval", values.milliseconds, t["interval"], MAX_INTERVAL)
        if "resptimeout" in t:
            m.resptimeout = self.value(kind, name, "resptimeout", values.milliseconds, t["resptimeout"],
                                       MAX_RESPTIMEOUT)
        if "retries" in t:
            m.retries = self.value(kind, name, "retries", _integer, t["retries"], 1, MAX_RETRIES)
        if "success_retries" in t:
            m.success_retries = self.value(kind, name, "success_retries", _integer, t["success_retries"], 1,
                                           MAX_SUCCESS_RETRIES)
        if not m.resptimeout < m.interval:
            key = "resptimeout" if "resptimeout" in t else "interval"
            raise self.error(f"monitor {name!r}: {key}: the response timeout ({m.resptimeout:g} s) must be less "
                             f"than the interval ({m.interval:g} s)", kind, name, key)
        return m

    def proxy(self, table: Any) -> dict[str, object]:
        """The [proxy] table: every key checked; an unknown key is an error naming the accepted ones."""
        if not isinstance(table, dict):
            raise ConfigError(self.source, self.where.table_key("proxy", ""), f"proxy: must be a table, got {table!r}")
        out: dict[str, object] = {}
        for key, value in table.items():
            line = self.where.table_key("proxy", key)
            if key not in _PROXY_CHECKS:
                raise ConfigError(self.source, line, f"proxy: unknown key {key!r} (the keys: {', '.join(PROXY_KEYS)})")
            fn, args = _PROXY_CHECKS[key]
            try:
                out[key] = fn(key, value, *args)
            except ValueError as exc:
                raise ConfigError(self.source, line, f"proxy: {exc}") from None
        return out

    def vserver(self, name: str, t: dict[str, Any]) -> VServer:
        kind = "vserver"
        self.unknown_keys(kind, name, t, _VSERVER_KEYS)
        line = self.where.line(kind, name) or 0
        vs = VServer(name=name, service_type=self.value(kind, name, "type", values.choice,
                                                        self.required(kind, name, t, "type"), SERVICE_TYPES),
                     line=line)
        vs.option_lines[""] = line
        if ("address" in t) != ("port" in t):
            raise self.error(f"vserver {name!r}: address and port go together", kind, name)
        if "address" in t:
            vs.address = self.value(kind, name, "address", values.address, t["address"])
            vs.port = self.value(kind, name, "port", _port, t["port"])
        settings: tuple[tuple[str, str, Callable[..., Any], tuple[Any, ...]], ...] = (
            ("method", "lb_method", values.choice, (LB_METHODS,)),
            ("new_service_request", "new_service_request", _integer, (0, MAX_NEW_SERVICE_REQUEST)),
            ("new_service_request_unit", "new_service_request_unit", values.choice, (UNITS,)),
            ("new_service_request_increment_interval", "new_service_request_increment_interval",
             _integer, (0, MAX_INCREMENT_INTERVAL)),
            ("hash_length", "hash_length", _integer, (1, MAX_HASH_LENGTH)),
            ("netmask", "netmask", values.netmask, ()),
        )
        for key, attr, fn, args in settings:
            if key in t:
                setattr(vs, attr, self.value(kind, name, key, fn, t[key], *args))
                vs.option_lines[attr] = self.where.line(kind, name, key) or line
        if vs.new_service_request_unit == "PERCENT" and vs.new_service_request > 100:
            raise self.error(f"vserver {name!r}: new_service_request: must be an integer in 0..100 with PERCENT, "
                             f"got {vs.new_service_request}", kind, name, "new_service_request")
        if "tls_cert" in t or "tls_key" in t:  # TLS: certificates paired in order with their keys
            certs = self.value(kind, name, "tls_cert", _files, t.get("tls_cert", []))
            keys = self.value(kind, name, "tls_key", _files, t.get("tls_key", []))
            if len(certs) != len(keys):
                raise self.error(f"vserver {name!r}: tls_key: as many keys as certificates, got {len(certs)} "
                                 f"certificates and {len(keys)} keys", kind, name, "tls_key")
            vs.cert_keys = [CertKey(c, k) for c, k in zip(certs, keys)]
        if "accept_proxy" in t:
            vs.accept_proxy = self.value(kind, name, "accept_proxy", _flag, t["accept_proxy"])
        binds = t.get("services", [])
        if not isinstance(binds, list):
            raise self.error(f"vserver {name!r}: services: must be a list of names or "
                             "{ service = NAME, weight = W } tables", kind, name, "services")
        for item in binds:
            vs.bindings.append(self.binding(vs, item))
        return vs

    def binding(self, vs: VServer, item: Any) -> Binding:
        kind, name, key = "vserver", vs.name, "services"
        weight = None
        slow_start = False
        if isinstance(item, dict):
            extra = set(item) - {"service", "weight", "slow_start"}
            if extra or "service" not in item:
                raise self.error(f"vserver {name!r}: services: a table entry takes service = and optional "
                                 f"weight = and slow_start =, got {sorted(item)}", kind, name, key)
            if "slow_start" in item:
                if not isinstance(item["slow_start"], bool):
                    raise self.error(f"vserver {name!r}: slow_start: must be true or false, got "
                                     f"{item['slow_start']!r}", kind, name, key)
                slow_start = item["slow_start"]
            if "weight" in item:
                try:
                    weight = _integer("weight", item["weight"], 1, MAX_WEIGHT)
                except ValueError as exc:
                    raise self.error(f"vserver {name!r}: services: {exc}", kind, name, key) from None
            item = item["service"]
        if not isinstance(item, str) or self.config.service(item) is None:
            raise self.error(f"vserver {name!r}: services: no service named {item!r}", kind, name, key)
        if any(b.service == item for b in vs.bindings):
            raise self.error(f"vserver {name!r}: services: {item!r} is listed twice", kind, name, key)
        return Binding(service=item, weight=weight, slow_start=slow_start, line=self.where.line(kind, name, key) or vs.line)


def parse_toml(text: str, source: str = "<config>", *, strict: bool = False) -> Config:
    """The model of the TOML form `text`; `source` names it in messages."""
    try:
        data = _loads(text)
    except ValueError as exc:  # tomllib.TOMLDecodeError: "... (at line L, column C)"
        message = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", message)
        line = int(m.group(1)) if m else None
        raise ConfigError(source, line, "bad TOML: " + re.sub(r"\s*\(at line \d+, column \d+\)", "", message)) \
            from None
    return _TomlParser(text, source, strict).parse(data)
