"""The supervisor's fan-out admin port (_fanout.py), end to end.

In-process Proxy objects stand for the workers (each its own admin port, token "t"),
over real backend processes (tests/servers.py); a Fanout over their admin ports;
real requests through each proxy (httpx). The merged /metrics is read by the strict
parser of tests/proxy/test_proxy_metrics.py and compared, series by series, with each
proxy's own /metrics and counters; promtool judges it too. The proxies run in the
test's event loop, the fan-out in its own thread, so the test asks the fan-out with
an async client (the loop keeps serving the workers' admin ports meanwhile).
Every wait is bounded.
"""

import asyncio
import contextlib
import math
import shutil
import socket
import subprocess
import time

import httpx
import pytest

from leastload import prometheus_text
from leastload.proxy import Proxy, _admin, _exposition, _fanout, _metrics
from leastload.proxy._fanout import start_fanout
from leastload.proxy._metrics import FAMILIES, PER_WORKER, SUM
from leastload.proxy._proxy import TTFB_BUCKETS
from leastload_testkit.ports import free_port
from servers import run_loop
from test_proxy import C, backends  # noqa: F401 (fixtures: the C engine; backend processes, stopped after the test)
from test_proxy import RUN_TIMEOUT, assert_nothing_active, load, settle, specs, url_of, wait_for_async
from test_proxy_metrics import parse_exposition

TOKEN = "t"
VSERVER = "edge-1"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
OWN = ("leastload_fanout_workers", "leastload_fanout_workers_scraped", "leastload_fanout_scrape_failures_total")


def run(coro):
    return run_loop(coro, RUN_TIMEOUT)


def base(fanout):
    host, port = fanout.address
    return f"http://{host}:{port}"


async def ask(url, method="GET", **kwargs):
    async with httpx.AsyncClient(timeout=20) as client:
        return await client.request(method, url, **kwargs)


async def command(fanout, words, headers=None):
    return await ask(base(fanout) + "/leastload/command", "POST", json={"command": words}, headers=headers or {})


def worker_proxy(backend_specs, engine, clock=None, **more):
    settings = dict(listen=("127.0.0.1", 0), admin=("127.0.0.1", 0), admin_token=TOKEN, health_check="none",
                    name=VSERVER, engine=engine, **more)
    if clock is not None:
        settings["clock"] = clock
    return Proxy(backend_specs, "LEASTCONNECTION", **settings)


def series(families):
    """{(sample name, labels sorted): value} over every family."""
    return {(name, tuple(sorted(labels.items()))): v
            for family in families.values() for name, labels, v in family.samples}


def sample(families, name, **labels):
    """The one sample `name` whose labels are exactly `labels`."""
    wanted = tuple(sorted(labels.items()))
    found = [v for (n, ls), v in series(families).items() if n == name and ls == wanted]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def promtool_check(text):
    promtool = shutil.which("promtool")
    if promtool is None:
        print("promtool is not on PATH (Debian package prometheus): the strict parser's checks stand alone")
        return
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, (result.stdout, result.stderr, text)
    assert not result.stdout.strip() and not result.stderr.strip(), (result.stdout, result.stderr)


# ---- /metrics over three workers with real traffic ----------------------------------------------------


LOADS = (40, 70, 100)  # requests through worker 0, 1, 2


