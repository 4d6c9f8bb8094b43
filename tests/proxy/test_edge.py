"""A connection's edge (_edge.py): the PROXY header read off the socket without a byte past it,
then the TLS handshake with the certificate store, within one header timeout; every refusal
closed and counted. Real sockets, a real asyncio server using `take()`, real `ssl` clients, and
real HAProxy (send-proxy-v2, send-proxy) in front when it is installed."""

import asyncio
import socket
import ssl
import struct
import threading
import time

import pytest

from certs import OPENSSL, make_cert
from edge_helpers import HAPROXY, HAPROXY_SENDERS, start_haproxy
from leastload.proxy._edge import Edge, take
from leastload.proxy._proxy_protocol import V2_SIGNATURE
from leastload.proxy._tls import CertificateStore
from leastload_testkit.ports import free_port

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed: no certificates "
                                                         "can be made for the edge's TLS tests")


class Greeter(asyncio.Protocol):
    """Says whom it serves (the PROXY header's client, else the connection's peer), then echoes."""

    def __init__(self, header, made):
        self.header, self.made = header, made

    def connection_made(self, transport):  # (with TLS, once the handshake is done)
        self.made.append(self.header)
        self.transport = transport
        source = self.header.source if self.header is not None and self.header.source else None
        host, port = source or transport.get_extra_info("peername")[:2]
        self.transport.write(f"FROM {host} {port}\n".encode())

    def data_received(self, data):
        self.transport.write(data)


class EdgeServer:
    """A listening socket whose connections go through `take(edge)`, on a loop in a thread."""

    def __init__(self, edge, loop_kind):
        self.edge = edge
        self.made = []
        self.loop = LOOPS[loop_kind]()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.task = self.loop.create_task(self._accept())
        self.loop.run_forever()

    async def _accept(self):
        while True:
            conn, _ = await self.loop.sock_accept(self.sock)
            accepted_at = self.loop.time()
            self.loop.create_task(take(self.loop, conn, self.edge, lambda h: Greeter(h, self.made), accepted_at))

    def counters(self):
        return asyncio.run_coroutine_threadsafe(_now(self.edge.counters.as_dict), self.loop).result(10)

    def close(self):
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.sock.close()


async def _now(function):
    return function()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("edge-certs")
    default = make_cert(d, "default", "default.test", ["DNS:default.test"])
    a = make_cert(d, "a", "a.example.com", ["DNS:a.example.com"])
    return CertificateStore([default[:2], a[:2]]), {"default": default[2], "a": a[2]}


try:
    import uvloop
except ImportError:
    uvloop = None
LOOPS = {"asyncio": asyncio.new_event_loop}
if uvloop is not None:  # the proxy's loop where it is installed: its TLS and its add_reader are its own
    LOOPS["uvloop"] = uvloop.new_event_loop
else:
    print("uvloop is not installed: the edge is tested on asyncio's loop only")


@pytest.fixture(params=sorted(LOOPS))
def serve(request):
    started = []

    def start(**kw):
        started.append(EdgeServer(Edge(**kw), request.param))
        return started[-1]
    yield start
    for server in started:
        server.close()


def client_context():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the served certificate's bytes are compared instead
    return context


def read_line(sock):
    line = b""
    while not line.endswith(b"\n"):
        got = sock.recv(1)
        if not got:
            break
        line += got
    return line.decode()


def v2_header(src, sport, dst="192.0.2.99", dport=443):
    block = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport)
    return V2_SIGNATURE + b"\x21\x11" + struct.pack("!H", len(block)) + block


