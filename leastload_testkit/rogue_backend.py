"""A misbehaving HTTP/1.1 backend for the hostile-proxy tests and benchmark (127.0.0.1 only).

    python -m leastload_testkit.rogue_backend --listen 127.0.0.1:0   # prints `listening on HOST:PORT`

or, from a test, `RogueProcess()` (a child process: `.port`, `.stats()`, `.kill()`
(SIGKILL: its connections are reset), `.stop()`).

Any path not listed below answers like `leastload backends`: 200 (or
`?status=`) with `?size=` bytes of `x` (default 1024; HEAD: the head alone)
after `?delay=` seconds, on a keep-alive connection, so the rogue serves
normal traffic too. The rogue paths:

    /rogue/echo          200, JSON of the request as it arrived: method, target,
                         version, headers (in order, as sent), body_length, trailers
    /rogue/extra         a complete `200 hello`, then an unasked response in the
                         same write (?late=1: 0.1 s later, while the connection is idle)
    /rogue/204-body      204 (or /rogue/304-body: 304) followed by bytes it must not have
    /rogue/head-body     for HEAD: a Content-Length, and then that many bytes anyway
    /rogue/bad-length    two different Content-Length headers (?kind=junk: `5x`)
    /rogue/hop           hop-by-hop response headers (Connection names X-Secret; Keep-Alive)
    /rogue/chunked       a chunked answer, `hello chunked world`, with a trailer
    /rogue/slow          ?size= bytes in 64 KiB pieces, ?pace= seconds apart (default 0.05)
    /rogue/stall         stops reading the connection (the body stays unread), never answers
    /rogue/tunnel        101 to an upgrade request (?delay= seconds first), `hello tunnel` in the
                         same write, then the connection is a tunnel: it echoes what it reads
                         (?flood=BYTES: sends that many bytes of `w` instead, with flow control)
    /rogue/101-length    101 with `Content-Length: 5` and `hello` (a 101 has no body)
    /rogue/101-unasked   101 Switching Protocols whether the request asked for an upgrade or not
    /__tunnels           JSON: tunnels opened, flood bytes the kernel took (what a proxy read)
    /__stats             JSON: requests (the ones above and the normal ones), stalled, delayed
    /__health            200 at once (not counted)

Every unasked extra is a complete-looking `HTTP/1.1 200` whose body is
`SMUGGLED`: a proxy that reads it as the next request's answer hands it to an
unrelated client. A request with `Expect: 100-continue` gets `100 Continue`
before its body is read.

Bounded: a head over 1 MiB or a body over 64 MiB closes the connection; the
answers are at most `?size=` bytes, written with flow control.
"""

import argparse
import asyncio
import json
import sys
from typing import Any, Optional
from urllib.parse import parse_qsl

from .processes import KitServer, get_json, listen_main

HEAD_LIMIT = 1 << 20
BODY_LIMIT = 64 << 20
PIECE = 65536
SMUGGLED = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"


class Request:
    __slots__ = ("method", "target", "version", "headers", "body_length", "trailers")

    def __init__(self, method, target, version, headers):
        self.method, self.target, self.version, self.headers = method, target, version, headers
        self.body_length = 0
        self.trailers = []

    def values(self, name):
        return [v for n, v in self.headers if n.lower() == name]

    @property
    def path(self):
        """The path, also of an absolute-form target (which echo reports as it came)."""
        target = self.target
        if "://" in target:
            target = "/" + target.split("://", 1)[1].partition("/")[2]
        return target.partition("?")[0]

    @property
    def query(self):
        return dict(parse_qsl(self.target.partition("?")[2]))

    @property
    def keep_alive(self):
        tokens = {t.strip().lower() for v in self.values("connection") for t in v.split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


class Counters:
    def __init__(self):
        self.requests = 0
        self.stalled = 0
        self.delayed = 0  # requests with ?delay= (the normal traffic has none)
        self.tunnels = 0  # 101s sent on /rogue/tunnel
        self.flooded = 0  # bytes of floods written and drained (taken by the kernel)


def parse_head(head):
    """(method, target, version, [(name, value), ...]) from a head's bytes; ValueError if garbled."""
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers = []
    for line in lines[1:]:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"not a header line: {line!r}")
            headers.append((name, value.strip()))
    return method, target, version, headers


async def read_chunked(reader, request):
    """Reads (and drops) a chunked body; keeps the trailer lines apart from the headers."""
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
        if size == 0:
            break
        request.body_length += size
        if request.body_length > BODY_LIMIT:
            raise ValueError("body too large")
        await reader.readexactly(size + 2)
    while True:
        line = (await reader.readuntil(b"\r\n"))[:-2]
        if not line:
            return
        name, _, value = line.decode("latin-1").partition(":")
        request.trailers.append((name, value.strip()))