def test_merged_metrics_sum_what_adds_up_and_label_the_rest(backends, c_impl):
    procs = [backends(0.001, 1024), backends(0.001, 2048)]
    names = ["a", "b"]

    async def main():
        async with contextlib.AsyncExitStack() as stack:
            proxies = [await stack.enter_async_context(
                worker_proxy(specs(names, procs), c_impl.VirtualServer, c_impl.ManualClock(1000.0)))
                for _ in LOADS]
            outcomes = [await load(url_of(p), n, 2) for p, n in zip(proxies, LOADS)]
            for p in proxies:
                await settle(p)
                assert_nothing_active(p)
                assert await wait_for_async(lambda p=p: not p.clients, 10)
            own = []
            for p in proxies:
                r = await ask("http://%s:%d/metrics" % p.admin_address)
                assert r.status_code == 200
                own.append(r.text)
            stats = [{n: (c.requests, c.by_class[2], list(c.ttfb_buckets), c.ttfb_sum)
                      for n, c in p.stats.backends.items()} for p in proxies]
            selected = [{n: p.vserver.info(n)["selected"] for n in names} for p in proxies]
            weights = [{n: p.vserver.info(n)["weight"] for n in names} for p in proxies]
            accepted = [p.listener.accepted for p in proxies]
            ports = [p.admin_address[1] for p in proxies]
            with start_fanout("127.0.0.1", 0, lambda: list(ports), TOKEN) as fanout:
                r = await ask(base(fanout) + "/metrics")
                again = await ask(base(fanout) + "/metrics")
            return outcomes, own, r, again.text, stats, selected, weights, accepted
    outcomes, own_texts, r, again, stats, selected, weights, accepted = run(main())
    assert outcomes == [{200: n} for n in LOADS]
    assert r.status_code == 200 and r.headers["content-type"] == _metrics.CONTENT_TYPE.decode()
    merged = parse_exposition(r.text)
    own = [parse_exposition(text) for text in own_texts]
    assert r.text == again  # nothing moved between two scrapes: the same text

    # every family a proxy writes is in the table: summed or per worker on purpose, not by default
    written = set().union(*own)
    assert written <= set(FAMILIES), f"add {sorted(written - set(FAMILIES))} to _metrics.FAMILY_SPECS"
    assert set(merged) == written | {"leastload_fanout_workers", "leastload_fanout_workers_scraped",
                                     "leastload_fanout_scrape_failures_total"}

    # series by series: a summed family is the sum of the workers' same series, a per-worker family
    # is each worker's series with worker="i", nothing more and nothing less
    own_series = [series(families) for families in own]
    for name, family in merged.items():
        if name in OWN:
            continue
        assert family.type == own[0][name].type and family.help == own[0][name].help
        mode = FAMILIES[name]
        got = {(n, tuple(sorted(ls.items()))): v for n, ls, v in family.samples}
        if mode == SUM:
            keys = {k for s in own_series for k in s if _of_family(k[0], name, family.type)}
            assert set(got) == keys, name
            for key, v in got.items():
                assert not any(label == "worker" for label, _ in key[1]), (name, key)
                assert v == pytest.approx(sum(s.get(key, 0) for s in own_series)), (name, key)
        else:
            expected = {}
            for i, s in enumerate(own_series):
                for (n, labels), v in s.items():
                    if _of_family(n, name, family.type):
                        expected[n, tuple(sorted(labels + (("worker", str(i)),)))] = v
            assert got == expected, name

    # the figures the proxies counted, summed
    for n in names:
        requests = sum(s[n][0] for s in stats)
        assert sample(merged, "leastload_service_requests_total", vserver=VSERVER, service=n) == requests
        assert requests == sum(sel[n] for sel in selected)
        assert sample(merged, "leastload_service_responses_total", vserver=VSERVER, service=n, code="2xx") == \
            sum(s[n][1] for s in stats)
        running = 0
        for k, bound in enumerate(TTFB_BUCKETS):
            running += sum(s[n][2][k] for s in stats)
            assert sample(merged, "leastload_service_ttfb_seconds_bucket", vserver=VSERVER, service=n,
                          le=repr(bound)) == running
        running += sum(s[n][2][-1] for s in stats)
        assert sample(merged, "leastload_service_ttfb_seconds_bucket", vserver=VSERVER, service=n, le="+Inf") \
            == running == requests
        assert sample(merged, "leastload_service_ttfb_seconds_count", vserver=VSERVER, service=n) == running
        assert sample(merged, "leastload_service_ttfb_seconds_sum", vserver=VSERVER, service=n) == \
            pytest.approx(sum(s[n][3] for s in stats))
        for i in range(len(LOADS)):  # per worker: each worker's own weight and state, labelled
            labels = dict(vserver=VSERVER, service=n, worker=str(i))
            assert sample(merged, "leastload_service_weight", **labels) == weights[i][n]
            assert sample(merged, "leastload_service_state", state="UP", **labels) == 1
            assert sample(merged, "leastload_service_bound", **labels) == 1
    assert sample(merged, "leastload_vserver_picks_total", vserver=VSERVER) == sum(LOADS)
    assert sample(merged, "leastload_vserver_accepted_connections_total", vserver=VSERVER) == sum(accepted)
    assert sample(merged, "leastload_vserver_clients", vserver=VSERVER) == 0
    for i in range(len(LOADS)):
        assert sample(merged, "leastload_vserver_info", vserver=VSERVER, method="LEASTCONNECTION", worker=str(i)) == 1
        assert sample(merged, "leastload_vserver_window_seconds", vserver=VSERVER, worker=str(i)) == 14
    assert merged["leastload_service_ttfb_seconds"].type == "histogram"  # parse_exposition: cumulative, +Inf = _count
    assert sample(merged, "leastload_fanout_workers") == 3
    assert sample(merged, "leastload_fanout_workers_scraped") == 3
    for i in range(3):
        assert sample(merged, "leastload_fanout_scrape_failures_total", worker=str(i)) == 0
    promtool_check(r.text)


