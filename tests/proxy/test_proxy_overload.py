"""Overload (_overload.py): the header and idle timeouts shrink past overload_connections, at
max_connections the connection waiting longest for its head is closed to admit a new one (408
when it had begun a head), a reserve descriptor answers EMFILE; the state is logged once per
change and counted. The rule alone with stand-in connections, then a proxy over real sockets
(the hostile-client suite runs the attack at the descriptor limit, tests/proxy/test_proxy_hostile.py)."""

import asyncio
import contextlib
import logging
import socket
import ssl
import subprocess
import sys
import textwrap

import pytest

from certs import OPENSSL, make_cert
from leastload.proxy import Proxy, _overload
from leastload_testkit.waits import wait_until_async
from servers import LOOPS, run_loop


class Conn:
    """A stand-in client connection: waiting for a head since `since` (-1.0: not waiting)."""

    def __init__(self, since):
        self.since = since
        self.evicted = False

    def waiting_since(self):
        return self.since

    def evict(self):
        self.evicted = True
        self.since = -1.0


def test_timeouts_shrink_linearly_from_the_high_water_mark_to_the_floor():
    o = _overload.Overload(100, 60, 2.0, [])
    assert [o.timeout(10.0, n) for n in (0, 60, 70, 80, 90, 100, 500)] == [10.0, 10.0, 8.0, 6.0, 4.0, 2.0, 2.0]
    assert o.timeout(1.0, 100) == 1.0  # a timeout under the floor stays as it is
    assert [o.level(n) for n in (60, 80, 100)] == [0.0, 0.5, 1.0]


def test_the_state_is_logged_once_per_change_and_counted(caplog):
    o = _overload.Overload(20, 10, 1.0, [])  # overload ends at 9 open (high - max(1, high // 10))
    with caplog.at_level(logging.WARNING, logger="leastload.proxy"):
        states = [o.update(n) for n in (1, 10, 11, 12, 10, 11, 20, 19, 20, 19, 11, 10, 9, 8, 11)]
    assert states == ["normal", "normal", "high", "high", "high", "high", "full", "full", "full", "full",
                      "full", "full", "normal", "normal", "high"]
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["overload"] * 2 + ["overload over"] + ["overload"]
    assert o.entered == {"high": 2, "full": 1}


def test_make_room_closes_the_longest_waiting_connection_first():
    conns = [Conn(t) for t in (5.0, 1.0, -1.0, 3.0, 2.0)]
    o = _overload.Overload(5, 3, 1.0, conns)
    order = []
    while o.make_room():
        order.append(next(c for c in conns if c.evicted and c not in order))
    assert [c for c in order] == [conns[1], conns[4], conns[3], conns[0]]
    assert not conns[2].evicted and o.evicted == 4


def test_make_room_skips_a_candidate_that_moved_on_since_the_scan():
    conns = [Conn(float(t)) for t in range(100)]
    o = _overload.Overload(100, 50, 1.0, conns)
    assert o.make_room() and conns[0].evicted
    conns[1].since = -1.0   # its head came in
    conns[2].since = 500.0  # a new wait: now the newest
    assert o.make_room() and conns[3].evicted and not conns[2].evicted


def test_make_room_closes_a_connection_still_at_its_edge_too():
    """A connection whose PROXY header or TLS handshake is not done yet (overload.at_edge) waits
    for its head like any: the longest waiting of both kinds goes first."""
    clients, edge = [Conn(3.0), Conn(-1.0)], [Conn(1.0), Conn(2.0), Conn(-1.0)]
    o = _overload.Overload(5, 3, 1.0, clients)
    o.at_edge.update(edge)
    assert o.make_room() and edge[0].evicted
    assert o.make_room() and edge[1].evicted
    assert o.make_room() and clients[0].evicted
    assert not o.make_room() and o.evicted == 3


def test_the_reserve_descriptor_is_freed_and_taken_again():
    r = _overload.Reserve()
    fd = r.fd
    assert fd is not None and r.release() and r.fd is None and not r.release()
    assert r.take() and r.fd is not None
    r.close()


def test_bad_settings_name_the_argument_and_the_value():
    backends = ["a=127.0.0.1:1"]
    with pytest.raises(ValueError, match="overload_connections.*0"):
        Proxy(backends, overload_connections=0)
    with pytest.raises(ValueError, match=r"overload_connections.*at most max_connections \(10\).*11"):
        Proxy(backends, max_connections=10, overload_connections=11)
    with pytest.raises(ValueError, match="overload_timeout.*-1"):
        Proxy(backends, overload_timeout=-1)
    with pytest.raises(ValueError, match="linger_bytes.*-5"):
        Proxy(backends, linger_bytes=-5)
    p = Proxy(backends, max_connections=100)
    assert (p.overload_connections, p.overload_timeout, p.linger_bytes) == (75, 2.0, 256 << 10)


