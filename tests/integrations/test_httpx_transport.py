"""leastload.integrations.httpx.Transport end to end: real backends on 127.0.0.1, httpx clients.

Backends are toy servers (tests/servers.py) in child processes, started once
per module and read through their own counters (`.stats()`), so a test
measures what the backends served, not what the transport believes it sent.
Two tiny in-process servers stand in for misbehaving backends: one echoes the
request head, one resets the connection after reading a request.

Bounds on shares are loose on purpose (a busy machine, CI): each is far from
what the method under test would give if it were ignored.
"""
import asyncio
import gc
import math
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

httpx = pytest.importorskip("httpx")

from leastload.net import tcpinfo  # noqa: E402
from leastload.integrations.httpx import NoBackendAvailable, Transport  # noqa: E402
from leastload_testkit.backends import start_backend
from leastload_testkit.ports import free_port
from servers import RawServer  # noqa: E402

CONCURRENCY = 16


# ==== backends ==============================================================================

@pytest.fixture(scope="module")
def backends():
    """backends(delay, size, key) -> a running backend, one per (delay, size, key) for the module."""
    started = {}

    def get(delay=0.002, size=1024, key=0):
        if (delay, size, key) not in started:
            started[(delay, size, key)] = start_backend(delay, size)
        return started[(delay, size, key)]

    yield get
    for b in started.values():
        b.stop()


@pytest.fixture(scope="module")
def echo_server():
    server = RawServer("echo")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def reset_server():
    server = RawServer("reset")
    yield server
    server.stop()


# ==== helpers ===============================================================================

def served(*bs):
    """(requests, bytes) served so far by each backend."""
    return [(s["requests"], s["bytes"]) for s in (b.stats() for b in bs)]


def delta(before, after):
    return [(a[0] - b[0], a[1] - b[1]) for b, a in zip(before, after)]


def assert_idle(transport):
    """No transaction left open on any backend."""
    vs = transport.vserver
    assert {name: vs.info(name)["active"] for name in vs.services} == {name: 0 for name in vs.services}


async def load(client, total, concurrency=CONCURRENCY, path="/", until=None, on_result=None):
    """`total` GETs from `concurrency` tasks (or until `until()` is true); returns
    [(start time, backend name or None, status or exception)]."""
    results = []
    issued = 0

    async def worker():
        nonlocal issued
        while (issued < total) if until is None else not until():
            issued += 1
            started = time.monotonic()
            try:
                r = await client.get(path)
                outcome = (started, r.extensions.get("leastload_backend"), r.status_code)
            except httpx.HTTPError as exc:
                outcome = (started, None, exc)
            results.append(outcome)
            if on_result is not None:
                on_result(outcome)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


def client_for(transport, base_url="http://app"):
    # trust_env=False: a proxy set in the environment would take the requests around the transport
    return httpx.Client(transport=transport, base_url=base_url, trust_env=False)


def async_client(transport, base_url="http://app"):
    return httpx.AsyncClient(transport=transport, base_url=base_url, trust_env=False)


def names_specs(*bs, weights=None):
    weights = weights or [1] * len(bs)
    return [f"b{k}={b.address}:{w}" for k, (b, w) in enumerate(zip(bs, weights))]


# ==== construction and bad input ================================================================

def test_bad_backend_spec_is_named(impl):
    with pytest.raises(ValueError, match="nonsense"):
        Transport(["a=127.0.0.1:8080", "nonsense"], engine=impl.VirtualServer)
    with pytest.raises(ValueError, match="weight"):
        Transport(["a=127.0.0.1:8080:101"], engine=impl.VirtualServer)
    with pytest.raises(ValueError, match="at least one"):
        Transport([], engine=impl.VirtualServer)
    with pytest.raises(ValueError, match="at least one"):
        Transport({}, engine=impl.VirtualServer)
    with pytest.raises(ValueError, match="retries"):
        Transport(["a=127.0.0.1:8080"], retries=-1, engine=impl.VirtualServer)
    t = Transport({"a": "127.0.0.1:8080:3"}, method="ROUNDROBIN", engine=impl.VirtualServer)
    assert list(t.backends) == ["a"] and t.backends["a"].weight == 3
    with pytest.raises(ValueError, match="no-port"):
        t.add_backend("b=no-port")
    with pytest.raises(ValueError, match="already bound"):
        t.add_backend("a=127.0.0.1:9000")
    assert t.vserver.services == ("a",) and t.backends["a"].port == 8080


