"""The admin port (off by default): status, Prometheus metrics and a health check.

    GET /leastload/status   the vserver as JSON (`?format=text`: the `show()` table as plain text)
    GET /metrics            Prometheus' text format, version 0.0.4 (_metrics.py lists every series)
    GET /healthz            200 `ok` while at least one bound backend is UP (not DOWN or
                            OUT_OF_SERVICE, not ejected, not draining), else 503

Anything else is 404. Requests go through the same I/O-free reader as the proxy's
clients, with small limits (ADMIN_LIMITS: a long request line is refused
as it arrives, never buffered); a request head must arrive within the
proxy's `header_timeout`, and an idle connection closes after it too. At most
MAX_ADMIN_CONNECTIONS are open at once (more are closed at once), so the
admin port cannot eat the descriptors the proxy keeps for backends.
"""

import asyncio
import json
from typing import TYPE_CHECKING, Optional, Set, cast

from . import _http1, _metrics

STATUS_PATH = b"/leastload/status"
METRICS_PATH = b"/metrics"
HEALTH_PATH = b"/healthz"
NOT_FOUND = b"try GET /leastload/status, GET /metrics or GET /healthz\n"
ADMIN_LIMITS = _http1.Limits(max_request_line=4096, max_header_size=16384, max_headers=64, max_body=65536)
MAX_ADMIN_CONNECTIONS = 32

if TYPE_CHECKING:
    from ._proxy import Proxy


class AdminConnection(asyncio.Protocol):
    transport: asyncio.Transport  # set by connection_made, before any other callback

    def __init__(self, proxy: "Proxy", open_set: "Set[AdminConnection]") -> None:
        self.proxy = proxy
        self.open_set = open_set
        self.reader = _http1.RequestReader(ADMIN_LIMITS)
        self.timer: Optional[asyncio.TimerHandle] = None
        self.done = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        if len(self.open_set) >= MAX_ADMIN_CONNECTIONS:
            self.done = True
            self.transport.abort()
            return
        self.open_set.add(self)
        self.timer = asyncio.get_running_loop().call_later(self.proxy.header_timeout, self._late)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.open_set.discard(self)
        if self.timer is not None:
            self.timer.cancel()

    def _late(self) -> None:
        self.timer = None
        if not self.done:
            if self.reader.started:
                self._answer(408, b"text/plain", b"the request did not arrive in time\n")
            else:
                self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.done:
            return
        self.reader.feed(data)
        while not self.done:
            event = self.reader.next_event()
            if event is _http1.ERROR:
                status, text = self.reader.error or (400, "malformed request")
                self._answer(status, b"text/plain", text.encode() + b"\n")
            elif event is _http1.COMPLETE:
                self._serve()
            elif event is not _http1.HEAD:
                return  # NEED_DATA

    def _serve(self) -> None:
        head = self.reader.head
        assert head is not None  # COMPLETE carries it
        path, _, query = head.target.partition(b"?")
        if head.method != b"GET":
            self._answer(404, b"text/plain", NOT_FOUND)
        elif path == METRICS_PATH:
            self._answer(200, _metrics.CONTENT_TYPE, _metrics.render(self.proxy))
        elif path == HEALTH_PATH:
            ok, why = _metrics.healthy(self.proxy)
            self._answer(200 if ok else 503, b"text/plain", why.encode() + b"\n")
        elif path != STATUS_PATH:
            self._answer(404, b"text/plain", NOT_FOUND)
        elif query == b"format=text":
            self._answer(200, b"text/plain", str(self.proxy.status()["show"]).encode() + b"\n")
        else:
            body = json.dumps(self.proxy.status(), indent=2, default=str).encode() + b"\n"
            self._answer(200, b"application/json", body)

    def _answer(self, status: int, content_type: bytes, body: bytes) -> None:
        self.done = True
        reason = {200: b"OK", 404: b"Not Found"}.get(status) or _http1.REASONS[status]
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (status, reason, content_type, len(body), body))
        self.transport.close()


async def start(proxy: "Proxy", host: str, port: int) -> asyncio.Server:
    assert proxy.loop is not None  # started
    open_set: Set[AdminConnection] = set()
    server: asyncio.Server = await proxy.loop.create_server(lambda: AdminConnection(proxy, open_set), host, port,
                                                            reuse_address=True)
    return server