def tls_in_one_segment_with(sock, prefix, server_name):
    """A TLS handshake whose first flight goes in one send() with `prefix` before it (the PROXY
    header and the ClientHello in one segment): the SSLObject, handshake done."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = client_context().wrap_bio(incoming, outgoing, server_hostname=server_name)
    first = True
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            data = outgoing.read()
            if first:
                data, first = prefix + data, False
            if data:
                sock.sendall(data)
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("closed during the handshake")
            incoming.write(chunk)
    sock.sendall(outgoing.read())
    return tls, incoming, outgoing


def tls_read_line(sock, tls, incoming):
    data = b""
    while not data.endswith(b"\n"):
        try:
            data += tls.read(1024)
        except ssl.SSLWantReadError:
            chunk = sock.recv(65536)
            if not chunk:
                break
            incoming.write(chunk)
    return data.decode()


def test_the_header_and_the_client_hello_in_one_segment(serve, store):
    """Nothing past the header is read with it: the ClientHello behind it reaches the handshake."""
    server = serve(accept_proxy=True, tls=store[0], header_timeout=10)
    for header, want in ((b"PROXY TCP4 203.0.113.7 192.0.2.1 41000 443\r\n", "FROM 203.0.113.7 41000\n"),
                         (v2_header("198.51.100.9", 5555), "FROM 198.51.100.9 5555\n")):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            tls, incoming, _ = tls_in_one_segment_with(sock, header, "a.example.com")
            assert tls.getpeercert(binary_form=True) == store[1]["a"]
            assert tls_read_line(sock, tls, incoming) == want
    assert server.counters()["proxy_headers"] == 2 and server.counters()["tls_handshakes"] == 2


def test_without_tls_the_bytes_after_the_header_reach_the_protocol_whole(serve):
    server = serve(accept_proxy=True, header_timeout=10)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(v2_header("192.0.2.50", 1234) + b"GET / HTTP/1.1\r\n\r\n")
        assert read_line(sock) == "FROM 192.0.2.50 1234\n"
        echoed = b""
        while len(echoed) < 18:
            echoed += sock.recv(100)
        assert echoed == b"GET / HTTP/1.1\r\n\r\n"


def test_a_header_sent_byte_by_byte_then_tls(serve, store):
    server = serve(accept_proxy=True, tls=store[0], header_timeout=10)
    header = b"PROXY TCP6 2001:db8::5 2001:db8::1 50000 443\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(header)):
            sock.sendall(header[i:i + 1])
            time.sleep(0.002)
        with client_context().wrap_socket(sock, server_hostname="default.test") as tls:
            assert tls.getpeercert(binary_form=True) == store[1]["default"]
            assert read_line(tls) == "FROM 2001:db8::5 50000\n"


def test_local_and_unknown_keep_the_connections_own_address(serve):
    server = serve(accept_proxy=True, header_timeout=10)
    for header in (b"PROXY UNKNOWN\r\n", V2_SIGNATURE + b"\x20\x00\x00\x00"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            host, port = sock.getsockname()[:2]
            sock.sendall(header)
            assert read_line(sock) == f"FROM {host} {port}\n"
    assert server.counters()["proxy_local"] == 2


def closed_by_server(sock):
    """True once the server closed the connection (EOF or reset), reading at most 64 KiB."""
    try:
        for _ in range(64):
            if not sock.recv(1024):
                return True
    except (ConnectionResetError, socket.timeout):
        return isinstance(sock, socket.socket)
    return False


def wait_counter(server, name, value):
    deadline = time.monotonic() + 10
    while server.counters()[name] != value:
        assert time.monotonic() < deadline, server.counters()
        time.sleep(0.02)


@pytest.mark.parametrize("send, counter", [
    (b"GET / HTTP/1.1\r\n\r\n", "proxy_refused"),                        # no header at all
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n", "proxy_refused"),        # a bad port
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", "proxy_refused"),              # a bare LF
    (b"PROXY UNKNOWN " + b"x" * 120, "proxy_refused"),                   # past 107 bytes without CRLF
    (b"PROXY TCP4 1.2.3.4", "proxy_timeouts"),                           # half a header, then nothing
    (V2_SIGNATURE + b"\x21\x11\x00\x0c\x01\x02", "proxy_timeouts"),
    (b"PROXY UNKNOWN\r\n", "tls_timeouts"),                              # the header, then no ClientHello
    (b"PROXY UNKNOWN\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", "tls_failures"),  # plain HTTP on the TLS port
])
def test_refusals_are_closed_and_counted_and_never_reach_the_protocol(serve, store, send, counter):
    server = serve(accept_proxy=True, tls=store[0], header_timeout=0.5)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(send)
        assert closed_by_server(sock)
    wait_counter(server, counter, 1)
    counts = server.counters()
    assert sum(counts[k] for k in ("proxy_refused", "proxy_timeouts", "tls_timeouts", "tls_failures")) == 1, counts
    assert server.made == []  # no protocol got a connection


def test_a_client_that_leaves_mid_header_is_counted_as_closed_early(serve):
    server = serve(accept_proxy=True, header_timeout=10)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"PROXY TCP4 ")
    wait_counter(server, "closed_early", 1)
    assert server.made == []


def test_the_edge_refuses_a_bad_header_timeout_and_a_bad_bound():
    for bad in (0, -1, "10", True, float("nan")):
        with pytest.raises(ValueError, match="header_timeout: must be a number > 0"):
            Edge(header_timeout=bad)
    with pytest.raises(ValueError, match="max_v2_length: must be an integer from 232"):
        Edge(max_v2_length=100)


# ---- HAProxy in front ----------------------------------------------------------------------------

@pytest.mark.skipif(HAPROXY is None, reason="haproxy is not installed (apt-get install haproxy): the edge is "
                                            "not tested behind a real PROXY protocol sender")
def test_tls_through_haproxy_sending_the_proxy_header(serve, store, tmp_path):
    server = serve(accept_proxy=True, tls=store[0], header_timeout=10)
    ports = {"server": server.port, "v1": free_port(), "v2": free_port()}
    haproxy = start_haproxy(tmp_path, HAPROXY_SENDERS.format(**ports), ports["v1"])
    try:
        for frontend in ("v2", "v1"):
            for name, expected in (("a.example.com", "a"), (None, "default")):
                with socket.create_connection(("127.0.0.1", ports[frontend]), timeout=10) as sock:
                    host, port = sock.getsockname()[:2]
                    with client_context().wrap_socket(sock, server_hostname=name) as tls:
                        assert tls.getpeercert(binary_form=True) == store[1][expected]
                        assert read_line(tls) == f"FROM {host} {port}\n", frontend
                        tls.sendall(b"ping\n")
                        assert read_line(tls) == "ping\n"
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=20)
    counts = server.counters()
    # HAProxy's first connection (the readiness probe above) carried a header too, and no TLS
    assert counts["proxy_refused"] == 0 and counts["tls_handshakes"] == 4, counts