@contextlib.asynccontextmanager
async def _proxy(port, **limits):
    """A started proxy in front of one backend (no health checks), closed on the way out."""
    proxy = Proxy([f"b=127.0.0.1:{port}"], listen=("127.0.0.1", 0), health_check="none", **limits)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()


async def _slow(address, n):
    """n connections that each send a partial head (and nothing more)."""
    conns = []
    for _ in range(n):
        reader, writer = await asyncio.open_connection(*address)
        writer.write(b"GET / HTTP/1.1\r\nHost: slow\r\nX-Slow: a")
        conns.append((reader, writer))
    return conns


async def _get(address):
    reader, writer = await asyncio.open_connection(*address)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


def test_at_the_limit_the_longest_waiting_slow_client_gets_408_and_a_get_is_served(backend_procs):
    procs = backend_procs(1)

    async def scenario():
        async with _proxy(procs[0].port, max_connections=20, overload_connections=10,
                          header_timeout=30.0, overload_timeout=30.0) as proxy:
            slow = await _slow(proxy.address, 20)
            await wait_until_async(lambda: len(proxy.clients) == 20, 5)
            full = proxy.overload.state
            answer = await _get(proxy.address)  # the 21st: the first slow client makes room
            first = await asyncio.wait_for(slow[0][0].read(), 5)
            others_open = sum(not r.at_eof() for r, _ in slow[1:])
            await wait_until_async(lambda: len(proxy.clients) == 19, 5)  # the GET's connection closed
            more = await _slow(proxy.address, 10)  # the first fills the room, each of the others closes one
            await wait_until_async(lambda: proxy.overload.evicted >= 10, 5)
            status = proxy.status()["overload"]
            for _, w in slow + more:
                w.close()
            return full, answer, first, others_open, status, proxy.stats.answered_by_proxy[408]
    full, answer, first, others_open, status, answered_408 = run_loop(scenario(), 60)
    assert full == "full"
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:100]
    assert first.startswith(b"HTTP/1.1 408 "), first[:100]
    assert others_open == 19  # only the longest waiting one made room
    assert status["evicted"] == 10 and status["state"] == "full" and status["entered_full"] == 1
    assert answered_408 == status["evicted"]


def test_a_new_connection_not_read_yet_is_spared_by_a_flood_at_the_limit(backend_procs, monkeypatch):
    """A connection whose first bytes have not been read yet is not closed for a newer one
    (FIRST_BYTES_GRACE): a flood of slow clients at the limit evicts one another, and a GET that
    connected before the flood but sent its head after it is answered 200, not 408."""
    from leastload.proxy import _client

    if not hasattr(_client, "FIRST_BYTES_GRACE"):
        pytest.skip("the compiled _client keeps FIRST_BYTES_GRACE in C: the grace is widened on the pure path")
    monkeypatch.setattr(_client, "FIRST_BYTES_GRACE", 30.0)  # no machine is that slow: the rule, not the timing
    procs = backend_procs(1)

    async def scenario():
        async with _proxy(procs[0].port, max_connections=5, overload_connections=3,
                          header_timeout=30.0, overload_timeout=30.0) as proxy:
            slow = await _slow(proxy.address, 5)
            await wait_until_async(lambda: len(proxy.clients) == 5, 5)
            reader, writer = await asyncio.open_connection(*proxy.address)  # silent for now
            await wait_until_async(lambda: proxy.overload.evicted == 1, 5)  # it made room for itself
            flood = await _slow(proxy.address, 8)
            await wait_until_async(lambda: proxy.overload.evicted == 9, 5)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            for _, w in slow + flood:
                w.close()
            return answer
    answer = run_loop(scenario(), 60)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:100]