def _of_family(sample_name, family, kind):
    if kind == "histogram":
        return sample_name in (family + "_bucket", family + "_sum", family + "_count")
    return sample_name == family


# ---- the runtime API through the fan-out -----------------------------------------------------------------


def test_commands_go_to_every_worker_and_writes_need_the_token(C):
    async def main():
        async with contextlib.AsyncExitStack() as stack:
            proxies = [await stack.enter_async_context(worker_proxy(["a=127.0.0.1:9", "b=127.0.0.1:9"], C))
                       for _ in range(2)]
            ports = [p.admin_address[1] for p in proxies]

            def states(name):
                return [p.vserver.state(name) for p in proxies]

            seen = {}
            with start_fanout("127.0.0.1", 0, lambda: list(ports), TOKEN) as fanout:
                seen["no token"] = await command(fanout, ["disable", "service", "a"]), states("a")
                seen["wrong token"] = await command(fanout, ["disable", "service", "a"],
                                                    {"Authorization": "Bearer nope"}), states("a")
                seen["read"] = await command(fanout, ["show", "lb", "vserver"])
                seen["write"] = await command(fanout, ["disable", "service", "a"], AUTH), states("a")
                seen["weight"] = (await command(fanout, ["set", "service", "b", "-weight", "5"], AUTH),
                                  [p.vserver.weight("b") for p in proxies])
                seen["unknown"] = await command(fanout, ["enable", "service", "zz"], AUTH)
                seen["bad body"] = await ask(base(fanout) + "/leastload/command", "POST", content=b"{nope",
                                             headers=AUTH)
                seen["reload"] = await ask(base(fanout) + "/leastload/reload", "POST", content=b"{}", headers=AUTH)
                seen["reload no token"] = await ask(base(fanout) + "/leastload/reload", "POST", content=b"{}")
            # a fan-out without a token of its own: the workers decide, and their 401 stays a 401
            with start_fanout("127.0.0.1", 0, lambda: list(ports), None) as open_fanout:
                seen["workers refuse"] = await command(open_fanout, ["enable", "service", "a"]), states("a")
                seen["workers accept"] = await command(open_fanout, ["enable", "service", "a"], AUTH), states("a")
            return seen
    seen = run(main())

    for key in ("no token", "wrong token"):
        r, states = seen[key]
        assert r.status_code == 401, key
        doc = r.json()
        assert doc["ok"] is False and doc["workers"] == [] and "admin token" in doc["error"]
        assert states == ["UP", "UP"]  # nothing reached a worker
    r = seen["read"]
    assert r.status_code == 200 and r.json()["ok"] is True
    assert [w["ok"] for w in r.json()["workers"]] == [True, True]
    r, states = seen["write"]
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["ok"] is True and len(doc["workers"]) == 2
    assert all(w["ok"] and w["done"] == "a OUT_OF_SERVICE" for w in doc["workers"]), doc
    assert states == ["OUT_OF_SERVICE", "OUT_OF_SERVICE"]
    r, weights = seen["weight"]
    assert r.status_code == 200 and weights == [5, 5]
    r = seen["unknown"]
    assert r.status_code == 404 and r.json()["ok"] is False
    assert [w["ok"] for w in r.json()["workers"]] == [False, False] and r.json()["error"].startswith("worker 0: ")
    r = seen["bad body"]
    assert r.status_code == 400 and r.json()["ok"] is False
    r = seen["reload"]
    assert r.status_code == 404 and "without --config" in r.json()["workers"][0]["error"]  # no config: each says so
    assert seen["reload no token"].status_code == 401
    r, states = seen["workers refuse"]
    assert r.status_code == 401 and r.json()["ok"] is False
    assert [w["ok"] for w in r.json()["workers"]] == [False, False]
    assert states == ["OUT_OF_SERVICE", "OUT_OF_SERVICE"]
    r, states = seen["workers accept"]
    assert r.status_code == 200 and r.json()["ok"] is True and states == ["UP", "UP"]


