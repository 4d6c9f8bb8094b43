"""A backend connection's TCP segments (BackendConnection.packets): the compiled path reads
TCP_INFO in C on the socket's descriptor, the pure-Python path through tcpinfo.SegmentCounter.
On both, the counts add up to the kernel's own, wrap modulo 2^32, and turn into the estimate
from the bytes once the socket can no longer tell."""

import asyncio
import sys
import time

import pytest

from leastload.net import tcpinfo
from leastload.proxy import HTTP_LAYER, _backend, _core, _http1
from servers import exchange_over, tcp_pair

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="TCP_INFO segment counters are Linux's")


class SocketTransport:
    """Stands in for a transport: it hands out the real socket under it, as asyncio's do."""

    def __init__(self, sock):
        self.sock = sock

    def get_extra_info(self, name, default=None):
        return self.sock if name == "socket" else default

    def is_closing(self):
        return False


@pytest.fixture
def connection():
    """A BackendConnection made on the near end of a real TCP connection, and both ends."""
    loop = asyncio.new_event_loop()
    near, far = tcp_pair()
    pool = _backend.Pool(loop, "127.0.0.1", 1, 4, _http1.Limits(), _backend.ConnectionBudget(10), None,
                         _core.WriteTurn(loop))
    conn = _backend.BackendConnection(pool)
    conn.connection_made(SocketTransport(near))
    assert conn.exact  # this kernel has the segment counters (4.2 and later)
    conn.sent = conn.received = 0  # (send() sets them for each exchange; none is sent here)
    yield conn, near, far
    for s in (near, far):
        s.close()
    loop.close()


def quiet():
    time.sleep(0.25)  # past the delayed ACKs (at most 200 ms on Linux): no segment still on its way


def test_each_read_counts_the_segments_since_the_last_and_they_add_up_to_the_kernels(connection):
    conn, near, far = connection
    taken = []
    for size in (100, 200_000, 1_000):
        exchange_over(near, far, size)
        quiet()
        taken.append(conn.packets(True, True))
    assert taken[0] >= 3 + 2  # the handshake (charged to the first read) and an exchange
    assert taken[1] > taken[2] >= 2  # 200 KB take more segments than 1 KB; one each way at least
    assert sum(taken) == sum(tcpinfo.read_segments(near))  # every segment since the handshake, once
    assert conn.packets(True, True) == 0  # nothing moved since


def test_a_reading_wraps_modulo_2_to_the_32(connection):
    conn, near, _ = connection
    conn.packets(True, True)
    now_in, now_out = tcpinfo.read_segments(near)
    before = ((now_in - 3) % 2**32, (now_out + 2**32 - 5) % 2**32)  # as if the counters had wrapped
    if HTTP_LAYER == "compiled":  # the C path keeps the last reading as segs_in << 32 | segs_out
        conn.segments_read = before[0] << 32 | before[1]
    else:
        conn.counter.last = before
    assert conn.packets(True, True) == 3 + 5


def test_a_socket_that_cannot_tell_any_more_gives_the_estimate_from_then_on(connection):
    conn, near, far = connection
    exchange_over(near, far, 100)
    assert conn.packets(True, True) >= 2
    near.close()  # getsockopt() now fails (the descriptor is closed)
    conn.sent, conn.received = 3_000, 100
    assert conn.packets(True, True) == tcpinfo.estimate_packets(3_000, 100) == 3 + 1
    assert not conn.exact and not conn.counter.exact
    conn.sent, conn.received = 10, 10
    assert conn.packets(False, True) == 2  # estimated after every exchange now, each on its own
