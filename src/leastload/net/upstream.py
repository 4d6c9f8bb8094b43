"""What the proxy and the httpx transport share: backends, the retry rule, the vserver.

A backend is written `NAME=HOST:PORT[:WEIGHT]` (the name is the service's
name in the engine). `make_vserver()` binds them all before slow start is
switched on, so backends present at start are not ramped: slow start is for a
backend that joins later or comes back UP after DOWN.

After an attempt on a backend went wrong, both ask `after_attempt()` whether
it was the backend's failure and whether the request may go elsewhere; each
only says which `Outcome` its own errors are (see the function).
"""

import enum
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple, Type, Union

from .._implementation import VirtualServer  # the engine `import leastload` chose
from ..engine import errors as _errors

# Methods that may be sent again on another backend when the first one
# refused or reset the connection before any response byte (RFC 9110 9.2.2).
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})


class Outcome(enum.Enum):
    """How an attempt on a backend went wrong, as far as the retry rule cares."""

    NOT_SENT = "not sent"
    """No connection: refused, unreachable, or not accepted within the connect timeout.
    The backend received nothing."""

    NO_RESPONSE = "no response"
    """The request (or part of it) went out, then the connection was closed, reset or
    broke before the response: the backend may have acted on the request."""

    FAILED = "failed"
    """The request went out and the backend did not answer in time, answered something
    unusable, or broke off in the middle of its answer."""

    NOT_THE_BACKEND = "not the backend"
    """The attempt ended for a reason on this side: the client left or stopped reading,
    the caller was cancelled, the process ran out of something."""


@dataclass(frozen=True)
class Verdict:
    """What to do after an attempt went wrong.

    failure:   the backend is to blame: end the transaction with `fail()` (it counts
               for outlier ejection); otherwise end it with a finish that is not a
               failure (status 499, "client closed request").
    retry:     send the request to another backend (the same key, the backends tried
               excluded); implies failure.
    reconnect: send it once more to the same backend on a new connection, in the same
               transaction, without ending it; implies neither of the others.
    """

    failure: bool
    retry: bool = False
    reconnect: bool = False


_FAILURE = Verdict(failure=True)
_FAILURE_RETRY = Verdict(failure=True, retry=True)
_NOT_A_FAILURE = Verdict(failure=False)
_RECONNECT = Verdict(failure=False, reconnect=True)


def after_attempt(outcome: Outcome, method: str, *, replayable: bool, tried: int, retries: int,
                  reused: bool = False, wanted: bool = True) -> Verdict:
    """The rule for an attempt that went wrong: whose failure, and may the request go on.

    outcome:    how the attempt ended (`Outcome`).
    method:     the request's method, as sent (methods are case-sensitive, RFC 9110 9.1).
    replayable: the request can be sent again as it was (its body is still at hand).
    tried:      the backends this request failed on, this attempt's included (>= 1).
    retries:    how many other backends a request may go to after its first.
    reused:     the attempt went on a pooled connection that had carried earlier requests.
    wanted:     someone still waits for the answer.

    The cases:

    - NOT_THE_BACKEND: not a failure, nothing sent again. A client that left or a
      cancelled caller wants no answer; a shortage of this process says nothing of
      the backend, and charging it would eject healthy backends.
    - NOT_SENT: a failure; another backend may have the request whatever its method,
      since this one received nothing.
    - NO_RESPONSE on a reused connection (idempotent, replayable, wanted): not a
      failure; once more on a new connection to the same backend. A keep-alive
      connection the backend closed as it was being reused is its normal idle
      timeout racing the request, not a fault.
    - NO_RESPONSE otherwise: a failure; another backend may have the request only if
      its method is idempotent (RFC 9110 9.2.2: GET HEAD PUT DELETE OPTIONS TRACE,
      `IDEMPOTENT`), since the backend may have acted on it, and only if it is
      replayable.
    - FAILED: a failure, never sent again: the backend got the request and may be
      working on it (a timeout), or part of an answer may already be out.

    A retry also needs `wanted` and a backend left to try: `tried <= retries`, so at
    most `retries` others after the first. A reconnect is not bounded by `retries`:
    the caller does it once (it passes reused=False for the new connection).

    Each integration maps its own errors to an Outcome and passes what it knows;
    where they differ, the rule takes the difference as an argument:

    - the proxy reads a whole request before sending it (replayable=True always);
      the httpx transport's is replayable only when its body was known up front,
      not a one-shot stream.
    - the proxy knows which attempts went on a pooled connection (reused); the
      httpx transport does not see which connection httpcore used (reused=False
      always: httpcore drops idle connections the peer closed before reusing them,
      and a reset on one is a NO_RESPONSE like any other).
    - the proxy's client may leave while the proxy waits (wanted=False then); an
      httpx caller that gives up is cancelled instead (NOT_THE_BACKEND).
    - the proxy tells an unparsable answer (FAILED) from a close before any response
      byte (NO_RESPONSE); httpx raises RemoteProtocolError for both, which the
      transport maps to NO_RESPONSE.
    """
    if outcome is Outcome.NOT_THE_BACKEND:
        return _NOT_A_FAILURE
    if outcome is Outcome.NOT_SENT:
        may_go_on = True
    elif outcome is Outcome.NO_RESPONSE:
        may_go_on = replayable and method in IDEMPOTENT
        if may_go_on and reused and wanted:
            return _RECONNECT
    elif outcome is Outcome.FAILED:
        may_go_on = False
    else:
        raise TypeError(f"outcome must be a leastload.net.upstream.Outcome, got {outcome!r}")
    if may_go_on and wanted and tried <= retries:
        return _FAILURE_RETRY
    return _FAILURE

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
    known at start begin at full share. With shared= the process that finds the
    shared vserver empty binds and sets them; the others find them there.
    """
    slow_start = {k: settings.pop(k) for k in list(settings) if k.startswith("new_service_request")}
    vs = (engine or VirtualServer)(method, **settings)
    with vs.atomic():  # shared=: the first process to find it empty binds them, for all
        if len(vs) == 0:
            for b in backends:
                vs.bind(b.name, b.weight)
            if slow_start:
                vs.set(**slow_start)
    return vs
