"""Connections to one backend: the keep-alive pool and one response's trip back.

A `BackendConnection` carries one request at a time. Its response is
passed through to the client byte for byte as it arrives (the head too: the
proxy does not rewrite response headers); the parser only finds the status,
the end of the message and whether the connection may be reused. When the
exchange ends, the connection calls `exchange.on_outcome(outcome, conn)`
once, as its last step, so the request's accounting sits in one place.

No timer per request: the proxy's sweep calls `check_timeout(now)` on the
connections that carry a request a few times per timeout period.
"""

import asyncio
import os
import socket
from typing import TYPE_CHECKING, Any, Dict, Optional, Set, Tuple, cast

import httptools

from ..tcpinfo import SegmentCounter

if TYPE_CHECKING:
    from ._client import ClientConnection
    from ._exchange import Exchange

# How an exchange with a backend ended.
OK = "ok"
RESET = "reset"            # closed or reset before any response byte (or refused: no connection)
BROKEN = "broken"          # closed, reset or garbled after response bytes were passed on
TIMEOUT = "timeout"        # no first byte (or no further byte) within the timeout
BAD_RESPONSE = "bad"       # unparsable response before anything was passed on
CLIENT_GONE = "client-gone"


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


class BackendConnection(asyncio.Protocol):
    __slots__ = ("pool", "loop", "transport", "parser", "counter", "dup", "exchange", "client", "t",
                 "timeout", "sent", "received", "sent_at", "last_data", "ttfb", "status", "head_only",
                 "interim", "until_eof", "complete", "keep_alive", "client_keep_alive", "_framing")

    # set by connection_made / send(), before they are read
    transport: asyncio.Transport
    counter: SegmentCounter
    client: "ClientConnection"
    t: Any  # the exchange's transaction handle (either engine's)
    timeout: float
    sent: int
    received: int
    sent_at: float
    last_data: float
    ttfb: Optional[float]
    status: int
    head_only: bool
    interim: bool
    until_eof: bool
    complete: bool
    client_keep_alive: bool
    _framing: bool

    def __init__(self, pool: "Pool") -> None:
        self.pool = pool
        self.loop = pool.loop
        self.parser = httptools.HttpResponseParser(self)
        self.dup: Optional[socket.socket] = None
        self.exchange: "Optional[Exchange]" = None
        self.keep_alive = True  # a new connection may carry a request; each answer decides again

    # ---- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock, self.dup = _own_socket(transport)
        # the connection's first request is charged its handshake too
        self.counter = SegmentCounter(sock, from_start=True)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.pool.forget(self)
        if self.exchange is not None:
            if self.until_eof and self.status:  # a body delimited by the close: the close ends it
                self._end(OK)
            elif self.ttfb is None:
                self._end(RESET)
            else:
                self._end(BROKEN)
        if self.dup is not None:
            self.dup.close()
            self.dup = None

    def data_received(self, data: bytes) -> None:
        if self.exchange is None:  # nothing was asked: a confused backend
            self.transport.abort()
            return
        now = self.last_data = self.loop.time()
        if self.ttfb is None:
            self.ttfb = now - self.sent_at
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.abort()
            self._end(BAD_RESPONSE if not self.received else BROKEN)
            return
        if self.head_only and self.complete:  # a backend that sends a body after HEAD: not passed on
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                data = data[:end + 4]
        self.received += len(data)
        self.client.transport.write(data)
        self.t.record(bytes=len(data))
        if self.complete:
            self._end(OK)

    # ---- httptools callbacks ------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) in (14, 17):
            lowered = name.lower()
            if lowered == b"content-length" or (lowered == b"transfer-encoding" and b"chunked" in value.lower()):
                self._framing = True

    def on_headers_complete(self) -> None:
        status: int = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self.interim = True  # 1xx: passed on, the final response follows
            return
        self.status = status
        if self.head_only or status in (204, 304):
            self.complete = True
            self.client_keep_alive = self.parser.should_keep_alive()
            # after HEAD the parser would wait for the announced body: this connection is done
            self.keep_alive = self.client_keep_alive and not self.head_only
            return
        self.until_eof = not self._framing

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            self._framing = False
            return
        self.complete = True
        self.keep_alive = self.client_keep_alive = self.parser.should_keep_alive() and not self.until_eof

    # ---- one exchange ----------------------------------------------------------

    def send(self, exchange: "Exchange", payload: bytes, timeout: float, head_only: bool) -> None:
        """Sends a request for `exchange`; its on_outcome() is called when the exchange ends."""
        self.exchange, self.client, self.t = exchange, exchange.client, exchange.t
        self.timeout, self.head_only = timeout, head_only
        self.sent, self.received = len(payload), 0
        self.ttfb = None
        self.status = 0
        self.interim = self.until_eof = self.complete = self._framing = False
        self.keep_alive = self.client_keep_alive = False
        self.pool.busy.add(self)
        self.transport.write(payload)
        self.sent_at = self.last_data = self.loop.time()
        self.t.record(bytes=len(payload))

    def check_timeout(self, now: float) -> None:
        if self.exchange is not None and now - self.last_data >= self.timeout:
            self.transport.abort()
            self._end(TIMEOUT)

    def abandon(self) -> None:
        """The client went away mid-exchange: this connection cannot be reused."""
        if self.exchange is not None:
            self.transport.abort()
            self._end(CLIENT_GONE)

    def _end(self, outcome: str) -> None:
        exchange, self.exchange = self.exchange, None
        assert exchange is not None  # every caller checked that an exchange is in progress
        self.pool.busy.discard(self)
        exchange.on_outcome(outcome, self)  # last: it may reuse this connection at once

    def packets(self) -> int:
        return self.counter.take(self.sent, self.received)

    def reusable(self) -> bool:
        return self.keep_alive and not self.transport.is_closing()


class Pool:
    """Keep-alive connections to one backend: the idle ones (newest reused first), the busy ones."""

    def __init__(self, loop: asyncio.AbstractEventLoop, host: str, port: int, max_idle: int) -> None:
        self.loop, self.host, self.port, self.max_idle = loop, host, port, max_idle
        self.idle: Dict[BackendConnection, None] = {}  # insertion-ordered: popitem() takes the newest
        self.busy: Set[BackendConnection] = set()
        self.opened = 0

    async def connect(self, timeout: float) -> BackendConnection:
        self.opened += 1
        _, conn = await asyncio.wait_for(
            self.loop.create_connection(lambda: BackendConnection(self), self.host, self.port), timeout)
        return conn

    def take(self) -> Optional[BackendConnection]:
        while self.idle:
            conn, _ = self.idle.popitem()
            if not conn.transport.is_closing():
                return conn
        return None

    def put(self, conn: BackendConnection) -> None:
        if len(self.idle) < self.max_idle and conn.reusable():
            self.idle[conn] = None
        else:
            conn.transport.close()

    def forget(self, conn: BackendConnection) -> None:
        self.idle.pop(conn, None)

    def check_timeouts(self, now: float) -> None:
        for conn in list(self.busy):
            conn.check_timeout(now)

    def close(self) -> None:
        for conn in list(self.idle):
            conn.transport.close()
        self.idle.clear()
