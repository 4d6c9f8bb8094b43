"""The listener's certificate store (_tls.py): certificates made here with the openssl command,
a real asyncio TLS server using the store, and real `ssl` clients over TLS 1.2 and 1.3 that
check which certificate each SNI name got (the served certificate's bytes against the file's),
ALPN, session resumption by ticket, a reload while a connection stays open, and every bad file
refused as one line naming it."""

import asyncio
import shutil
import socket
import ssl
import subprocess
import threading

import pytest

from certs import OPENSSL, make_cert, openssl
from leastload.cmdline import UserError
from leastload.proxy._tls import CertificateStore, host_names, load_pair

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed: no certificates "
                                                         "can be made for the TLS tests")
VERSIONS = [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    return {
        "default": make_cert(d, "default", "default.test", ["DNS:default.test"]),
        "a": make_cert(d, "a", "ignored-cn.test", ["DNS:a.example.com", "DNS:www.a.example.com", "IP:127.0.0.1"]),
        "wild": make_cert(d, "wild", "wild", ["DNS:*.wild.test"]),
        "cn": make_cert(d, "cn", "Only-CN.test"),
        "ip": make_cert(d, "ip", "ip-cn.test", ["IP:127.0.0.1", "email:x@y.test"]),
        "none": make_cert(d, "none"),
    }


# ---- names read from the certificates ----------------------------------------------------------


def test_names_are_the_dns_names_of_the_san_else_the_cn(certs):
    assert host_names(certs["a"][2]) == ("a.example.com", "www.a.example.com")  # the CN and the IP left out
    assert host_names(certs["wild"][2]) == ("*.wild.test",)
    assert host_names(certs["cn"][2]) == ("only-cn.test",)  # no SAN: the CN, lowercased
    assert host_names(certs["ip"][2]) == ("ip-cn.test",)    # a SAN without a DNS name: the CN
    assert host_names(certs["none"][2]) == ()


def test_names_agree_with_openssls_own_reading(certs):
    for stem in ("a", "wild"):
        out = subprocess.run([OPENSSL, "x509", "-noout", "-ext", "subjectAltName", "-in", certs[stem][0]],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        dns = tuple(p.strip()[4:].lower() for p in out.splitlines()[1].split(",") if p.strip().startswith("DNS:"))
        assert host_names(certs[stem][2]) == dns


def test_a_pair_may_be_given_its_names(certs):
    cert, key, _ = certs["none"]
    assert load_pair(cert, key, ["Named.Test", "*.more.test"]).names == ("named.test", "*.more.test")


# ---- a real TLS server using the store ----------------------------------------------------------


class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)


class Server:
    """An asyncio TLS server with the store's context, on its own loop in a thread."""

    def __init__(self, store):
        self.store = store
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        assert ready.wait(20)

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            self.loop.create_server(Echo, "127.0.0.1", 0, ssl=self.store.context, ssl_handshake_timeout=10))
        self.port = self.server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    def call(self, function):
        """`function()` on the server's loop (as the proxy's SIGHUP handler would run a reload)."""
        async def run():
            return function()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(20)

    def close(self):
        self.call(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(20)


@pytest.fixture
def serve():
    started = []

    def start(store):
        started.append(Server(store))
        return started[-1]
    yield start
    for server in started:
        server.close()


def client_context(version, alpn=("http/1.1",)):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the test compares the served certificate's bytes instead
    context.minimum_version = context.maximum_version = version
    if alpn:
        context.set_alpn_protocols(list(alpn))
    return context


def connect(port, context, server_name, session=None):
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return context.wrap_socket(raw, server_hostname=server_name, session=session)


def echo(tls, data=b"ping"):
    tls.sendall(data)
    got = b""
    while len(got) < len(data):
        got += tls.recv(len(data) - len(got))
    return got


@pytest.mark.parametrize("version", VERSIONS, ids=["TLSv1.2", "TLSv1.3"])
def test_sni_chooses_the_certificate_over_tls_1_2_and_1_3(certs, serve, version):
    store = CertificateStore([certs[k][:2] for k in ("default", "a", "wild", "cn")])
    server = serve(store)
    expected = {
        "a.example.com": "a", "www.a.example.com": "a", "A.Example.COM": "a", "a.example.com.": "a",
        "x.wild.test": "wild", "other.wild.test": "wild",
        "deep.x.wild.test": "default",   # a wildcard covers one label
        "wild.test": "default",
        "only-cn.test": "cn",
        "unknown.test": "default",
        None: "default",                 # no SNI
    }
    context = client_context(version, alpn=("h2", "http/1.1"))
    for name, stem in expected.items():
        with connect(server.port, context, name) as tls:
            assert tls.getpeercert(binary_form=True) == certs[stem][2], (name, stem)
            assert tls.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
            assert tls.selected_alpn_protocol() == "http/1.1"
            assert echo(tls) == b"ping"


@pytest.mark.parametrize("version", VERSIONS, ids=["TLSv1.2", "TLSv1.3"])
def test_sessions_resume_by_ticket(certs, serve, version):
    store = CertificateStore([certs["default"][:2], certs["a"][:2]])
    server = serve(store)
    context = client_context(version)
    for name in ("a.example.com", None):
        with connect(server.port, context, name) as first:
            echo(first)  # TLS 1.3 sends its tickets after the handshake: read something first
            session = first.session
            assert not first.session_reused and session is not None and session.has_ticket
        with connect(server.port, context, name, session=session) as again:
            echo(again)
            assert again.session_reused, name
            assert again.getpeercert(binary_form=True) == certs["a" if name else "default"][2]


def test_a_reload_serves_new_certificates_to_new_connections_while_an_old_one_goes_on(certs, serve, tmp_path):
    cert, key = tmp_path / "site.crt", tmp_path / "site.key"
    old = make_cert(tmp_path, "old", "site.test", ["DNS:site.test"])
    new = make_cert(tmp_path, "new", "site.test", ["DNS:site.test", "DNS:new.site.test"])
    shutil.copy(old[0], cert)
    shutil.copy(old[1], key)
    store = CertificateStore([certs["default"][:2], (str(cert), str(key))])
    server = serve(store)
    context = client_context(ssl.TLSVersion.TLSv1_3)
    with connect(server.port, context, "site.test") as before:
        assert before.getpeercert(binary_form=True) == old[2]
        assert echo(before) == b"ping"
        shutil.copy(new[0], cert)
        shutil.copy(new[1], key)
        server.call(store.reload)
        assert store.reloads == 1
        for name in ("site.test", "new.site.test"):
            with connect(server.port, context, name) as after:
                assert after.getpeercert(binary_form=True) == new[2]
                assert echo(after, b"pong") == b"pong"
        # the connection opened before the reload goes on, with its certificate
        assert echo(before, b"still here") == b"still here"
        assert before.getpeercert(binary_form=True) == old[2]


# ---- bad files -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bad(certs, tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "garbage.pem").write_text("not a certificate\n")
    (d / "truncated.crt").write_text(open(certs["a"][0]).read()[:200] + "\n-----END CERTIFICATE-----\n")
    (d / "garbage.key").write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    openssl("pkey", "-in", certs["a"][1], "-out", str(d / "encrypted.key"), "-aes256", "-passout", "pass:secret")
    return d


def test_bad_files_are_one_line_naming_the_file(certs, bad):
    cert, key, _ = certs["a"]
    missing = str(bad / "missing.crt")
    cases = [
        ((missing, key), f"TLS certificate {missing}: cannot read it: No such file or directory"),
        ((str(bad / "garbage.pem"), key), f"TLS certificate {bad / 'garbage.pem'}: not a certificate in PEM form"),
        ((str(bad / "truncated.crt"), key), f"TLS certificate {bad / 'truncated.crt'}: not a certificate in PEM form"),
        ((cert, str(bad / "missing.key")), f"TLS key {bad / 'missing.key'}: cannot read it: No such file"),
        ((cert, str(bad / "garbage.key")), f"TLS key {bad / 'garbage.key'}: not a private key in PEM form for {cert}"),
        ((cert, certs["wild"][1]), f"TLS key {certs['wild'][1]}: not the key of the certificate {cert}"),
        ((cert, str(bad / "encrypted.key")), f"TLS key {bad / 'encrypted.key'}: encrypted with a passphrase"),
    ]
    for pair, message in cases:
        with pytest.raises(UserError) as caught:
            CertificateStore([certs["default"][:2], pair])
        text = str(caught.value)
        assert text.startswith(message), text
        assert "\n" not in text
    with pytest.raises(UserError, match="at least one certificate"):
        CertificateStore([])


def test_a_reload_that_fails_changes_nothing(certs, serve, tmp_path):
    cert, key = tmp_path / "site.crt", tmp_path / "site.key"
    shutil.copy(certs["a"][0], cert)
    shutil.copy(certs["a"][1], key)
    store = CertificateStore([certs["default"][:2], (str(cert), str(key))])
    server = serve(store)
    cert.write_text("broken\n")
    with pytest.raises(UserError, match=f"TLS certificate {cert}: not a certificate"):
        server.call(store.reload)
    assert store.reloads == 0
    with connect(server.port, client_context(ssl.TLSVersion.TLSv1_2), "a.example.com") as tls:
        assert tls.getpeercert(binary_form=True) == certs["a"][2]


def test_names_given_to_a_pair_and_the_first_pair_listed_wins_a_name(certs):
    default, a, wild = certs["default"][:2], certs["a"][:2], certs["wild"][:2]
    store = CertificateStore([default, (*wild, ["a.example.com", "*.given.test"]), a])
    assert store.choose("a.example.com").cert_file == wild[0]  # listed first with that name
    assert store.choose("www.a.example.com").cert_file == a[0]
    assert store.choose("x.given.test").cert_file == wild[0]
    assert store.choose("x.wild.test").cert_file == default[0]  # its own names were replaced
    assert store.choose(None).cert_file == default[0] and store.choose("").cert_file == default[0]
    assert [p["names"] for p in store.status()] == [["default.test"], ["a.example.com", "*.given.test"],
                                                     ["a.example.com", "www.a.example.com"]]
