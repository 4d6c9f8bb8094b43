"""The client side: parse requests, send each through the engine, stream the answer.

One `ClientConnection` per client connection. Requests are parsed with
httptools; each complete request (its body buffered, so it can be sent again
on another backend) is forwarded by `_serve()`, one at a time in arrival
order (pipelined requests wait their turn). The engine sees, per request:

    acquire(exclude=tried)      the pick; a retry excludes the backends tried
    record(bytes=...)           the request as sent, each response chunk as it arrives
    record(packets=...)         the backend socket's TCP_INFO segment delta at the end
    finish(ttfb, status)        request fully sent -> first response byte; the status
    fail()                      refused, reset, timed out or garbled: no response
"""

import asyncio
from collections import deque

import httptools

from .. import NoServiceAvailable
from ..upstream import IDEMPOTENT
from . import _backend

# Headers that belong to one hop (RFC 9110 7.6.1) or that the proxy sets itself.
_DROP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding",
                   b"upgrade", b"expect", b"content-length", b"x-forwarded-for"})
MAX_HEAD = 65536

_REASONS = {400: b"Bad Request", 413: b"Content Too Large", 431: b"Request Header Fields Too Large",
            501: b"Not Implemented", 502: b"Bad Gateway", 503: b"Service Unavailable", 504: b"Gateway Timeout"}


def error_response(status, text, close):
    body = text.encode() + b"\n"
    return b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status, _REASONS[status], len(body), b"Connection: close\r\n" if close else b"", body)


class Request:
    __slots__ = ("method", "payload", "keep_alive", "idempotent", "head_only")

    def __init__(self, method, payload, keep_alive):
        self.method = method
        self.payload = payload
        self.keep_alive = keep_alive
        self.idempotent = method in IDEMPOTENT
        self.head_only = method == "HEAD"


