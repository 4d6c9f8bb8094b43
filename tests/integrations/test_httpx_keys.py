"""leastload.integrations.httpx.Transport under the hash methods: each request's key, real backends on 127.0.0.1.

Each backend answers with a body of its own size, so a response tells which
backend served it (also `extensions["leastload_backend"]`, which is the
transport's own word). The pick a key should get is asked of a twin vserver
with the same names and weights: a hash pick depends on the key and the
eligible services only.
"""
import asyncio
import ipaddress
import socket

import pytest

httpx = pytest.importorskip("httpx")

from leastload.integrations.httpx import MissingKey, Transport  # noqa: E402
from keyed_backends import NAMES, SIZES, expected, specs, start_backends, stop_backends, twin  # noqa: E402
from leastload_testkit.ports import free_port  # noqa: E402


@pytest.fixture(scope="module")
def procs():
    started = start_backends()
    yield started
    stop_backends(started)


def served_by(response):
    """The backend that answered, from the body's size (not from the transport)."""
    return NAMES[SIZES.index(len(response.content))]


def client(transport, base_url="http://app"):
    return httpx.Client(transport=transport, base_url=base_url, trust_env=False)


def assert_idle(transport):
    vs = transport.vserver
    assert all(vs.info(n)["active"] == 0 for n in vs.services)


def test_urlhash_keeps_each_path_and_query_on_one_backend(impl, procs):
    transport = Transport(specs(procs), "URLHASH", engine=impl.VirtualServer)
    paths = [f"/item/{i}?lang=en" for i in range(20)]
    with client(transport) as c:
        picks = {p: [served_by(c.get(p)) for _ in range(3)] for p in paths}
    ref = twin(impl, "URLHASH")
    for path, backends in picks.items():
        assert backends == [expected(ref, path)] * 3, (path, backends)
    assert len({b[0] for b in picks.values()}) >= 2
    assert_idle(transport)


def test_a_retry_keeps_the_key_and_goes_to_its_next_backend(impl, procs):
    dead = free_port()  # nothing listens there: connections are refused
    transport = Transport(specs(procs[:2]) + [f"b2=127.0.0.1:{dead}"], "URLHASH", engine=impl.VirtualServer,
                          outlier_failures=0)
    ref = twin(impl, "URLHASH")
    paths = [f"/k{i}" for i in range(30)]
    with client(transport) as c:
        got = {p: served_by(c.get(p)) for p in paths}
    assert any(expected(ref, p) == "b2" for p in paths)  # some keys map to the dead backend ...
    for p in paths:  # ... and go to their second choice; no other key moves
        assert got[p] == expected(ref, p, exclude=["b2"]), p
    assert transport.vserver.info("b2")["failures"] == sum(expected(ref, p) == "b2" for p in paths)
    assert_idle(transport)


def test_domainhash_hashes_the_host_and_token_its_header(impl, procs):
    domain = Transport(specs(procs), "DOMAINHASH", engine=impl.VirtualServer)
    hosts = [f"Shop{i}.example.com" for i in range(12)]
    got = []
    for h in hosts:
        with client(domain, f"http://{h}:8080") as c:
            got.append(served_by(c.get("/")))
    ref = twin(impl, "DOMAINHASH")
    assert got == [expected(ref, h.lower()) for h in hosts]
    assert len(set(got)) >= 2

    token = Transport(specs(procs), "TOKEN", engine=impl.VirtualServer, token_header="X-Session")
    with client(token) as c:
        tokens = [served_by(c.get("/", headers={"x-session": f"s{i}"})) for i in range(12)]
        without = served_by(c.get("/"))
    ref = twin(impl, "TOKEN")
    assert tokens == [expected(ref, f"s{i}") for i in range(12)]
    assert without == expected(ref, "127.0.0.1")  # no token: this host's address, as text
    assert_idle(token)


def test_callidhash_without_call_id_raises_and_charges_nothing(impl, procs):
    transport = Transport(specs(procs), "CALLIDHASH", engine=impl.VirtualServer)
    with client(transport) as c:
        assert served_by(c.get("/", headers={"Call-ID": "a84b4c76e66710@pc33"})) == \
            expected(twin(impl, "CALLIDHASH"), "a84b4c76e66710@pc33")
        with pytest.raises(MissingKey, match="Call-ID"):
            c.get("/")
    assert sum(transport.vserver.info(n)["selected"] for n in NAMES) == 1
    assert_idle(transport)


def test_the_address_methods(impl, procs):
    source = Transport(specs(procs), "SOURCEIPHASH", engine=impl.VirtualServer)
    with client(source) as c:
        assert {served_by(c.get(f"/{i}")) for i in range(6)} == {expected(twin(impl, "SOURCEIPHASH"), "127.0.0.1")}
    assert source.local_ip() == ipaddress.ip_address("127.0.0.1")  # toward the backends on loopback

    # the destination is the host of the URL the caller used (never connected to: the backend is)
    dest = Transport(specs(procs), "DESTINATIONIPHASH", engine=impl.VirtualServer)
    ref = twin(impl, "DESTINATIONIPHASH")
    got = []
    for i in range(1, 13):
        with client(dest, f"http://192.0.2.{i}") as c:
            got.append(served_by(c.get("/")))
    assert got == [expected(ref, f"192.0.2.{i}") for i in range(1, 13)]
    assert len(set(got)) >= 2

    async def by_name():  # a host name is resolved once, off the event loop
        async with httpx.AsyncClient(transport=dest, base_url="http://localhost", trust_env=False) as c:
            return served_by(await c.get("/"))
    localhost = socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM)[0][4][0]
    assert asyncio.run(by_name()) == expected(ref, localhost)
    assert_idle(dest)

    async def from_async():  # this host's address, found off the event loop too
        fresh = Transport(specs(procs), "SOURCEIPHASH", engine=impl.VirtualServer)
        async with httpx.AsyncClient(transport=fresh, base_url="http://app", trust_env=False) as c:
            return served_by(await c.get("/"))
    assert asyncio.run(from_async()) == expected(twin(impl, "SOURCEIPHASH"), "127.0.0.1")


def test_srcipsrcporthash_needs_a_request_key(impl, procs):
    with pytest.raises(ValueError, match="request_key"):
        Transport(specs(procs), "SRCIPSRCPORTHASH", engine=impl.VirtualServer)
    with pytest.raises(ValueError, match="token_header"):
        Transport(specs(procs), "TOKEN", engine=impl.VirtualServer)
    with pytest.raises(TypeError, match="request_key"):
        Transport(specs(procs), "URLHASH", engine=impl.VirtualServer, request_key="x")
    transport = Transport(specs(procs), "SRCIPSRCPORTHASH", engine=impl.VirtualServer,
                          request_key=lambda r: ("10.1.2.3", int(r.headers["x-client-port"])))
    ref = twin(impl, "SRCIPSRCPORTHASH")
    with client(transport) as c:
        got = [served_by(c.get("/", headers={"x-client-port": str(p)})) for p in range(5000, 5012)]
    assert got == [expected(ref, ("10.1.2.3", p)) for p in range(5000, 5012)]
