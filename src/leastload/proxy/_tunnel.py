"""After a backend's 101: the client's connection and the backend's as one byte tunnel.

A request that asks for an upgrade (Connection: upgrade and Upgrade, no body:
_http1.RequestReader) is forwarded with its Upgrade header; when the backend
answers 101 (_http1.ResponseReader._switch), the exchange hands both
connections here (`open_tunnel`) instead of ending: each transport gets a
`_End` as its protocol, and bytes pass as they come, both ways. What either
side sent before the switch goes first: the backend's bytes after its 101
head, and the client's after its request (held unparsed by its reader).

- Flow control: a side whose writes back up (its transport's pause_writing)
  stops the other side's reads until they drain, so at most a transport's
  write buffer and one read are held per direction.
- Accounting: the engine's transaction stays open while the tunnel lives;
  every chunk is recorded into it as it passes (bytes; segments read from
  TCP_INFO every RECORD_PACKETS_EVERY chunks and at the end when the method
  picks by packets), and it is finished with status 101 once the tunnel ends.
  Nothing that happens in a tunnel is the backend's failure.
- Ends: `tunnel_timeout` seconds with no byte either way aborts both sides;
  one side's end of input is passed on (write_eof where the transport can, a
  close after the buffered bytes where it cannot, as TLS); once both sides
  have ended their input, or one connection is lost, the other is closed
  (aborted when the loss was an error).
"""

import asyncio
from typing import TYPE_CHECKING, Any, Optional, Union

from ._core import clock

if TYPE_CHECKING:
    from ._backend import BackendConnection

# `exchange` below is an _exchange.Exchange (typed Any: that module imports this one)

UPGRADE_LINES = b"Connection: upgrade\r\nUpgrade: %s\r\n\r\n"
RECORD_PACKETS_EVERY = 16  # chunks between two TCP_INFO reads (with a method that picks by packets)


def upgrade_request(payload: Union[bytes, bytearray], upgrade: bytes) -> bytes:
    """A request for the backend (_http1.encode_request's, which drops the hop-by-hop Connection
    and Upgrade and has no body here) with the client's Upgrade asked for again."""
    assert payload[-4:] == b"\r\n\r\n", "an upgrade request has no body"
    return bytes(payload[:-2]) + UPGRADE_LINES % upgrade


class _End(asyncio.Protocol):
    """One side's connection once it is a tunnel's: its transport's protocol."""

    def __init__(self, tunnel: "Tunnel", transport: asyncio.Transport) -> None:
        self.tunnel = tunnel
        self.transport = transport
        self.peer: "_End" = self  # the other side (set once both exist)
        self.reading = True    # its transport reads
        self.eof = False       # its side sent its end of input
        self.gone = False      # its connection is lost

    def data_received(self, data: bytes) -> None:
        self.tunnel.passed(self, data)

    def eof_received(self) -> Optional[bool]:
        return self.tunnel.ended_input(self)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.tunnel.lost(self, exc)

    def pause_writing(self) -> None:  # this side reads slower than the other sends
        self.peer.stop_reading()

    def resume_writing(self) -> None:
        self.peer.start_reading()

    def stop_reading(self) -> None:
        if self.reading and not self.gone:
            self.reading = False
            self.transport.pause_reading()

    def start_reading(self) -> None:
        if not self.reading and not self.gone and not self.eof:
            self.reading = True
            self.transport.resume_reading()


