"""NetScaler CLI lines -> the config model (leastload.config.model).

Supported: `add|set lb vserver`, `bind|unbind lb vserver`, `add server`,
`add|set service`, `disable|enable service`, full-line `#` comments and
double-quoted names. Command words and option names are case-insensitive and
options may be shortened to any unique prefix (`-lbm` for `-lbMethod`), as
the vendor's CLI allows; so may enumerated values (`roundrobin`). Commands
and options the engine does not model are warnings naming the line, or
errors with strict=True. Any other problem is a ConfigError naming the line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional

from . import values
from .errors import ConfigError
from .model import (LB_METHODS, MAX_BYTES, MAX_HASH_LENGTH, MAX_INCREMENT_INTERVAL,
                    MAX_NEW_SERVICE_REQUEST, MAX_TTFB, MAX_WEIGHT, SERVICE_STATES, SERVICE_TYPES,
                    UNITS, Binding, Config, Server, Service, VServer)

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
# (the unit after -newServiceRequest is optional and handled apart).
_VSERVER_OPTIONS = ("lbMethod", "newServiceRequest", "newServiceRequestUnit",
                    "newServiceRequestIncrementInterval", "hashLength", "netmask")
_SERVICE_OPTIONS = ("weight", "state", "ttfb", "requestBytes", "responseBytes")
_BIND_OPTIONS = ("weight",)


class _Line:
    """One line being parsed: its tokens, its number, and how to complain."""

    def __init__(self, parser: "_Parser", number: int, tokens: list[Token]) -> None:
        self.parser, self.number, self.tokens = parser, number, tokens
        self.unmodelled_options = False

    def error(self, message: str) -> ConfigError:
        return ConfigError(self.parser.source, self.number, message)

    def check(self, fn: Callable[..., object], *args: object) -> object:
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


def parse_netscaler(text: str, source: str = "<config>", *, strict: bool = False) -> Config:
    """The model of NetScaler CLI `text`; `source` names it in messages."""
    return _Parser(source, strict).parse(text)
