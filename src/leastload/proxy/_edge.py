"""A client connection's edge, between accept() and the HTTP protocol: the PROXY protocol's
header (_proxy_protocol.py) and the TLS handshake (_tls.py), both within one header timeout.

`await take(loop, sock, edge, factory)` runs on an accepted socket:

1. with `edge.accept_proxy`, reads the PROXY header straight from the socket, never a byte
   past it: it peeks, hands the peeked bytes (after those consumed) to the sans-I/O parser, and
   consumes only bytes that are surely the header's (all it peeked while the header is
   incomplete, the header's exact size once it is complete). What follows the header, a TLS
   ClientHello or the first request, stays in the kernel's buffer for the next step;
2. hands the socket to the loop (`connect_accepted_socket`), with `edge.tls`'s listener
   context when there is one: the handshake is the loop's own, under what is left of the
   header timeout;
3. makes the protocol with `factory(header)` (header None without the PROXY protocol, else
   the ProxyHeader: its `source` is the client's address, None for LOCAL, UNKNOWN and the
   families that fall back to the connection's own).

Every refusal closes the socket and is counted in `edge.counters` (EdgeCounters); `take`
then answers None. (A connection the overload state shut down to admit another one ends the
same way, counted there instead.) The deadline starts at accept (`accepted_at`, the loop's
clock), so the header, the handshake and (with the protocol's own deadline set from the same
time) the request head share one header timeout, as a request head alone does without them.
"""

import asyncio
import socket
import ssl
from typing import Callable, Dict, Optional, Tuple

from ._proxy_protocol import MAX_V2_LENGTH, V1_MAX, ProxyHeader, ProxyProtocolError, check_max_v2_length, parse
from ._tls import CertificateStore

Factory = Callable[[Optional[ProxyHeader]], asyncio.BaseProtocol]


class EdgeCounters:
    """What the edge refused or passed, by kind (the names of the metrics to come: the plan)."""

    __slots__ = ("proxy_headers", "proxy_local", "proxy_refused", "proxy_timeouts",
                 "tls_handshakes", "tls_failures", "tls_timeouts", "closed_early")

    def __init__(self) -> None:
        self.proxy_headers = 0   # PROXY headers read (LOCAL ones too)
        self.proxy_local = 0     # of which LOCAL, UNKNOWN or a family that falls back to the connection's
        self.proxy_refused = 0   # malformed headers (and connections without one)
        self.proxy_timeouts = 0  # headers incomplete at the header timeout
        self.tls_handshakes = 0  # handshakes completed
        self.tls_failures = 0    # handshakes refused (a bad ClientHello, no common version or cipher, ...)
        self.tls_timeouts = 0    # handshakes not done by the header timeout
        self.closed_early = 0    # the client closed or reset before its connection was set up

    def as_dict(self) -> Dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


class Edge:
    """What one listener does before HTTP: `accept_proxy`, `tls` (a CertificateStore or None),
    the `header_timeout` (seconds) they share, and their counters."""

    def __init__(self, *, accept_proxy: bool = False, tls: Optional[CertificateStore] = None,
                 header_timeout: float = 10.0, max_v2_length: int = MAX_V2_LENGTH) -> None:
        if not isinstance(header_timeout, (int, float)) or isinstance(header_timeout, bool) \
                or not header_timeout > 0:
            raise ValueError(f"header_timeout: must be a number > 0, got {header_timeout!r}")
        self.accept_proxy, self.tls = bool(accept_proxy), tls
        self.header_timeout, self.max_v2_length = float(header_timeout), check_max_v2_length(max_v2_length)
        self.counters = EdgeCounters()


async def read_proxy_header(loop: asyncio.AbstractEventLoop, sock: socket.socket, deadline: float,
                            max_v2_length: int = MAX_V2_LENGTH) -> ProxyHeader:
    """The PROXY header at the start of `sock` (non-blocking), consumed and no more, by the
    loop's clock `deadline`. Raises ProxyProtocolError, asyncio.TimeoutError, ConnectionError."""
    taken = b""
    limit = max(V1_MAX, max_v2_length)
    while True:
        try:
            peeked = sock.recv(limit - len(taken), socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            await _readable(loop, sock, deadline)
            continue
        if not peeked:
            raise ConnectionResetError("the client closed before its PROXY header was complete")
        header = parse(taken + peeked, max_v2_length)
        if header is not None:
            _consume(sock, header.size - len(taken))
            return header
        _consume(sock, len(peeked))  # all of it is the header's: it is not complete yet
        taken += peeked
        await _readable(loop, sock, deadline)


def _consume(sock: socket.socket, size: int) -> None:
    """Reads `size` bytes that a peek saw (they are in the socket's buffer: one recv takes them)."""
    while size > 0:
        got = sock.recv(size)
        if not got:
            raise ConnectionResetError("the client closed while its PROXY header was read")
        size -= len(got)


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket, deadline: float) -> None:
    left = deadline - loop.time()
    if left <= 0:
        raise asyncio.TimeoutError()
    ready: "asyncio.Future[None]" = loop.create_future()
    fd = sock.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await asyncio.wait_for(ready, left)
    finally:
        loop.remove_reader(fd)


async def take(loop: asyncio.AbstractEventLoop, sock: socket.socket, edge: Edge, factory: Factory,
               accepted_at: Optional[float] = None, evicted: Optional[Callable[[], bool]] = None
               ) -> Optional[Tuple[asyncio.BaseTransport, asyncio.BaseProtocol]]:
    """An accepted socket through the edge to its protocol (see the module's text): the transport
    and the protocol, or None when it was refused and closed (counted). `evicted()` true: the
    socket was shut down to admit another connection (the overload state counts that), so its
    end is not counted here as the client's doing."""
    counters = edge.counters

    def refused(what: str) -> None:
        if evicted is None or not evicted():
            setattr(counters, what, getattr(counters, what) + 1)

    deadline = (loop.time() if accepted_at is None else accepted_at) + edge.header_timeout
    sock.setblocking(False)
    header: Optional[ProxyHeader] = None
    if edge.accept_proxy:
        try:
            header = await read_proxy_header(loop, sock, deadline, edge.max_v2_length)
        except ProxyProtocolError:
            refused("proxy_refused")
            sock.close()
            return None
        except asyncio.TimeoutError:
            refused("proxy_timeouts")
            sock.close()
            return None
        except OSError:
            refused("closed_early")
            sock.close()
            return None
        counters.proxy_headers += 1
        if header.source is None:
            counters.proxy_local += 1
    chosen = header
    if edge.tls is None:
        try:
            return await loop.connect_accepted_socket(lambda: factory(chosen), sock)
        except OSError:  # gone between the header and the hand-over
            refused("closed_early")
            sock.close()
            return None
    left = deadline - loop.time()
    if left <= 0:
        refused("tls_timeouts")
        sock.close()
        return None
    try:
        pair = await loop.connect_accepted_socket(lambda: factory(chosen), sock, ssl=edge.tls.context,
                                                  ssl_handshake_timeout=left)
    except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
        refused("closed_early")
    except ssl.SSLError:
        refused("tls_failures")
    except (OSError, asyncio.TimeoutError):
        # the loop reports its handshake timeout as ConnectionAbortedError (asyncio's and uvloop's):
        # told from a client's reset by the time
        if loop.time() >= deadline - 0.001:
            refused("tls_timeouts")
        else:
            refused("closed_early")
    else:
        counters.tls_handshakes += 1
        return pair
    sock.close()
    return None
