"""TLS and the PROXY protocol in a config file: the NetScaler form (`add ssl certKey`, `bind ssl
vserver -certkeyName`, an SSL vserver) and the TOML form (a vserver's tls_cert, tls_key,
accept_proxy), parsed, printed back, planned, and served by `leastload proxy --config`; a
reload of a config whose certificate files changed serves the new certificate."""

import signal
import socket
import ssl
import time

import pytest

from certs import OPENSSL, make_cert
from edge_helpers import EchoBackend
from leastload.config import ConfigError, parse, parse_toml
from leastload.config.printer import to_netscaler, to_toml
from leastload.proxy._config import plan
from leastload_testkit.proxy_process import ProxyProcess

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed: no certificates")

NETSCALER = """\
add service s1 127.0.0.1 HTTP {port}
add ssl certKey a -cert {a_cert} -key {a_key}
add ssl certKey b -cert {b_cert} -key {b_key}
add lb vserver web SSL 127.0.0.1 {listen}
bind lb vserver web s1
bind ssl vserver web -certkeyName a
bind ssl vserver web -certkeyName b
add lb vserver plain SSL 127.0.0.1 {other}
bind lb vserver plain s1
"""


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    return {"a": make_cert(d, "a", "a.test", ["DNS:a.test"]), "b": make_cert(d, "b", "b.test", ["DNS:b.test"])}


def text(certs, port=9000, listen=8443, other=8444):
    return NETSCALER.format(port=port, listen=listen, other=other, a_cert=certs["a"][0], a_key=certs["a"][1],
                            b_cert=certs["b"][0], b_key=certs["b"][1])


def test_the_netscaler_form_binds_certificates_in_order_and_prints_them_back(certs):
    config = parse(text(certs), "lb.conf")
    web = config.vserver("web")
    assert [(c.name, c.cert, c.key) for c in web.cert_keys] == [
        ("a", certs["a"][0], certs["a"][1]), ("b", certs["b"][0], certs["b"][1])]
    again = parse(to_netscaler(config), "again.conf")
    assert again == config
    assert "bind ssl vserver web -certkeyName b" in to_netscaler(config)
    toml = parse_toml(to_toml(config), "lb.toml")
    assert toml.vserver("web").cert_keys == web.cert_keys  # the pairs (the TOML form names none)
    plans, warnings = plan(config)
    assert [p.name for p in plans] == ["web"]
    assert plans[0].edge == {"tls_cert": (certs["a"][0], certs["b"][0]), "tls_key": (certs["a"][1], certs["b"][1])}
    assert any("lb vserver plain is SSL without a certificate" in w for w in warnings), warnings


def test_bad_ssl_lines_are_errors_naming_the_line(certs):
    for bad, message in (("bind ssl vserver web -certkeyName nope\n", "no ssl certKey named 'nope'"),
                         ("add ssl certKey c -cert x.crt\n", "needs -cert FILE and -key FILE"),
                         ("bind ssl vserver web -certkeyName a\n", "already bound")):
        with pytest.raises(ConfigError, match=message):
            parse(text(certs) + bad, "lb.conf")


def test_the_toml_form_per_vserver(certs):
    config = parse_toml(f"""
[service.s1]
host = "127.0.0.1"
type = "HTTP"
port = 9000
[vserver.web]
type = "SSL"
address = "127.0.0.1"
port = 8443
tls_cert = ["{certs['a'][0]}"]
tls_key = ["{certs['a'][1]}"]
accept_proxy = true
services = ["s1"]
""", "lb.toml")
    web = config.vserver("web")
    assert web.accept_proxy and [c.cert for c in web.cert_keys] == [certs["a"][0]]
    assert parse_toml(to_toml(config), "again.toml") == config
    plans, _ = plan(config)
    assert plans[0].edge == {"tls_cert": (certs["a"][0],), "tls_key": (certs["a"][1],), "accept_proxy": True}
    with pytest.raises(ConfigError, match="as many keys as certificates"):
        parse_toml(f'[vserver.web]\ntype = "SSL"\ntls_cert = ["{certs["a"][0]}"]\ntls_key = ["x.key", "y.key"]\n',
                   "bad.toml")


def served_certificate(port, name):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=name) as tls:
            tls.sendall(f"GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
            answer = b""
            while True:
                chunk = tls.recv(65536)
                if not chunk:
                    break
                answer += chunk
            return tls.getpeercert(binary_form=True), answer


def test_an_ssl_vserver_of_a_config_is_served_and_a_reload_takes_new_certificates(tmp_path, certs):
    backend = EchoBackend("s1")
    c = make_cert(tmp_path, "c", "a.test", ["DNS:a.test"])
    path = tmp_path / "lb.conf"
    path.write_text(text(certs, port=backend.port))
    proxy = ProxyProcess(["--config", str(path), "--listen", "127.0.0.1:0", "--health-check", "none"])
    try:
        for name in ("a", "b"):
            served, answer = served_certificate(proxy.port, f"{name}.test")
            assert served == certs[name][2]
            assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"s1 127.0.0.1 https")
        path.write_text(text(certs, port=backend.port).replace(f"-cert {certs['a'][0]} -key {certs['a'][1]}",
                                                               f"-cert {c[0]} -key {c[1]}"))
        proxy.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while served_certificate(proxy.port, "a.test")[0] != c[2]:
            assert time.monotonic() < deadline, f"the reload's certificate is not served: {proxy.err()}"
            time.sleep(0.05)
        assert served_certificate(proxy.port, "b.test")[0] == certs["b"][2]
    finally:
        assert proxy.stop() == 0, proxy.err()
        backend.stop()
