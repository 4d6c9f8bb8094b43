# cython: annotation_typing=False
"""Connections to one backend: the keep-alive pool and one response's trip back.

A `BackendConnection` carries one request at a time. Its response goes
through the I/O-free reader (_http1.ResponseReader), which rewrites the head
for the client (hop-by-hop headers out), passes the body on as it arrives,
finds the end of the message and says whether the connection may carry
another request: one that sent bytes past its response's end, or a body its
framing did not announce, is closed and never pooled. When the
exchange ends, the connection calls `exchange.on_outcome(outcome, conn)`
once, as its last step, so the request's accounting sits in one place.

What a connection uses of the exchange it carries and of the client it answers is
spelled out below (`ExchangeSide`, the base class of _exchange.Exchange, and
`ClientSide`, which _client.ClientConnection is), so this module imports neither.

No timer per request: the proxy's sweep calls `check_timeout(now)` on the
connections that carry a request a few times per timeout period.
"""

import asyncio
import os
import socket
from typing import Any, Callable, List, Optional, Tuple, cast

from ..net.tcpinfo import SegmentCounter
from ._core import ProxyCore, WriteSide, WriteTurn, clock, descriptor_of
from ._response import ResponseReader
from ._scan import Buffer, Limits, Piece

# (each compiled module needs its own: a cdef global cannot be imported from another module)
try:
    import cython
    _COMPILED = cython.compiled  # True only in the built module (a C constant there)
except ImportError:  # no Cython installed: this file runs as plain Python
    _COMPILED = False


# How an exchange with a backend ended.
OK = "ok"
RESET = "reset"            # closed or reset before any response byte (or refused: no connection)
BROKEN = "broken"          # closed, reset or garbled after response bytes were passed on
TIMEOUT = "timeout"        # no first byte (or no further byte) within the timeout
BAD_RESPONSE = "bad"       # unparsable response before anything was passed on
CLIENT_GONE = "client-gone"
CLIENT_STALLED = "client-stalled"  # the client did not read its answer for `timeout`

# With a method that does not pick by packets, a connection's TCP_INFO is read after every
# SEGMENTS_READ_EVERY-th response, after one it is closed after, and once more when it is lost
# (the pool's on_late_packets), rather than after each: the segments in between are charged
# to the response that reads them, and the totals stay exact (docs/proxy.md).
SEGMENTS_READ_EVERY = 16  # a C global in the compiled build (_backend.pxd)
PACKETS_EVERY = SEGMENTS_READ_EVERY  # its value for Python, the compiled build's too (the benchmarks read it)


def _own_socket(transport: asyncio.BaseTransport) -> Tuple[Optional[socket.socket], Optional[socket.socket]]:
    """A socket object for getsockopt(TCP_INFO) that is cheap to call.

    uvloop's transports hand out a stand-in that builds a socket object on each
    call (a getsockname() each time); a dup of the descriptor avoids that. The
    dup is closed with the connection.
    """
    sock = transport.get_extra_info("socket")
    if sock is None or isinstance(sock, socket.socket):
        return sock, None
    inner = getattr(sock, "_sock", None)  # asyncio's TransportSocket wraps a real one
    if isinstance(inner, socket.socket):
        return inner, None
    try:
        own = socket.socket(fileno=os.dup(sock.fileno()))
    except OSError:
        return cast(socket.socket, sock), None  # a stand-in with getsockopt(): used as a socket
    return own, own


class ClientSide(WriteSide):
    """What a backend connection and an exchange use of the client connection the answer
    goes to: _client.ClientConnection subclasses it. A base class rather than a Protocol,
    so that the compiled build reads these fields and calls exchange_done() as C."""

    __slots__ = ("proxy", "core", "loop", "gone", "paused", "paused_since", "backend")

    proxy: Any                   # the proxy's settings and state (_exchange.Upstream)
    core: ProxyCore              # the proxy's, read on every request
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport  # the answer is written to it; aborted when it stalls
    gone: bool                   # the connection is lost
    paused: bool                 # the client does not read (our writes are backed up)
    paused_since: float
    backend: "Optional[BackendConnection]"  # the backend connection of the exchange in progress

    def exchange_done(self, keep_going: bool) -> None:
        """The exchange in progress ended; `keep_going`: the connection may serve another request."""
        raise NotImplementedError

    def log_request(self, log: Any, status: int, size: int, backend: Optional[str], ttfb: Optional[float],
                    total: float, retries: int, wall: float, method: str, head: Any) -> None:
        """The access log's line for an exchange that ended (`log`: the proxy's AccessLog,
        `head`: the request's _http1.RequestHead, or None when it was not read)."""
        raise NotImplementedError


