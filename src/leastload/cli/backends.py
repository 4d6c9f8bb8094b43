"""Toy HTTP/1.1 backends for demos, tests and benchmarks (`leastload backends`).

Each backend answers every request with 200 and a body of `size` bytes after
`delay` seconds, on keep-alive connections. A request may ask for something
else with query parameters: `delay=SECONDS`, `size=BYTES`, `status=CODE`.
`GET /__stats` returns what the backend served as JSON (`requests`, `bytes`:
body bytes sent) and `GET /__health` answers 200 at once; neither is counted.

    leastload backends --listen 127.0.0.1:9001 --listen 127.0.0.1:9002 --delay 0.002

runs one server per `--listen` in one process (uvloop when installed) and
prints `listening on HOST:PORT` for each, port 0 giving a free port.
Needs httptools (`pip install leastload[proxy]`).
"""

import argparse
import asyncio
import json
import sys
from typing import Any, List, Optional, Sequence, Tuple, cast
from urllib.parse import parse_qsl

try:
    import httptools
except ImportError as exc:
    raise ImportError("leastload backends needs httptools: pip install leastload[proxy]") from exc

from ..cmdline import ignore_sigpipe, serve_until_stopped
from ..net.upstream import parse_host_port

CHUNK = 65536  # large bodies go out in pieces, paced by the transport's flow control


__all__ = ["Counters", "BackendProtocol", "serve", "main"]


class Counters:
    __slots__ = ("requests", "bytes", "second", "in_second", "last_second")

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        self.second = 0         # --report-load: the clock's second being counted,
        self.in_second = 0      # the requests answered in it,
        self.last_second = 0    # and in the whole second before it (the report's rps_fractional)

    def count(self, now: float) -> None:
        self.requests += 1
        second = int(now)
        if second != self.second:
            self.last_second = self.in_second if second == self.second + 1 else 0
            self.second, self.in_second = second, 0
        self.in_second += 1


class BackendProtocol(asyncio.Protocol):
    """One client connection: parse requests, answer them in order."""

    transport: asyncio.Transport  # set by connection_made, before any other callback

    def __init__(self, delay: float, size: int, counters: Counters, report_load: Optional[float] = None) -> None:
        self.delay, self.size, self.counters = delay, size, counters
        self.report_load = report_load  # cpu_utilization to report in each answer (ORCA), None: no report
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        # complete requests waiting for their turn: (url, keep_alive, HEAD)
        self.queue: List[Tuple[bytes, bool, bool]] = []
        self.busy = False
        self.can_write: Optional[asyncio.Event] = None  # set while the transport is paused

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream transport (uvloop's too)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_message_complete(self) -> None:
        self.queue.append((self.url, self.parser.should_keep_alive(), self.parser.get_method() == b"HEAD"))
        self.url = b""
        if not self.busy:
            self.busy = True
            asyncio.ensure_future(self.answer_all())

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.queue.clear()
        if self.can_write is not None:
            self.can_write.set()

    def pause_writing(self) -> None:
        self.can_write = asyncio.Event()

    def resume_writing(self) -> None:
        if self.can_write is not None:
            self.can_write.set()
            self.can_write = None

    async def answer_all(self) -> None:
        try:
            while self.queue and not self.transport.is_closing():
                url, keep_alive, head = self.queue.pop(0)
                await self.answer(url, keep_alive, head)
        finally:
            self.busy = False

    async def answer(self, url: bytes, keep_alive: bool, head: bool = False) -> None:
        path, _, query = url.partition(b"?")
        if path == b"/__stats":
            body = json.dumps({"requests": self.counters.requests, "bytes": self.counters.bytes}).encode()
            return self.send_head(200, len(body), keep_alive, body)
        if path == b"/__health":
            return self.send_head(200, 0, keep_alive)
        params = dict(parse_qsl(query.decode("latin-1")))
        delay = float(params.get("delay", self.delay))
        size = int(params.get("size", self.size))
        status = int(params.get("status", 200))
        if delay > 0:
            await asyncio.sleep(delay)
        if self.transport.is_closing():
            return
        self.counters.count(asyncio.get_running_loop().time())
        if head:
            return self.send_head(status, size, keep_alive)
        if size <= CHUNK:
            self.send_head(status, size, keep_alive, b"x" * size)
            self.counters.bytes += size
            return
        self.send_head(status, size, None)
        left = size
        while left > 0 and not self.transport.is_closing():
            if self.can_write is not None:
                await self.can_write.wait()
                continue
            piece = min(left, CHUNK)
            self.transport.write(b"x" * piece)
            self.counters.bytes += piece
            left -= piece
        if not keep_alive:
            self.transport.close()

    def send_head(self, status: int, length: int, keep_alive: Optional[bool], body: bytes = b"") -> None:
        connection = b"" if keep_alive is None or keep_alive else b"Connection: close\r\n"
        if self.report_load is not None:  # ORCA's TEXT form: its utilization, and its rate of the last second
            connection += b"endpoint-load-metrics: TEXT cpu_utilization=%s, rps_fractional=%d\r\n" % (
                repr(self.report_load).encode(), max(1, self.counters.last_second))
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Length: %d\r\nContent-Type: text/plain\r\n%s\r\n%s" % (
            status, b"OK" if status == 200 else b"Status", length, connection, body))
        if keep_alive is False:
            self.transport.close()


async def serve(host: str, port: int, delay: float = 0.0, size: int = 1024,
                report_load: Optional[float] = None) -> Tuple[asyncio.Server, Counters]:
    """Starts one backend; returns (server, counters). The caller closes the server."""
    counters = Counters()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: BackendProtocol(delay, size, counters, report_load), host, port,
                                      reuse_address=True, backlog=1024)
    return server, counters


def _host_port(text: str) -> Tuple[str, int]:
    try:
        return parse_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="leastload backends", description="Toy HTTP backends for trying the proxy.")
    p.add_argument("--listen", type=_host_port, action="append", required=True, metavar="HOST:PORT",
                   help="one backend per --listen (port 0: a free port)")
    p.add_argument("--delay", type=float, default=0.0, help="seconds before each answer (default 0)")
    p.add_argument("--size", type=int, default=1024, help="body bytes of each answer (default 1024)")
    p.add_argument("--report-load", type=float, default=None, metavar="UTILIZATION",
                   help="each answer carries an ORCA load report (endpoint-load-metrics, TEXT form): this "
                        "cpu_utilization, and the requests answered in the last second as rps_fractional "
                        "(default: no report)")
    return p


async def _main(args: argparse.Namespace) -> None:
    servers: List[asyncio.Server] = []
    for host, port in args.listen:
        server, _ = await serve(host, port, args.delay, args.size, args.report_load)
        servers.append(server)
        bound = server.sockets[0].getsockname()
        print(f"listening on {bound[0]}:{bound[1]}", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if args.delay < 0 or args.size < 0:
        _parser().error("--delay and --size must not be negative")
    if args.report_load is not None and not 0 <= args.report_load < float("inf"):
        _parser().error(f"--report-load must be a utilization >= 0, got {args.report_load}")
    ignore_sigpipe()
    return serve_until_stopped("leastload backends", _main(args))


if __name__ == "__main__":
    sys.exit(main())
