"""The admin port (off by default): `GET /leastload/status` -> the vserver as JSON.

`?format=text` gives the `show()` table as plain text instead. Anything
else is 404; the connection closes after each answer.
"""

import asyncio
import json

import httptools

STATUS_PATH = b"/leastload/status"


class AdminConnection(asyncio.Protocol):
    def __init__(self, proxy):
        self.proxy = proxy
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._answer(400, b"text/plain", b"malformed request\n")

    def on_url(self, url):
        self.url += url

    def on_message_complete(self):
        path, _, query = self.url.partition(b"?")
        if self.parser.get_method() != b"GET" or path != STATUS_PATH:
            self._answer(404, b"text/plain", b"try GET /leastload/status\n")
        elif query == b"format=text":
            self._answer(200, b"text/plain", self.proxy.status()["show"].encode() + b"\n")
        else:
            body = json.dumps(self.proxy.status(), indent=2, default=str).encode() + b"\n"
            self._answer(200, b"application/json", body)

    def _answer(self, status, content_type, body):
        reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}[status]
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (status, reason, content_type, len(body), body))
        self.transport.close()


async def start(proxy, host, port):
    return await proxy.loop.create_server(lambda: AdminConnection(proxy), host, port, reuse_address=True)
