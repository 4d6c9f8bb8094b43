"""A real Prometheus server scrapes the admin port's /metrics, and the fan-out's merged /metrics.

The `prometheus` binary (Debian package prometheus) runs as a child process with a config
written here: a 1 s scrape interval, a job `proxy` scraping one Proxy's admin port, a job
`fanout` scraping a Fanout over that proxy and a second one (127.0.0.1 only; its storage in
tmp_path; always killed at the end). Real requests go through both proxies (real backend
processes) first; then the test polls Prometheus' query API, bounded in time, until the
series are there with the proxies' counts, and asserts their labels and values. Skipped,
saying why, only when the binary is missing.
"""

import asyncio
import contextlib
import math
import shutil
import subprocess
import time

import httpx
import pytest

from leastload.proxy import Proxy
from leastload.proxy._fanout import start_fanout
from leastload_testkit.ports import free_port
from leastload_testkit.processes import stop_child
from servers import run_loop
from test_proxy import C, backends  # noqa: F401 (fixtures: the C engine; backend processes, stopped after the test)
from test_proxy import assert_nothing_active, load, settle, specs, url_of, wait_for_async

VSERVER = "edge-1"
TOKEN = "t"
LOADS = (30, 50)          # requests through proxy 0 (scraped directly and by the fan-out) and proxy 1
WAIT = 45.0               # the longest the test waits for Prometheus (to start, then for the series)
POLLS = 400               # and the most times it asks
RUN_TIMEOUT = 150.0


def config(targets):
    jobs = "".join(f"  - job_name: {job}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
                   for job, port in targets.items())
    return ("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n" + jobs)


def start_prometheus(binary, tmp_path, targets):
    """(the process, its base URL, its log file's path)."""
    (tmp_path / "prometheus.yml").write_text(config(targets))
    port = free_port()
    log_path = tmp_path / "prometheus.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return proc, f"http://127.0.0.1:{port}", log_path


def stop(proc):
    stop_child(proc, timeout=10)


async def poll(client, url, check, what, proc, log_path):
    """Asks url until check(its JSON) is truthy; at most WAIT seconds and POLLS times. Returns the last JSON."""
    deadline = time.monotonic() + WAIT
    doc = None
    for _ in range(POLLS):
        assert proc.poll() is None, f"prometheus exited ({proc.returncode}): {log_path.read_text()[-3000:]}"
        try:
            r = await client.get(url)
            doc = r.json() if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            doc = None
        if doc is not None and check(doc):
            return doc
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.25)
    raise AssertionError(f"{what}: not within {WAIT:.0f} s; last answer {doc!r}; prometheus log: "
                         f"{log_path.read_text()[-3000:]}")


def results(doc):
    """[(labels, value)] of an instant query's vector."""
    assert doc["status"] == "success", doc
    return [(r["metric"], float(r["value"][1])) for r in doc["data"]["result"]]


def by_job_and_service(doc):
    return {(m["job"], m["service"]): v for m, v in results(doc)}


def test_prometheus_scrapes_the_admin_port_and_the_fanout(backends, C, tmp_path):
    binary = shutil.which("prometheus")
    if binary is None:
        reason = "the prometheus binary is not on PATH (Debian package prometheus): no real scrape tested"
        print(reason)
        pytest.skip(reason)
    procs = [backends(0.001, 1024), backends(0.001, 2048)]
    names = ["a", "b"]

    async def main():
        async with contextlib.AsyncExitStack() as stack:
            proxies = [await stack.enter_async_context(
                Proxy(specs(names, procs), "LEASTCONNECTION", listen=("127.0.0.1", 0), admin=("127.0.0.1", 0),
                      admin_token=TOKEN, health_check="none", name=VSERVER, engine=C)) for _ in LOADS]
            outcomes = [await load(url_of(p), n, 2) for p, n in zip(proxies, LOADS)]
            for p in proxies:
                await settle(p)
                assert_nothing_active(p)
                assert await wait_for_async(lambda p=p: not p.clients, 10)
            counts = [{n: p.stats.backends[n].requests for n in names} for p in proxies]
            ports = [p.admin_address[1] for p in proxies]
            fanout = stack.enter_context(start_fanout("127.0.0.1", 0, lambda: list(ports), TOKEN))
            proc, url, log_path = start_prometheus(binary, tmp_path, {"proxy": ports[0], "fanout": fanout.address[1]})
            stack.callback(stop, proc)
            expected = {("proxy", n): counts[0][n] for n in names}
            expected.update({("fanout", n): counts[0][n] + counts[1][n] for n in names})
            async with httpx.AsyncClient(timeout=10) as client:
                query = url + "/api/v1/query"
                requests = await poll(
                    client, query + "?query=leastload_service_requests_total",
                    lambda doc: by_job_and_service(doc) == expected, "leastload_service_requests_total", proc, log_path)
                targets = await poll(
                    client, url + "/api/v1/targets",
                    lambda doc: len(doc["data"]["activeTargets"]) == 2
                    and all(t["health"] == "up" for t in doc["data"]["activeTargets"]), "both targets up",
                    proc, log_path)
                up = await client.get(query, params={"query": "up"})
                ttfb = await client.get(query, params={"query": "sum by (job) (leastload_service_ttfb_seconds_count)"})
                weights = await client.get(query, params={"query": 'leastload_service_weight{job="fanout"}'})
                buckets = 'sum by (le) (leastload_service_ttfb_seconds_bucket{job="proxy"})'
                median = await client.get(query, params={"query": f"histogram_quantile(0.5, {buckets})"})
                picks = await client.get(query, params={"query": "leastload_vserver_picks_total"})
            return (outcomes, counts, requests, targets, up.json(), ttfb.json(), weights.json(), median.json(),
                    picks.json())
    outcomes, counts, requests, targets, up, ttfb, weights, median, picks = run_loop(main(), RUN_TIMEOUT)

    assert outcomes == [{200: n} for n in LOADS]
    assert all(counts[i][n] > 0 for i in range(2) for n in names), counts
    for metric, value in results(requests):
        assert set(metric) == {"__name__", "instance", "job", "vserver", "service"}, metric
        assert metric["__name__"] == "leastload_service_requests_total" and metric["vserver"] == VSERVER
    found = by_job_and_service(requests)
    for n in names:
        assert found["proxy", n] == counts[0][n]
        assert found["fanout", n] == counts[0][n] + counts[1][n]
    for target in targets["data"]["activeTargets"]:
        assert target["health"] == "up" and target["lastError"] == "", target
    assert {m["job"]: v for m, v in results(up)} == {"proxy": 1.0, "fanout": 1.0}
    assert {m["job"]: v for m, v in results(ttfb)} == {"proxy": LOADS[0], "fanout": sum(LOADS)}
    assert {(m["service"], m["worker"]): v for m, v in results(weights)} == \
        {(n, w): 1.0 for n in names for w in ("0", "1")}  # a gauge that does not add: one series per worker
    (_, q50), = results(median)
    assert math.isfinite(q50) and q50 > 0, q50  # the buckets read as a histogram
    assert {m["job"]: v for m, v in results(picks)} == {"proxy": LOADS[0], "fanout": sum(LOADS)}
