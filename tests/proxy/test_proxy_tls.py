"""`leastload proxy --tls-cert FILE --tls-key FILE` end to end: real proxy processes (1 and 2
workers, the compiled and the pure-Python per-request paths) terminating TLS in front of plain
HTTP backends; clients are Debian's curl and Python's `ssl`, over TLS 1.2 and 1.3, each
checking the certificate its SNI name got (the served certificate's bytes against the file's).
Also: SIGHUP with a new certificate (new connections get it, a keep-alive connection opened
before goes on), handshake failures in the (merged) /metrics, and bad files refused at start
with one line and exit 2."""

import re
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest

from certs import OPENSSL, make_cert
from edge_helpers import EchoBackend, ProxyProcess, metrics, sample
from leastload_testkit.ports import free_ports

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed: no certificates "
                                                         "can be made for the TLS tests")
CURL = shutil.which("curl")
VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
PATHS = [(1, "c"), (2, "c"), (1, "python"), (2, "python")]
PATH_IDS = [f"{w}-worker{'s' * (w > 1)}-{'compiled' if i == 'c' else 'python'}" for w, i in PATHS]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    return {"a": make_cert(d, "a", "a.test", ["DNS:a.test"]),
            "b": make_cert(d, "b", "b.test", ["DNS:b.test", "DNS:*.b.test"])}


@pytest.fixture(scope="module")
def backend():
    b = EchoBackend("app")
    yield b
    b.stop()


def tls_args(certs, *names):
    args = []
    for name in names:
        args += ["--tls-cert", certs[name][0], "--tls-key", certs[name][1]]
    return args


def start(tmp_path, backend, certs, workers, implementation, *more):
    admin = free_ports(workers + 1 if workers > 1 else 1)
    args = ["--listen", "127.0.0.1:0", "--backend", f"app=127.0.0.1:{backend.port}", "--health-check", "none",
            "--admin", f"127.0.0.1:{admin}", "--workers", str(workers), *tls_args(certs, "a", "b"), *more]
    proxy = ProxyProcess(tmp_path, args, implementation)
    proxy.admin = admin
    return proxy


def client_context(version):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the test compares the bytes itself
    context.minimum_version = context.maximum_version = VERSIONS[version]
    context.set_alpn_protocols(["http/1.1"])
    return context


def connect(port, version, server_name):
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return client_context(version).wrap_socket(raw, server_hostname=server_name)


def get(tls, host, close=False):
    """One GET on the TLS connection: (status line, body)."""
    tls.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}"
                "\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = tls.recv(65536)
        assert chunk, f"closed before the head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(body) < length:
        chunk = tls.recv(65536)
        assert chunk, "closed within the body"
        body += chunk
    return head.split(b"\r\n")[0].decode(), body.decode()


@pytest.mark.parametrize("workers,implementation", PATHS, ids=PATH_IDS)
def test_python_ssl_and_curl_reach_the_backend_with_the_certificate_of_their_sni_name(
        tmp_path, backend, certs, workers, implementation):
    proxy = start(tmp_path, backend, certs, workers, implementation)
    try:
        for version in VERSIONS:
            for name, host, want in (("a", "a.test", "a"), ("b", "b.test", "b"), ("wild", "x.b.test", "b"),
                                     ("other", "other.test", "a"), ("none", None, "a")):
                with connect(proxy.port, version, host) as tls:
                    assert tls.version() == f"TLSv{version}", name
                    assert tls.selected_alpn_protocol() == "http/1.1"
                    assert tls.getpeercert(binary_form=True) == certs[want][2], (version, name)
                    status, body = get(tls, host or "127.0.0.1")
                    assert status == "HTTP/1.1 200 OK"
                    assert body == "app 127.0.0.1 https", body  # X-Forwarded-For and X-Forwarded-Proto
        if CURL is None:
            print("curl is not installed (apt-get install curl): its part of the test is left out")
            return
        for flags in (["--tlsv1.2", "--tls-max", "1.2"], ["--tlsv1.3"]):
            for name, host in (("a", "a.test"), ("b", "b.test")):
                done = subprocess.run(
                    [CURL, "-sS", "--cacert", certs[name][0], "--resolve", f"{host}:{proxy.port}:127.0.0.1",
                     *flags, "-w", " %{http_code} %{ssl_verify_result}", f"https://{host}:{proxy.port}/"],
                    capture_output=True, text=True, timeout=30)
                # the certificate verified against that name's file only: the SNI chose it
                assert done.returncode == 0, done.stderr
                assert done.stdout.endswith(" 200 0"), done.stdout
                assert done.stdout.startswith("app 127.0.0.1 https "), done.stdout
        text = metrics(proxy.admin)
        assert sample(text, "leastload_vserver_tls_handshakes_total") >= 2 * 5 + (4 if CURL else 0)
    finally:
        assert proxy.stop() == 0, proxy.err()


@pytest.mark.parametrize("workers", [1, 2], ids=["1-worker", "2-workers"])
def test_handshake_failures_are_counted_in_the_merged_metrics(tmp_path, backend, certs, workers):
    proxy = start(tmp_path, backend, certs, workers, "c")
    try:
        for _ in range(4):  # plain HTTP on the TLS port: not a ClientHello
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                s.settimeout(10)
                try:
                    while s.recv(4096):
                        pass
                except ConnectionResetError:
                    pass
        deadline = time.monotonic() + 10
        while True:  # the fan-out's merge reads each worker's counters
            text = metrics(proxy.admin)
            if sample(text, "leastload_vserver_tls_handshake_failures_total", reason="error") >= 4 \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert sample(text, "leastload_vserver_tls_handshake_failures_total", reason="error") == 4
        with connect(proxy.port, "1.3", "a.test") as tls:
            assert get(tls, "a.test")[0] == "HTTP/1.1 200 OK"
    finally:
        assert proxy.stop() == 0, proxy.err()