class ExchangeSide:
    """What a backend connection uses of the exchange it carries: _exchange.Exchange
    subclasses it. A base class rather than a Protocol, so that the compiled build reads
    `client` and `t` and calls on_outcome() as C, not through Python attribute lookups."""

    __slots__ = ("client", "t")

    client: ClientSide
    t: Any  # the attempt's transaction handle (either engine's)

    def on_outcome(self, outcome: str, conn: "Optional[BackendConnection]") -> None:
        raise NotImplementedError


class BackendConnection(WriteSide):
    __slots__ = ("pool", "loop", "reader", "counter", "dup", "exchange", "client", "t",
                 "timeout", "sent", "received", "passed", "sent_at", "last_data", "ttfb", "held", "unread",
                 "exact", "segments_fd", "segments_read", "unrecorded", "busy_at")

    # (the fields are declared in _backend.pxd; an annotation here only gives mypy the type
    # of one that starts as None elsewhere)
    ttfb: Optional[float]

    def __init__(self, pool: "Pool") -> None:
        WriteSide.__init__(self)
        self.turn = pool.turn
        self.pool = pool
        self.loop = pool.loop
        self.reader = ResponseReader(pool.limits)
        if pool.added_head:  # --backend-header's line, the same for every response of this backend
            self.reader.add_to_head(pool.added_head)
        self.dup: Optional[socket.socket] = None
        self.exchange: Optional[ExchangeSide] = None
        self.held = False  # reading paused because the client does not read
        self.unread = 0  # exchanges sent on it since TCP_INFO was last read
        self.unrecorded = 0  # the response's last bytes, which the exchange's end records (data_received)
        self.busy_at = -1  # its place in its pool's busy list while an exchange is on it

    # ---- asyncio.Protocol (not its subclass: compiled, this is an extension type) --------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock, self.dup = _own_socket(transport)
        self.fd = descriptor_of(sock)  # (the dup's, when there is one: ours until connection_lost closes it)
        # the connection's first request is charged its handshake too
        self.counter = SegmentCounter(sock, from_start=True)
        self.exact = self.counter.exact  # TCP_INFO is read (not estimated); kept here, read per request
        # compiled, TCP_INFO is read in C on this descriptor (see _take_segments), from no segments
        self.segments_fd = descriptor_of(sock)
        self.segments_read = 0
        self.pool.opened_one()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.fd = -1
        self.pool.lost(self)
        if self.exchange is not None:
            self._pass_on(self.reader.feed_eof())
            if self.reader.complete:  # a body delimited by the close: the close ends it
                self._end(OK)
            elif self.ttfb is None:
                self._end(RESET)
            else:
                self._end(BROKEN)
        if self.unread and self.exact:  # segments not read yet: the socket is still open here
            late = self._take_segments(0, 0)  # no estimate: a read that fails here counts nothing
            if late and self.pool.on_late_packets is not None:
                self.pool.on_late_packets(late)
        self.segments_fd = -1  # (not read again: the number may name another socket once closed)
        if self.dup is not None:
            self.dup.close()
            self.dup = None

    def data_received(self, data: bytes) -> None:
        if self.exchange is None:  # nothing was asked (bytes after a response's end): never reused
            self.transport.abort()
            return
        now = self.last_data = clock()
        if self.ttfb is None:
            self.ttfb = now - self.sent_at
        reader = self.reader
        out = reader.feed(data)
        self.received += len(data)
        if reader.complete and reader.failed is None:
            # the response's last bytes: the exchange records them as it ends, a few microseconds
            # from now in this same callback, in one call with the packets when TCP_INFO is read
            # (a call fewer after every response with LEASTPACKETS, after one in 16 otherwise)
            self.unrecorded = len(data)
        else:
            self.t.record(len(data))  # (bytes), positional: cheaper than a keyword
        if out:
            self._pass_on(out)
        if reader.failed is not None:
            self.transport.abort()
            self._end(BROKEN if self.passed else BAD_RESPONSE)
        elif reader.complete:
            if not reader.reusable and reader.status != 101:  # (after a 101: the tunnel's, _tunnel.py)
                self.close_when_written()
            self._end(OK)

    def eof_received(self) -> Optional[bool]:
        return None  # the backend closed its side: the transport closes, connection_lost() ends the exchange

    def pause_writing(self) -> None:
        pass  # a request is one write; a backend that does not read it times out

    def resume_writing(self) -> None:
        pass

    def _pass_on(self, out: List[Piece]) -> None:
        if out and not self.client.gone:
            self.passed = True
            # one write: a head and its body in one segment, one system call
            self.client.write(out[0] if len(out) == 1 else b"".join(out))

    # ---- one exchange ----------------------------------------------------------

    def send(self, exchange: ExchangeSide, payload: Buffer, timeout: float, head_only: bool,
             http10: bool, keep_alive: bool) -> None:
        """Sends a request for `exchange`; its on_outcome() is called when the exchange ends."""
        self.exchange, self.client, self.t = exchange, exchange.client, exchange.t
        self.timeout = timeout
        self.reader.start(head_only, http10, keep_alive)
        self.sent, self.received, self.passed = len(payload), 0, False
        self.unrecorded = 0
        self.ttfb = None
        self.unread += 1
        self.pool.started(self)
        if self.held and not self.client.paused:  # held for an earlier client: this one reads
            self.held = False
            self.transport.resume_reading()
        self.write(payload)  # held to the turn's end, when sent_at is set again (on_sent)
        self.sent_at = self.last_data = clock()
        self.t.record(len(payload))

    def on_sent(self) -> None:
        # the request held to the turn's end has just gone out: its TTFB and silence count from now
        if self.exchange is not None:
            self.sent_at = self.last_data = clock()

    @property
    def status(self) -> int:
        return self.reader.status

    def check_timeout(self, now: float) -> None:
        if self.exchange is None:
            return
        client = self.client
        if client.paused:  # the client is not reading: its stall, not the backend's
            if now - client.paused_since >= self.timeout:
                self.abandon(stalled=True)
                client.transport.abort()
            return
        if now - self.last_data >= self.timeout:
            self.transport.abort()
            self._end(TIMEOUT)

    def hold(self) -> None:
        """The client does not read: neither does this connection (the backend is slowed down)."""
        if not self.held:
            self.held = True
            self.transport.pause_reading()

    def resume(self, now: float) -> None:
        """The client reads again: so does this connection, and its timeout starts again."""
        self.last_data = now
        if self.held:
            self.held = False
            self.transport.resume_reading()

    def abandon(self, stalled: bool = False) -> None:
        """The client went away (or stopped reading) mid-exchange: this connection cannot be reused."""
        if self.exchange is not None:
            self.transport.abort()
            self._end(CLIENT_STALLED if stalled else CLIENT_GONE)

    def _end(self, outcome: str) -> None:
        exchange, self.exchange = self.exchange, None
        assert exchange is not None  # every caller checked that an exchange is in progress
        self.pool.ended(self)
        exchange.on_outcome(outcome, self)  # last: it may reuse this connection at once

    def packets(self, every: bool, reusable: bool) -> int:
        """TCP segments both ways since the last read, at the end of an exchange that went well
        (`reusable`: the connection's reusable() then, which the caller reads once).

        `every`: read TCP_INFO now (the method picks by packets). Otherwise it is read after
        every SEGMENTS_READ_EVERY-th exchange and after one the connection is not reused after; the
        others return 0 (their segments go to the next read, or to the pool's on_late_packets
        when the connection is lost). Without TCP_INFO each exchange gets its estimate from
        the bytes, which costs no system call.
        """
        if every or self.unread >= SEGMENTS_READ_EVERY or not self.exact or not reusable:
            return self._take_segments(self.sent, self.received)
        return 0

    def _take_segments(self, sent: int, received: int) -> int:
        """Segments since the last read (without TCP_INFO: the estimate for `sent` and `received` bytes)."""
        self.unread = 0
        counter = self.counter
        if _COMPILED and self.exact:
            # compiled: one getsockopt() in C, counted as counter.take() counts. Its Python (a
            # socket method, a struct, tuples) ran cold once every 16 responses and showed in
            # the proxy's profile (journal/performance-2026.md)
            packets: int = _segments_since(  # type: ignore[name-defined]  # noqa: F821 (in _backend.pxd)
                self.segments_fd, cython.address(self.segments_read))
            if packets >= 0:
                return packets
            counter.stop_reading()  # as take() does when its read fails: estimates from now on
        packets = counter.take(sent, received)
        self.exact = counter.exact  # a failed read: estimates from now on
        return packets

    def release(self, reusable: bool) -> None:
        """Back to its pool: idle if `reusable` (its reusable() at the exchange's end), else closed."""
        self.pool.put(self, reusable)

    def reusable(self) -> bool:
        # a connection held unread (its client stopped reading) would hide bytes the backend
        # sent past the response's end from the next exchange: closed rather than pooled
        return self.reader.reusable and not self.held and not self.transport.is_closing()


