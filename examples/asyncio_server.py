"""Embedding the engine in your own asyncio server, in about sixty lines.

A deliberately small front end: it reads one HTTP request per connection,
lets the engine pick a backend, forwards the request, and feeds the engine
what it saw: bytes, TTFB, status, failures (with a retry on another backend).
`leastload proxy` does the same with keep-alive pools, streaming and health
checks (docs/proxy.md). Run it: `python examples/asyncio_server.py`; it starts
two toy backends and one that refuses connections, sends a few requests
through the front end, and prints the engine's view.

Needs httptools for the toy backends: pip install "leastload[proxy]".
"""

import asyncio
import socket
import time
from typing import Dict, List, Optional, Tuple

from leastload import NoServiceAvailable, Transaction, VirtualServer
from leastload.backends import serve

BACKENDS: Dict[str, Tuple[str, int]] = {}  # name -> (host, port)
vs = VirtualServer("LEASTRESPONSETIME", outlier_failures=3)


async def forward(request: bytes, t: Transaction) -> Optional[bytes]:
    """Sends `request` to t.service; returns the response, or None if the backend failed."""
    host, port = BACKENDS[t.service]
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2)
    except (OSError, asyncio.TimeoutError):
        t.fail()  # nothing was sent: safe to try another backend
        return None
    try:
        writer.write(request)
        t.record(bytes=len(request))
        sent = time.monotonic()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        ttfb = time.monotonic() - sent
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        body = await reader.readexactly(length)
        t.record(bytes=len(head) + len(body))
        t.finish(ttfb=ttfb, status=int(head.split()[1]))
        return head + body
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError):
        t.fail()
        return None
    finally:
        writer.close()


async def handle_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await reader.readuntil(b"\r\n\r\n")  # GET requests only, for brevity
    request = request.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
    tried: List[str] = []
    response = None
    while response is None and len(tried) < 3:
        try:
            t = vs.acquire(exclude=tried)  # a handle: ends exactly once
        except NoServiceAvailable:
            break
        tried.append(t.service)
        response = await forward(request, t)
    writer.write(response or b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
    await writer.drain()
    writer.close()


async def main() -> None:
    servers = [await serve("127.0.0.1", 0, delay=d) for d in (0.002, 0.02)]
    for name, (server, _) in zip(("fast", "slow"), servers):
        BACKENDS[name] = server.sockets[0].getsockname()[:2]
    with socket.socket() as s:  # a port nobody listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        BACKENDS["dead"] = s.getsockname()[:2]
    for name in BACKENDS:
        vs.bind(name)
    front = await asyncio.start_server(handle_client, "127.0.0.1", 0)
    host, port = front.sockets[0].getsockname()[:2]

    async def get() -> bytes:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n")
        status: bytes = (await reader.readline()).split()[1]
        writer.close()
        return status

    statuses = [await get() for _ in range(60)]
    print("answers:", {s.decode(): statuses.count(s) for s in set(statuses)})
    print(vs.show())
    print("ejections:", vs.outlier_events)
    front.close()
    for server, _ in servers:
        server.close()


if __name__ == "__main__":
    asyncio.run(main())
