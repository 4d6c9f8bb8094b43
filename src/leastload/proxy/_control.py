"""The runtime API's commands, in the vendor's words, on the vservers one proxy process serves.

`POST /leastload/command` on the admin port with `{"command": ["disable", "service", "s1"]}`
(`leastload ctl URL disable service s1` sends it) runs one of:

    disable service NAME [DELAY]        OUT_OF_SERVICE in every vserver that binds it: no new
                                        picks at once; requests in flight finish. DELAY (seconds,
                                        the vendor's graceful delay) is accepted and reported:
                                        without persistence it changes nothing here
    enable service NAME                 UP again, at its full share: OUT_OF_SERVICE -> UP starts no
                                        slow start (the vendor's is for a new binding and DOWN -> UP);
                                        a ramp it was in when disabled goes on where it stood
    drain service NAME                  no new picks; unbound from every vserver once its last
                                        request ends (its probes stop, its connections close)
    set service NAME -weight W          the weight of every binding of NAME
    add service NAME IP HTTP PORT       a service the next `bind` can use
    bind lb vserver VS NAME [-weight W] bound to VS (a new service: under slow start when VS
                                        has it); bound already: its weight set
    unbind lb vserver VS NAME           drained from VS (as `drain`, for that vserver only)
    show lb vserver [VS]                the vserver(s) as `show()` data
    stat lb vserver [VS]                the counters of the status page

Answers are JSON: 200 `{"ok": true, "done": "...", ...}`; 400 `{"ok": false, "error": "..."}`
for a command that is wrong, naming what and why; 404 for an unknown vserver or service.
Writes change what runs now; a later reload of a config file applies the file's difference from
the file before it (so it does not undo a runtime change the file does not touch).
"""

from dataclasses import asdict
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..net import upstream
from ..net.upstream import Backend

Answer = Tuple[int, Dict[str, Any]]
READ_COMMANDS = (("show", "lb", "vserver"), ("stat", "lb", "vserver"))


