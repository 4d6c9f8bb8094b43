"""The PROXY protocol reader against a real sender: HAProxy (`send-proxy-v2`, `send-proxy`,
and its health checks with `check-send-proxy`) in front of an asyncio server in this test that
reads each connection's header with _proxy_protocol.ProxyHeaderReader and answers with the
client address it names. The clients are this test's own sockets to HAProxy, so the address
HAProxy must report is known: each client's own (host, port)."""

import asyncio
import socket
import time

import pytest

from leastload.proxy._proxy_protocol import LOCAL, PROXY, ProxyHeaderReader, ProxyProtocolError

from edge_helpers import HAPROXY, HAPROXY_SENDERS, start_haproxy
pytestmark = pytest.mark.skipif(HAPROXY is None, reason="haproxy is not installed (apt-get install haproxy): "
                                                         "the PROXY protocol is not tested against a real sender")


class HeaderServer(asyncio.Protocol):
    """Reads the header, then the client's line; answers `VERSION COMMAND FAMILY HOST PORT LINE`."""

    def __init__(self, seen):
        self.reader = ProxyHeaderReader()
        self.header = None
        self.rest = b""
        self.seen = seen

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        if self.header is None:
            try:
                self.header = self.reader.feed(data)
            except ProxyProtocolError as exc:
                self.seen.append(exc)
                self.transport.close()
                return
            if self.header is None:
                return
            self.seen.append(self.header)
            data = self.header.rest
        self.rest += data
        if b"\n" in self.rest:
            line = self.rest.split(b"\n", 1)[0].decode()
            h = self.header
            host, port = h.source if h.source is not None else ("-", "-")
            self.transport.write(f"{h.version} {h.command} {h.family} {host} {port} {h.tlvs} {line}\n".encode())
            self.transport.close()


def free_port(family=socket.AF_INET, host="127.0.0.1"):
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


CONFIG = HAPROXY_SENDERS + """
frontend v2_crc
    bind 127.0.0.1:{v2_crc}
    default_backend v2_crc
backend v2_crc
    server s 127.0.0.1:{server} send-proxy-v2 proxy-v2-options crc32c

backend checked
    server s 127.0.0.1:{server} send-proxy-v2 check check-send-proxy inter 200ms
{ipv6}"""

IPV6 = """
frontend v2_ipv6
    bind [::1]:{v2_6}
    default_backend v2
frontend v1_ipv6
    bind [::1]:{v1_6}
    default_backend v1
"""


def start(tmp_path, ports):
    return start_haproxy(tmp_path, CONFIG.format(ipv6=IPV6.format(**ports) if "v2_6" in ports else "", **ports),
                         ports["v1"])


async def ask(host, port):
    """Connects to HAProxy, sends a line: (the server's answer, this client's own address)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
    mine = writer.get_extra_info("sockname")[:2]
    writer.write(b"hello through haproxy\n")
    answer = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    return answer.decode().split(), mine


def test_haproxy_send_proxy_v1_and_v2_give_the_clients_address_and_its_checks_send_local(tmp_path):
    ports = {"server": free_port(), "v1": free_port(), "v2": free_port(), "v2_crc": free_port()}
    with_ipv6 = ipv6_loopback()
    if with_ipv6:
        ports.update(v1_6=free_port(socket.AF_INET6, "::1"), v2_6=free_port(socket.AF_INET6, "::1"))
    else:
        print("no IPv6 loopback here: the TCP6 forms are tested without HAProxy only")

    async def main():
        seen = []
        server = await asyncio.get_running_loop().create_server(lambda: HeaderServer(seen), "127.0.0.1",
                                                                 ports["server"])
        haproxy = start(tmp_path, ports)
        try:
            # (frontend, its address, version, family, TLVs: crc32c adds one, its checksum verified)
            cases = [("v2", "127.0.0.1", "2", "TCP4", "0"), ("v1", "127.0.0.1", "1", "TCP4", "0"),
                     ("v2_crc", "127.0.0.1", "2", "TCP4", "1")]
            if with_ipv6:
                cases += [("v2_6", "::1", "2", "TCP6", "0"), ("v1_6", "::1", "1", "TCP6", "0")]
            for name, host, version, family, tlvs in cases:
                for _ in range(3):  # each connection its own client port
                    answer, (my_host, my_port) = await ask(host, ports[name])
                    assert answer == [version, PROXY, family, my_host, str(my_port), tlvs, "hello", "through",
                                      "haproxy"], (name, answer)
            # the health checks of a send-proxy-v2 server: HAProxy's own connections, LOCAL
            deadline = time.monotonic() + 15
            while not any(getattr(h, "command", None) == LOCAL for h in seen):
                assert time.monotonic() < deadline, f"no LOCAL header from HAProxy's checks: {seen}"
                await asyncio.sleep(0.1)
            local = next(h for h in seen if getattr(h, "command", None) == LOCAL)
            assert (local.version, local.source) == (2, None)
            assert not [h for h in seen if isinstance(h, Exception)], seen  # every header read
        finally:
            haproxy.terminate()
            haproxy.wait(timeout=20)
            server.close()
            await server.wait_closed()

    asyncio.run(main())
