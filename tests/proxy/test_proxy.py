"""End to end: `leastload.proxy` in front of real backend processes on 127.0.0.1.

The proxy runs in the test's event loop; the backends are `leastload
backends` processes (tests/servers.py); the client is httpx. Every load is a
fixed number of requests, and every wait is bounded.
"""

import asyncio
import collections
import json
import socket
import struct
import subprocess
import sys
import urllib.request

import httpx
import pytest

from leastload.proxy import Proxy
from leastload_testkit.backends import start_backend
from leastload_testkit.ports import free_port, free_ports
from leastload_testkit.proxy_process import ProxyProcess
from servers import run_loop

RUN_TIMEOUT = 90.0  # no test's event loop runs longer than this


def run(coro):
    """Runs the test's loop (bounded); any error the loop reports fails it."""
    return run_loop(coro, RUN_TIMEOUT)


@pytest.fixture
def backends(request):
    """start(delay, size) -> a backend process; all of them stopped after the test."""
    started = []

    def start(delay=0.0, size=1024, port=0):
        b = start_backend(delay, size, port)
        started.append(b)
        return b
    yield start
    for b in started:
        b.stop()


@pytest.fixture
def C(c_impl):
    """The C engine's VirtualServer (the suite's default chooser points at the reference)."""
    return c_impl.VirtualServer


def specs(names, procs, weights=None):
    weights = weights or [1] * len(names)
    return [f"{n}=127.0.0.1:{p.port}:{w}" for n, p, w in zip(names, procs, weights)]


async def load(url, n, concurrency, method="GET", content=None):
    """n requests from `concurrency` keep-alive connections; returns a Counter of statuses (or error names)."""
    outcome = collections.Counter()
    next_index = iter(range(n))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=20, limits=limits) as client:
        async def worker():
            for _ in next_index:
                try:
                    r = await client.request(method, url, content=content)
                    outcome[r.status_code] += 1
                except httpx.HTTPError as exc:
                    outcome[type(exc).__name__] += 1
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return outcome


def served(procs, before=None):
    now = [p.stats() for p in procs]
    if before is None:
        return now
    return [{k: a[k] - b[k] for k in a} for a, b in zip(now, before)]


def url_of(proxy, path="/"):
    host, port = proxy.address
    return f"http://{host}:{port}{path}"


def assert_nothing_active(proxy):
    for name in proxy.vserver.services:
        assert proxy.vserver.info(name)["active"] == 0, (name, proxy.vserver.info(name))


async def settle(proxy, timeout=5.0):
    """Waits (bounded) until no transaction is open: a proxy ends them when its client's answer ends."""
    deadline = asyncio.get_running_loop().time() + timeout
    while any(proxy.vserver.info(n)["active"] for n in proxy.vserver.services):
        if asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.01)


# ---- the methods, end to end ---------------------------------------------------------


def test_least_response_time_sends_fewer_requests_to_the_slow_backend(backends, impl):
    # 200 ms: a backend with no request in flight scores 0, so the slow one holds about one
    # request at a time whatever the method does; at 200 ms that is 5 requests a second,
    # a small share even when a busy machine (or a sanitizer build) slows everything else
    procs = [backends(0.002), backends(0.002), backends(0.2)]

    async def main():
        async with Proxy(specs(["fast1", "fast2", "slow"], procs), "LEASTRESPONSETIME", listen=("127.0.0.1", 0),
                         health_check="none", engine=impl.VirtualServer) as proxy:
            # 8 clients: with many more, the client's own CPU decides the pace, and a backend
            # with nothing in flight scores 0 whatever its TTFB, so the slow one keeps a slot or two
            outcome = await load(url_of(proxy), 1500, 8)
            await settle(proxy)
            assert_nothing_active(proxy)
            return outcome, proxy.vserver.info("slow"), proxy.vserver.info("fast1")
    outcome, slow, fast = run(main())
    assert outcome == {200: 1500}
    counts = [s["requests"] for s in served(procs)]
    assert sum(counts) == 1500
    assert counts[2] < 0.15 * 1500, counts  # an even split would give it a third
    # the TTFB averages the engine saw (on a busy machine the fast ones' grow; the slow one's stays above 180 ms)
    assert slow["ttfb"] >= 0.18 and slow["ttfb"] > fast["ttfb"], (slow, fast)