# ---- a worker that is gone, or silent ------------------------------------------------------------------


def test_a_worker_that_does_not_answer_is_skipped_and_named(backends, C, monkeypatch):
    # shorter waits for the silent worker (read at each request); the live ones answer in milliseconds
    monkeypatch.setattr(_fanout, "SCRAPE_TIMEOUT", 1.0)
    monkeypatch.setattr(_fanout, "COMMAND_TIMEOUT", 1.0)
    procs = [backends(0.001)]
    dead = free_port()  # nothing listens: refused
    silent = socket.socket()  # listens, never accepts: the connection opens, no answer comes
    silent.bind(("127.0.0.1", 0))
    silent.listen(32)

    async def main():
        async with contextlib.AsyncExitStack() as stack:
            proxies = [await stack.enter_async_context(worker_proxy(specs(["a"], procs), C)) for _ in range(2)]
            for p in proxies:
                assert (await load(url_of(p), 10, 1)) == {200: 10}
                await settle(p)
            ports = [proxies[0].admin_address[1], dead, proxies[1].admin_address[1], silent.getsockname()[1]]
            out = {}
            with start_fanout("127.0.0.1", 0, lambda: list(ports), TOKEN) as fanout:
                started = time.monotonic()
                out["metrics"] = await ask(base(fanout) + "/metrics")
                out["took"] = time.monotonic() - started
                out["metrics again"] = await ask(base(fanout) + "/metrics")
                out["status"] = await ask(base(fanout) + "/leastload/status")
                out["status text"] = await ask(base(fanout) + "/leastload/status?format=text")
                out["unknown vserver"] = await ask(base(fanout) + "/leastload/status?vserver=nope")
                out["health"] = await ask(base(fanout) + "/healthz")
                out["command"] = await command(fanout, ["disable", "service", "a"], AUTH)
                out["states"] = [p.vserver.state("a") for p in proxies]
            return out
    try:
        out = run(main())
    finally:
        silent.close()
    # each worker asked at once, each bounded: the silent one waited for, once
    assert _fanout.SCRAPE_TIMEOUT * 0.9 < out["took"] < _fanout.SCRAPE_TIMEOUT + 5, out["took"]
    r = out["metrics"]
    assert r.status_code == 200
    merged = parse_exposition(r.text)
    promtool_check(r.text)
    assert sample(merged, "leastload_fanout_workers") == 4
    assert sample(merged, "leastload_fanout_workers_scraped") == 2
    assert [sample(merged, "leastload_fanout_scrape_failures_total", worker=str(i)) for i in range(4)] == [0, 1, 0, 1]
    again = parse_exposition(out["metrics again"].text)
    assert [sample(again, "leastload_fanout_scrape_failures_total", worker=str(i)) for i in range(4)] == [0, 2, 0, 2]
    workers = {ls["worker"] for family in merged.values() for _, ls, _ in family.samples if "worker" in ls}
    assert workers == {"0", "1", "2", "3"}  # the fan-out's own counter names all four ...
    labelled = {ls["worker"] for name, family in merged.items() if name not in OWN
                for _, ls, _ in family.samples if "worker" in ls}
    assert labelled == {"0", "2"}  # ... the workers' series only the two that answered
    assert sample(merged, "leastload_service_requests_total", vserver=VSERVER, service="a") == 20

    r = out["status"]
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    statuses = r.json()["workers"]
    assert len(statuses) == 4 and statuses[1] is None and statuses[3] is None
    for doc in (statuses[0], statuses[2]):
        assert doc["name"] == VSERVER and set(doc["backends"]) == {"a"}
    text = out["status text"]
    assert text.status_code == 200 and text.text.startswith("# worker 0\n") and "# worker 1\n(no answer)" in text.text
    assert "LEASTCONNECTION" in text.text
    assert out["unknown vserver"].status_code == 404  # every worker that answered said 404: so does the fan-out
    assert out["health"].status_code == 200 and out["health"].text == "ok (2 of 4 workers)\n"

    r = out["command"]
    assert r.status_code == 502  # the first worker that did not answer 2xx gave no answer at all
    doc = r.json()
    assert doc["ok"] is False and doc["error"] == "worker 1: no answer"
    assert doc["workers"][1] is None and doc["workers"][3] is None
    assert doc["workers"][0]["ok"] and doc["workers"][2]["ok"]
    assert out["states"] == ["OUT_OF_SERVICE", "OUT_OF_SERVICE"]  # the workers that answered did it


