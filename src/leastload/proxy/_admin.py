"""The admin port (off by default): `GET /leastload/status` -> the vserver as JSON.

`?format=text` gives the `show()` table as plain text instead. Anything
else is 404; the connection closes after each answer.
"""

import asyncio
import json
from typing import TYPE_CHECKING, cast

import httptools

STATUS_PATH = b"/leastload/status"

if TYPE_CHECKING:
    from ._proxy import Proxy


class AdminConnection(asyncio.Protocol):
    transport: asyncio.Transport  # set by connection_made, before any other callback

    def __init__(self, proxy: "Proxy") -> None:
        self.proxy = proxy
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._answer(400, b"text/plain", b"malformed request\n")

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_message_complete(self) -> None:
        path, _, query = self.url.partition(b"?")
        if self.parser.get_method() != b"GET" or path != STATUS_PATH:
            self._answer(404, b"text/plain", b"try GET /leastload/status\n")
        elif query == b"format=text":
            self._answer(200, b"text/plain", str(self.proxy.status()["show"]).encode() + b"\n")
        else:
            body = json.dumps(self.proxy.status(), indent=2, default=str).encode() + b"\n"
            self._answer(200, b"application/json", body)

    def _answer(self, status: int, content_type: bytes, body: bytes) -> None:
        reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}[status]
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (status, reason, content_type, len(body), body))
        self.transport.close()


async def start(proxy: "Proxy", host: str, port: int) -> asyncio.Server:
    assert proxy.loop is not None  # started
    server: asyncio.Server = await proxy.loop.create_server(lambda: AdminConnection(proxy), host, port,
                                                            reuse_address=True)
    return server