def test_import_without_httpx_names_the_extra():
    code = "import sys; sys.modules['httpx'] = None; import leastload.integrations.httpx"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ))
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr and "pip install leastload[httpx]" in proc.stderr


def test_request_is_rewritten_to_the_backend(impl, echo_server):
    """Path, query and headers reach the backend unchanged; the Host header is the caller's."""
    t = Transport([f"e={echo_server.address}"], engine=impl.VirtualServer)
    with client_for(t, base_url="") as client:
        r = client.get("https://api.example:8443/v1/items?x=1&y=two", headers={"X-Trace": "abc"})
    head = r.content.decode()
    assert head.startswith("GET /v1/items?x=1&y=two HTTP/1.1\r\n")
    lines = head.split("\r\n")
    assert "Host: api.example:8443" in lines and "X-Trace: abc" in lines
    assert r.url == "https://api.example:8443/v1/items?x=1&y=two"  # the caller's view is unchanged
    assert r.extensions["leastload_backend"] == "e"
    info = t.vserver.info("e")
    assert info["bytes"] == len(r.content) and info["active"] == 0 and info["failures"] == 0


# ==== methods under load ==========================================================================

def test_least_response_time_avoids_the_slow_backend(impl, backends):
    # 200 ms: a backend with no request in flight scores 0, so the slow one holds about
    # one request at a time whatever the method does; at 200 ms that is 5 requests a
    # second, a small share even when a busy machine (or a sanitizer build) slows the client
    fast1, fast2, slow = backends(0.002), backends(0.002, key=1), backends(0.2)
    t = Transport(names_specs(fast1, fast2, slow), method="LEASTRESPONSETIME", engine=impl.VirtualServer)
    before = served(fast1, fast2, slow)

    async def main():
        async with async_client(t) as client:
            # 8 tasks, not 16: a backend with no request in flight scores 0 and is picked
            # at once, so the slow one always holds one or two of the slots; with 16 slots
            # on a CPU-bound client that alone would be 10-20 % of the requests.
            return await load(client, 900, concurrency=8)

    results = asyncio.run(main())
    counts = [n for n, _ in delta(before, served(fast1, fast2, slow))]
    assert all(status == 200 for _, _, status in results)
    assert sum(counts) == 900
    assert counts[2] < 0.15 * 900, counts  # an even split would give it a third
    assert t.vserver.info("b2")["ttfb"] > t.vserver.info("b0")["ttfb"]
    assert_idle(t)


def test_least_bandwidth_evens_out_bytes(impl, backends):
    small, medium, large = backends(0.002, 1024), backends(0.002, 4096), backends(0.002, 16384)
    t = Transport(names_specs(small, medium, large), method="LEASTBANDWIDTH", engine=impl.VirtualServer)
    # the bytes compared below are the window's: its longest (60 s), so that a busy machine
    # taking more than the default 14 s for the 900 requests does not let the first ones out
    t.vserver.set(window_seconds=60)
    before = served(small, medium, large)

    async def main():
        async with async_client(t) as client:
            return await load(client, 900)

    results = asyncio.run(main())
    got = delta(before, served(small, medium, large))
    counts, sent = [n for n, _ in got], [b for _, b in got]
    assert all(status == 200 for _, _, status in results)
    assert counts[0] > 4 * counts[2], counts  # bytes even out: about 16x as many small answers
    assert max(sent) < 3 * min(sent), sent      # an even split of requests would give 16x
    # the engine was charged what was read: the body bytes of each backend
    assert [t.vserver.info(n)["bytes"] for n in ("b0", "b1", "b2")] == sent
    assert_idle(t)