class CommandError(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


class Control:
    """The commands over `proxies` (vserver name -> Proxy), sharing one table of services."""

    def __init__(self, proxies: Mapping[str, Any]) -> None:
        self.proxies = proxies
        self.added: Dict[str, Backend] = {}  # `add service` not yet bound

    @staticmethod
    def is_read(words: List[str]) -> bool:
        return tuple(w.lower() for w in words[:3]) in READ_COMMANDS

    def run(self, words: List[str]) -> Answer:
        try:
            return 200, {"ok": True, **self._run([str(w) for w in words])}
        except CommandError as exc:
            return exc.status, {"ok": False, "error": str(exc)}
        except (ValueError, TypeError, KeyError) as exc:
            return 400, {"ok": False, "error": str(exc)}

    def _run(self, words: List[str]) -> Dict[str, Any]:
        verb = [w.lower() for w in words[:3]]
        if verb[:2] == ["disable", "service"]:
            return self._disable(words[2:])
        if verb[:2] == ["enable", "service"]:
            name = self._one(words[2:], "enable service NAME")
            return self._each_binding(name, lambda proxy: proxy.vserver.set_state(name, "UP"), "UP")
        if verb[:2] == ["drain", "service"]:
            name = self._one(words[2:], "drain service NAME")
            return self._each_binding(name, lambda proxy: proxy.remove_backend(name), "draining")
        if verb[:2] == ["set", "service"]:
            return self._set_service(words[2:])
        if verb[:2] == ["add", "service"]:
            return self._add_service(words[2:])
        if verb == ["bind", "lb", "vserver"]:
            return self._bind(words[3:])
        if verb == ["unbind", "lb", "vserver"]:
            args = words[3:]
            if len(args) != 2:
                raise CommandError(400, "usage: unbind lb vserver VSERVER SERVICE")
            proxy = self._proxy(args[0])
            if args[1] not in proxy.vserver:
                raise CommandError(404, f"service {args[1]!r} is not bound to lb vserver {args[0]!r}")
            proxy.remove_backend(args[1])
            return {"done": f"{args[1]} draining from {args[0]}"}
        if verb == ["show", "lb", "vserver"]:
            return {"vservers": {name: asdict(p.vserver.show()) for name, p in self._selected(words[3:]).items()}}
        if verb == ["stat", "lb", "vserver"]:
            return {"vservers": {name: p.status() for name, p in self._selected(words[3:]).items()}}
        raise CommandError(400, f"unknown command {' '.join(words)!r}: try disable|enable|drain service NAME, "
                                "set service NAME -weight W, add service NAME IP HTTP PORT, "
                                "bind|unbind lb vserver VS NAME, show|stat lb vserver [VS]")

    # ---- the commands -----------------------------------------------------------------

    def _disable(self, args: List[str]) -> Dict[str, Any]:
        if not 1 <= len(args) <= 2:
            raise CommandError(400, "usage: disable service NAME [DELAY]")
        name = args[0]
        delay = 0
        if len(args) == 2:
            if not args[1].isdigit() or not 0 <= int(args[1]) <= 86400:
                raise CommandError(400, f"DELAY must be whole seconds in 0..86400, got {args[1]!r}")
            delay = int(args[1])
        answer = self._each_binding(name, lambda proxy: proxy.vserver.set_state(name, "OUT_OF_SERVICE"),
                                    "OUT_OF_SERVICE")
        answer["delay"] = delay
        return answer

    def _set_service(self, args: List[str]) -> Dict[str, Any]:
        if len(args) != 3 or args[1].lower() != "-weight":
            raise CommandError(400, "usage: set service NAME -weight W")
        name, weight = args[0], _weight(args[2])
        if name in self.added:
            b = self.added[name]
            self.added[name] = Backend(name, b.host, b.port, weight)
            return {"done": f"{name} weight {weight} (not bound yet)"}

        def set_weight(proxy: Any) -> None:
            proxy.vserver.set_weight(name, weight)
            b = proxy.backends[name]
            proxy.backends[name] = Backend(name, b.host, b.port, weight)
        return self._each_binding(name, set_weight, f"weight {weight}")

    def _add_service(self, args: List[str]) -> Dict[str, Any]:
        if len(args) != 4:
            raise CommandError(400, "usage: add service NAME IP HTTP PORT")
        name, host, kind, port = args
        if kind.upper() != "HTTP":
            raise CommandError(400, f"service type: the proxy forwards HTTP, got {kind!r}")
        if name in self.added or any(name in p.backends for p in self.proxies.values()):
            raise CommandError(400, f"service {name!r} exists already")
        self.added[name] = upstream.parse_backend(f"{name}={host}:{port}")
        return {"done": f"service {name} at {host}:{port} added (bind it to a vserver)"}

    def _bind(self, args: List[str]) -> Dict[str, Any]:
        weight: Optional[int] = None
        if len(args) == 4 and args[2].lower() == "-weight":
            weight = _weight(args[3])
        elif len(args) != 2:
            raise CommandError(400, "usage: bind lb vserver VSERVER SERVICE [-weight W]")
        proxy, name = self._proxy(args[0]), args[1]
        # a shared engine: another worker bound it a moment ago; this one learns its address
        if name in proxy.vserver and not (proxy.shared and name not in proxy.backends):
            if weight is None:
                raise CommandError(400, f"service {name!r} is bound to {args[0]!r} already")
            proxy.vserver.set_weight(name, weight)
            return {"done": f"{name} weight {weight} in {args[0]}"}
        known = self.added.get(name) or self._known(name)
        if known is None:
            raise CommandError(404, f"no service {name!r}: add service {name} IP HTTP PORT first")
        backend = Backend(name, known.host, known.port, weight if weight is not None else known.weight)
        proxy.add_backend(backend)
        self.added.pop(name, None)
        ramp = proxy.vserver.slow_start(name) is not None
        return {"done": f"{name} bound to {args[0]}" + (" (slow start)" if ramp else ""), "slow_start": ramp}

    # ---- helpers -------------------------------------------------------------------------

    def _each_binding(self, name: str, action: Any, what: str) -> Dict[str, Any]:
        bound = [vs for vs, proxy in self.proxies.items() if name in proxy.vserver]
        if not bound:
            raise CommandError(404, f"service {name!r} is not bound to any lb vserver")
        for vs in bound:
            action(self.proxies[vs])
        return {"done": f"{name} {what}", "vservers": bound}

    def _known(self, name: str) -> Optional[Backend]:
        for proxy in self.proxies.values():
            if name in proxy.backends:
                b: Backend = proxy.backends[name]
                return b
        return None

    def _proxy(self, name: str) -> Any:
        proxy = self.proxies.get(name)
        if proxy is None:
            raise CommandError(404, f"no lb vserver {name!r} (there are: {', '.join(self.proxies)})")
        return proxy

    def _selected(self, args: List[str]) -> Dict[str, Any]:
        if len(args) > 1:
            raise CommandError(400, "usage: show|stat lb vserver [VSERVER]")
        return {args[0]: self._proxy(args[0])} if args else dict(self.proxies)

    @staticmethod
    def _one(args: List[str], usage: str) -> str:
        if len(args) != 1:
            raise CommandError(400, f"usage: {usage}")
        return args[0]


def _weight(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 100:
        raise CommandError(400, f"weight must be a whole number in 1..100, got {text!r}")
    return int(text)