async def read_request(reader, writer, counters):
    """The next request (body read and dropped), or None at the end of the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    request = Request(*parse_head(head[:-4]))
    if request.path == "/rogue/stall":
        counters.stalled += 1
        await asyncio.Event().wait()  # the body stays unread; the connection ends when we are killed
    if any(v.lower() == "100-continue" for v in request.values("expect")):
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    if any("chunked" in v.lower() for v in request.values("transfer-encoding")):
        await read_chunked(reader, request)
    elif request.values("content-length"):
        length = int(request.values("content-length")[0])
        if length > BODY_LIMIT:
            raise ValueError("body too large")
        await reader.readexactly(length)
        request.body_length = length
    return request


def head(status, headers, length=None):
    reason = {100: "Continue", 101: "Switching Protocols", 200: "OK", 204: "No Content", 304: "Not Modified"}.get(status, "Status")
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{n}: {v}" for n, v in headers]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def send_late(writer, data, delay):
    await asyncio.sleep(delay)
    if not writer.is_closing():
        writer.write(data)


async def stream(writer, size, pace):
    """size bytes of `x` in pieces, pace seconds apart, with flow control."""
    left = size
    while left > 0 and not writer.is_closing():
        piece = min(left, PIECE)
        writer.write(b"x" * piece)
        left -= piece
        await writer.drain()
        if pace:
            await asyncio.sleep(pace)


SWITCHED = [("Connection", "Upgrade"), ("Upgrade", "websocket")]


async def tunnel(reader, writer, counters, query):
    """/rogue/tunnel after its 101: an echo, or a flood of ?flood= bytes (bounded), until closed."""
    counters.tunnels += 1
    flood = int(query.get("flood", 0))
    if flood:
        left = flood
        while left > 0 and not writer.is_closing():
            piece = min(left, PIECE)
            writer.write(b"w" * piece)
            await writer.drain()
            counters.flooded += piece
            left -= piece
        await reader.read()  # until the proxy closes
        return
    while True:
        data = await reader.read(PIECE)
        if not data:
            return
        writer.write(data)
        await writer.drain()


async def answer(request, writer, counters):
    """Writes the answer the path asks for."""
    path, query = request.path, request.query
    if path == "/__tunnels":
        body = json.dumps({"tunnels": counters.tunnels, "flooded": counters.flooded}).encode()
        writer.write(head(200, [("Content-Type", "application/json")], len(body)) + body)
        return
    if path == "/__health":
        writer.write(head(200, [], 0))
        return
    if path == "/__stats":
        body = json.dumps({"requests": counters.requests, "stalled": counters.stalled,
                           "delayed": counters.delayed}).encode()
        writer.write(head(200, [("Content-Type", "application/json")], len(body)) + body)
        return
    counters.requests += 1
    if path == "/rogue/echo":
        body = json.dumps({"method": request.method, "target": request.target, "version": request.version,
                           "headers": request.headers, "body_length": request.body_length,
                           "trailers": request.trailers}).encode()
        writer.write(head(200, [("Content-Type", "application/json")], len(body)) + body)
    elif path == "/rogue/extra":
        if query.get("late"):
            writer.write(head(200, [], 5) + b"hello")
            asyncio.ensure_future(send_late(writer, SMUGGLED, 0.1))
        else:
            writer.write(head(200, [], 5) + b"hello" + SMUGGLED)  # one write: one segment, as a proxy reads it
    elif path in ("/rogue/204-body", "/rogue/304-body"):
        writer.write(head(int(path[7:10]), []) + SMUGGLED)
    elif path == "/rogue/head-body":
        writer.write(head(200, [], len(SMUGGLED)) + SMUGGLED)
    elif path == "/rogue/bad-length":
        lengths = [("Content-Length", "5x")] if query.get("kind") == "junk" else \
            [("Content-Length", "5"), ("Content-Length", "7")]
        writer.write(head(200, lengths) + b"hello!!")
    elif path == "/rogue/hop":
        writer.write(head(200, [("Connection", "X-Secret, keep-alive"), ("Keep-Alive", "timeout=5, max=100"),
                                ("X-Secret", "1"), ("X-Public", "1")], 2) + b"ok")
    elif path == "/rogue/chunked":
        writer.write(head(200, [("Transfer-Encoding", "chunked")])
                     + b"5\r\nhello\r\n8\r\n chunked\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
    elif path == "/rogue/tunnel" and request.values("upgrade"):
        await asyncio.sleep(float(query.get("delay", 0)))
        writer.write(head(101, SWITCHED) + b"hello tunnel")
        return "tunnel"
    elif path == "/rogue/101-length":
        writer.write(head(101, SWITCHED, 5) + b"hello")
    elif path == "/rogue/101-unasked":
        writer.write(head(101, SWITCHED) + b"hello tunnel")
        return "tunnel"
    elif path == "/rogue/slow":
        size = int(query.get("size", 1 << 20))
        writer.write(head(200, [], size))
        await stream(writer, size, float(query.get("pace", 0.05)))
    else:
        size = int(query.get("size", 1024))
        if "delay" in query:
            counters.delayed += 1
            await asyncio.sleep(float(query["delay"]))
        writer.write(head(int(query.get("status", 200)), [("Content-Type", "text/plain")], size))
        if request.method != "HEAD":
            await stream(writer, size, float(query.get("pace", 0)))


async def serve_connection(reader, writer, counters):
    try:
        while True:
            request = await read_request(reader, writer, counters)
            if request is None:
                break
            if await answer(request, writer, counters) == "tunnel":
                await tunnel(reader, writer, counters, request.query)
                break
            await writer.drain()
            if not request.keep_alive:
                break
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        pass
    finally:
        writer.close()


async def serve(host, port):
    counters = Counters()
    server = await asyncio.start_server(lambda r, w: serve_connection(r, w, counters), host, port,
                                        limit=HEAD_LIMIT, reuse_address=True, backlog=1024)
    bound = server.sockets[0].getsockname()
    print(f"listening on {bound[0]}:{bound[1]}", flush=True)
    await server.serve_forever()


def main(argv=None):
    return listen_main("A misbehaving HTTP/1.1 backend (see the module docstring).", serve, argv)


class RogueProcess(KitServer):
    """The rogue backend in a child process: a Server with `.port` and `.stats()`."""

    MODULE = "rogue_backend"

    def stats(self) -> Any:
        return get_json(self.port, "/__stats")


if __name__ == "__main__":
    sys.exit(main())