class Tunnel:
    """One tunnel: its two ends, the exchange whose transaction it keeps open, its idle timer."""

    def __init__(self, exchange: Any, conn: "BackendConnection", timeout: float) -> None:
        client = exchange.client
        self.exchange, self.conn, self.client = exchange, conn, client
        self.t: Any = exchange.t
        self.counters = exchange.counters
        self.by_packets = exchange.by_packets
        self.timeout = timeout
        self.last = clock()  # when a byte last passed
        self.chunks = 0      # chunks since TCP_INFO was last read (by_packets)
        self.over = False    # the transaction is finished
        self.client_end = _End(self, client.transport)
        self.backend_end = _End(self, conn.transport)
        self.client_end.peer, self.backend_end.peer = self.backend_end, self.client_end
        self.timer: Optional[asyncio.TimerHandle] = client.loop.call_later(timeout, self._check_idle)

    def start(self, early: bytes) -> None:
        """Both transports to their ends; what each side sent before the switch passed on."""
        client, conn = self.client, self.conn
        client.send_waiting()  # the 101's head (held to the turn's end) before any tunnel byte
        client.transport.set_protocol(self.client_end)
        conn.transport.set_protocol(self.backend_end)
        # the reads as flow control wants them now: the backend's paused while the client's
        # writes are backed up (then the client end's resume_writing starts them again)
        if client.paused:
            conn.held = True
            self.backend_end.stop_reading()
        else:
            self.backend_end.reading = not conn.held
            self.backend_end.start_reading()
        self.client_end.reading = bool(client.reading)
        self.client_end.start_reading()
        rest = conn.reader.rest
        if rest:  # (already recorded with the 101's bytes)
            client.transport.write(rest)
        if early:
            self.passed(self.client_end, early)
        if client.half_closed:  # the client ended its input before the switch
            self.ended_input(self.client_end)

    # ---- bytes -----------------------------------------------------------------

    def passed(self, end: _End, data: bytes) -> None:
        peer = end.peer
        if peer.gone:
            return
        peer.transport.write(data)
        self.last = clock()
        size = len(data)
        if end is self.client_end:
            self.counters.bytes_in += size
            self.conn.sent += size
        else:
            self.counters.bytes_out += size
            self.conn.received += size
        if self.over:
            return
        packets = 0
        if self.by_packets:
            self.chunks += 1
            if self.chunks >= RECORD_PACKETS_EVERY:
                packets = self._segments()
        self.t.record(size, packets)  # as the bytes pass: the window sees a busy tunnel

    def _segments(self) -> int:
        self.chunks = 0
        packets = int(self.conn.packets(True, False))
        self.counters.packets += packets
        return packets

    # ---- ends --------------------------------------------------------------------

    def ended_input(self, end: _End) -> Optional[bool]:
        """One side sent its end of input: passed on to the other; both ended: the tunnel closes."""
        end.eof = True
        end.reading = False
        peer = end.peer
        if peer.eof or peer.gone:
            self.close()
            return None
        if peer.transport.can_write_eof():
            peer.transport.write_eof()  # after what it holds
        else:  # (TLS) no half-close to pass on: closed once what it holds is written
            peer.transport.close()
        # this side stays open for what the other still sends, where it can (a TLS connection closes)
        return True if end.transport.can_write_eof() else None

    def lost(self, end: _End, exc: Optional[Exception]) -> None:
        end.gone = True
        peer = end.peer
        if not peer.gone:
            if exc is None:
                peer.transport.close()
            else:
                peer.transport.abort()
        self._finish()
        if end is self.client_end:
            self.client.connection_lost(exc)  # the proxy's bookkeeping of its clients
        else:
            conn = self.conn
            conn.unread = 1  # the tunnel's last segments: counted (the pool's on_late_packets)
            conn.connection_lost(exc)  # the pool's bookkeeping, the descriptor's dup closed

    def close(self) -> None:
        """Both sides closed after what they hold is written."""
        for end in (self.client_end, self.backend_end):
            if not end.gone:
                end.transport.close()

    def abort(self) -> None:
        for end in (self.client_end, self.backend_end):
            if not end.gone:
                end.transport.abort()

    def _check_idle(self) -> None:
        self.timer = None
        if self.over:
            return
        idle = clock() - self.last
        if idle >= self.timeout:
            self.exchange.proxy.stats.tunnel_timeouts += 1
            self.abort()
        else:
            self.timer = self.client.loop.call_later(self.timeout - idle, self._check_idle)

    def _finish(self) -> None:
        """The transaction ends with the tunnel (status 101: never the backend's failure)."""
        if self.over:
            return
        self.over = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        exchange, conn = self.exchange, self.conn
        if self.by_packets and not self.backend_end.gone:
            packets = self._segments()
            if packets:
                self.t.record(0, packets)
        self.exchange.proxy.stats.tunnels_open -= 1
        self.t.finish(conn.ttfb, 101)
        if exchange.began is not None:
            exchange._log(101, conn)


def open_tunnel(exchange: Any, conn: "BackendConnection") -> None:
    """The exchange's backend answered 101: its connection and the client's become a tunnel."""
    client = exchange.client
    counters = exchange.counters
    counters.by_class[1] += 1
    if conn.ttfb is not None:
        counters.add_ttfb(conn.ttfb)
    if client.gone:  # (it went while the 101 came: nothing to tunnel to)
        conn.transport.abort()
        exchange.t.finish(status=499)
        return
    stats = exchange.proxy.stats
    stats.tunnels += 1
    stats.tunnels_open += 1
    early = client.reader.take_buffered()  # sent after the request, before the 101: the new protocol's
    Tunnel(exchange, conn, exchange.proxy.tunnel_timeout).start(early)
