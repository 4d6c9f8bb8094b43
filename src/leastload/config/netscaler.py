"""NetScaler CLI lines -> the config model (leastload.config.model).

Supported: `add|set lb vserver`, `bind|unbind lb vserver`, `add server`,
`add ssl certKey NAME -cert FILE -key FILE`, `bind ssl vserver VS -certkeyName NAME`,
`add|set service`, `disable|enable service`, `add lb monitor` (HTTP and
TCP), `bind|unbind service -monitorName` (and `bind|unbind lb monitor`),
full-line `#` comments and double-quoted names. Command words and option
names are case-insensitive and options may be shortened to any unique
prefix (`-lbm` for `-lbMethod`), as the vendor's CLI allows; so may
enumerated values (`roundrobin`). Commands
and options the engine does not model are warnings naming the line, or
errors with strict=True. Any other problem is a ConfigError naming the line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar

from ..engine.settings import SETTINGS
from . import values
from .errors import ConfigError
from .model import (BUILTIN_MONITOR_TYPES, LB_METHODS, MAX_BYTES, MAX_HASH_LENGTH, MAX_INCREMENT_INTERVAL,
                    MAX_INTERVAL, MAX_NEW_SERVICE_REQUEST, MAX_RESP_CODE, MAX_RESPTIMEOUT, MAX_RETRIES,
                    MAX_SUCCESS_RETRIES, MAX_TTFB, MAX_WEIGHT, MIN_RESP_CODE, MONITOR_TYPES, SERVICE_STATES,
                    SERVICE_TYPES, TIME_UNITS, UNITS, UNMODELLED_BUILTIN_MONITORS, Binding, CertKey, Config,
                    Monitor, Server, Service, VServer)

_T = TypeVar("_T")
_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?")


@dataclass(frozen=True)
class Token:
    text: str
    quoted: bool

    @property
    def is_option(self) -> bool:
        return not self.quoted and len(self.text) > 1 and self.text[0] == "-" and self.text[1].isalpha()


def tokenize(line: str) -> list[Token]:
    """Splits a line at blanks; "double quoted" text is one token (\\" and \\\\ inside)."""
    tokens: list[Token] = []
    i, n = 0, len(line)
    while i < n:
        if line[i].isspace():
            i += 1
            continue
        if line[i] == '"':
            i += 1
            text = []
            while i < n and line[i] != '"':
                if line[i] == "\\" and i + 1 < n and line[i + 1] in '"\\':
                    i += 1
                text.append(line[i])
                i += 1
            if i >= n:
                raise ValueError("a quoted name has no closing \"")
            i += 1
            tokens.append(Token("".join(text), True))
            continue
        start = i
        while i < n and not line[i].isspace():
            if line[i] == '"':
                raise ValueError(f"a \" inside {line[start:].split()[0]!r}: quote the whole name")
            i += 1
        tokens.append(Token(line[start:i], False))
    return tokens


# Options of each object: the name as printed, and how many values it takes
# (the unit after -newServiceRequest is optional and handled apart). A vserver's
# are the settings table's NetScaler options (leastload.engine.settings).
_VSERVER_OPTIONS = tuple(s.netscaler for s in SETTINGS if s.netscaler)
_SERVICE_OPTIONS = ("weight", "state", "ttfb", "requestBytes", "responseBytes")
_BIND_OPTIONS = ("weight",)
_MONITOR_OPTIONS = ("respCode", "httpRequest", "interval", "resptimeout", "retries", "successRetries")
_MONITOR_BIND_OPTIONS = ("monitorName",)


def _seconds(seconds: float) -> str:
    """Seconds for a message: 5 s, 0.5 s."""
    return f"{seconds:g} s"


class _Line:
    """One line being parsed: its tokens, its number, and how to complain."""

    def __init__(self, parser: "_Parser", number: int, tokens: list[Token]) -> None:
        self.parser, self.number, self.tokens = parser, number, tokens
        self.unmodelled_options = False

    def error(self, message: str) -> ConfigError:
        return ConfigError(self.parser.source, self.number, message)

    def check(self, fn: Callable[..., _T], *args: object) -> _T:
        try:
            return fn(*args)
        except ValueError as exc:
            raise self.error(str(exc)) from None

    def split(self, words: int, known: tuple[str, ...]) -> tuple[list[str], dict[str, list[Token]]]:
        """Positional values after the command's `words`, and its options by canonical name.
        Unknown options are warned about (or refused under strict) and dropped."""
        rest = self.tokens[words:]
        positional: list[str] = []
        i = 0
        while i < len(rest) and not rest[i].is_option:
            positional.append(rest[i].text)
            i += 1
        options: dict[str, list[Token]] = {}
        unknown: list[str] = []
        while i < len(rest):
            flag = rest[i].text[1:]
            i += 1
            args: list[Token] = []
            while i < len(rest) and not rest[i].is_option:
                args.append(rest[i])
                i += 1
            canonical = self._option_name(flag, known)
            if canonical is None:
                unknown.append("-" + flag)
                continue
            if canonical in options:
                raise self.error(f"-{canonical}: given twice")
            options[canonical] = args
        if unknown:  # one warning a line
            what = f"option {unknown[0]} is" if len(unknown) == 1 else "options " + ", ".join(unknown) + " are"
            self.parser.unmodelled(self.number, f"{what} not modelled by leastload, ignored")
            self.unmodelled_options = True
        return positional, options

    def _option_name(self, flag: str, known: tuple[str, ...]) -> Optional[str]:
        lowered = flag.lower()
        exact = [k for k in known if k.lower() == lowered]
        if exact:
            return exact[0]
        matches = [k for k in known if k.lower().startswith(lowered)]
        if len(matches) > 1:
            raise self.error(f"-{flag}: ambiguous, could be " + " or ".join("-" + m for m in matches))
        return matches[0] if matches else None

    def one(self, option: str, args: list[Token]) -> str:
        if len(args) != 1:
            what = "a value" if not args else f"one value, got {len(args)}: " + " ".join(a.text for a in args)
            raise self.error(f"-{option}: needs {what}")
        return args[0].text


class _Parser:
    def __init__(self, source: str, strict: bool) -> None:
        self.source, self.strict = source, strict
        self.config = Config(source=source)
        self.service_groups: set[str] = set()  # `add serviceGroup` names: not modelled, binds of them ignored
        self.unmodelled_monitors: set[str] = set()  # `add lb monitor` names of other types: binds of them ignored

    def unmodelled(self, number: int, message: str) -> None:
        if self.strict:
            raise ConfigError(self.source, number, message + " (--strict)")
        self.config.warnings.append(f"{self.source}:{number}: warning: {message}")

    def parse(self, text: str) -> Config:
        for number, raw in enumerate(text.splitlines(), start=1):
            stripped = raw.strip()
            if not stripped or stripped.startswith("#"):
                continue
            try:
                tokens = tokenize(stripped)
            except ValueError as exc:
                raise ConfigError(self.source, number, str(exc)) from None
            self.command(_Line(self, number, tokens))
        return self.config.settle()

    def command(self, line: _Line) -> None:
        words = [t.text.lower() if not t.quoted else "" for t in line.tokens[:3]]
        handlers: dict[tuple[str, ...], Callable[[_Line], None]] = {
            ("add", "lb", "vserver"): self.add_vserver, ("set", "lb", "vserver"): self.set_vserver,
            ("bind", "lb", "vserver"): self.bind, ("unbind", "lb", "vserver"): self.unbind,
            ("add", "server"): self.add_server, ("add", "service"): self.add_service,
            ("set", "service"): self.set_service, ("disable", "service"): self.disable_service,
            ("enable", "service"): self.enable_service,
            ("add", "lb", "monitor"): self.add_monitor,
            ("bind", "service"): self.bind_service_monitor, ("unbind", "service"): self.unbind_service_monitor,
            ("bind", "lb", "monitor"): self.bind_lb_monitor, ("unbind", "lb", "monitor"): self.unbind_lb_monitor,
            ("add", "ssl", "certkey"): self.add_cert_key, ("bind", "ssl", "vserver"): self.bind_ssl,
        }
        for key, handler in handlers.items():
            if tuple(words[:len(key)]) == key:
                handler(line)
                return
        if words[:2] == ["add", "servicegroup"] and len(line.tokens) > 2:
            self.service_groups.add(line.tokens[2].text)
        shown = " ".join(t.text for t in line.tokens[:3])
        self.unmodelled(line.number, f"command '{shown}' is not modelled by leastload, ignored")

    # ---- lb vserver ----------------------------------------------------------

    def add_vserver(self, line: _Line) -> None:
        positional, options = line.split(3, _VSERVER_OPTIONS)
        if len(positional) not in (2, 4):
            raise line.error("add lb vserver: needs NAME TYPE [IP PORT], got "
                             + (" ".join(positional) or "nothing"))
        name = str(line.check(values.name, "vserver name", positional[0]))
        if self.config.vserver(name) is not None:
            raise line.error(f"lb vserver {name!r} already exists")
        service_type = str(line.check(values.choice, "service type", positional[1], SERVICE_TYPES))
        vs = VServer(name=name, service_type=service_type, line=line.number)
        vs.option_lines[""] = line.number
        if len(positional) == 4:
            vs.address = str(line.check(values.address, "IP address", positional[2]))
            vs.port = int(str(line.check(values.port, "port", positional[3])))
        self.vserver_options(line, vs, options)
        self.config.vservers.append(vs)

    def set_vserver(self, line: _Line) -> None:
        positional, options = line.split(3, _VSERVER_OPTIONS)
        vs = self.existing_vserver(line, positional, "set lb vserver: needs NAME")
        if len(positional) != 1:
            raise line.error(f"set lb vserver: unexpected argument {positional[1]!r}")
        if not options:
            raise line.error("set lb vserver: needs at least one option, e.g. -lbMethod")
        self.vserver_options(line, vs, options)

    def vserver_options(self, line: _Line, vs: VServer, options: dict[str, list[Token]]) -> None:
        """Checks every option first, then applies them all: nothing half-applied."""
        new: dict[str, object] = {}
        for option, args in options.items():
            if option == "lbMethod":
                new["lb_method"] = line.check(values.choice, "-lbMethod", line.one(option, args), LB_METHODS)
            elif option == "newServiceRequest":
                if not 1 <= len(args) <= 2:
                    raise line.error("-newServiceRequest: needs a value and an optional unit "
                                     "(PER_SECOND or PERCENT)")
                new["new_service_request"] = line.check(values.integer, "-newServiceRequest", args[0].text,
                                                        0, MAX_NEW_SERVICE_REQUEST)
                if len(args) == 2:
                    new["new_service_request_unit"] = line.check(values.choice, "newServiceRequestUnit",
                                                                 args[1].text, UNITS)
            elif option == "newServiceRequestUnit":
                new["new_service_request_unit"] = line.check(values.choice, "-newServiceRequestUnit",
                                                             line.one(option, args), UNITS)
            elif option == "newServiceRequestIncrementInterval":
                new["new_service_request_increment_interval"] = line.check(
                    values.integer, "-newServiceRequestIncrementInterval", line.one(option, args),
                    0, MAX_INCREMENT_INTERVAL)
            elif option == "hashLength":
                new["hash_length"] = line.check(values.integer, "-hashLength", line.one(option, args),
                                                1, MAX_HASH_LENGTH)
            elif option == "netmask":
                new["netmask"] = line.check(values.netmask, "-netmask", line.one(option, args))
        rate = new.get("new_service_request", vs.new_service_request)
        unit = new.get("new_service_request_unit", vs.new_service_request_unit)
        if unit == "PERCENT" and isinstance(rate, int) and rate > 100:
            raise line.error(f"-newServiceRequest: must be an integer in 0..100 with PERCENT, got {rate}")
        for attr, value in new.items():
            setattr(vs, attr, value)
            vs.option_lines[attr] = line.number

    def existing_vserver(self, line: _Line, positional: list[str], usage: str) -> VServer:
        if not positional:
            raise line.error(usage)
        vs = self.config.vserver(positional[0])
        if vs is None:
            raise line.error(f"no lb vserver named {positional[0]!r} (add lb vserver first)")
        return vs

    def bind(self, line: _Line) -> None:
        positional, options = line.split(3, _BIND_OPTIONS)
        vs = self.existing_vserver(line, positional, "bind lb vserver: needs VSERVER SERVICE")
        if len(positional) == 1 and line.unmodelled_options:
            return  # a binding of something else (a policy: -policyName ...), warned about
        if len(positional) != 2:
            raise line.error("bind lb vserver: needs VSERVER SERVICE, got " + " ".join(positional))
        if positional[1] in self.service_groups and self.config.service(positional[1]) is None:
            self.unmodelled(line.number, f"service group {positional[1]!r} is not modelled by leastload, "
                                         "its binding ignored")
            return
        service = self.existing_service(line, positional[1])
        if any(b.service == service.name for b in vs.bindings):
            raise line.error(f"service {service.name!r} is already bound to lb vserver {vs.name!r}")
        weight = None
        if "weight" in options:
            weight = int(str(line.check(values.integer, "-weight", line.one("weight", options["weight"]),
                                        1, MAX_WEIGHT)))
        vs.bindings.append(Binding(service=service.name, weight=weight, slow_start=vs.new_service_request > 0,
                                   line=line.number))

    def unbind(self, line: _Line) -> None:
        positional, _ = line.split(3, ())
        vs = self.existing_vserver(line, positional, "unbind lb vserver: needs VSERVER SERVICE")
        if len(positional) != 2:
            raise line.error("unbind lb vserver: needs VSERVER SERVICE, got " + " ".join(positional))
        kept = [b for b in vs.bindings if b.service != positional[1]]
        if len(kept) == len(vs.bindings):
            raise line.error(f"service {positional[1]!r} is not bound to lb vserver {vs.name!r}")
        vs.bindings = kept

    # ---- ssl ----------------------------------------------------------------------

    def add_cert_key(self, line: _Line) -> None:
        positional, options = line.split(3, ("cert", "key"))
        if len(positional) != 1:
            raise line.error("add ssl certKey: needs NAME -cert FILE -key FILE, got " + (" ".join(positional) or "nothing"))
        name = str(line.check(values.name, "certKey name", positional[0]))
        if any(c.name == name for c in self.config.cert_keys):
            raise line.error(f"ssl certKey {name!r} already exists")
        if "cert" not in options or "key" not in options:
            raise line.error(f"add ssl certKey {name}: needs -cert FILE and -key FILE")
        self.config.cert_keys.append(CertKey(line.one("cert", options["cert"]), line.one("key", options["key"]),
                                             name=name, line=line.number))

    def bind_ssl(self, line: _Line) -> None:
        positional, options = line.split(3, ("certkeyName",))
        vs = self.existing_vserver(line, positional, "bind ssl vserver: needs VSERVER -certkeyName NAME")
        if len(positional) != 1:
            raise line.error("bind ssl vserver: needs VSERVER -certkeyName NAME, got " + " ".join(positional))
        if "certkeyName" not in options:
            return  # another binding (a cipher, a curve): warned about as unmodelled by split()
        name = line.one("certkeyName", options["certkeyName"])
        found = [c for c in self.config.cert_keys if c.name == name]
        if not found:
            raise line.error(f"no ssl certKey named {name!r} (add ssl certKey first)")
        if any(c.name == name for c in vs.cert_keys):
            raise line.error(f"ssl certKey {name!r} is already bound to {vs.name!r}")
        vs.cert_keys.append(found[0])

    # ---- servers and services ----------------------------------------------------

    def add_server(self, line: _Line) -> None:
        positional, _ = line.split(2, ())
        if len(positional) != 2:
            raise line.error("add server: needs NAME ADDRESS, got " + (" ".join(positional) or "nothing"))
        name = str(line.check(values.name, "server name", positional[0]))
        if self.config.server(name) is not None:
            raise line.error(f"server {name!r} already exists")
        self.config.servers.append(Server(name=name, address=self.host_address(line, positional[1]),
                                          line=line.number))

    def host_address(self, line: _Line, text: str) -> str:
        try:
            return values.address("address", text)
        except ValueError:
            if _HOSTNAME.fullmatch(text):
                return text
            raise line.error(f"address: must be an IP address or a domain name, got {text!r}") from None

    def add_service(self, line: _Line) -> None:
        positional, options = line.split(2, _SERVICE_OPTIONS)
        if len(positional) != 4:
            raise line.error("add service: needs NAME IP|SERVER TYPE PORT, got "
                             + (" ".join(positional) or "nothing"))
        name = str(line.check(values.name, "service name", positional[0]))
        if self.config.service(name) is not None:
            raise line.error(f"service {name!r} already exists")
        host = positional[1]
        try:
            host = values.address("IP", host)
        except ValueError:
            if self.config.server(host) is None:
                raise line.error(f"no server named {host!r} (add server {host} ADDRESS first, "
                                 "or give an IP address)") from None
        service = Service(name=name, host=host,
                          service_type=str(line.check(values.choice, "service type", positional[2],
                                                      SERVICE_TYPES)),
                          port=int(str(line.check(values.port, "port", positional[3]))), line=line.number)
        self.service_options(line, service, options)
        self.config.services.append(service)

    def set_service(self, line: _Line) -> None:
        positional, options = line.split(2, _SERVICE_OPTIONS)
        if len(positional) != 1:
            raise line.error("set service: needs NAME and options, got " + (" ".join(positional) or "nothing"))
        if not options:
            raise line.error("set service: needs at least one option, e.g. -weight")
        self.service_options(line, self.existing_service(line, positional[0]), options)

    def service_options(self, line: _Line, service: Service, options: dict[str, list[Token]]) -> None:
        new: dict[str, object] = {}
        for option, args in options.items():
            value = line.one(option, args)
            if option == "weight":
                new["weight"] = line.check(values.integer, "-weight", value, 1, MAX_WEIGHT)
            elif option == "state":
                new["state"] = line.check(values.choice, "-state", value, SERVICE_STATES)
            elif option == "ttfb":
                new["ttfb"] = line.check(values.number, "-ttfb", value, 0.0, MAX_TTFB)
            elif option == "requestBytes":
                new["request_bytes"] = line.check(values.integer, "-requestBytes", value, 0, MAX_BYTES)
            elif option == "responseBytes":
                new["response_bytes"] = line.check(values.integer, "-responseBytes", value, 0, MAX_BYTES)
        for attr, v in new.items():
            setattr(service, attr, v)

    def existing_service(self, line: _Line, name: str) -> Service:
        service = self.config.service(name)
        if service is None:
            raise line.error(f"no service named {name!r} (add service first)")
        return service

    def disable_service(self, line: _Line) -> None:
        self.service_state(line, "DISABLED")

    def enable_service(self, line: _Line) -> None:
        self.service_state(line, "ENABLED")

    def service_state(self, line: _Line, state: str) -> None:
        positional, _ = line.split(2, ())
        verb = "disable" if state == "DISABLED" else "enable"
        if not positional:
            raise line.error(f"{verb} service: needs NAME")
        service = self.existing_service(line, positional[0])
        if len(positional) > 1:  # the vendor's graceful-shutdown delay: no meaning on a virtual clock
            self.unmodelled(line.number, f"{verb} service: delay {positional[1]!r} is not modelled, ignored")
        service.state = state


    # ---- monitors ----------------------------------------------------------------

    def add_monitor(self, line: _Line) -> None:
        leading = []
        for t in line.tokens[3:]:
            if t.is_option:
                break
            leading.append(t.text)
        if len(leading) < 2:
            raise line.error("add lb monitor: needs NAME TYPE, got " + (" ".join(leading) or "nothing"))
        name = str(line.check(values.name, "monitor name", leading[0]))
        if name in BUILTIN_MONITOR_TYPES or name in UNMODELLED_BUILTIN_MONITORS:
            raise line.error(f"lb monitor {name!r} is one of the vendor's built-in monitors: "
                             "give yours another name")
        if self.config.monitor(name) is not None or name in self.unmodelled_monitors:
            raise line.error(f"lb monitor {name!r} already exists")
        try:
            monitor_type = values.choice("monitor type", leading[1], MONITOR_TYPES)
        except ValueError:  # one of the vendor's many other types (or a typo): one warning, the line ignored
            self.unmodelled_monitors.add(name)
            self.unmodelled(line.number, f"lb monitor {name!r}: type {leading[1]} is not modelled by leastload "
                                         f"(it models {' and '.join(MONITOR_TYPES)}), ignored")
            return
        positional, options = line.split(3, _MONITOR_OPTIONS)
        if len(positional) != 2:
            raise line.error(f"add lb monitor: unexpected argument {positional[2]!r}")
        monitor = Monitor(name=name, monitor_type=monitor_type, line=line.number)
        for option, args in options.items():
            if option in ("respCode", "httpRequest") and monitor_type != "HTTP":
                raise line.error(f"-{option}: only for HTTP monitors, {name!r} is {monitor_type}")
            if option == "respCode":
                if not args:
                    raise line.error("-respCode: needs one or more codes or ranges, such as 200 or 200-299")
                monitor.resp_codes = tuple(
                    line.check(values.resp_code_range, "-respCode", a.text, MIN_RESP_CODE, MAX_RESP_CODE)
                    for a in args)
            elif option == "httpRequest":
                if len(args) != 1:
                    raise line.error('-httpRequest: needs one quoted value, such as "GET /health", got '
                                     + (" ".join(a.text for a in args) or "nothing"))
                monitor.http_request = line.check(values.http_request, "-httpRequest", args[0].text)
            elif option in ("interval", "resptimeout"):
                setattr(monitor, option, self.seconds(line, option, args,
                                                      MAX_INTERVAL if option == "interval" else MAX_RESPTIMEOUT))
            elif option == "retries":
                monitor.retries = line.check(values.integer, "-retries", line.one(option, args), 1, MAX_RETRIES)
            elif option == "successRetries":
                monitor.success_retries = line.check(values.integer, "-successRetries", line.one(option, args),
                                                     1, MAX_SUCCESS_RETRIES)
        if not monitor.resptimeout < monitor.interval:
            which = "resptimeout" if "resptimeout" in options else "interval"
            raise line.error(f"-{which}: the response timeout ({_seconds(monitor.resptimeout)}) must be less "
                             f"than the interval ({_seconds(monitor.interval)})")
        self.config.monitors.append(monitor)

    def seconds(self, line: _Line, option: str, args: list[Token], high: int) -> float:
        """`-interval N [SEC|MSEC|MIN]` -> seconds."""
        if not 1 <= len(args) <= 2:
            raise line.error(f"-{option}: needs a value and an optional unit (SEC, MSEC or MIN)")
        unit = "SEC" if len(args) == 1 else line.check(values.choice, f"-{option} unit", args[1].text, TIME_UNITS)
        return line.check(values.seconds_in_unit, f"-{option}", args[0].text, unit, high)

    def monitor_binding(self, line: _Line, service_name: str, monitor_name: str) -> Optional[tuple[Service, str]]:
        """The service and the monitor of a (un)bind; None for a monitor leastload does not model (warned)."""
        service = self.existing_service(line, service_name)
        if self.config.monitor(monitor_name) is None:
            if monitor_name in self.unmodelled_monitors or monitor_name in UNMODELLED_BUILTIN_MONITORS:
                self.unmodelled(line.number, f"lb monitor {monitor_name!r} is not modelled by leastload, "
                                             "its binding ignored")
                return None
            raise line.error(f"no lb monitor named {monitor_name!r} (add lb monitor first)")
        return service, monitor_name

    def bind_monitor(self, line: _Line, service_name: str, monitor_name: str) -> None:
        found = self.monitor_binding(line, service_name, monitor_name)
        if found is not None:
            service, name = found
            if name in service.monitors:
                raise line.error(f"lb monitor {name!r} is already bound to service {service.name!r}")
            service.monitors.append(name)

    def unbind_monitor(self, line: _Line, service_name: str, monitor_name: str) -> None:
        found = self.monitor_binding(line, service_name, monitor_name)
        if found is not None:
            service, name = found
            if name not in service.monitors:
                raise line.error(f"lb monitor {name!r} is not bound to service {service.name!r}")
            service.monitors.remove(name)

    def service_monitor_line(self, line: _Line, verb: str) -> Optional[tuple[str, str]]:
        """`bind|unbind service NAME -monitorName M` -> (NAME, M); None for a binding of
        something else (`-policyName ...`), which split() warned about."""
        positional, options = line.split(2, _MONITOR_BIND_OPTIONS)
        usage = f"{verb} service: needs NAME -monitorName MONITOR"
        if len(positional) != 1:
            raise line.error(usage + ", got " + (" ".join(positional) or "nothing"))
        if "monitorName" not in options:
            if line.unmodelled_options:
                return None
            raise line.error(usage)
        return positional[0], line.one("monitorName", options["monitorName"])

    def bind_service_monitor(self, line: _Line) -> None:
        found = self.service_monitor_line(line, "bind")
        if found is not None:
            self.bind_monitor(line, *found)

    def unbind_service_monitor(self, line: _Line) -> None:
        found = self.service_monitor_line(line, "unbind")
        if found is not None:
            self.unbind_monitor(line, *found)

    def lb_monitor_line(self, line: _Line, verb: str) -> tuple[str, str]:
        """`bind|unbind lb monitor M SERVICE` -> (SERVICE, M); its options (-state, -weight) are not modelled."""
        positional, _ = line.split(3, ())
        if len(positional) != 2:
            raise line.error(f"{verb} lb monitor: needs MONITOR SERVICE, got " + (" ".join(positional) or "nothing"))
        return positional[1], positional[0]

    def bind_lb_monitor(self, line: _Line) -> None:
        self.bind_monitor(line, *self.lb_monitor_line(line, "bind"))

    def unbind_lb_monitor(self, line: _Line) -> None:
        self.unbind_monitor(line, *self.lb_monitor_line(line, "unbind"))


def parse_netscaler(text: str, source: str = "<config>", *, strict: bool = False) -> Config:
    """The model of NetScaler CLI `text`; `source` names it in messages."""
    return _Parser(source, strict).parse(text)