def test_weighted_round_robin_from_threads(impl, backends):
    """Sync client, 4 threads: weights 1/2/3 split 600 requests 100/200/300."""
    bs = [backends(0.0, 64, key=k) for k in range(3)]
    t = Transport(names_specs(*bs, weights=[1, 2, 3]), method="ROUNDROBIN", engine=impl.VirtualServer)
    before = served(*bs)
    with client_for(t) as client:
        def send(_):
            return client.get("/").status_code
        with ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(send, range(600)))
    counts = [n for n, _ in delta(before, served(*bs))]
    assert statuses == [200] * 600
    for got, want in zip(counts, (100, 200, 300)):
        assert abs(got - want) <= 12, counts  # within 2 % of all requests
    assert_idle(t)


# ==== slow start and draining =======================================================================

def test_slow_start_caps_a_backend_added_mid_run(c_impl, backends):
    """A 4th backend joins with 10 requests/s more per 1 s interval: 0 in its first
    second, at most 10 in the next, then 20, then 30 (the others get about 100/s each).
    C engine only: four seconds of real time, the same facade runs the policy for
    both engines (tests/engine/test_slow_start.py holds them equal on a virtual clock)."""
    bs = [backends(0.04, 128, key=k) for k in range(4)]
    t = Transport(names_specs(*bs[:3]), engine=c_impl.VirtualServer,
                  new_service_request=10, new_service_request_increment_interval=1)
    vs = t.vserver
    state = {"since": None, "done": False}

    async def control():
        await asyncio.sleep(1.0)
        await asyncio.sleep(1.0 - time.monotonic() % 1.0 + 0.01)  # just after a whole second
        t.add_backend(f"b3={bs[3].address}")
        ramp = vs.slow_start("b3")
        state["since"] = ramp["since"]
        state["first_cap"] = vs.info("b3")["cap"]
        state["show"] = str(vs.show())
        await asyncio.sleep(3.9)
        state["done"] = True

    async def main():
        async with async_client(t) as client:
            results, _ = await asyncio.gather(load(client, 0, until=lambda: state["done"]), control())
            return results

    results = asyncio.run(main())
    assert all(status == 200 for _, _, status in results)
    assert state["first_cap"] == 0 and "slow start" in state["show"]
    since = state["since"]
    exits = [when for when, name, _ in vs.slow_start_exits if name == "b3"]
    capped_until = min(exits, default=math.inf)
    per_second = [0] * 4
    for started, name, _ in results:
        k = math.floor(started) - math.floor(since)
        if name == "b3" and 0 <= k < 4:
            per_second[k] += 1
    assert all(name != "b3" for started, name, _ in results if started < since)
    for k, cap in enumerate((0, 10, 20, 30)):
        if math.floor(since) + k + 1 <= capped_until:  # the whole second was under the ramp
            assert per_second[k] <= cap + 2, (k, per_second)
    assert per_second[2] + per_second[3] > per_second[0] + per_second[1], per_second  # it grows
    assert vs.info("b3")["selected"] > 0
    assert_idle(t)


def test_drain_backend_finishes_in_flight_then_unbinds(impl, backends):
    a, b = backends(0.0, 64, key=10), backends(0.0, 64, key=11)
    t = Transport(names_specs(a, b), method="ROUNDROBIN", engine=impl.VirtualServer)
    vs = t.vserver

    async def main():
        async with async_client(t) as client:
            slow = asyncio.ensure_future(client.get("/", params={"delay": 0.5}))  # b0, first in order
            while vs.info("b0")["active"] == 0:
                await asyncio.sleep(0.005)
            t.drain_backend("b0")
            assert "b0" in vs and vs.info("b0")["draining"]
            during = [(await client.get("/")).extensions["leastload_backend"] for _ in range(10)]
            return (await slow), during

    slow, during = asyncio.run(main())
    assert slow.status_code == 200 and slow.extensions["leastload_backend"] == "b0"
    assert during == ["b1"] * 10
    assert "b0" not in vs and list(t.backends) == ["b1"]
    t.add_backend(f"b0={a.address}")  # back, at the end of bind order
    assert vs.services == ("b1", "b0") and t.backends["b0"].port == a.port
    assert_idle(t)


# ==== failures ======================================================================================

