"""One request, one answer, then the connection ends: the admin port's connections and the fan-out's.

`OneRequestConnection` reads a request with the proxy's own reader
(_http1.RequestReader, the limits it is given), answers 408 when the head is
late, 4xx when the reader refuses the request, and hands a complete request to
`serve()`, which a subclass answers at once or from a task it starts. At most
`max_open` connections are open in its `open_set`; one more is aborted at once.
After the answer the connection lingers (_linger.py), so a client still
sending (the rest of a body refused with 413) gets the answer, not a reset,
and a slow reader of a large answer is not cut off while it reads; a client
that sends past the linger's byte bound (_linger.byte_bound) is reset.
A 408 closes at once instead: a client that slow is not waited for, and its
descriptor is freed for the next one.
"""

import asyncio
import http
from typing import Optional, Set, cast

from . import _http1, _linger


def reason(status: int) -> bytes:
    """The status line's reason: the proxy's own wording, else the standard phrase."""
    known = _http1.REASONS.get(status)
    if known is not None:
        return known
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b"Unknown"


class OneRequestConnection(asyncio.Protocol):
    transport: asyncio.Transport  # set by connection_made, before any other callback

    def __init__(self, limits: _http1.Limits, open_set: "Set[OneRequestConnection]", max_open: int,
                 header_timeout: float) -> None:
        self.reader = _http1.RequestReader(limits)
        self.open_set, self.max_open, self.header_timeout = open_set, max_open, header_timeout
        self.timer: Optional[asyncio.TimerHandle] = None  # the head's deadline, then the linger's
        self.done = False       # no more of the request is read
        self.answered = False   # the answer is written
        self.backlog = 0        # what the transport held unsent when the linger's span began
        self.linger_left = -1   # lingering: bytes still read and dropped before a reset (-1: not lingering)

    def serve(self, head: _http1.RequestHead, body: bytes) -> None:
        """A complete request: answer() it, now or later."""
        raise NotImplementedError

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        if len(self.open_set) >= self.max_open:
            self.done = self.answered = True
            self.transport.abort()
            return
        self.open_set.add(self)
        self.timer = asyncio.get_running_loop().call_later(self.header_timeout, self._late)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.open_set.discard(self)
        self._stop_timer()

    def eof_received(self) -> bool:
        return self.done and not self.answered  # the client's side ended after its request: still answered

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _late(self) -> None:
        self.timer = None
        if not self.done:
            if self.reader.started:
                self.answer(408, b"text/plain", b"the request did not arrive in time\n")
            else:
                self.done = self.answered = True
                self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.done:  # read and dropped while the connection lingers, up to its byte bound
            if self.linger_left >= 0:
                self.linger_left -= len(data)
                if self.linger_left < 0:
                    self._stop_timer()
                    _linger.reset(self.transport)
            return
        self.reader.feed(data)
        while not self.done:
            event = self.reader.next_event()
            if event is _http1.ERROR:
                status, text = self.reader.error or (400, "malformed request")
                self.answer(status, b"text/plain", text.encode() + b"\n")
            elif event is _http1.COMPLETE:
                self.done = True
                self._stop_timer()
                self.transport.pause_reading()  # one request per connection: the rest waits for the linger
                head = self.reader.head
                assert head is not None  # COMPLETE carries it
                self.serve(head, bytes(self.reader.body))
            elif event is _http1.HEAD:
                head = self.reader.head
                if head is not None and head.expect_continue:
                    self.transport.write(_http1.CONTINUE)
            else:
                return  # NEED_DATA

    def answer(self, status: int, content_type: bytes, body: bytes) -> None:
        self.done = self.answered = True
        if self.transport.is_closing():
            return
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (status, reason(status), content_type, len(body), body))
        self._stop_timer()
        if not _linger.lingers_after(status):
            self.transport.close()
        elif _linger.half_close(self.transport):
            self.backlog = self.transport.get_write_buffer_size()
            head = self.reader.head  # a 413's Content-Length: the body an upload client still sends
            declared = head.content_length if status == 413 and head is not None and head.content_length else 0
            self.linger_left = _linger.byte_bound(status, _linger.LINGER_BYTES, declared, self.reader.limits.max_body)
            self.timer = asyncio.get_running_loop().call_later(_linger.LINGER_SECONDS, self._linger_span_over)

    def _linger_span_over(self) -> None:
        self.timer = None
        self.backlog = _linger.span_over(self.transport, self.backlog)
        if self.backlog:
            self.timer = asyncio.get_running_loop().call_later(_linger.LINGER_SECONDS, self._linger_span_over)
