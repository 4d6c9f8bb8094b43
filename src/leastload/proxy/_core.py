# cython: annotation_typing=False
"""The per-request path's shared core: the clock, a connection's writes and the loop's write turn,
and the proxy's fields that every request reads (ProxyCore).

Compiled from this .py with _core.pxd (Cython's pure-Python mode) like the modules above it
(_backend, _exchange, _client), which cimport these types; the .py runs as it is where there is
no compiled module. On Linux the compiled build reads the clock and sends on a socket in C
(_core.pxd's ll_proxy_clock, ll_proxy_send).
"""

import asyncio
import time
from typing import Any, Dict, List, Optional

from ..engine.methods import BY_PACKETS
from ..net.request_keys import KEYED_METHODS
from ._http1 import Piece

# (each compiled module needs its own: a cdef global cannot be imported from another module)
try:
    import cython
    _COMPILED = cython.compiled  # True only in the built module (a C constant there)
except ImportError:  # no Cython installed: this file runs as plain Python
    _COMPILED = False


def clock() -> float:
    """The proxy's clock for every wait and stamp of a request (deadlines, the sweep's `now`,
    TTFB, the access log's durations): time.monotonic()'s. Not the event loop's time():
    uvloop's counts whole milliseconds (a 2 ms backend's TTFB read 1, 2 or 3 ms). Compiled,
    on Linux, CLOCK_MONOTONIC is read in C as time.monotonic() reads it (_backend.pxd's
    ll_proxy_clock: the same double, without a Python call; four reads a request)."""
    if _COMPILED:
        now: float = _linux_monotonic()  # type: ignore[name-defined]  # noqa: F821 (in _backend.pxd)
        if now >= 0.0:
            return now
    return time.monotonic()


def write_now(transport: asyncio.WriteTransport, fd: int, data: Piece) -> int:
    """Writes `data` to a connection: compiled, on Linux, with one send() on its socket's
    descriptor `fd` while the transport holds nothing unsent, else through the transport.
    Returns the descriptor for the next write: -1 once the transport has been handed any bytes
    (they may wait in it, and what follows must queue behind them).

    uvloop's `write()` makes that same first attempt, but through a Python method call and
    its buffer bookkeeping (about 1,000 instructions a write, two writes a request). The
    transport stays the connection's owner: it is asked whether it is closing first (after
    it closed, the descriptor's number may already belong to a new connection), and it takes
    what the socket did not, or all of it after an error, which it then reports as its own
    (connection_lost). `fd` is -1 where there is no socket (a stand-in transport)."""
    if _COMPILED and fd >= 0 and transport.is_closing():
        fd = -1  # a closing transport is handed the bytes (what becomes of them is its to report)
    return _write_open(transport, fd, data)


def _write_open(transport: asyncio.WriteTransport, fd: int, data: Piece) -> int:
    """write_now() once the transport is known to be open (or `fd` is -1: through it)."""
    if _COMPILED and fd >= 0 and type(data) is bytes:
        size = len(cython.cast(bytes, data))  # (a bytes object's length: a field read, not len()'s call)
        sent = _send_now(fd, data, size)  # type: ignore[name-defined]  # noqa: F821 (in _backend.pxd)
        if sent == size:
            return fd
        transport.write(data[sent:] if sent > 0 else data)
        return -1
    transport.write(data)
    return -1


def socket_fd(transport: asyncio.BaseTransport) -> int:
    """The descriptor of a transport's socket, for write_now(); -1 when it has none."""
    return descriptor_of(transport.get_extra_info("socket"))


def descriptor_of(sock: Any) -> int:
    """A socket's (or a transport's stand-in's) descriptor; -1 for None or a closed one."""
    try:
        return int(sock.fileno()) if sock is not None else -1
    except (AttributeError, OSError, ValueError):
        return -1


# A turn whose flush found fewer than QUIET_TURN_PIECES pieces was a quiet one: holding the
# requests to the backends saved no wake-up there and cost the backends time, so the next
# WRITES_AT_ONCE_AFTER_QUIET of them go out at once (WriteTurn.holds()); then holding them is
# tried again. Under load a turn holds tens of pieces (256 connections). Answers to clients are
# held in every turn, a quiet one too (WriteSide.always_held). C globals in the compiled build
# (_core.pxd); WRITE_TURN_KNOBS gives their values to Python there too.
QUIET_TURN_PIECES = 4
WRITES_AT_ONCE_AFTER_QUIET = 64
WRITE_TURN_KNOBS = (QUIET_TURN_PIECES, WRITES_AT_ONCE_AFTER_QUIET)


