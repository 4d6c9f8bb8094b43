"""`leastload proxy --accept-proxy` end to end: real HAProxy (`send-proxy-v2`, and `send-proxy`)
in front of real proxy processes (1 and 2 workers, both per-request paths); the clients bind to
127.0.0.2 while HAProxy connects from 127.0.0.1, so only the PROXY header can tell the proxy
the client's address: the backend's X-Forwarded-For and the access log must show 127.0.0.2.
Raw headers written by the test: SOURCEIPHASH keys on the header's address, a connection
without a valid header is refused before any HTTP (counted in /metrics), and --backend-header
names the service that answered."""

import http.client
import json
import socket
import time

import pytest

from edge_helpers import HAPROXY, HAPROXY_SENDERS, EchoBackend, ProxyProcess, metrics, sample, start_haproxy
from leastload_testkit.ports import free_port, free_ports

PATHS = [(1, "c"), (2, "c"), (1, "python"), (2, "python")]
PATH_IDS = [f"{w}-worker{'s' * (w > 1)}-{'compiled' if i == 'c' else 'python'}" for w, i in PATHS]
CLIENT = "127.0.0.2"  # the clients' own address; HAProxy's connections come from 127.0.0.1


def loopback_alias():
    try:
        with socket.socket() as s:
            s.bind((CLIENT, 0))
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def backends():
    started = [EchoBackend("b0"), EchoBackend("b1")]
    yield started
    for b in started:
        b.stop()


def start(tmp_path, backends, workers, implementation, *more):
    admin = free_ports(workers + 1 if workers > 1 else 1)
    args = ["--listen", "127.0.0.1:0", "--health-check", "none", "--admin", f"127.0.0.1:{admin}",
            "--workers", str(workers), "--accept-proxy", *more]
    for b in backends:
        args += ["--backend", f"{b.server.name}=127.0.0.1:{b.port}"]
    proxy = ProxyProcess(tmp_path, args, implementation)
    proxy.admin = admin
    return proxy


def haproxy_in_front(tmp_path, proxy_port):
    """HAProxy sending the PROXY header to `proxy_port`: (its process, its frontends' ports)."""
    ports = {"v2": free_port(), "v1": free_port(), "server": proxy_port}
    return start_haproxy(tmp_path, HAPROXY_SENDERS.format(**ports), ports["v1"]), ports


def get_from(port, source=CLIENT, prefix=b""):
    """A GET over a connection bound to `source`, `prefix` written first: (status, headers, body)."""
    sock = socket.socket()
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(prefix + b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    response = http.client.HTTPResponse(sock)
    response.begin()
    body = response.read().decode()
    sock.close()
    return response.status, dict(response.getheaders()), body


@pytest.mark.skipif(HAPROXY is None, reason="haproxy is not installed (apt-get install haproxy): the PROXY "
                                            "protocol is not tested behind a real sender")
@pytest.mark.skipif(not loopback_alias(), reason=f"cannot bind {CLIENT}: the client is not told from HAProxy")
@pytest.mark.parametrize("workers,implementation", PATHS, ids=PATH_IDS)
def test_behind_haproxy_the_backend_and_the_access_log_see_the_original_client(
        tmp_path, backends, workers, implementation):
    log_path = tmp_path / "access.log"
    proxy = start(tmp_path, backends, workers, implementation, "--access-log", str(log_path),
                  "--log-format", "json")
    haproxy, ports = haproxy_in_front(tmp_path, proxy.port)
    try:
        for front in ("v2", "v1"):
            for _ in range(3):
                status, _, body = get_from(ports[front])
                assert status == 200
                name, xff, proto = body.split()
                assert xff == CLIENT, (front, body)  # not 127.0.0.1, HAProxy's own
                assert proto == "http"
        text = metrics(proxy.admin)
        # 6, and HAProxy's connection for the start-up probe of its frontend when it made one
        assert sample(text, "leastload_vserver_proxy_protocol_headers_total", command="PROXY") in (6, 7)
        deadline = time.monotonic() + 10
        while True:  # the access log is written as each request ends
            lines = [json.loads(line) for line in log_path.read_text().splitlines()]
            if len(lines) >= 6 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert [line["client"] for line in lines] == [CLIENT] * 6
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=30)
        assert proxy.stop() == 0, proxy.err()


def v1(source, port=40000):
    return f"PROXY TCP4 {source} 127.0.0.1 {port} 80\r\n".encode()


def v2(source, port=40000):
    import ipaddress
    import struct
    body = ipaddress.IPv4Address(source).packed + ipaddress.IPv4Address("127.0.0.1").packed + struct.pack("!HH", port, 80)
    return b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11]) + struct.pack("!H", len(body)) + body


@pytest.mark.parametrize("workers,implementation", PATHS, ids=PATH_IDS)
def test_sourceiphash_keys_on_the_headers_address_and_no_header_is_refused(tmp_path, backends, workers,
                                                                          implementation):
    proxy = start(tmp_path, backends, workers, implementation, "--method", "SOURCEIPHASH",
                  "--backend-header", "X-Served-By")
    try:
        picks = {}
        for i in range(24):
            source = f"10.0.{i}.7"
            for header in (v1(source, 40000 + i), v2(source, 50000 + i), v1(source, 41000 + i)):
                status, headers, body = get_from(proxy.port, "127.0.0.1", header)
                assert status == 200
                name, xff, _ = body.split()
                assert xff == source
                assert headers["X-Served-By"] == name  # --backend-header: the service that answered
                picks.setdefault(source, set()).add(name)
        assert all(len(names) == 1 for names in picks.values()), picks  # one source, one backend
        assert {n for names in picks.values() for n in names} == {"b0", "b1"}  # the sources spread
        refused = 0
        for prefix in (b"", b"PROXY TCP4 nonsense\r\n", b"\r\n\r\n\x00\r\nQUIT\n\x99"):
            with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
                get_from(proxy.port, "127.0.0.1", prefix)
            refused += 1
        deadline = time.monotonic() + 10
        while True:
            text = metrics(proxy.admin)
            if sample(text, "leastload_vserver_proxy_protocol_refused_total", reason="malformed") >= refused \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert sample(text, "leastload_vserver_proxy_protocol_refused_total", reason="malformed") == refused
        assert sample(text, "leastload_vserver_proxy_protocol_headers_total", command="PROXY") == 72
    finally:
        assert proxy.stop() == 0, proxy.err()


@pytest.mark.parametrize("workers", [1, 2], ids=["1-worker", "2-workers"])
def test_a_header_incomplete_at_the_header_timeout_is_refused_and_counted(tmp_path, backends, workers):
    proxy = start(tmp_path, backends, workers, "c", "--header-timeout", "0.5")
    try:
        for partial in (b"", b"PROXY TCP4 10.0.0.1 ", b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\x0a"):
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as sock:
                if partial:
                    sock.sendall(partial)
                try:
                    assert sock.recv(4096) == b""  # closed, nothing answered
                except ConnectionResetError:
                    pass
        deadline = time.monotonic() + 10
        while sample(metrics(proxy.admin), "leastload_vserver_proxy_protocol_refused_total", reason="timeout") < 3:
            assert time.monotonic() < deadline, metrics(proxy.admin)
            time.sleep(0.05)
        status, headers, body = get_from(proxy.port, "127.0.0.1", v1("10.9.8.7"))
        assert status == 200 and body.split()[1] == "10.9.8.7"
        assert "X-Served-By" not in headers  # --backend-header is off by default
    finally:
        assert proxy.stop() == 0, proxy.err()
