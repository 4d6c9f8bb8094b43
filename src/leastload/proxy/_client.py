# cython: annotation_typing=False
"""The client side: bytes into the I/O-free reader, each complete request to an Exchange.

One `ClientConnection` per client connection, one request in flight: the
reader (_http1.RequestReader) checks every limit as bytes arrive and stops
after a complete request; what the client sends meanwhile stays in the
reader, and once that is more than a head's worth the connection stops
reading until the answer is out (a pipelining client cannot queue work).
The body is buffered whole, so the request can be sent again to another
backend. A client that does not read its answers stops the next request
from starting, and the proxy's sweep closes it after `timeout`.

Waits, checked by the proxy's sweep (`check_deadline`) rather than a timer
each: a new connection's first head, and any head once its first byte is
in, must be complete within `header_timeout` (408); a body within
`body_timeout` of its head (408); an idle keep-alive connection closes after
`client_timeout`; a client whose writes stay backed up for `timeout` is
dropped, its last answer's included. A connection that ends while the client
may still be sending (a request refused with 400, 413, 414 or 431; bytes in
behind a request answered with `Connection: close`) ends with a lingering
close (_linger.py): it reads and drops what the client sends until the
client closes, at most LINGER_SECONDS once the answer is written out (more
only while a large answer is being read) and at most the proxy's `linger_bytes`
(a quarter of it after a 414 or 431), past which it is reset. A 408 closes at
once, as does a connection whose client has nothing more in.

Under overload (_overload.py) the sweep passes how much the header and idle
timeouts have shrunk, and a connection that waits for a head (`waiting_since`)
may be closed to admit a new one (`evict`: 408, unless idle between requests).
"""

import asyncio
import time
from typing import TYPE_CHECKING, Optional, Protocol, Tuple, cast

from ..net.request_keys import Address, KeyRule, MissingKey, ip_or_none
from . import _http1, _linger, _overload, _tunnel
from ._backend import ClientSide
from ._core import ProxyCore, clock, socket_fd
from ._exchange import Upstream, new_exchange
from ._http1 import COMPLETE, ERROR, HEAD, NEED_DATA, RequestHead, encode_request, error_response

if TYPE_CHECKING:
    from ._accesslog import AccessLog
    from ._backend import BackendConnection

