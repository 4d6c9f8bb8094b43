"""What the proxy and the httpx transport share: backends, retry rules, the vserver.

A backend is written `NAME=HOST:PORT[:WEIGHT]` (the name is the service's
name in the engine). `make_vserver()` binds them all before slow start is
switched on, so backends present at start are not ramped: slow start is for a
backend that joins later or comes back UP after DOWN.
"""

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple, Type, Union

from . import VirtualServer, _errors

# Methods that may be sent again on another backend when the first one
# refused or reset the connection before any response byte (RFC 9110 9.2.2).
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})

_SPEC = re.compile(r"^(?P<name>[^=\s]+)=(?P<host>\[[^\]]+\]|[^:\s]+):(?P<port>\d+)(?::(?P<weight>\d+))?$")


@dataclass(frozen=True)
class Backend:
    name: str
    host: str
    port: int
    weight: int = 1

    def __str__(self) -> str:
        return f"{self.name}={self.host}:{self.port}:{self.weight}"


def parse_backend(text: object) -> Backend:
    """`NAME=HOST:PORT[:WEIGHT]` -> Backend; ValueError naming the text otherwise."""
    if not isinstance(text, str):
        raise TypeError(f"backend must be a str NAME=HOST:PORT[:WEIGHT], got {text!r}")
    m = _SPEC.match(text.strip())
    if m is None:
        raise ValueError(f"backend must be NAME=HOST:PORT[:WEIGHT], got {text!r}")
    port = int(m["port"])
    if not 1 <= port <= 65535:
        raise ValueError(f"backend port must be in 1..65535, got {port} in {text!r}")
    weight = int(m["weight"]) if m["weight"] is not None else 1
    if not 1 <= weight <= 100:
        raise ValueError(f"backend weight must be in 1..100, got {weight} in {text!r}")
    return Backend(m["name"], m["host"].strip("[]"), port, weight)


def parse_host_port(text: str) -> Tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets) -> (host, port); ValueError naming the text otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def check_int(arg: str, value: object, low: int, high: int) -> int:
    """An int in low..high (not a bool), else TypeError / ValueError naming the argument and value."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _errors.bad_type(arg, value, f"an int in {low}..{high}")
    if not low <= value <= high:
        raise _errors.bad_value(arg, value, f"an int in {low}..{high}")
    return value


MAX_RETRIES = 100


def parse_backends(backends: Union[Iterable[Union[str, Backend]], Dict[str, Union[str, Backend]]]) -> List[Backend]:
    """A list of Backend from specs, Backend objects, or a {name: "HOST:PORT[:WEIGHT]"} dict."""
    specs: Iterable[Union[str, Backend]] = backends
    if isinstance(backends, dict):
        specs = [b if isinstance(b, Backend) else f"{name}={b}" for name, b in backends.items()]
    if isinstance(specs, (str, bytes)):
        raise TypeError(f"backends must be a list of NAME=HOST:PORT[:WEIGHT] or a dict, got {specs!r}")
    result = [b if isinstance(b, Backend) else parse_backend(b) for b in specs]
    if not result:
        raise ValueError("backends must name at least one backend, got none")
    names = [b.name for b in result]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"backend names must be unique, got {name!r} twice")
    return result


def make_vserver(backends: Iterable[Backend], method: str = "LEASTCONNECTION", *,
                 engine: Optional[Type[Any]] = None, **settings: Any) -> Any:
    """A vserver with every backend bound; settings as for VirtualServer.

    `engine` is the VirtualServer class (default: leastload.VirtualServer;
    `leastload.reference.VirtualServer` for the pure-Python one). Slow start
    (new_service_request...) is applied after the binds, so the backends
    known at start begin at full share.
    """
    slow_start = {k: settings.pop(k) for k in list(settings) if k.startswith("new_service_request")}
    vs = (engine or VirtualServer)(method, **settings)
    for b in backends:
        vs.bind(b.name, b.weight)
    if slow_start:
        vs.set(**slow_start)
    return vs