@pytest.mark.parametrize("workers,implementation", [(1, "c"), (2, "c"), (1, "python")],
                         ids=["1-worker-compiled", "2-workers-compiled", "1-worker-python"])
def test_sighup_serves_a_new_certificate_to_new_connections_while_an_old_one_finishes(
        tmp_path, backend, certs, workers, implementation):
    d = tmp_path / "live"
    d.mkdir()
    cert, key = d / "live.crt", d / "live.key"
    old = make_cert(d, "old", "a.test", ["DNS:a.test"])
    new = make_cert(d, "new", "a.test", ["DNS:a.test"])
    cert.write_bytes(open(old[0], "rb").read())
    key.write_bytes(open(old[1], "rb").read())
    admin = free_ports(workers + 1 if workers > 1 else 1)
    proxy = ProxyProcess(tmp_path, ["--listen", "127.0.0.1:0", "--backend", f"app=127.0.0.1:{backend.port}",
                                    "--health-check", "none", "--admin", f"127.0.0.1:{admin}",
                                    "--workers", str(workers), "--tls-cert", str(cert), "--tls-key", str(key)],
                         implementation)
    try:
        kept = []  # keep-alive connections on the old certificate: one per worker, most likely
        for _ in range(2 * workers):
            tls = connect(proxy.port, "1.3", "a.test")
            assert tls.getpeercert(binary_form=True) == old[2]
            assert get(tls, "a.test")[0] == "HTTP/1.1 200 OK"
            kept.append(tls)
        cert.write_bytes(open(new[0], "rb").read())
        key.write_bytes(open(new[1], "rb").read())
        proxy.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        seen = []
        while len(seen) < 4 * workers:  # new connections: every worker's answer is the new certificate
            with connect(proxy.port, "1.2", "a.test") as tls:
                served = tls.getpeercert(binary_form=True)
                if served == new[2]:
                    seen.append(served)
                    assert get(tls, "a.test", close=True)[0] == "HTTP/1.1 200 OK"
                else:
                    assert served == old[2]
                    seen.clear()
                    assert time.monotonic() < deadline, "the new certificate was not served after SIGHUP"
                    time.sleep(0.05)
        for tls in kept:  # the old connections go on, on the certificate they were handed
            assert tls.getpeercert(binary_form=True) == old[2]
            assert get(tls, "a.test", close=True)[0] == "HTTP/1.1 200 OK"
            tls.close()
        assert "certificates reloaded" in proxy.err()
    finally:
        assert proxy.stop() == 0, proxy.err()


@pytest.fixture(scope="module")
def bad(certs, tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "garbage.crt").write_text("not a certificate\n")
    (d / "garbage.key").write_text("not a key\n")
    return {"missing": (str(d / "missing.crt"), certs["a"][1], "missing.crt"),
            "garbage cert": (str(d / "garbage.crt"), certs["a"][1], "garbage.crt"),
            "garbage key": (certs["a"][0], str(d / "garbage.key"), "garbage.key"),
            "other's key": (certs["a"][0], certs["b"][1], "b.key")}


@pytest.mark.parametrize("workers", [1, 2], ids=["1-worker", "2-workers"])
@pytest.mark.parametrize("case", ["missing", "garbage cert", "garbage key", "other's key"])
def test_a_bad_certificate_or_key_at_start_is_one_line_and_exit_2(tmp_path, backend, bad, case, workers):
    cert, key, named = bad[case]
    import sys
    done = subprocess.run([sys.executable, "-m", "leastload", "proxy", "--listen", "127.0.0.1:0",
                           "--backend", f"app=127.0.0.1:{backend.port}", "--workers", str(workers),
                           "--tls-cert", cert, "--tls-key", key], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("leastload proxy: TLS ") and named in lines[0], done.stderr
    assert done.stdout == ""


def test_unpaired_certificates_and_keys_are_refused_naming_both_counts(tmp_path, backend, certs):
    import sys
    done = subprocess.run([sys.executable, "-m", "leastload", "proxy", "--listen", "127.0.0.1:0",
                           "--backend", f"app=127.0.0.1:{backend.port}", *tls_args(certs, "a"),
                           "--tls-cert", certs["b"][0]], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "tls_cert has 2, tls_key 1" in done.stderr, done.stderr


def closed_by_the_proxy(sock, sent=b""):
    """Sends `sent`, then waits (30 s at most) until the proxy closes the connection."""
    sock.settimeout(30)
    if sent:
        sock.sendall(sent)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return True


@pytest.mark.parametrize("workers", [1, 2], ids=["1-worker", "2-workers"])
def test_a_slow_handshake_is_closed_at_the_header_timeout_and_counted(tmp_path, backend, certs, workers):
    proxy = start(tmp_path, backend, certs, workers, "c", "--header-timeout", "0.5")
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as silent:
            assert closed_by_the_proxy(silent)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as partial:
            assert closed_by_the_proxy(partial, b"\x16\x03\x01\x02\x00\x01")  # a ClientHello's first bytes
        deadline = time.monotonic() + 10
        while sample(metrics(proxy.admin), "leastload_vserver_tls_handshake_failures_total", reason="timeout") < 2:
            assert time.monotonic() < deadline, metrics(proxy.admin)
            time.sleep(0.05)
        with connect(proxy.port, "1.3", "a.test") as tls:  # and the next client is served
            assert get(tls, "a.test")[0] == "HTTP/1.1 200 OK"
    finally:
        assert proxy.stop() == 0, proxy.err()
