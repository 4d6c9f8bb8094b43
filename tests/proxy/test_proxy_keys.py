"""The proxy under the hash methods, end to end: each request's key, real backends on 127.0.0.1.

Each backend answers with a body of its own size (100, 101, 102 bytes), so a
response tells which backend served it. The pick a key should get is asked of
a twin vserver (same names, same weights, no traffic): a hash pick depends on
the key and the eligible services only.
"""

import asyncio

import pytest

from leastload.proxy import Proxy
from keyed_backends import NAMES, SIZES, expected, specs, start_backends, stop_backends, twin
from servers import run_loop

RUN_TIMEOUT = 60.0


def run(coro):
    return run_loop(coro, RUN_TIMEOUT)


@pytest.fixture(scope="module")
def shared_backends():
    """Three backends for the tests that kill none."""
    procs = start_backends()
    yield procs
    stop_backends(procs)


class Connection:
    """One keep-alive client connection, requests written by hand (headers exactly as given)."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.port = writer.get_extra_info("sockname")[1]

    @classmethod
    async def open(cls, proxy):
        reader, writer = await asyncio.open_connection(*proxy.address)
        return cls(reader, writer)

    async def get(self, target, headers=(("Host", "app"),), version="1.1"):
        """(status, backend name or None, body)."""
        lines = [f"GET {target} HTTP/{version}"] + [f"{k}: {v}" for k, v in headers]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10)
        status = int(head.split(b" ", 2)[1])
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        body = await asyncio.wait_for(self.reader.readexactly(length), 10)
        return status, (NAMES[SIZES.index(length)] if status == 200 else None), body

    async def close(self):
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


async def fetch_all(proxy, targets, connections=4):
    """Each target once, spread over `connections` keep-alive connections: {target: [backend, ...]}."""
    conns = [await Connection.open(proxy) for _ in range(connections)]
    seen = {}

    async def worker(conn, mine):
        for target in mine:
            status, backend, _ = await conn.get(target)
            assert status == 200, (target, status)
            seen.setdefault(target, []).append(backend)
    await asyncio.gather(*(worker(c, targets[i::connections]) for i, c in enumerate(conns)))
    for c in conns:
        await c.close()
    return seen


URLS = [f"/item/{i}?lang=en" for i in range(30)]


def test_urlhash_keeps_each_url_on_one_backend_and_a_killed_backend_moves_only_its_urls(impl):
    procs = start_backends()
    try:
        async def main():
            async with Proxy(specs(procs), "URLHASH", listen=("127.0.0.1", 0), health_check="none",
                             engine=impl.VirtualServer) as proxy:
                before = await fetch_all(proxy, URLS * 3)  # every URL three times, over four connections
                victim = max(NAMES, key=lambda n: sum(v[0] == n for v in before.values()))
                procs[NAMES.index(victim)].kill()
                after = await fetch_all(proxy, URLS * 2)
                return before, victim, after, proxy.stats.of(victim).failures
        before, victim, after, failures = run(main())
    finally:
        stop_backends(procs)
    ref = twin(impl, "URLHASH")
    for url in URLS:
        assert len(set(before[url])) == 1, (url, before[url])  # the same backend every time
        assert before[url][0] == expected(ref, url.encode()), url
    assert len({v[0] for v in before.values()}) == 3  # 30 URLs reach every backend
    moved = [url for url in URLS if after[url][0] != before[url][0]]
    assert set(moved) == {url for url in URLS if before[url][0] == victim}  # its URLs, no other
    for url in URLS:
        assert len(set(after[url])) == 1
        assert after[url][0] == expected(ref, url, exclude=[victim]), url  # each to its second choice
    assert failures >= 1  # the refused tries were retried on the key's next backend, not answered 502


def test_srcipsrcporthash_spreads_client_connections_and_keeps_each_on_one_backend(impl, shared_backends):
    async def main():
        async with Proxy(specs(shared_backends), "SRCIPSRCPORTHASH", listen=("127.0.0.1", 0),
                         health_check="none", engine=impl.VirtualServer) as proxy:
            picks = {}
            for _ in range(24):
                conn = await Connection.open(proxy)
                picks[conn.port] = [(await conn.get(f"/r{i}"))[1] for i in range(3)]
                await conn.close()
            return picks
    picks = run(main())
    ref = twin(impl, "SRCIPSRCPORTHASH")
    for port, backends in picks.items():
        assert len(set(backends)) == 1, (port, backends)  # one connection, one key
        assert backends[0] == expected(ref, ("127.0.0.1", port)), port
    assert len({b[0] for b in picks.values()}) >= 2, picks  # 24 source ports do not all map to one backend


def test_the_address_methods_hash_the_connection_addresses(impl, shared_backends):
    keys = {"SOURCEIPHASH": "127.0.0.1", "DESTINATIONIPHASH": "127.0.0.1",
            "SRCIPDESTIPHASH": ("127.0.0.1", "127.0.0.1")}

    async def main():
        got = {}
        for method in keys:
            async with Proxy(specs(shared_backends), method, listen=("127.0.0.1", 0), health_check="none",
                             engine=impl.VirtualServer) as proxy:
                got[method] = list((await fetch_all(proxy, [f"/{i}" for i in range(8)])).values())
        return got
    got = run(main())
    for method, key in keys.items():
        assert {b for v in got[method] for b in v} == {expected(twin(impl, method), key)}, method


def test_domainhash_hashes_the_host_name_and_falls_back_without_one(impl, shared_backends):
    hosts = [f"Shop{i}.Example.com" for i in range(12)]

    async def main():
        async with Proxy(specs(shared_backends), "DOMAINHASH", listen=("127.0.0.1", 0), health_check="none",
                         engine=impl.VirtualServer) as proxy:
            conn = await Connection.open(proxy)
            by_host = {}
            for h in hosts:
                with_port = (await conn.get("/", headers=[("Host", f"{h}:8080")]))[1]
                lower = (await conn.get("/x?y", headers=[("Host", h.lower() + ".")]))[1]
                # RFC 9112 3.2.2: the target's authority is the Host; a Host that agrees may differ in case
                absolute = (await conn.get(f"http://{h}/z", headers=[("Host", h.upper())]))[1]
                by_host[h] = (with_port, lower, absolute)
            disagreeing = await conn.get(f"http://{hosts[0]}/z", headers=[("Host", "elsewhere")])
            await conn.close()  # that answer closed the connection
            conn = await Connection.open(proxy)
            no_host = await conn.get("/", headers=[], version="1.0")  # LEASTCONNECTION's pick
            await conn.close()
            return by_host, no_host, disagreeing
    by_host, no_host, disagreeing = run(main())
    assert disagreeing[0] == 400, disagreeing
    ref = twin(impl, "DOMAINHASH")
    for h, picks in by_host.items():
        # the port, letter case and a root dot do not matter; an absolute-form target's host wins
        assert set(picks) == {expected(ref, h.lower())}, (h, picks)
    assert len({p[0] for p in by_host.values()}) >= 2
    assert no_host[0] == 200


def test_token_and_callidhash_hash_their_headers(impl, shared_backends):
    async def main():
        out = {}
        async with Proxy(specs(shared_backends), "TOKEN", listen=("127.0.0.1", 0), health_check="none",
                         engine=impl.VirtualServer, token_header="X-Session") as proxy:
            conn = await Connection.open(proxy)
            out["token"] = [(await conn.get("/", headers=[("Host", "a"), ("x-session", f" s{i} ")]))[1]
                            for i in range(12)]
            out["no token"] = (await conn.get("/"))[1]
            await conn.close()
        async with Proxy(specs(shared_backends), "CALLIDHASH", listen=("127.0.0.1", 0), health_check="none",
                         engine=impl.VirtualServer) as proxy:
            conn = await Connection.open(proxy)
            out["call-id"] = [(await conn.get("/", headers=[("Host", "a"), ("Call-ID", f"{i}@pc33")]))[1]
                              for i in range(12)]
            out["compact"] = (await conn.get("/", headers=[("Host", "a"), ("i", "3@pc33")]))[1]
            out["no call-id"] = await conn.get("/")
            out["next"] = (await conn.get("/", headers=[("Host", "a"), ("Call-ID", "3@pc33")]))[1]  # same connection
            await conn.close()
            out["answered"] = dict(proxy.stats.answered_by_proxy)
        return out
    out = run(main())
    token, callid = twin(impl, "TOKEN"), twin(impl, "CALLIDHASH")
    assert out["token"] == [expected(token, f"s{i}") for i in range(12)]  # blanks around the value dropped
    assert len(set(out["token"])) >= 2
    assert out["no token"] == expected(token, "127.0.0.1")  # no token: the client's address as the token
    assert out["call-id"] == [expected(callid, f"{i}@pc33") for i in range(12)]
    assert out["compact"] == out["next"] == out["call-id"][3]
    status, backend, body = out["no call-id"]
    assert (status, backend) == (400, None) and b"Call-ID" in body
    assert out["answered"] == {400: 1}


def test_token_needs_its_header_name():
    with pytest.raises(ValueError, match="token_header"):
        Proxy(["a=127.0.0.1:9"], "TOKEN")
    with pytest.raises(ValueError, match="token_header.*'X Session'"):
        Proxy(["a=127.0.0.1:9"], "TOKEN", token_header="X Session")