def test_least_bandwidth_evens_out_the_bytes(backends, C):
    procs = [backends(0.001, 1024), backends(0.001, 4096), backends(0.001, 16384)]

    async def main():
        async with Proxy(specs(["small", "medium", "large"], procs), "LEASTBANDWIDTH", listen=("127.0.0.1", 0),
                         health_check="none", engine=C) as proxy:
            outcome = await load(url_of(proxy), 1500, 8)
            await settle(proxy)
            assert_nothing_active(proxy)
            return outcome
    outcome = run(main())
    assert outcome == {200: 1500}
    stats = served(procs)
    counts = [s["requests"] for s in stats]
    body_bytes = [s["bytes"] for s in stats]
    assert counts[0] > 3 * counts[2], counts  # the small answers are asked for far more often ...
    assert max(body_bytes) < 2.5 * min(body_bytes), body_bytes  # ... and the bytes even out (16x if split evenly)


def test_round_robin_splits_by_weight(backends, impl):
    procs = [backends(), backends(), backends()]

    async def main():
        async with Proxy(specs(["w1", "w2", "w3"], procs, [1, 2, 3]), "ROUNDROBIN", listen=("127.0.0.1", 0),
                         health_check="none", engine=impl.VirtualServer) as proxy:
            outcome = await load(url_of(proxy), 1200, 4)
            await settle(proxy)
            assert_nothing_active(proxy)
            return outcome
    assert run(main()) == {200: 1200}
    counts = [s["requests"] for s in served(procs)]
    assert counts == [200, 400, 600], counts


def test_least_packets_is_fed_from_tcp_info(backends, C):
    procs = [backends(0.001, 1024), backends(0.001, 200000)]

    async def main():
        async with Proxy(specs(["small", "large"], procs), "LEASTPACKETS", listen=("127.0.0.1", 0),
                         health_check="none", engine=C) as proxy:
            outcome = await load(url_of(proxy), 400, 4)
            await settle(proxy)
            info = {n: proxy.vserver.info(n) for n in proxy.vserver.services}
            return outcome, info
    outcome, info = run(main())
    assert outcome == {200: 400}
    counts = [s["requests"] for s in served(procs)]
    # Every request is at least a data segment each way, so packets >= 2 per request;
    # the large answers take more segments, so the large backend is asked less.
    for (name, i), n in zip(info.items(), counts):
        assert i["load"] >= 2 * n, (name, i, n)
    assert counts[1] < counts[0], counts


@pytest.mark.parametrize("method", ["LEASTCONNECTION", "LEASTPACKETS"])
def test_tcp_info_is_read_per_response_only_where_the_method_picks_by_packets(backends, C, method):
    """LEASTPACKETS: each response's segments reach the engine with it. Another method: a backend
    connection's TCP_INFO is read after every 16th response and once more when it closes, so the
    engine's and the counters' totals are the same, one system call a request fewer."""
    b = backends(0.0, 1024)
    n = 40  # one client connection, so one backend connection: read after the 16th and the 32nd

    async def main():
        async with Proxy(specs(["b"], [b]), method, listen=("127.0.0.1", 0), health_check="none",
                         engine=C) as proxy:
            assert await load(url_of(proxy), n, 1) == {200: n}
            await settle(proxy)
            open_ = (proxy.vserver.info("b")["packets"], proxy.stats.of("b").packets)
            proxy.pools["b"].close()  # the idle backend connection closes: its last segments are read
            assert await wait_for_async(lambda: proxy.budget.open == 0, 10)
            return open_, (proxy.vserver.info("b")["packets"], proxy.stats.of("b").packets)
    (engine_open, counted_open), (engine_closed, counted_closed) = run(main())
    assert engine_open == counted_open and engine_closed == counted_closed  # both told the same
    assert engine_closed >= 2 * n  # at least a data segment each way per request
    if method == "LEASTPACKETS":
        assert engine_open == engine_closed  # nothing was left to read at the close
    else:
        assert 2 * 32 <= engine_open < engine_closed  # the last 8 responses' segments came at the close