def test_killed_backend_is_ejected_and_requests_still_succeed(c_impl):
    """SIGKILL one of three backends mid-run: GETs are retried elsewhere, the dead one is
    ejected after 5 failures in a row and then gets no more picks.
    C engine only: it needs backends of its own (one is killed). The ejection lasts the
    longest there is (300 s), so that "no picks once ejected" does not depend on how fast
    a loaded machine gets through the GETs after it."""
    bs = [start_backend(0.005, 1024) for _ in range(3)]
    try:
        t = Transport(names_specs(*bs), engine=c_impl.VirtualServer, outlier_ejection_time=300)
        vs = t.vserver
        seen = {"n": 0, "selected_at_ejection": None}

        def on_result(_):
            seen["n"] += 1
            if seen["n"] == 300:
                bs[2].kill()
            if seen["selected_at_ejection"] is None and vs.ejection("b2") is not None:
                seen["selected_at_ejection"] = vs.info("b2")["selected"]

        async def main():
            async with async_client(t) as client:
                return await load(client, 900, on_result=on_result)  # 300 before the kill, 600 after

        results = asyncio.run(main())
        ok = sum(1 for _, _, status in results if status == 200)
        assert ok >= 0.99 * len(results), [r for r in results if r[2] != 200][:5]
        assert seen["selected_at_ejection"] is not None and vs.info("b2")["ejected"]
        assert vs.info("b2")["failures"] >= 5
        assert vs.info("b2")["selected"] == seen["selected_at_ejection"]  # no picks once ejected
        assert any(what == "ejected" and name == "b2" for _, name, what in vs.outlier_events)
        assert_idle(t)
    finally:
        for b in bs:
            b.stop()


def test_retry_rules(impl, backends, reset_server):
    good = backends(0.0, 64, key=20)
    dead_port = free_port()

    def transport(*specs):
        return Transport(list(specs), method="ROUNDROBIN", engine=impl.VirtualServer)

    # a reset before the response: a GET goes to the next backend
    t = transport(f"r={reset_server.address}", f"g={good.address}")
    with client_for(t, base_url="") as client:
        r = client.get("http://app/")
    assert r.status_code == 200 and r.extensions["leastload_backend"] == "g"
    assert t.vserver.info("r")["failures"] == 1 and t.vserver.info("g")["failures"] == 0
    assert_idle(t)

    # ... a POST is not sent again (the backend may have acted on it)
    t = transport(f"r={reset_server.address}", f"g={good.address}")
    before = served(good)
    with client_for(t, base_url="") as client, pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        client.post("http://app/", content=b"x" * 100)
    assert delta(before, served(good))[0][0] == 0 and t.vserver.info("r")["failures"] == 1
    assert_idle(t)

    # ... nor is a GET whose body is a one-shot stream
    t = transport(f"r={reset_server.address}", f"g={good.address}")
    with client_for(t, base_url="") as client, pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        client.request("GET", "http://app/", content=iter([b"one", b"shot"]))
    assert_idle(t)

    # a refused connection sent nothing: any method goes to the next backend
    t = transport(f"d=127.0.0.1:{dead_port}", f"g={good.address}")
    with client_for(t, base_url="") as client:
        r = client.post("http://app/", content=iter([b"streamed ", b"body"]))
    assert r.status_code == 200 and t.vserver.info("d")["failures"] == 1
    assert t.vserver.info("g")["bytes"] == len(b"streamed body") + 64  # both directions
    assert_idle(t)

    # every backend refused: the last error, after one attempt per backend
    t = transport(f"d1=127.0.0.1:{dead_port}", f"d2=127.0.0.1:{free_port()}", f"d3=127.0.0.1:{free_port()}")
    t.retries = 1
    with client_for(t, base_url="") as client, pytest.raises(httpx.ConnectError) as caught:
        client.get("http://app/")
    assert not isinstance(caught.value, NoBackendAvailable)
    assert [t.vserver.info(n)["failures"] for n in ("d1", "d2", "d3")] == [1, 1, 0]  # retries=1: two tries
    assert_idle(t)

    # nothing to pick at all
    t = transport(f"g={good.address}")
    t.vserver.set_state("g", "DOWN")
    with client_for(t, base_url="") as client, pytest.raises(NoBackendAvailable, match="no backend available"):
        client.get("http://app/")
    assert issubclass(NoBackendAvailable, httpx.ConnectError)


