"""Connections to one backend: the keep-alive pool and one response's trip back.

A `BackendConnection` carries one request at a time. Its response is
passed through to the client byte for byte as it arrives (the head too: the
proxy does not rewrite response headers); the parser only finds the status,
the end of the message and whether the connection may be reused. The
outcome of the exchange is reported through a future, so the request's
coroutine does the accounting in one place.
"""

import asyncio

import httptools

from ..tcpinfo import SegmentCounter

# How an exchange with a backend ended (the future's result).
OK = "ok"
RESET = "reset"            # closed or reset before any response byte
BROKEN = "broken"          # closed, reset or garbled after response bytes were passed on
TIMEOUT = "timeout"        # no first byte (or no further byte) within the timeout
BAD_RESPONSE = "bad"       # unparsable response before anything was passed on
CLIENT_GONE = "client-gone"


class BackendConnection(asyncio.Protocol):
    __slots__ = ("pool", "loop", "transport", "parser", "counter", "future", "client", "t", "timer",
                 "timeout", "sent", "received", "sent_at", "last_data", "ttfb", "status", "head_only",
                 "interim", "until_eof", "complete", "keep_alive", "client_keep_alive", "uses", "_framing")

    def __init__(self, pool):
        self.pool = pool
        self.loop = pool.loop
        self.transport = None
        self.parser = httptools.HttpResponseParser(self)
        self.counter = None
        self.future = None
        self.client = None
        self.t = None
        self.timer = None
        self.uses = 0

    # ---- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        # the connection's first request is charged its handshake too
        self.counter = SegmentCounter(transport.get_extra_info("socket"), from_start=True)

    def connection_lost(self, exc):
        self.pool.forget(self)
        if self.future is None:
            return
        if self.until_eof and self.status:  # a body delimited by the close: the close ends it
            self._end(OK)
        elif self.ttfb is None:
            self._end(RESET)
        else:
            self._end(BROKEN)

    def data_received(self, data):
        if self.future is None:  # nothing was asked: a confused backend
            self.transport.abort()
            return
        if self.ttfb is None:
            self.ttfb = self.loop.time() - self.sent_at
        self.last_data = self.loop.time()
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
        self.client.write(data)
        self.t.record(bytes=len(data))
        if self.complete:
            self._end(OK)

    def pause_writing(self):  # a request larger than the socket buffer: the kernel catches up
        pass

    def resume_writing(self):
        pass

    # ---- httptools callbacks ------------------------------------------------

    def on_header(self, name, value):
        if len(name) in (14, 17):
            lowered = name.lower()
            if lowered == b"content-length" or (lowered == b"transfer-encoding" and b"chunked" in value.lower()):
                self._framing = True

    def on_headers_complete(self):
        status = self.parser.get_status_code()
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

    def on_message_complete(self):
        if self.interim:
            self.interim = False
            self._framing = False
            return
        self.complete = True
        self.keep_alive = self.client_keep_alive = self.parser.should_keep_alive() and not self.until_eof

    # ---- one exchange ----------------------------------------------------------

    def send(self, payload, client, t, timeout, head_only):
        """Sends a request; returns a future resolved with the outcome."""
        self.uses += 1
        self.client, self.t, self.timeout, self.head_only = client, t, timeout, head_only
        self.sent, self.received = len(payload), 0
        self.ttfb = None
        self.status = 0
        self.interim = self.until_eof = self.complete = self._framing = False
        self.keep_alive = self.client_keep_alive = False
        self.future = fut = self.loop.create_future()
        self.transport.write(payload)
        self.sent_at = self.last_data = self.loop.time()
        t.record(bytes=len(payload))
        self.timer = self.loop.call_at(self.sent_at + timeout, self._on_timer)
        return fut

    def _on_timer(self):
        self.timer = None
        if self.future is None:
            return
        if self.ttfb is not None:
            due = self.last_data + self.timeout
            if due > self.loop.time():  # data came meanwhile: wait again (one timer per exchange)
                self.timer = self.loop.call_at(due, self._on_timer)
                return
        self.transport.abort()
        self._end(TIMEOUT)

    def abandon(self):
        """The client went away mid-exchange: this connection cannot be reused."""
        if self.future is not None:
            self.transport.abort()
            self._end(CLIENT_GONE)

    def _end(self, outcome):
        fut, self.future = self.future, None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not fut.done():
            fut.set_result(outcome)

    def packets(self):
        return self.counter.take(self.sent, self.received)

    def reusable(self):
        return self.keep_alive and not self.transport.is_closing()


class Pool:
    """Idle keep-alive connections to one backend (newest reused first)."""

    def __init__(self, loop, host, port, max_idle):
        self.loop, self.host, self.port, self.max_idle = loop, host, port, max_idle
        self.idle = {}  # insertion-ordered: popitem() takes the newest
        self.opened = 0

    async def connect(self, timeout):
        self.opened += 1
        _, conn = await asyncio.wait_for(
            self.loop.create_connection(lambda: BackendConnection(self), self.host, self.port), timeout)
        return conn

    def take(self):
        while self.idle:
            conn, _ = self.idle.popitem()
            if not conn.transport.is_closing():
                return conn
        return None

    def put(self, conn):
        if len(self.idle) < self.max_idle and conn.reusable():
            self.idle[conn] = None
        else:
            conn.transport.close()

    def forget(self, conn):
        self.idle.pop(conn, None)

    def close(self):
        for conn in list(self.idle):
            conn.transport.close()
        self.idle.clear()