# ---- failures ----------------------------------------------------------------------


def test_a_killed_backend_loses_no_get_and_gets_nothing_once_out(backends, C, caplog):
    procs = [backends(0.002), backends(0.002), backends(0.002)]
    caplog.set_level("WARNING", logger="leastload.proxy")

    async def main():
        async with Proxy(specs(["a", "b", "c"], procs), "LEASTCONNECTION", listen=("127.0.0.1", 0),
                         health_check="tcp", health_interval=0.2, health_fall=2, engine=C) as proxy:
            out_at = {}

            async def killer():
                while proxy.stats.backends["c"].requests < 300:
                    await asyncio.sleep(0.005)
                procs[2].kill()
                while not out_at:
                    if proxy.vserver.ejection("c") is not None or proxy.vserver.state("c") == "DOWN":
                        out_at["requests"] = proxy.stats.backends["c"].requests
                    await asyncio.sleep(0.005)
            kill_task = asyncio.ensure_future(killer())
            outcome = await load(url_of(proxy), 1500, 16)  # c killed at its 300th: ~600 GETs in, ~900 after
            await asyncio.wait_for(kill_task, 10)
            await settle(proxy)
            assert_nothing_active(proxy)
            return outcome, out_at, proxy.stats.backends["c"].as_dict(), proxy.vserver.outlier_events
    outcome, out_at, c_stats, events = run(main())
    assert sum(outcome.values()) == 1500
    # GETs cut off by the kill before any answer byte are retried elsewhere; only one whose
    # answer was already on its way could be lost
    assert outcome[200] >= 0.99 * 1500, outcome
    assert c_stats["requests"] == out_at["requests"], (c_stats, out_at)  # nothing after it was out
    assert c_stats["failures"] >= 1, c_stats
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("backend c: ejected") or m.startswith("backend c is DOWN") for m in messages), messages