_METHOD_NAMES = {m.encode(): m for m in ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE")}

# what the connection is waiting for (its deadline's kind)
WAIT_HEAD = 1      # the first head of a new connection, or a head begun: 408 when late
WAIT_BODY = 2      # the body of a head that is in: 408 when late
WAIT_IDLE = 3      # the next request on a kept-alive connection: closed when late
WAIT_NONE = 0      # a request is being served (the backend side keeps its own time)
WAIT_LINGER = 4    # answered for the last time, half-closed: ended if the client has not closed by then
FIRST_BYTES_GRACE = _overload.FIRST_BYTES_GRACE  # a new connection that sent nothing yet is not evicted before


class ClientContext(Upstream, Protocol):
    """What a client connection uses of the proxy that accepted it (a Proxy is one): its
    limits, waits and forwarding settings, the request key's rule, and its open-connection
    bookkeeping; and, for the exchanges it starts, an Upstream."""

    @property
    def core(self) -> ProxyCore: ...  # what the per-request path reads of the proxy (C fields compiled)

    @property
    def loop(self) -> Optional[asyncio.AbstractEventLoop]: ...

    @property
    def name(self) -> str: ...  # the vserver's, for the access log

    @property
    def limits(self) -> _http1.Limits: ...

    @property
    def forwarding(self) -> _http1.Forwarding: ...

    @property
    def keys(self) -> KeyRule: ...

    @property
    def header_timeout(self) -> float: ...

    @property
    def body_timeout(self) -> float: ...

    @property
    def client_timeout(self) -> float: ...

    @property
    def linger_bytes(self) -> int: ...  # what a lingering close reads before a reset (_linger.byte_bound)

    def client_opened(self, client: "ClientConnection") -> None: ...

    def client_closed(self, client: "ClientConnection") -> None: ...


class ClientConnection(ClientSide):
    """One client's connection (`transport`, a ClientSide field, is set by connection_made,
    before any other callback)."""

    def __init__(self, proxy: ClientContext) -> None:
        ClientSide.__init__(self)
        self.proxy = proxy
        self.core = proxy.core
        self.turn = proxy.core.turn  # answers held to the loop's turn's end (_core.WriteTurn)
        self.always_held = True  # in every turn, a quiet loop's too (_core.QUIET_TURN_PIECES)
        assert proxy.loop is not None  # connections come in once the proxy runs
        self.loop: asyncio.AbstractEventLoop = proxy.loop
        self.reader = _http1.RequestReader(proxy.limits)
        self.peer = b"unknown"
        self.peername: Tuple[object, ...] = ()  # the client's (address, port, ...)
        self.sockname: Tuple[object, ...] = ()  # the proxy's end of the connection
        # set by the edge (_edge.py) before connection_made: the client's (address, port) from a
        # PROXY header (None: the connection's own peer), and when the socket was accepted (clock();
        # 0.0: at connection_made), from which its first head is due
        self.client: Optional[Tuple[object, ...]] = None
        self.accepted_at = 0.0
        self._addresses: Optional[Tuple[Optional[Address], Optional[Address]]] = None
        self.busy = False       # an exchange is in progress
        self.gone = False       # the connection is lost
        self.closing = False    # answered for the last time; the transport closes once flushed
        self.paused = False     # our writes are backed up (the client is not reading)
        self.paused_since = 0.0
        self.reading = True
        self.half_closed = False  # the client shut its side after its request
        self.backend: "Optional[BackendConnection]" = None  # the exchange in progress
        self.wait = WAIT_HEAD
        self.deadline = 0.0
        self.in_pump = False
        self.backlog = 0        # lingering: what the transport held unsent when the span began
        self.linger_left = 0    # lingering: bytes still read and dropped before a reset

    # ---- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.fd = socket_fd(transport)
        if self.accepted_at > 0.0 and transport.get_extra_info("sslcontext") is not None:
            self.fd = -1  # TLS (from the edge): every write goes through the transport, which encrypts
        peer = self.client if self.client is not None else transport.get_extra_info("peername")
        if peer:
            self.peer = str(peer[0]).encode()
            self.peername = tuple(peer)
        self.sockname = tuple(transport.get_extra_info("sockname") or ())
        self.proxy.client_opened(self)
        # the edge's header and handshake and the first head share one header timeout
        self.deadline = (self.accepted_at if self.accepted_at > 0.0 else clock()) + self.proxy.header_timeout

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.gone = True
        self.fd = -1
        self.proxy.client_closed(self)
        if self.backend is not None:
            self.backend.abandon()

    def data_received(self, data: bytes) -> None:
        if self.closing:
            if self.wait == WAIT_LINGER:
                self.linger_left -= len(data)
                if self.linger_left < 0:  # a client that sends on and on: not read any further
                    self.proxy.stats.linger_resets += 1
                    self.wait = WAIT_NONE
                    _linger.reset(self.transport)
            return
        reader = self.reader
        if self.wait == WAIT_IDLE:  # the first byte of the next request: its head's time starts
            self.wait = WAIT_HEAD
            self.deadline = clock() + self.core.header_timeout
        reader.feed(data)
        if not self.busy:
            self._pump()
        elif reader.buffered > self.proxy.limits.max_header_size:
            self._stop_reading()  # read ahead: about one more head while a request is served

    def eof_received(self) -> Optional[bool]:
        if self.busy:  # the request is in: answer it on the half-open connection, then close
            self.half_closed = True
            return True
        return None  # nothing pending: close

    def pause_writing(self) -> None:  # the client reads slower than the backend sends: slow the backend down
        self.paused = True
        self.paused_since = clock()
        if self.backend is not None:
            self.backend.hold()

    def resume_writing(self) -> None:
        self.paused = False
        if self.backend is not None:
            self.backend.resume(clock())
        elif not self.busy and not self.gone:
            self._pump()

    def check_deadline(self, now: float, head_cut: float = 0.0, idle_cut: float = 0.0) -> None:
        """The proxy's sweep: ends a wait that took too long (a head's or an idle connection's
        `head_cut` or `idle_cut` seconds sooner: their timeouts shrunk under overload)."""
        if self.gone:
            return
        if self.paused and not self.busy:
            if now - self.paused_since >= self.proxy.timeout:  # the client does not read its answers
                self.transport.abort()
            return
        if self.closing:
            if self.wait == WAIT_LINGER and now >= self.deadline:
                self.backlog = _linger.span_over(self.transport, self.backlog)
                self.deadline = now + _linger.LINGER_SECONDS  # another span, if it did not end
            return
        if self.wait == WAIT_HEAD:
            now += head_cut
        elif self.wait == WAIT_IDLE:
            now += idle_cut
        if self.wait == WAIT_NONE or now < self.deadline:
            return
        if self.wait == WAIT_IDLE or not self.reader.started:
            self.close_when_written()  # nothing was asked: close quietly
        else:
            what = "request head" if self.wait == WAIT_HEAD else "request body"
            self._answer_and_close(408, f"the {what} did not arrive in time")

    def waiting_since(self) -> float:
        """When it began to wait for a head (a new connection, a head begun, or idle between
        requests); -1.0 when it does not (a request is in or served, or it is closing)."""
        if self.gone or self.closing:
            return -1.0
        if self.wait == WAIT_HEAD:
            since = self.deadline - self.core.header_timeout
            if not self.reader.started and clock() - since < FIRST_BYTES_GRACE:
                # nothing read yet from a connection this young: its first bytes may be in the
                # socket still (a flood of new connections fills the limit within a few turns)
                return -1.0
            return since
        if self.wait == WAIT_IDLE:
            return self.deadline - self.core.client_timeout
        return -1.0

    def evict(self) -> None:
        """Closed to admit a new connection at the limit (_overload.Overload.make_room): 408 when it
        waits for a head, a new connection's first one too (its bytes may be on their way); closed
        quietly when idle between requests (a request sent meanwhile is safe to send again);
        aborted when its earlier answers are still backed up (it would hold its descriptor)."""
        if self.paused:
            self.closing = True
            self.transport.abort()
        elif self.wait == WAIT_HEAD:
            self._answer_and_close(408, "the request head did not arrive in time (the proxy is full)")
        else:
            self.closing = True
            self.close_when_written()

    # ---- reading requests ----------------------------------------------------

    def _stop_reading(self) -> None:
        if self.reading:
            self.reading = False
            self.transport.pause_reading()

    def _start_reading(self) -> None:
        if not self.reading:
            self.reading = True
            self.transport.resume_reading()

    def _pump(self) -> None:
        """Reads requests and serves them, one at a time, while nothing else is pending."""
        if self.in_pump:
            return  # an exchange that ended at once: the loop below goes on
        self.in_pump = True
        reader = self.reader
        try:
            while not self.busy and not self.gone and not self.closing:
                if self.paused:  # answers are backed up: no next request until they drain
                    self._stop_reading()
                    return
                event = reader.next_event()
                if event is NEED_DATA:
                    if self.half_closed:
                        self.close_when_written()
                        return
                    self._start_reading()
                    return
                if event is COMPLETE:
                    self._dispatch()
                elif event is HEAD:
                    head = reader.head
                    assert head is not None  # a HEAD event carries it
                    if head.expect_continue and head.version == 11:
                        self.write(_http1.CONTINUE)  # this request is the one forwarded next
                    self.wait = WAIT_BODY
                    self.deadline = clock() + self.proxy.body_timeout
                elif event is ERROR:
                    status, text = reader.error or (400, "malformed request")
                    self._answer_and_close(status, text)
                    return
                else:  # PAUSED: a request was completed and not handed on (cannot happen)
                    return
        finally:
            self.in_pump = False

    def _dispatch(self) -> None:
        """A complete request: its key, its bytes for the backend, its exchange."""
        reader, proxy, core = self.reader, self.proxy, self.core
        head = reader.head
        assert head is not None  # COMPLETE carries it
        method = _METHOD_NAMES.get(head.method) or head.method.decode("ascii", "replace")
        vs_method = core.vserver.method
        if vs_method is not core.method:  # a new method (or the first request): what it needs, once
            core.use_method(vs_method)
        try:
            key = proxy.keys.key(vs_method, self) if core.keyed else None
        except MissingKey as exc:  # answered in turn, like any request; the connection goes on
            proxy.stats.answered_by_proxy[400] += 1
            answer = error_response(400, str(exc), not head.keep_alive, head.method == b"HEAD")
            self.write(answer)
            if proxy.access_log is not None:
                self._log_own_answer(400, len(answer))
            self._request_done(head.keep_alive)
            return
        payload = encode_request(head, reader.body, self.peer, core.forwarding)
        if head.upgrade:  # asked for an upgrade: the backend is asked too (a 101 makes a tunnel: _tunnel.py)
            payload = _tunnel.upgrade_request(payload, head.upgrade)
        self.busy = True
        self.wait = WAIT_NONE
        new_exchange(self, method, payload, head.keep_alive, head.version == 10, key, head, core.by_packets).start()

    def exchange_done(self, keep_going: bool) -> None:
        self.busy = False
        if self.gone:
            return
        head = self.reader.head
        if head is not None and head.upgrade and self.reader.buffered:
            keep_going = False  # an upgrade refused: what the client sent after it was meant for the new protocol
        self._request_done(keep_going)

    def _request_done(self, keep_going: bool) -> None:
        reader = self.reader
        if not keep_going or (self.half_closed and not reader.buffered):
            # linger only when the client may be sending more: bytes behind this request are in,
            # or reading stopped (more may wait in the socket); else it is done and gets a FIN
            self._close(reader.buffered > 0 or not self.reading, self.proxy.linger_bytes)
            return
        reader.start_next()
        if reader.started:  # the next request's bytes are here already (a half-closed client's too)
            self.wait = WAIT_HEAD
            self.deadline = clock() + self.core.header_timeout
            self._pump()
        else:
            self.wait = WAIT_IDLE
            self.deadline = clock() + self.core.client_timeout
            if not self.reading or self.paused:
                self._pump()

    def _answer_and_close(self, status: int, text: str) -> None:
        self.proxy.stats.answered_by_proxy[status] += 1
        answer = error_response(status, text, True)
        self.write(answer)
        head = self.reader.head  # a 413's: its Content-Length, the body an upload client still sends
        declared = head.content_length if status == 413 and head is not None and head.content_length else 0
        self._close(_linger.lingers_after(status),
                    _linger.byte_bound(status, self.proxy.linger_bytes, declared, self.proxy.limits.max_body))
        if self.proxy.access_log is not None:
            self._log_own_answer(status, len(answer))

    def _close(self, linger: bool, bound: int) -> None:
        """After the last answer: a lingering close, whose deadline the sweep keeps and which reads
        at most `bound` bytes; a plain one when not asked to linger or once the client has shut
        its side (nothing more can come)."""
        self.closing = True
        self.send_waiting()  # the answer held for the turn's end goes first
        if not linger or self.half_closed:
            self.transport.close()  # after what is buffered is written
        elif _linger.half_close(self.transport):
            self.reading = True
            self.wait = WAIT_LINGER
            self.backlog = self.transport.get_write_buffer_size()
            self.linger_left = bound
            self.deadline = clock() + _linger.LINGER_SECONDS

    # ---- the access log ------------------------------------------------------

    def _log_own_answer(self, status: int, size: int) -> None:
        """A request the proxy answered itself before any backend (400, 408, 413, 414, 431)."""
        head = self.reader.head  # None unless this request's head was read (a 413 or a late body)
        method = head.method.decode("latin-1") if head is not None and head.method is not None else "-"
        log = self.proxy.access_log
        assert log is not None
        self.log_request(log, status, size, None, None, 0.0, 0, time.time(), method, head)

    def log_request(self, log: "AccessLog", status: int, size: int, backend: Optional[str],
                    ttfb: Optional[float], total: float, retries: int, wall: float, method: str,
                    head: Optional[RequestHead]) -> None:
        referer = user_agent = ""
        if head is not None:
            for lowered, _, value in head.headers:
                if lowered == b"user-agent":
                    user_agent = value.decode("latin-1")
                elif lowered == b"referer":
                    referer = value.decode("latin-1")
        log.write(wall=wall, client=self.peer.decode("latin-1"), method=method,
                  target=head.target.decode("latin-1") if head is not None and head.target is not None else "-",
                  version="HTTP/1.0" if head is not None and head.version == 10 else "HTTP/1.1",
                  status=status, size=size, backend=backend, ttfb=ttfb, total=total, retries=retries,
                  vserver=self.proxy.name, referer=referer, user_agent=user_agent)

    # ---- the request's key (a RequestView for leastload.net.request_keys) --------------

    def _ips(self) -> Tuple[Optional[Address], Optional[Address]]:
        """(client address, proxy address) of the connection, parsed once."""
        if self._addresses is None:
            self._addresses = (ip_or_none(self.peername[0] if self.peername else None),
                               ip_or_none(self.sockname[0] if self.sockname else None))
        return self._addresses

    @property
    def source_ip(self) -> Optional[Address]:
        return self._ips()[0]

    @property
    def source_port(self) -> Optional[int]:
        port = self.peername[1] if len(self.peername) > 1 else None
        return port if isinstance(port, int) else None

    @property
    def destination_ip(self) -> Optional[Address]:
        return self._ips()[1]

    @property
    def target(self) -> bytes:
        head = self.reader.head
        return head.target if head is not None else b""

    def header(self, name: bytes) -> Optional[bytes]:
        """The current request's first header of that (lowercase) name; its authority for host."""
        head: Optional[RequestHead] = self.reader.head
        if head is None:
            return None
        if name == b"host":
            return head.host
        return head.header(name)