def test_read_timeout_fails_without_retry(impl, backends):
    slow, other = backends(0.0, 64, key=30), backends(0.0, 64, key=31)
    t = Transport(names_specs(slow, other), method="ROUNDROBIN", engine=impl.VirtualServer)
    before = served(other)

    async def main():
        async with async_client(t) as client:
            await client.get("/", params={"delay": 2}, timeout=httpx.Timeout(5, read=0.2))

    with pytest.raises(httpx.ReadTimeout):
        asyncio.run(main())
    assert t.vserver.info("b0")["failures"] == 1
    assert delta(before, served(other))[0][0] == 0  # not sent again
    assert_idle(t)


# ==== accounting =====================================================================================

def test_stream_closed_after_first_chunk_is_a_finish(impl, backends):
    big = backends(0.0, 64, key=40)
    t = Transport([f"b={big.address}"], method="LEASTRESPONSETIME", engine=impl.VirtualServer)

    with client_for(t) as client:
        with client.stream("GET", "/", params={"size": 5_000_000}) as r:
            first = next(r.iter_raw())
            assert t.vserver.info("b")["active"] == 1
    sync_bytes = t.vserver.info("b")["bytes"]
    assert 0 < len(first) <= sync_bytes < 5_000_000  # charged what was read

    async def main():
        async with async_client(t) as client:
            async with client.stream("GET", "/", params={"size": 5_000_000}) as r:
                async for _ in r.aiter_raw():
                    break

    asyncio.run(main())
    info = t.vserver.info("b")
    assert info["failures"] == 0 and info["ttfb"] is not None  # finished with 200, TTFB taken
    assert info["bytes"] < 2 * 5_000_000 and info["selected"] == 2
    assert_idle(t)


def test_dropped_response_is_ended_later(impl, backends):
    b = backends(0.0, 64, key=50)
    t = Transport([f"b={b.address}"], engine=impl.VirtualServer)
    with client_for(t) as client:
        r = client.send(client.build_request("GET", "/"), stream=True)
        assert t.vserver.info("b")["active"] == 1
        del r
        gc.collect()
        client.get("/")  # the next request ends the dropped one's transaction
        assert_idle(t)
        assert t.vserver.info("b")["failures"] == 0


def test_packets_are_counted(impl, backends):
    b = backends(0.0, 64, key=60)
    t = Transport([f"b={b.address}"], method="LEASTPACKETS", engine=impl.VirtualServer)
    with client_for(t) as client:
        client.get("/")
        first = t.vserver.info("b")["packets"]
        client.get("/")  # same pooled connection
        second = t.vserver.info("b")["packets"] - first
    with socket.create_connection(("127.0.0.1", b.port)) as probe:
        exact = tcpinfo.read_segments(probe) is not None
    if exact:  # TCP_INFO: the handshake and the ACKs are counted, not only data segments
        assert first >= 5 and 2 <= second < first
    else:  # the estimate: one segment each way per MSS of body
        assert first == second == 1
    assert_idle(t)


def test_load_reports_reach_the_weights_from_utilization_mode(impl, tmp_path):
    """A backend's endpoint-load-metrics header is read when weights_from_utilization is on,
    and only then."""
    hot = start_backend(0.0, 10, args=("--report-load", "0.9"))
    try:
        t = Transport([f"hot={hot.address}"], method="ROUNDROBIN", engine=impl.VirtualServer)
        seen = []
        real = t.vserver.report_utilization

        def spy(name, **report):
            seen.append((name, report["cpu_utilization"]))
            return real(name, **report)

        t.vserver.report_utilization = spy
        with client_for(t, base_url="http://app") as client:
            assert client.get("/").status_code == 200
            assert seen == []  # off: not read
            t.vserver.set(weights_from_utilization=True)
            for _ in range(3):
                assert client.get("/").status_code == 200
        assert seen == [("hot", 0.9)] * 3
    finally:
        hot.stop()