def test_refused_connections_are_retried_for_any_method_reset_ones_only_for_idempotent(backends, C):
    good = backends()

    async def reset_after_reading(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close -> RST
        writer.transport.abort()

    async def main():
        resetter = await asyncio.start_server(reset_after_reading, "127.0.0.1", 0)
        reset_port = resetter.sockets[0].getsockname()[1]
        refused_port = free_port()
        try:
            # ROUNDROBIN with "refused" and "reset" first in bind order: every request tries them first.
            async with Proxy([f"refused=127.0.0.1:{refused_port}", f"good=127.0.0.1:{good.port}"], "ROUNDROBIN",
                             listen=("127.0.0.1", 0), health_check="none", outlier_failures=0, engine=C) as proxy:
                posts = await load(url_of(proxy), 20, 1, method="POST", content=b"hello")
                refused_failures = proxy.vserver.info("refused")["failures"]
            async with Proxy([f"reset=127.0.0.1:{reset_port}", f"good=127.0.0.1:{good.port}"], "ROUNDROBIN",
                             listen=("127.0.0.1", 0), health_check="none", outlier_failures=0, engine=C) as proxy:
                gets = await load(url_of(proxy), 20, 1)
                reset_posts = await load(url_of(proxy), 20, 1, method="POST", content=b"hello")
                await settle(proxy)
                assert_nothing_active(proxy)
                reset_failures = proxy.vserver.info("reset")["failures"]
        finally:
            resetter.close()
        return posts, refused_failures, gets, reset_posts, reset_failures
    posts, refused_failures, gets, reset_posts, reset_failures = run(main())
    assert posts == {200: 20}               # nothing was sent: safe to send elsewhere
    assert refused_failures == 20           # round robin comes back to it first for every request
    assert gets == {200: 20}                # reset before any answer, GET: retried
    # POST may have had an effect: never sent twice. Without a retry the round-robin
    # cursor moves once per request, so every other POST meets the resetting backend.
    assert reset_posts == {502: 10, 200: 10}
    assert reset_failures == 30             # 20 GETs retried + 10 POSTs answered 502


def test_a_backend_that_does_not_answer_in_time_gives_504_and_a_failure(backends, C):
    slow = backends(2.0)

    async def main():
        async with Proxy([f"slow=127.0.0.1:{slow.port}"], listen=("127.0.0.1", 0), timeout=0.3,
                         health_check="none", engine=C) as proxy:
            outcome = await load(url_of(proxy), 3, 1)
            await settle(proxy)
            assert_nothing_active(proxy)
            return outcome, proxy.vserver.info("slow")
    outcome, info = run(main())
    assert outcome == {504: 3}
    assert info["failures"] == 3


def test_no_backend_left_gives_503(C):
    async def main():
        async with Proxy(["only=127.0.0.1:9"], listen=("127.0.0.1", 0), health_check="none", engine=C) as proxy:
            proxy.vserver.set_state("only", "DOWN")
            return await load(url_of(proxy), 2, 1)
    assert run(main()) == {503: 2}


def test_ttfb_is_timed_finer_than_uvloops_whole_milliseconds(backends, C):
    # uvloop's loop.time() is in whole milliseconds: a TTFB read from it is a multiple of
    # 1 ms, and a 2 ms backend's would read 1, 2 or 3 ms. The proxy's own clock is not.
    uvloop = pytest.importorskip("uvloop", reason="uvloop is the proxy's loop where it is installed")
    procs = [backends(0.002)]

    async def main():
        async with Proxy(specs(["a"], procs), "LEASTRESPONSETIME", listen=("127.0.0.1", 0),
                         health_check="none", engine=C) as proxy:
            counters, sums = proxy.stats.backends["a"], []
            async with httpx.AsyncClient(timeout=20) as client:
                for _ in range(10):
                    assert (await client.get(url_of(proxy))).status_code == 200
                    sums.append(counters.ttfb_sum)  # added before the answer's last byte went out
            return [b - a for a, b in zip([0.0] + sums, sums)]

    loop = uvloop.new_event_loop()
    try:
        ttfbs = loop.run_until_complete(asyncio.wait_for(main(), RUN_TIMEOUT))
    finally:
        loop.close()
    # (not >= 2 ms: the backend's own loop times its 2 ms wait from a clock that may lag)
    assert len(ttfbs) == 10 and all(0 < t < RUN_TIMEOUT for t in ttfbs), ttfbs
    # ten whole-millisecond readings would each be within float noise of a multiple of 1 ms
    off_the_ms = [abs(t * 1000 - round(t * 1000)) > 1e-4 for t in ttfbs]
    assert any(off_the_ms), ttfbs


def test_a_client_that_leaves_mid_response_ends_its_transaction(backends, C):
    big = backends(0.0, 1024)

    async def main():
        async with Proxy([f"big=127.0.0.1:{big.port}"], listen=("127.0.0.1", 0), health_check="none", engine=C) as proxy:
            host, port = proxy.address
            for _ in range(3):
                reader, writer = await asyncio.open_connection(host, port)
                writer.write(b"GET /?size=200000000 HTTP/1.1\r\nHost: t\r\n\r\n")
                await reader.readexactly(100000)  # part of the answer, then away
                assert proxy.vserver.info("big")["active"] == 1
                writer.transport.abort()
                await settle(proxy)
                assert_nothing_active(proxy)
            return proxy.vserver.info("big")
    info = run(main())
    assert info["failures"] == 0  # the client left: not the backend's fault


def test_a_client_that_leaves_while_the_backend_connection_opens(backends, C):
    b = backends(0.0)

    async def main():
        async with Proxy([f"b=127.0.0.1:{b.port}"], listen=("127.0.0.1", 0), health_check="none",
                         engine=C) as proxy:
            pool = proxy.pools["b"]
            real_connect = pool.connect

            async def slow_connect(timeout):  # a backend that takes its time to accept
                await asyncio.sleep(0.2)
                return await real_connect(timeout)
            pool.connect = slow_connect
            host, port = proxy.address
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            assert await wait_for_async(lambda: proxy.vserver.info("b")["active"] == 1, 10)
            writer.transport.abort()
            await asyncio.sleep(0.4)
            pool.connect = real_connect
            after = await load(url_of(proxy), 5, 1)  # the connection it made is reused, or closed
            await settle(proxy)
            assert_nothing_active(proxy)
            return proxy.vserver.info("b"), after
    info, after = run(main())
    assert after == {200: 5}
    assert info["failures"] == 0


# ---- slow start and health monitors -------------------------------------------------------


RAMP_STEP = 5  # small: the ramp must not reach the fair share of a slow (sanitizer, busy) run


def test_a_backend_that_comes_up_mid_run_ramps_under_slow_start(backends, C, caplog):
    a, b = backends(0.002), backends(0.002)
    late_port = free_port()
    caplog.set_level("WARNING", logger="leastload.proxy")

    async def main():
        # Passive ejection off: the refusals before "late" is marked DOWN must not eject it.
        async with Proxy(specs(["a", "b"], [a, b]) + [f"late=127.0.0.1:{late_port}"], "LEASTCONNECTION",
                         listen=("127.0.0.1", 0), health_check="http", health_path="/__health",
                         health_interval=0.05, health_fall=2, health_rise=1, outlier_failures=0,
                         new_service_request=RAMP_STEP, new_service_request_increment_interval=1,
                         engine=C) as proxy:
            vs = proxy.vserver
            assert await wait_for_async(lambda: vs.state("late") == "DOWN", 10)
            outcome = collections.Counter()
            done = asyncio.Event()

            async def traffic():  # rounds of 250 until told to stop (at most 40 rounds)
                for _ in range(40):
                    outcome.update(await load(url_of(proxy), 250, 8))
                    if done.is_set():
                        return
            loader = asyncio.ensure_future(traffic())
            # traffic flows for more than a whole second before "late" comes back, so the
            # ramp's boundaries judge real traffic: an idle last second would end the ramp
            # at its first boundary ("the cap reached the fair share"), as the vendor's does
            await asyncio.sleep(1.5)
            late = backends(0.002, port=late_port)
            assert await wait_for_async(lambda: vs.state("late") == "UP", 10)
            ramp = vs.slow_start("late")
            assert ramp is not None and ramp["cap"] == 0  # a new ramp: nothing in its first interval
            at_up = proxy.stats.backends["late"].requests
            samples = []
            while vs.now() < ramp["since"] + 3.5 and not loader.done():
                samples.append((vs.now(), proxy.stats.backends["late"].requests - at_up))
                await asyncio.sleep(0.02)
            done.set()
            await loader
            await settle(proxy)
            assert_nothing_active(proxy)
            return outcome, ramp, samples, vs.now(), late.stats(), vs.slow_start_exits
    outcome, ramp, samples, end, late_stats, exits = run(main())
    assert set(outcome) == {200} and sum(outcome.values()) >= 500, outcome  # refused ones were retried
    since = ramp["since"]
    assert all(count == 0 for t, count in samples if t < since + 1), samples[:5]
    # Still ramping when the load stopped, unless the machine was so busy that the cap reached a
    # third of the proxy's requests in a second (the fair share): then the ramp rightly ended there
    late_exits = [e for e in exits if e[1] == "late"]
    assert all(reason == "the cap reached the fair share" for _, _, reason in late_exits), exits
    ramp_end = late_exits[0][0] if late_exits else end
    assert late_stats["requests"] > 0  # it ramped up
    # caps 0, 5, 10, ... per whole clock second: at most 5 * k(k+1)/2 requests in k + 1 of them
    for t, count in samples:
        if t <= ramp_end:
            k = int(t - since) + 1
            assert count <= RAMP_STEP * k * (k + 1) // 2 + RAMP_STEP, (t - since, count, samples)
    if not late_exits:
        k = int(end - since) + 1
        assert late_stats["requests"] <= RAMP_STEP * k * (k + 1) // 2 + RAMP_STEP, (late_stats, k)
    assert late_stats["requests"] < sum(outcome.values()) / 3
    messages = [r.getMessage() for r in caplog.records]
    assert any("late is DOWN" in m for m in messages), messages
    assert any("late is UP" in m for m in messages), messages


async def wait_for_async(predicate, timeout):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def test_backends_added_and_drained_at_run_time(backends, C):
    a, b = backends(0.001), backends(0.001)

    async def main():
        async with Proxy([f"a=127.0.0.1:{a.port}"], listen=("127.0.0.1", 0), health_check="none",
                         engine=C) as proxy:
            first = await load(url_of(proxy), 100, 4)
            proxy.add_backend(f"b=127.0.0.1:{b.port}")
            second = await load(url_of(proxy), 200, 4)
            with pytest.raises(ValueError, match="already bound"):
                proxy.add_backend(f"b=127.0.0.1:{b.port}")
            proxy.drain_backend("a")
            await settle(proxy)
            still_bound = "a" in proxy.vserver
            third = await load(url_of(proxy), 100, 4)
            return first, second, third, still_bound
    first, second, third, still_bound = run(main())
    assert (first, second, third) == ({200: 100}, {200: 200}, {200: 100})
    assert not still_bound  # drained: unbound once its last request ended
    a_count, b_count = a.stats()["requests"], b.stats()["requests"]
    assert a_count + b_count == 400
    assert a_count >= 100 + 50 and b_count >= 100 + 50, (a_count, b_count)  # b took a share after it joined


# ---- HTTP details -----------------------------------------------------------------------


def test_pipelined_requests_head_and_keep_alive(backends, C):
    b = backends(0.0, 10)

    async def main():
        async with Proxy([f"b=127.0.0.1:{b.port}"], listen=("127.0.0.1", 0), health_check="none", engine=C) as proxy:
            host, port = proxy.address
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"GET /?size=3 HTTP/1.1\r\nHost: t\r\n\r\n"
                         b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n"
                         b"GET /?size=5 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            data = await asyncio.wait_for(reader.read(), 10)  # until the proxy closes, after the third
            writer.close()
            await settle(proxy)
            assert_nothing_active(proxy)
            return data
    data = run(main())
    answers = data.split(b"HTTP/1.1 ")[1:]
    assert len(answers) == 3, data
    assert answers[0].endswith(b"\r\n\r\nxxx")
    assert b"Content-Length: 10" in answers[1] and answers[1].endswith(b"\r\n\r\n")  # HEAD: no body
    assert answers[2].endswith(b"\r\n\r\nxxxxx")


def test_malformed_and_connect_requests_are_refused(C):
    async def main():
        async with Proxy(["b=127.0.0.1:9"], listen=("127.0.0.1", 0), health_check="none", engine=C) as proxy:
            host, port = proxy.address
            answers = []
            for raw in (b"NOT HTTP AT ALL\r\n\r\n",
                        b"CONNECT /x HTTP/1.1\r\nHost: t\r\n\r\n"):
                reader, writer = await asyncio.open_connection(host, port)
                writer.write(raw)
                answers.append(await asyncio.wait_for(reader.read(), 10))
                writer.close()
            return answers
    malformed, connect = run(main())
    assert malformed.startswith(b"HTTP/1.1 400 ")
    assert connect.startswith(b"HTTP/1.1 501 ")


def test_bad_settings_name_the_argument():
    with pytest.raises(ValueError, match="backend must be NAME=HOST:PORT"):
        Proxy(["nonsense"])
    with pytest.raises(ValueError, match="retries"):
        Proxy(["a=127.0.0.1:1"], retries=-1)
    with pytest.raises(ValueError, match="health_check"):
        Proxy(["a=127.0.0.1:1"], health_check="ping")
    with pytest.raises(ValueError, match="unique"):
        Proxy(["a=127.0.0.1:1", "a=127.0.0.1:2"])


# ---- the command line: admin port, workers ------------------------------------------------


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def test_cli_with_two_workers_and_their_admin_ports(backends):
    procs = [backends(0.001), backends(0.001)]
    admin = free_ports(3)  # the supervisor's admin port (all workers), then worker 0's and worker 1's
    proxy = ProxyProcess(["--listen", "127.0.0.1:0", "--workers", "2", "--health-check", "none",
                          "--admin", f"127.0.0.1:{admin}", *(f"--backend={s}" for s in specs(["a", "b"], procs))])
    port = proxy.port
    try:
        async def clients():
            # fresh connections, so the kernel spreads them over the workers
            outcome = collections.Counter()
            for _ in range(40):
                outcome.update(await load(f"http://127.0.0.1:{port}/", 5, 1))
            return outcome
        outcome = run(clients())
        statuses = [get_json(f"http://127.0.0.1:{admin + 1 + i}/leastload/status") for i in range(2)]
        combined = get_json(f"http://127.0.0.1:{admin}/leastload/status")
        with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=10) as r:
            metrics = r.read().decode()
    finally:
        code, err = proxy.stop(), proxy.err()
    assert outcome == {200: 200}
    per_worker = [sum(b.get("requests", 0) for b in s["backends"].values()) for s in statuses]
    assert sum(per_worker) == 200, per_worker
    # the supervisor's admin port: every worker's status, in worker order
    assert [{n: b["requests"] for n, b in w["backends"].items()} for w in combined["workers"]] == \
        [{n: b["requests"] for n, b in w["backends"].items()} for w in statuses]
    # one scrape of the supervisor's admin port sums both workers
    summed = {line.split('service="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
              for line in metrics.splitlines() if line.startswith("leastload_service_requests_total{")}
    assert summed == {name: float(sum(s["backends"][name]["requests"] for s in statuses)) for name in ("a", "b")}
    assert sum(summed.values()) == 200
    assert min(per_worker) > 0, per_worker  # both workers took connections
    for s in statuses:
        for b in s["backends"].values():  # the engine's window, fed with the bytes (and TCP_INFO's
            # segments, read after every 16th response with this method: test_tcp_info_is_read_...)
            assert b["engine"]["bytes"] > 1024 * b["requests"] > 0
        assert s["vserver"]["method"] == "LEASTCONNECTION"
        assert [svc["name"] for svc in s["vserver"]["services"]] == ["a", "b"]
        assert all(svc["active"] == 0 for svc in s["vserver"]["services"])
    assert code == 0, err
    assert "Traceback" not in err


def test_cli_rejects_a_bad_backend_without_a_traceback():
    result = subprocess.run([sys.executable, "-m", "leastload", "proxy", "--backend", "x=nowhere"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "NAME=HOST:PORT" in result.stderr and "'x=nowhere'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_client_that_shuts_its_side_after_pipelined_requests_gets_every_answer(backends, C):
    # `printf '...' | nc -N`: the requests, then the client's FIN; the answers must still come
    proc = backends(0.02, 100)

    async def main():
        async with Proxy(specs(["a"], [proc]), listen=("127.0.0.1", 0), health_check="none", engine=C) as proxy:
            host, port = proxy.address

            def client():
                with socket.create_connection((host, port), timeout=10) as s:
                    s.sendall(b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
                    s.shutdown(socket.SHUT_WR)
                    data = b""
                    while True:
                        piece = s.recv(65536)
                        if not piece:
                            return data  # the proxy closed after the last answer
                        data += piece
            data = await asyncio.get_running_loop().run_in_executor(None, client)
            await settle(proxy)
            assert_nothing_active(proxy)
            return data
    data = run(main())
    assert data.count(b"HTTP/1.1 200 OK\r\n") == 2, data[:300]
    assert data.endswith(b"x" * 100)