async def _edge_get(address, at):
    """A GET through the edge: after a PROXY header, or over TLS (any certificate)."""
    if at == "proxy-header":
        reader, writer = await asyncio.open_connection(*address)
        writer.write(b"PROXY TCP4 203.0.113.7 192.0.2.1 41000 80\r\n")
    else:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        reader, writer = await asyncio.open_connection(*address, ssl=context, server_hostname="a.test")
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    try:
        return await reader.read()
    finally:
        writer.close()


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("at", ["proxy-header", "tls-handshake"])
def test_at_the_limit_a_connection_silent_at_its_edge_makes_room(backend_procs, tmp_path, at, loop):
    """Connections that never send their PROXY header (or their TLS ClientHello) fill
    max_connections: past the edge's grace, the one accepted first is shut down to admit a new
    connection, which is served at once, not after the 30 s header timeout. Counted as an
    eviction, not as a client that left early. On both loops: the handshake is each loop's own."""
    if at == "proxy-header":
        edge = {"accept_proxy": True}
    else:
        if OPENSSL is None:
            pytest.skip("the openssl command is not installed: no certificate for the TLS case")
        cert, key, _ = make_cert(tmp_path, "a", "a.test", ["DNS:a.test"])
        edge = {"tls_cert": [cert], "tls_key": [key]}
    procs = backend_procs(1)

    async def scenario():
        async with _proxy(procs[0].port, max_connections=4, overload_connections=2,
                          header_timeout=30.0, overload_timeout=30.0, **edge) as proxy:
            silent = [await asyncio.open_connection(*proxy.address) for _ in range(4)]
            await wait_until_async(lambda: len(proxy.overload.at_edge) == 4, 5)
            await asyncio.sleep(_overload.FIRST_BYTES_GRACE + 0.05)  # past the grace: they wait for their heads
            answer = await asyncio.wait_for(_edge_get(proxy.address, at), 10)
            first = await asyncio.wait_for(silent[0][0].read(), 5)  # shut down: EOF, no answer
            evicted, counters = proxy.overload.evicted, proxy.edge.counters.as_dict()
            still_at_edge = len(proxy.overload.at_edge)
            for _, w in silent:
                w.close()
            return answer, first, evicted, counters, still_at_edge
    answer, first, evicted, counters, still_at_edge = run_loop(scenario(), 60, loop)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:100]
    assert first == b""
    assert evicted == 1 and still_at_edge == 3  # only the longest waiting one made room
    refusals = ("proxy_refused", "proxy_timeouts", "tls_failures", "tls_timeouts", "closed_early")
    assert all(counters[k] == 0 for k in refusals), counters


def test_past_the_high_water_mark_the_header_timeout_shrinks(backend_procs):
    procs = backend_procs(1)

    async def scenario():
        async with _proxy(procs[0].port, max_connections=20, overload_connections=4,
                          header_timeout=60.0, overload_timeout=0.5) as proxy:
            slow = await _slow(proxy.address, 20)  # at the limit: 0.5 s instead of 60
            ended = await asyncio.wait_for(asyncio.gather(*(r.read() for r, _ in slow)), 20)
            for _, w in slow:
                w.close()
            return ended
    ended = run_loop(scenario(), 60)
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in ended), {a[:20] for a in ended}


RESERVE_SCRIPT = textwrap.dedent("""
    import asyncio, resource, sys
    from leastload.proxy import Proxy

    async def main():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))  # far under max_connections
        proxy = Proxy(["b=127.0.0.1:%d"], listen=("127.0.0.1", 0), health_check="none",
                      max_connections=10000, header_timeout=60.0)
        await proxy.start()
        print(proxy.address[1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        o = proxy.overload
        print(o.reserve_accepts, o.evicted, proxy.stats.answered_by_proxy[408], flush=True)
        await proxy.close()

    asyncio.run(main())
""")


def test_the_reserve_descriptor_admits_a_connection_when_descriptors_run_out(backend_procs):
    """A proxy process under a descriptor limit (64) far below its max_connections: accept() fails
    with EMFILE, the reserve admits the connection and a waiting one is closed in its stead, so
    that a GET after 100 slow clients is answered, not left in the backlog (200, or 503 when its
    backend connection finds no descriptor either: max_connections is set past what the limit allows)."""
    procs = backend_procs(1)
    proc = subprocess.Popen([sys.executable, "-c", RESERVE_SCRIPT % procs[0].port], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    slow = []
    try:
        port = int(proc.stdout.readline())
        for _ in range(100):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET / HTTP/1.1\r\nHost: slow\r\nX: a")
            slow.append(s)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = s.recv(100)
        proc.stdin.write("\n")
        proc.stdin.flush()
        counts = proc.stdout.readline()
        proc.wait(20)
    finally:
        for s in slow:
            s.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert answer.startswith((b"HTTP/1.1 200 ", b"HTTP/1.1 503 ")), (answer, proc.stderr.read()[-2000:])
    reserve_accepts, evicted, answered_408 = map(int, counts.split())
    assert reserve_accepts >= 40 and evicted >= 40 and answered_408 == evicted, counts
