"""The client side: parse requests, hand each to an Exchange, one at a time.

One `ClientConnection` per client connection. Requests are parsed with
httptools; each complete request (its body buffered, so it can be sent again
on another backend) becomes an `Exchange` (_exchange.py), one at a time in
arrival order: pipelined requests wait their turn. Under a hash method the
request's key is read when the request is complete (leastload.request_keys:
the connection is the `RequestView`), and kept for its retries.
"""

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Deque, List, Optional, Set, Tuple, Union, cast

import httptools

from ..request_keys import Address, MissingKey, ip_or_none
from ..upstream import IDEMPOTENT
from ._exchange import Exchange
from ._http import error_response

if TYPE_CHECKING:
    from ._backend import BackendConnection
    from ._proxy import Proxy

# Headers that belong to one hop (RFC 9110 7.6.1) or that the proxy sets itself.
_DROP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding",
                   b"upgrade", b"expect", b"content-length", b"x-forwarded-for"})
_CONNECTION_OPTIONS = frozenset({b"close", b"keep-alive", b"upgrade"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_METHOD_NAMES = {m.encode(): m for m in ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE")}
MAX_HEAD = 65536


class Request:
    __slots__ = ("method", "payload", "keep_alive", "idempotent", "head_only", "key")

    def __init__(self, method: str, payload: bytes, keep_alive: bool, key: object = None) -> None:
        self.method = method
        self.payload = payload
        self.keep_alive = keep_alive
        self.idempotent = method in IDEMPOTENT
        self.head_only = method == "HEAD"
        self.key = key  # what the vserver's hash method picks by (None for the other methods)


class ClientConnection(asyncio.Protocol):
    transport: asyncio.Transport  # set by connection_made, before any other callback
    url: bytes
    headers: List[Tuple[bytes, bytes]]
    head_size: int
    body: bytearray
    too_large: bool

    def __init__(self, proxy: "Proxy") -> None:
        self.proxy = proxy
        assert proxy.loop is not None  # connections come in once the proxy runs
        self.loop: asyncio.AbstractEventLoop = proxy.loop
        self.parser = httptools.HttpRequestParser(self)
        self.peer = b"unknown"
        self.peername: Tuple[object, ...] = ()  # the client's (address, port, ...)
        self.sockname: Tuple[object, ...] = ()  # the proxy's end of the connection
        self._addresses: Optional[Tuple[Optional[Address], Optional[Address]]] = None
        # requests in arrival order, or an answer of the proxy's own: (status, text, close after it)
        self.queue: Deque[Union[Request, Tuple[int, str, bool]]] = deque()
        self.busy = False
        self.gone = False
        self.paused = False
        self.backend: "Optional[BackendConnection]" = None  # the exchange in progress
        self.idle_since = 0.0
        self.idle_timer: Optional[asyncio.TimerHandle] = None
        self.refused = False
        self.in_next = False
        self._reset_message()

    def _reset_message(self) -> None:
        self.url = b""
        self.headers = []
        self.head_size = 0
        self.body = bytearray()
        self.too_large = False

    # ---- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = str(peer[0]).encode()
            self.peername = tuple(peer)
        self.sockname = tuple(transport.get_extra_info("sockname") or ())
        self.proxy.clients.add(self)
        self.idle_since = self.loop.time()
        self.idle_timer = self.loop.call_later(self.proxy.client_timeout, self._on_idle_timer)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.gone = True
        self.proxy.clients.discard(self)
        self.queue.clear()
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        if self.backend is not None:
            self.backend.abandon()

    def data_received(self, data: bytes) -> None:
        self.idle_since = self.loop.time()
        if self.refused:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(501, "upgrade and CONNECT are not supported by this proxy")
        except httptools.HttpParserError:
            self._refuse(400, "malformed request")

    def pause_writing(self) -> None:  # the client reads slower than the backend sends: slow the backend down
        self.paused = True
        if self.backend is not None:
            self.backend.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        if self.backend is not None:
            self.backend.transport.resume_reading()

    def _on_idle_timer(self) -> None:
        self.idle_timer = None
        if self.gone:
            return
        due = self.idle_since + self.proxy.client_timeout
        if self.busy or self.queue or due > self.loop.time():
            self.idle_timer = self.loop.call_at(max(due, self.loop.time() + 1.0), self._on_idle_timer)
        else:
            self.transport.close()

    # ---- the request's key (a RequestView for leastload.request_keys) --------------

    def _ips(self) -> Tuple[Optional[Address], Optional[Address]]:
        """(client address, proxy address) of the connection, parsed once."""
        if self._addresses is None:
            self._addresses = (ip_or_none(self.peername[0] if self.peername else None),
                               ip_or_none(self.sockname[0] if self.sockname else None))
        return self._addresses

    @property
    def source_ip(self) -> Optional[Address]:
        return self._ips()[0]

    @property
    def source_port(self) -> Optional[int]:
        port = self.peername[1] if len(self.peername) > 1 else None
        return port if isinstance(port, int) else None

    @property
    def destination_ip(self) -> Optional[Address]:
        return self._ips()[1]

    @property
    def target(self) -> bytes:
        return self.url

    def header(self, name: bytes) -> Optional[bytes]:
        """The current request's first header of that (lowercase) name."""
        for key, value in self.headers:
            if len(key) == len(name) and key.lower() == name:
                return value
        return None

    # ---- httptools callbacks ------------------------------------------------

    def on_url(self, url: bytes) -> None:
        self.url += url
        self.head_size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_size += len(name) + len(value)
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self.head_size > MAX_HEAD:
            raise httptools.HttpParserError("head too large")  # caught in data_received
        for name, value in self.headers:
            if len(name) == 6 and name.lower() == b"expect" and value.lower() == b"100-continue":
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # the body is read here, then sent on

    def on_body(self, body: bytes) -> None:
        if len(self.body) + len(body) > self.proxy.max_body:
            self.too_large = True
        elif not self.too_large:
            self.body += body

    def on_message_complete(self) -> None:
        if self.parser.should_upgrade():
            self._refuse(501, "upgrade and CONNECT are not supported by this proxy")
            return
        if self.too_large:
            self._refuse(413, f"request body larger than {self.proxy.max_body} bytes")
            return
        raw_method: bytes = self.parser.get_method()
        method = _METHOD_NAMES.get(raw_method) or raw_method.decode("ascii", "replace")
        keep_alive = self.parser.should_keep_alive()
        try:
            key = self.proxy.keys.key(self.proxy.vserver.method, self)
        except MissingKey as exc:  # answered in turn, like any request; the connection goes on
            self.queue.append((400, str(exc), not keep_alive))
            self.proxy.stats.answered_by_proxy[400] += 1
        else:
            self.queue.append(Request(method, self._payload(method, raw_method), keep_alive, key))
        self._reset_message()
        if not self.busy and not self.in_next:
            self._next()

    def _payload(self, method: str, raw_method: bytes) -> bytes:
        """The request as sent to a backend: HTTP/1.1, keep-alive, hop-by-hop headers dropped."""
        parts: List[bytes] = [raw_method, b" ", self.url, b" HTTP/1.1\r\n"]
        kept: List[Tuple[bytes, bytes, bytes]] = []
        forwarded = self.peer
        named: Optional[Set[bytes]] = None  # headers a Connection header names as hop-by-hop
        for name, value in self.headers:
            lowered = name.lower()
            if lowered in _DROP:
                if lowered == b"x-forwarded-for":
                    forwarded = value + b", " + self.peer
                elif lowered == b"connection":
                    named = {t.strip().lower() for t in value.split(b",")} - _CONNECTION_OPTIONS
            else:
                kept.append((lowered, name, value))
        for lowered, name, value in kept:
            if not named or lowered not in named:
                parts += (name, b": ", value, b"\r\n")
        parts += (b"X-Forwarded-For: ", forwarded, b"\r\n")
        body = self.body
        if body or method in _BODY_METHODS:
            parts.append(b"Content-Length: %d\r\n" % len(body))
        parts.append(b"\r\n")
        if body:
            parts.append(bytes(body))
        return b"".join(parts)

    # ---- answering ------------------------------------------------------------

    def _refuse(self, status: int, text: str) -> None:
        """A request this proxy will not forward: answer in turn and close (the stream is unusable)."""
        self.refused = True
        self.queue.append((status, text, True))
        if not self.busy and not self.in_next:
            self._next()

    def _next(self) -> None:
        """Starts the queued requests in order, each when the one before it is done."""
        self.in_next = True  # an exchange that ends at once returns here instead of recursing
        try:
            while self.queue and not self.busy and not self.gone:
                item = self.queue.popleft()
                if isinstance(item, tuple):  # an answer of the proxy's own: (status, text, close)
                    status, text, close = item
                    self.transport.write(error_response(status, text, close))
                    if close:
                        self.transport.close()
                        self.queue.clear()
                        return
                    continue
                self.busy = True
                Exchange(self, item).start()
        finally:
            self.in_next = False

    def exchange_done(self, keep_going: bool) -> None:
        self.busy = False
        self.idle_since = self.loop.time()
        if self.gone:
            return
        if not keep_going:
            self.queue.clear()
            self.transport.close()
        elif self.queue and not self.in_next:
            self._next()