class ClientConnection(asyncio.Protocol):
    def __init__(self, proxy):
        self.proxy = proxy
        self.loop = proxy.loop
        self.parser = httptools.HttpRequestParser(self)
        self.transport = None
        self.peer = b"unknown"
        self.queue = deque()
        self.busy = False
        self.gone = False
        self.paused = False
        self.backend = None  # the BackendConnection of the exchange in progress
        self.idle_since = 0.0
        self.idle_timer = None
        self.refused = False
        self._reset_message()

    def _reset_message(self):
        self.url = b""
        self.headers = []
        self.head_size = 0
        self.body = bytearray()
        self.too_large = False

    # ---- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = str(peer[0]).encode()
        self.proxy.clients.add(self)
        self.idle_since = self.loop.time()
        self.idle_timer = self.loop.call_later(self.proxy.client_timeout, self._on_idle_timer)

    def connection_lost(self, exc):
        self.gone = True
        self.proxy.clients.discard(self)
        self.queue.clear()
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        if self.backend is not None:
            self.backend.abandon()

    def data_received(self, data):
        self.idle_since = self.loop.time()
        if self.refused:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(501, "upgrade and CONNECT are not supported by this proxy")
        except httptools.HttpParserError:
            self._refuse(400, "malformed request")

    def pause_writing(self):  # the client reads slower than the backend sends: slow the backend down
        self.paused = True
        if self.backend is not None:
            self.backend.transport.pause_reading()

    def resume_writing(self):
        self.paused = False
        if self.backend is not None:
            self.backend.transport.resume_reading()

    def _on_idle_timer(self):
        self.idle_timer = None
        if self.gone:
            return
        due = self.idle_since + self.proxy.client_timeout
        if self.busy or self.queue or due > self.loop.time():
            self.idle_timer = self.loop.call_at(max(due, self.loop.time() + 1.0), self._on_idle_timer)
        else:
            self.transport.close()

    # ---- httptools callbacks ------------------------------------------------

    def on_url(self, url):
        self.url += url
        self.head_size += len(url)

    def on_header(self, name, value):
        self.head_size += len(name) + len(value)
        self.headers.append((name, value))

    def on_headers_complete(self):
        if self.head_size > MAX_HEAD:
            raise httptools.HttpParserError("head too large")  # caught in data_received
        for name, value in self.headers:
            if len(name) == 6 and name.lower() == b"expect" and value.lower() == b"100-continue":
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # the body is read here, then sent on

    def on_body(self, body):
        if len(self.body) + len(body) > self.proxy.max_body:
            self.too_large = True
        elif not self.too_large:
            self.body += body

    def on_message_complete(self):
        if self.parser.should_upgrade():
            self._refuse(501, "upgrade and CONNECT are not supported by this proxy")
            return
        if self.too_large:
            self._refuse(413, f"request body larger than {self.proxy.max_body} bytes")
            return
        method = self.parser.get_method().decode("ascii", "replace")
        self.queue.append(Request(method, self._payload(method), self.parser.should_keep_alive()))
        self._reset_message()
        if not self.busy:
            self.busy = True
            self.loop.create_task(self._serve_queue())

    def _payload(self, method):
        """The request as sent to a backend: HTTP/1.1, keep-alive, hop-by-hop headers dropped."""
        connection_tokens = ()
        for name, value in self.headers:
            if name.lower() == b"connection":
                connection_tokens = {t.strip().lower() for t in value.split(b",")}
                break
        parts = [method.encode(), b" ", self.url, b" HTTP/1.1\r\n"]
        for name, value in self.headers:
            lowered = name.lower()
            if lowered not in _DROP and lowered not in connection_tokens:
                parts += (name, b": ", value, b"\r\n")
        forwarded = self.peer
        for name, value in self.headers:
            if name.lower() == b"x-forwarded-for":
                forwarded = value + b", " + self.peer
        parts += (b"X-Forwarded-For: ", forwarded, b"\r\n")
        if self.body or method in ("POST", "PUT", "PATCH"):
            parts.append(b"Content-Length: %d\r\n" % len(self.body))
        parts.append(b"\r\n")
        parts.append(bytes(self.body))
        return b"".join(parts)

    # ---- answering ------------------------------------------------------------

    def write(self, data):
        self.transport.write(data)

    def _refuse(self, status, text):
        """A request this proxy will not forward: answer and close (the stream is unusable)."""
        self.refused = True
        if not self.busy and not self.gone:
            self.transport.write(error_response(status, text, True))
            self.transport.close()
        else:
            self.queue.append(status)  # answered in turn, after the requests before it

    async def _serve_queue(self):
        try:
            while self.queue and not self.gone:
                request = self.queue.popleft()
                if isinstance(request, int):
                    self.transport.write(error_response(request, "request refused", True))
                    self.transport.close()
                    return
                keep_going = await self._serve(request)
                if not keep_going:
                    self.transport.close()
                    return
                self.idle_since = self.loop.time()
        finally:
            self.busy = False

    async def _serve(self, request):
        """Forwards one request, retrying on another backend where that is safe; False: close after."""
        proxy = self.proxy
        tried = []
        while True:
            try:
                t = proxy.vserver.acquire(tried) if tried else proxy.vserver.acquire()
            except NoServiceAvailable:
                status = 502 if tried else 503
                self.write(error_response(status, "no backend available" if not tried else "all backends failed",
                                          not request.keep_alive))
                proxy.stats.answered_by_proxy[status] += 1
                return request.keep_alive
            outcome, conn = await self._attempt(t, request)
            if outcome is _backend.OK:
                return request.keep_alive and conn.client_keep_alive
            if outcome is _backend.CLIENT_GONE:
                return False
            tried.append(t.service)
            retry = outcome is _backend.RESET and (request.idempotent or conn is None)
            if retry and len(tried) <= proxy.retries and not self.gone:
                proxy.stats.count(t.service, "retries")
                continue
            if conn is not None and conn.received:  # part of the answer went out: only closing tells the client
                return False
            status = 504 if outcome is _backend.TIMEOUT else 502
            self.write(error_response(status, "backend timed out" if status == 504 else "backend failed",
                                      not request.keep_alive))
            proxy.stats.answered_by_proxy[status] += 1
            return request.keep_alive

    async def _attempt(self, t, request):
        """One backend, one transaction `t`: returns (outcome, connection or None if none was made)."""
        proxy = self.proxy
        name = t.service
        pool = proxy.pools[name]
        proxy.stats.count(name, "requests")
        conn = pool.take()
        reused = conn is not None
        while True:
            if conn is None:
                try:
                    conn = await pool.connect(proxy.connect_timeout)
                except (OSError, asyncio.TimeoutError) as exc:
                    proxy.stats.count(name, "failures")
                    proxy.note_failure(name, exc)
                    t.fail()
                    return _backend.RESET, None
                if self.gone:
                    t.finish(status=499)
                    pool.put(conn)
                    return _backend.CLIENT_GONE, None
            self.backend = conn
            if self.paused:
                conn.transport.pause_reading()
            outcome = await conn.send(request.payload, self, t, proxy.timeout, request.head_only)
            self.backend = None
            if outcome is _backend.RESET and reused and request.idempotent:
                # A pooled connection the backend had just closed: try once more on a new one,
                # same backend, same transaction; not the backend's failure.
                conn = None
                reused = False
                proxy.stats.count(name, "stale")
                continue
            break
        if outcome is _backend.OK:
            packets = conn.packets()
            if packets:
                t.record(packets=packets)
            t.finish(ttfb=conn.ttfb, status=conn.status)
            if conn.status >= 500:
                proxy.stats.count(name, "failures")
            proxy.stats.count_status(name, conn.status)
            pool.put(conn)
        elif outcome is _backend.CLIENT_GONE:
            t.finish(ttfb=conn.ttfb if conn.status else None, status=conn.status or 499)
        else:
            proxy.stats.count(name, "failures")
            proxy.note_failure(name, outcome)
            t.fail()
            if outcome is not _backend.RESET or conn.received:
                conn.transport.abort()
        return outcome, conn
