"""_core.write_now: the compiled path's send() straight to the socket while the transport holds
nothing, and the rule that keeps the bytes of a connection in order and the transport its owner.

On both paths the bytes reach the peer once each, in order; the compiled build on Linux sends
them itself while it can, the pure-Python path always hands them to the transport."""

import socket
import sys

import pytest

from leastload.proxy import HTTP_LAYER, _core
import servers  # (its tcp_pair() under the fixture of that name)

DIRECT = HTTP_LAYER == "compiled" and sys.platform.startswith("linux")


class RecordingTransport:
    """Stands in for the transport that owns the socket: it keeps what it is handed, in order,
    and how it was closed (test_proxy_write_turn uses it too)."""

    def __init__(self, closing=False):
        self.handed = []
        self.closing = closing
        self.closed = self.aborted = False

    def write(self, data):
        self.handed.append(bytes(data))

    def is_closing(self):
        return self.closing

    def close(self):
        self.closing = self.closed = True

    def abort(self):
        self.closing = self.aborted = True

    def get_extra_info(self, name, default=None):
        return default


@pytest.fixture
def tcp_pair():
    near, far = servers.tcp_pair()
    near.setblocking(False)  # as an event loop's sockets are
    yield near, far
    near.close()
    far.close()


def read_exactly(sock, size):
    got = bytearray()
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        assert chunk, "the peer closed early"
        got += chunk
    return bytes(got)


def test_small_writes_reach_the_peer_in_order(tcp_pair):
    near, far = tcp_pair
    transport = RecordingTransport()
    fd = near.fileno()
    for piece in (b"GET / HTTP/1.1\r\n", b"Host: a\r\n\r\n", b"x" * 1024):
        fd = _core.write_now(transport, fd, piece)
    # what the socket took and what the transport was handed, together, are the stream once
    sent = b"".join((b"GET / HTTP/1.1\r\n", b"Host: a\r\n\r\n", b"x" * 1024))
    if DIRECT:
        assert fd == near.fileno() and transport.handed == []
        assert read_exactly(far, len(sent)) == sent
    else:
        assert fd == -1 and b"".join(transport.handed) == sent


def test_what_the_socket_does_not_take_goes_to_the_transport_and_so_does_everything_after(tcp_pair):
    near, far = tcp_pair
    near.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    transport = RecordingTransport()
    big = bytes(range(256)) * 16384  # 4 MiB: more than the socket's buffers hold unread
    fd = _core.write_now(transport, near.fileno(), big)
    assert fd == -1  # the transport may hold bytes now: every later write queues behind them
    handed = b"".join(transport.handed)
    taken = len(big) - len(handed)
    assert handed == big[taken:]  # the rest, exactly
    if DIRECT:
        assert 0 < taken < len(big)
        assert read_exactly(far, taken) == big[:taken]
    else:
        assert taken == 0
    fd = _core.write_now(transport, fd, b"next")
    assert fd == -1 and transport.handed[-1] == b"next"


def test_a_closing_transport_gets_the_bytes_and_the_socket_none(tcp_pair):
    # after the transport closed, the descriptor's number may belong to a new connection
    near, far = tcp_pair
    transport = RecordingTransport(closing=True)
    assert _core.write_now(transport, near.fileno(), b"late") == -1
    assert transport.handed == [b"late"]
    far.setblocking(False)
    with pytest.raises(BlockingIOError):
        far.recv(16)


def test_an_error_hands_everything_to_the_transport_to_report(tcp_pair):
    near, far = tcp_pair
    far.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    far.close()  # a reset: the next send fails
    transport = RecordingTransport()
    fd = near.fileno()
    for _ in range(50):  # the reset may take a moment to arrive on loopback
        fd = _core.write_now(transport, fd, b"after the reset")
        if fd == -1:
            break
    assert fd == -1 and transport.handed[-1] == b"after the reset"


def test_no_socket_means_the_transport(tcp_pair):
    transport = RecordingTransport()
    assert _core.write_now(transport, -1, b"abc") == -1
    assert transport.handed == [b"abc"]
    # not bytes (a bytearray, a memoryview): the transport takes it, whatever the path
    assert _core.write_now(transport, tcp_pair[0].fileno(), bytearray(b"def")) == -1
    assert transport.handed == [b"abc", b"def"]