class ConnectionBudget:
    """Backend connections open across all pools, kept to `limit` (the proxy's
    max_connections): a new one past it first closes the oldest idle connection
    of the pool that has most, so descriptors spent on idle connections never
    crowd out client connections and probes. Busy connections are never closed
    for it (each serves one client connection, and those are limited)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0
        self.pools: "List[Pool]" = []

    def make_room(self) -> None:
        if self.open < self.limit:
            return
        fullest = max(self.pools, key=lambda pool: len(pool.idle), default=None)
        if fullest is not None and fullest.idle:
            oldest = fullest.idle[0]
            fullest.forget(oldest)
            oldest.close_when_written()


class Pool:
    """Keep-alive connections to one backend: the idle ones (newest reused first), the busy ones."""

    def __init__(self, loop: asyncio.AbstractEventLoop, host: str, port: int, max_idle: int,
                 limits: Limits, budget: ConnectionBudget,
                 on_late_packets: Optional[Callable[[int], None]] = None,
                 turn: Optional[WriteTurn] = None) -> None:
        self.loop, self.host, self.port, self.max_idle = loop, host, port, max_idle
        self.turn = turn  # its connections' writes held to the loop's turn's end (None: sent at once)
        self.limits, self.budget = limits, budget
        self.added_head = b""  # a line added to every response head from this backend (--backend-header)
        # segments a lost connection had not reported with an exchange (see SEGMENTS_READ_EVERY)
        self.on_late_packets = on_late_packets
        self.idle: List[BackendConnection] = []  # oldest first: take() pops the newest
        # the connections with an exchange on them, in no order (each knows its place, busy_at:
        # a list's append and a swap with the last cost less than a set's hashing, per request)
        self.busy: List[BackendConnection] = []
        self.opened = 0
        budget.pools.append(self)

    async def connect(self, timeout: float) -> BackendConnection:
        self.opened += 1
        self.budget.make_room()
        # BackendConnection is a protocol without asyncio.Protocol's base (an extension type compiled)
        _, conn = await asyncio.wait_for(self.loop.create_connection(
            lambda: cast(asyncio.Protocol, BackendConnection(self)), self.host, self.port), timeout)
        return cast(BackendConnection, conn)

    def opened_one(self) -> None:
        self.budget.open += 1

    def take(self) -> Optional[BackendConnection]:
        while self.idle:
            conn = self.idle.pop()
            if not conn.transport.is_closing():
                return conn
        return None

    def started(self, conn: BackendConnection) -> None:
        """An exchange is on `conn`: check_timeouts() looks at it until ended()."""
        if conn.busy_at < 0:
            conn.busy_at = len(self.busy)
            self.busy.append(conn)

    def ended(self, conn: BackendConnection) -> None:
        """`conn`'s exchange is over: off the busy list, the list's last taking its place."""
        at = conn.busy_at
        if at < 0:
            return
        conn.busy_at = -1
        last = self.busy.pop()
        if last is not conn:
            self.busy[at] = last
            last.busy_at = at

    def put(self, conn: BackendConnection, reusable: bool) -> None:
        if reusable and len(self.idle) < self.max_idle:
            self.idle.append(conn)
        else:
            conn.close_when_written()

    def forget(self, conn: BackendConnection) -> None:
        if conn in self.idle:  # at most max_idle identity checks, when a connection closes
            self.idle.remove(conn)

    def lost(self, conn: BackendConnection) -> None:
        self.forget(conn)
        self.budget.open -= 1

    def check_timeouts(self, now: float) -> None:
        for conn in list(self.busy):
            conn.check_timeout(now)

    def close(self) -> None:
        for conn in list(self.idle):
            conn.close_when_written()
        self.idle.clear()
        if self in self.budget.pools:
            self.budget.pools.remove(self)
