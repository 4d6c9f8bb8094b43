"""Packets of a TCP connection, for the engine's least-packets method.

On Linux, `getsockopt(TCP_INFO)` fills `struct tcp_info`, whose
`tcpi_segs_out` and `tcpi_segs_in` (kernel 4.2 and later) count every
segment the connection sent and received: data, ACKs, handshake. They are
read here by offset, after checking that the kernel returned that far:

    offset   8: tcpi_rto ... eight 32-bit fields ... (after 8 one-byte fields)
    offset  16: tcpi_snd_mss   (u32)
    offset 104: four 64-bit rate/byte counters
    offset 136: tcpi_segs_out  (u32)
    offset 140: tcpi_segs_in   (u32)

`SegmentCounter` turns the cumulative counts into per-transaction deltas
(the counters are 32-bit and wrap; the delta is taken modulo 2^32).

Where TCP_INFO is not available (not Linux, an old kernel, a socket that is
not TCP), `estimate_packets()` stands in: every MSS-sized piece of data is
one segment each way, at least one per direction that carried bytes; ACKs
are not counted. On loopback with small requests the kernel's count is
about twice the estimate (each data segment is ACKed), so the two are not to
be mixed within one vserver.
"""

import math
import socket
import struct
from typing import Optional, Tuple

TCP_INFO = getattr(socket, "TCP_INFO", None)  # 11 on Linux
_SND_MSS = 16
_SEGS_OUT = 136  # tcpi_segs_in follows at 140
_NEEDED = _SEGS_OUT + 8
_SEGS = struct.Struct("=II")
_ASK = 232  # for read_mss: the kernel copies min(asked, its struct size) bytes
DEFAULT_MSS = 1448  # Ethernet MTU 1500 less IPv4/TCP headers with timestamps


def read_segments(sock: Optional[socket.socket]) -> Optional[Tuple[int, int]]:
    """(segs_in, segs_out) of a TCP socket, or None where TCP_INFO cannot tell."""
    if TCP_INFO is None or sock is None:
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, _NEEDED)
    except OSError:
        return None
    if len(raw) < _NEEDED:  # a kernel older than 4.2 has no segment counters
        return None
    segs_out, segs_in = _SEGS.unpack_from(raw, _SEGS_OUT)
    return segs_in, segs_out


def read_mss(sock: Optional[socket.socket]) -> int:
    """The connection's send MSS from TCP_INFO, or DEFAULT_MSS."""
    if TCP_INFO is not None and sock is not None:
        try:
            raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, _ASK)
        except OSError:
            raw = b""
        if len(raw) >= _SND_MSS + 4:
            mss: int = struct.unpack_from("=I", raw, _SND_MSS)[0]
            if mss > 0:
                return mss
    return DEFAULT_MSS


def estimate_packets(sent: int, received: int, mss: int = DEFAULT_MSS) -> int:
    """Segments for `sent` and `received` bytes when TCP_INFO is missing."""
    return (math.ceil(sent / mss) if sent else 0) + (math.ceil(received / mss) if received else 0)


class SegmentCounter:
    """Per-transaction packet counts of one (possibly reused) connection."""

    __slots__ = ("sock", "last", "mss")

    def __init__(self, sock: Optional[socket.socket], from_start: bool = False) -> None:
        """from_start: the first take() includes every segment so far (the handshake too)."""
        self.sock = sock
        self.last: Optional[Tuple[int, int]] = read_segments(sock)  # None: this connection falls back to the estimate
        self.mss: Optional[int] = read_mss(sock) if self.last is None else None
        if from_start and self.last is not None:
            self.last = (0, 0)

    @property
    def exact(self) -> bool:
        return self.last is not None

    def take(self, sent: int = 0, received: int = 0) -> int:
        """Packets since the previous take() (or since the counter was made)."""
        if self.last is not None:
            now = read_segments(self.sock)
            if now is not None:
                delta = ((now[0] - self.last[0]) & 0xFFFFFFFF) + ((now[1] - self.last[1]) & 0xFFFFFFFF)
                self.last = now
                return delta
            self.stop_reading()
        return estimate_packets(sent, received, DEFAULT_MSS if self.mss is None else self.mss)

    def stop_reading(self) -> None:
        """Estimates from now on: TCP_INFO could not be read (the socket is closed, or cannot tell)."""
        self.last = None
        self.mss = DEFAULT_MSS