# ---- /healthz ------------------------------------------------------------------------------------------


def test_healthz_is_200_while_one_worker_is_healthy(C):
    async def main():
        async with contextlib.AsyncExitStack() as stack:
            proxies = [await stack.enter_async_context(worker_proxy(["a=127.0.0.1:9"], C)) for _ in range(2)]
            ports = [p.admin_address[1] for p in proxies]
            seen = []
            with start_fanout("127.0.0.1", 0, lambda: list(ports), TOKEN) as fanout:
                seen.append(await ask(base(fanout) + "/healthz"))
                proxies[0].vserver.set_state("a", "DOWN")
                seen.append(await ask(base(fanout) + "/healthz"))
                proxies[1].vserver.set_state("a", "OUT_OF_SERVICE")
                seen.append(await ask(base(fanout) + "/healthz"))
                proxies[1].vserver.set_state("a", "UP")
                seen.append(await ask(base(fanout) + "/healthz"))
                ports.clear()  # no worker running
                seen.append(await ask(base(fanout) + "/healthz"))
                seen.append(await command(fanout, ["show", "lb", "vserver"]))
                seen.append(await ask(base(fanout) + "/metrics"))
            return seen
    seen = run(main())
    assert [r.status_code for r in seen[:5]] == [200, 200, 503, 200, 503]
    assert seen[0].text == "ok\n" and seen[1].text == "ok (1 of 2 workers)\n"
    assert seen[2].text.startswith("no worker is healthy: worker 0: no backend is UP"), seen[2].text
    assert all(r.headers["content-type"] == "text/plain" for r in seen[:5])
    assert seen[4].text == "no worker is healthy: no worker is running\n"
    assert seen[5].status_code == 503 and seen[5].json() == {"ok": False, "error": "no worker is running",
                                                             "workers": []}
    empty = parse_exposition(seen[6].text)  # no worker: the fan-out's own families only
    assert set(empty) == {"leastload_fanout_workers", "leastload_fanout_workers_scraped"}  # no empty family
    assert sample(empty, "leastload_fanout_workers") == 0


# ---- the port itself: limits, 404, its thread ---------------------------------------------------------------