class WriteTurn:
    """The writes of one turn of the event loop, sent when the turn's callbacks are done.

    Under load, a request's two writes (the request to its backend, the answer to its
    client) are held as they are made and sent together by one callback that the first of
    them schedules (`call_soon`: it runs before the loop waits for events again). Sent one
    by one as they were made, tens of microseconds apart, each could find its reader (wrk,
    a backend, a browser's socket) asleep and pay the kernel for waking it, and the reader
    would run for that one message and sleep again. Sent back to back, a reader woken by
    the first finds the rest when it looks again: fewer wake-ups and context switches for
    the proxy and for its peers HAProxy also sends after its poller's events are handled. In a quiet loop
    (see QUIET_TURN_PIECES) requests to the backends go out at once, as they are made (one held there
    only starts its backend's work later: 2-3 % fewer requests a second at 32 connections);
    answers to clients are held all the same (1-2 % more, measured the same way)."""

    __slots__ = ("loop", "waiting", "spare", "scheduled", "direct")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: "List[WriteSide]" = []  # the connections with a piece held, in the order held
        self.spare: "List[WriteSide]" = []    # the other list (the two take turns: no new list a turn)
        self.scheduled = False
        self.direct = 0  # writes still to go out at once (a quiet loop), before holding is tried again

    def holds(self) -> bool:
        """Whether the next write of a side that is not always_held is held (and counts a
        write that is not)."""
        if self.direct:
            self.direct -= 1
            return False
        return True

    def add(self, side: "WriteSide") -> None:
        self.waiting.append(side)
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Sends every piece held, in the order held."""
        self.scheduled = False
        held, self.waiting = self.waiting, self.spare
        if len(held) < QUIET_TURN_PIECES:
            self.direct = WRITES_AT_ONCE_AFTER_QUIET
        try:
            for side in held:
                try:
                    side.send_waiting()
                except Exception as exc:  # one connection's trouble is not the others'
                    self.loop.call_exception_handler({
                        "message": "leastload proxy: a held write failed", "exception": exc})
                    side.transport.abort()
        finally:
            del held[:]
            self.spare = held


class WriteSide:
    """A connection the proxy writes to (ClientSide, BackendConnection): every write goes
    through `write()`, which holds the piece for its WriteTurn when there is one and it
    holds. At most one piece is held: a second write in the same turn sends the first at
    once. Whatever closes the transport gracefully calls `close_when_written()` (or
    `send_waiting()`) first; an abort drops a held piece, as it drops what the transport holds."""

    __slots__ = ("transport", "fd", "waiting", "turn", "always_held")

    transport: asyncio.Transport
    waiting: Optional[bytes]   # the piece held for the turn's end
    turn: Optional[WriteTurn]  # None: every write goes out at once (no loop of a proxy)

    def __init__(self) -> None:
        self.fd = -1  # (a C int field starts at 0, a real descriptor: never left to that)
        self.waiting = None
        self.turn = None
        self.always_held = False

    def write(self, data: Piece) -> None:
        """Writes `data` after what was written before (write_now's rule: the order is kept).
        Only a bytes piece is held; another kind (a view, a bytearray: its owner might change
        it meanwhile) goes at once."""
        listed = self.waiting is not None  # one piece held already (so on the turn's list): it goes now
        if listed:
            self.send_waiting()
        turn = self.turn
        if turn is not None and type(data) is bytes and (self.always_held or turn.holds()):
            self.waiting = data
            if not listed:
                turn.add(self)
        else:
            self.fd = write_now(self.transport, self.fd, data)

    def send_waiting(self) -> None:
        """Sends the piece held, if any; dropped when the transport is closing (an abort, a
        lost connection: then its descriptor's number may already be another connection's)."""
        waiting = self.waiting
        if waiting is None:
            return
        self.waiting = None
        if not self.transport.is_closing():
            self.fd = _write_open(self.transport, self.fd, waiting)
            self.on_sent()

    def on_sent(self) -> None:
        """A held piece has just been sent (BackendConnection times its request from here)."""

    def close_when_written(self) -> None:
        """Closes the transport once everything written, a held piece too, is sent."""
        self.send_waiting()
        self.transport.close()


class ProxyCore:
    """What the per-request path reads of its proxy on every request: C fields in the
    compiled build, where a Python attribute of the proxy costs a dictionary lookup or
    two. A Proxy's attributes of these names are views of its core's (set one, and the
    next request reads the new value); the rest of the proxy is read as attributes."""

    __slots__ = ("vserver", "pools", "stats", "access_log", "forwarding", "timeout", "header_timeout",
                 "client_timeout", "method", "keyed", "by_packets", "turn")

    def __init__(self) -> None:
        self.vserver: Any = None      # the engine's VirtualServer (either engine's)
        self.pools: Dict[str, Any] = {}  # name -> _backend.Pool
        self.stats: Any = None        # _stats.Stats
        self.access_log: Any = None   # an AccessLog, or None
        self.forwarding: Any = None   # _http1.Forwarding
        self.timeout = 0.0            # a backend's silence that ends an exchange
        self.header_timeout = 0.0     # a request head's time once begun
        self.client_timeout = 0.0     # an idle keep-alive client connection's
        # the vserver's method as last read (the engine's str), and what it asks of a request
        self.method: Optional[str] = None
        self.keyed = False            # a hash method: the request's key is read
        self.by_packets = False       # it picks by packets: TCP_INFO after every answer
        self.turn: Optional[WriteTurn] = None  # the writes held to the loop's turn's end (once started)

    def use_method(self, method: str) -> None:
        self.method = method
        self.keyed = method in KEYED_METHODS
        self.by_packets = method in BY_PACKETS