def _exchange(address, data, timeout=10.0):
    """Sends data, returns every byte until the fan-out closes (bounded)."""
    with socket.create_connection(address, timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_limits_and_other_paths(monkeypatch):
    with start_fanout("127.0.0.1", 0, lambda: [], TOKEN) as fanout:
        address = fanout.address
        for request in (b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", b"GET /metrics/ HTTP/1.1\r\nHost: x\r\n\r\n",
                        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
                        b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                        b"DELETE /leastload/command HTTP/1.1\r\nHost: x\r\n\r\n"):
            answer = _exchange(address, request)
            assert answer.startswith(b"HTTP/1.1 404 Not Found\r\n"), (request, answer)
            if not request.startswith(b"HEAD"):
                assert answer.endswith(b"\r\n\r\n" + _admin.NOT_FOUND)
        big = b"x" * (64 * 1024 + 1)
        answer = _exchange(address, b"POST /leastload/command HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                           % (len(big), big))
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:100]
        long_line = b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        assert _exchange(address, long_line).startswith(b"HTTP/1.1 414 ")

        # at most MAX_ADMIN_CONNECTIONS open: one more is closed at once
        held = [socket.create_connection(address, timeout=10) for _ in range(_admin.MAX_ADMIN_CONNECTIONS)]
        try:
            time.sleep(0.2)
            with socket.create_connection(address, timeout=10) as extra:
                extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                try:
                    assert extra.recv(100) == b""
                except ConnectionResetError:
                    pass  # aborted: reset
        finally:
            for s in held:
                s.close()
        deadline = time.monotonic() + 10
        while True:  # once the held ones are gone, requests are served again
            answer = _exchange(address, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            if answer or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert answer.startswith(b"HTTP/1.1 503 "), answer  # no worker: not healthy

        monkeypatch.setattr(_fanout, "HEADER_TIMEOUT", 0.5)  # read as each connection opens
        started = time.monotonic()
        assert _exchange(address, b"GET /metrics HTTP/1.1\r\nHost:").startswith(b"HTTP/1.1 408 ")  # head too late
        assert _exchange(address, b"") == b""  # nothing sent: closed without an answer after the timeout
        assert time.monotonic() - started < 8


def test_start_and_close():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        with pytest.raises(OSError):
            start_fanout("127.0.0.1", taken.getsockname()[1], lambda: [], None)
    with pytest.raises(ValueError, match="token"):
        start_fanout("0.0.0.0", 0, lambda: [], None)  # not loopback: a token is needed
    fanout = start_fanout("127.0.0.1", 0, lambda: [], None)
    address = fanout.address
    assert address[0] == "127.0.0.1" and address[1] > 0
    assert _exchange(address, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 503 ")
    fanout.close()
    fanout.close()  # a second close does nothing
    assert not fanout._thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(address, timeout=5).close()


def test_worker_ports_that_raise_are_no_workers(caplog):
    def broken():
        raise RuntimeError("the supervisor's list is gone")
    with start_fanout("127.0.0.1", 0, broken, None) as fanout:
        answer = _exchange(fanout.address, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 503 ") and answer.endswith(b"no worker is running\n")


# ---- the reader of the text format and the merge, without a network --------------------------------------


def test_the_reader_takes_what_prometheus_takes():
    text = ("# a comment\n\n"
            "# HELP x_total Things \\\\ done\\n here.\n# TYPE x_total counter\n"
            'x_total{a="q\\"uo\\\\te\\nnl" , b="2",} 3 1700000000000\n'
            "x_total 4\n"
            "# TYPE h histogram\n"
            'h_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 0.5\nh_count 2\n'
            "loose_gauge NaN\n"
            "# TYPE s summary\n"
            's{quantile="0.5"} 1.5e3\ns_sum -Inf\ns_count 7\r\n')
    families = prometheus_text.parse(text)
    assert list(families) == ["x_total", "h", "loose_gauge", "s"]
    x = families["x_total"]
    assert x.kind == "counter" and x.help == "Things \\ done\n here."
    assert x.samples == [("x_total", (("a", 'q"uo\\te\nnl'), ("b", "2")), 3), ("x_total", (), 4)]
    assert isinstance(x.samples[0][2], int)
    assert [s[0] for s in families["h"].samples] == ["h_bucket", "h_bucket", "h_sum", "h_count"]
    assert families["loose_gauge"].kind is None and math.isnan(families["loose_gauge"].samples[0][2])
    assert families["s"].samples[1][2] == -math.inf and families["s"].samples[0][2] == 1500.0
    for bad in ('x{a="b} 1\n', 'x{a=b} 1\n', "x 1 2 3\n", "x one\n", "x{a=\"1\",a=\"2\"} 1\n", "x\n",
                'x{a="\\t"} 1\n', "# TYPE x countr\n", "# TYPE x gauge\n# TYPE x gauge\n",
                "x 1\n# TYPE x gauge\n", "x 1\nx 2\n", "# TYPE h histogram\nh 1\n", "9x 1\n", "x 1 1.5\n"):
        with pytest.raises(prometheus_text.ExpositionError):
            prometheus_text.parse(bad)


def test_the_merge_sums_by_the_table_and_labels_by_default():
    def worker(requests, weight, le_one, bucket, extra_type="gauge"):
        return prometheus_text.parse(
            "# HELP leastload_service_requests_total r\n# TYPE leastload_service_requests_total counter\n"
            f'leastload_service_requests_total{{vserver="v",service="a"}} {requests}\n'
            "# HELP leastload_service_weight w\n# TYPE leastload_service_weight gauge\n"
            f'leastload_service_weight{{vserver="v",service="a"}} {weight}\n'
            "# HELP leastload_service_ttfb_seconds t\n# TYPE leastload_service_ttfb_seconds histogram\n"
            f'leastload_service_ttfb_seconds_bucket{{vserver="v",le="{le_one}"}} {bucket}\n'
            f'leastload_service_ttfb_seconds_bucket{{vserver="v",le="+Inf"}} {bucket + 1}\n'
            f'leastload_service_ttfb_seconds_sum{{vserver="v"}} 0.25\n'
            f'leastload_service_ttfb_seconds_count{{vserver="v"}} {bucket + 1}\n'
            f"# HELP something_new_total n\n# TYPE something_new_total {extra_type}\n"
            f'something_new_total{{worker="x"}} 1\n')
    merged = _exposition.merge([(0, worker(3, 1, "1", 2, "counter")), (2, worker(4, 7, "1.0", 5))])
    text = _exposition.render(merged)
    families = parse_exposition(text)
    promtool_check(text)
    assert sample(families, "leastload_service_requests_total", vserver="v", service="a") == 7
    assert sample(families, "leastload_service_weight", vserver="v", service="a", worker="0") == 1
    assert sample(families, "leastload_service_weight", vserver="v", service="a", worker="2") == 7
    assert sample(families, "leastload_service_ttfb_seconds_bucket", vserver="v", le="1") == 7  # "1" and "1.0"
    assert sample(families, "leastload_service_ttfb_seconds_bucket", vserver="v", le="+Inf") == 9
    assert sample(families, "leastload_service_ttfb_seconds_sum", vserver="v") == 0.5
    # not in the table: per worker; its own worker label kept as exported_worker; worker 2's gauge
    # of a family worker 0 gave as a counter is dropped (the first worker's type stays)
    assert families["something_new_total"].type == "counter"
    assert families["something_new_total"].samples == [("something_new_total", {"exported_worker": "x",
                                                                                 "worker": "0"}, 1.0)]
    assert 'leastload_service_requests_total{vserver="v",service="a"} 7\n' in text  # ints stay ints
    assert _exposition.mode_of("leastload_service_requests_total", "summary") == PER_WORKER
    assert _exposition.mode_of("leastload_vserver_clients", "gauge") == SUM
    assert _exposition.mode_of("not_in_the_table", "counter") == _exposition.DEFAULT_MODE == PER_WORKER
    # a worker's exposition read and written back unchanged but for the worker labels
    one = worker(3, 1, "1", 2)
    again = prometheus_text.parse(_exposition.render(_exposition.merge([(0, one)])))
    assert [s for f in again.values() for s in f.samples if f.name == "leastload_service_requests_total"] == \
        one["leastload_service_requests_total"].samples
