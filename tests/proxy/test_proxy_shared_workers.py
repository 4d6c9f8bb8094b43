"""`leastload proxy --workers 2`: two processes balancing with one engine in shared memory.

What one engine means, measured from outside: the health probes run once (worker 0's),
passive ejection follows the failures of the whole proxy (K in all, not K per worker),
the admin fan-out gives the engine's figures once, and --private-engines brings back
an engine per worker. Real `python -m leastload proxy` processes in front of
`leastload.cli.backends` processes on 127.0.0.1; every wait is bounded.
"""

import contextlib
import json
import sys
import threading
import time
import urllib.request

import pytest

from leastload_testkit.backends import start_backend
from leastload_testkit.ports import free_ports
from leastload_testkit.proxy_process import ProxyProcess
from test_proxy_workers import get, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_REUSEPORT workers, /proc")


@pytest.fixture
def backends():
    started = []

    def start(n, delay=0.0):
        for _ in range(n):
            started.append(start_backend(delay, 100))
        return started[-n:]
    yield start
    for b in started:
        b.stop()


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def samples(text, family, **labels):
    """The values of `family`'s samples whose labels include `labels` (label text as exported)."""
    found = []
    for line in text.splitlines():
        if not line.startswith(family + "{") and not line.startswith(family + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            found.append(float(line.rsplit(" ", 1)[1]))
    return found


def test_the_probes_run_once_for_the_shared_engine(tmp_path, backends):
    b1, b2 = backends(2)
    admin = free_ports(3)  # the fan-out, then worker 0 and worker 1 (PORT + 1 + i)
    cli = ProxyProcess(["--listen", "127.0.0.1:0", "--workers", "2", "--admin", f"127.0.0.1:{admin}",
                        "--health-check", "http", "--health-path", "/probe", "--health-interval", "0.1",
                        "--backend", f"b1={b1.address}", "--backend", f"b2={b2.address}"])
    try:
        wait_for(lambda: b1.stats()["requests"] >= 5, 20, "probes")
        start, t0 = b1.stats()["requests"], time.monotonic()
        time.sleep(2.0)
        probes = b1.stats()["requests"] - start
        elapsed = time.monotonic() - t0
        # one monitor at 10 a second: about 20 (two would make about 40)
        assert probes <= 1.5 * 10 * elapsed, probes
        text = metrics(admin)
        assert len(samples(text, "leastload_service_health_probes_total", service="b1")) == 1
        assert samples(text, "leastload_vserver_window_seconds") == [14.0]  # the engine's, once
    finally:
        assert cli.stop() == 0


def _eject_run(tmp_path, backends, *extra):
    """Sequential requests, each on a new connection (the kernel spreads them over the
    workers), while one of two backends refuses connections: its failures until ejected."""
    good, bad = backends(2)
    admin = free_ports(3)  # the fan-out, then worker 0 and worker 1 (PORT + 1 + i)
    cli = ProxyProcess(["--listen", "127.0.0.1:0", "--workers", "2", "--admin", f"127.0.0.1:{admin}",
                        "--health-check", "none", "--outlier-failures", "4", "--outlier-ejection-time", "60",
                        "--backend", f"good={good.address}", "--backend", f"bad={bad.address}", *extra])
    try:
        bad.kill()  # connections to it are refused from now on
        statuses = [get(cli.port, "/?size=10")[0] for _ in range(60)]
        assert statuses == [200] * 60  # each failure was retried on the good one
        text = metrics(admin)
        return sum(samples(text, "leastload_service_failures_total", service="bad")), text
    finally:
        assert cli.stop() == 0


def test_ejection_counts_the_failures_of_the_whole_proxy(tmp_path, backends):
    failures, text = _eject_run(tmp_path, backends)
    assert failures == 4  # K in all: the fifth pick of it never came
    assert samples(text, "leastload_service_ejected", service="bad") == [1.0]


def test_private_engines_count_failures_per_worker(tmp_path, backends):
    failures, text = _eject_run(tmp_path, backends, "--private-engines")
    assert failures == 8  # each worker's engine needed its own four
    assert sorted(samples(text, "leastload_service_ejected", service="bad")) == [1.0, 1.0]  # one per worker


def command(admin, token, *words):
    request = urllib.request.Request(f"http://127.0.0.1:{admin}/leastload/command", method="POST",
                                     data=json.dumps({"command": list(words)}).encode(),
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as r:
        return json.loads(r.read())


def _load(port, stop, count):
    """One client: keep-alive GETs as fast as the proxy answers, until `stop` is set."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        while not stop.is_set():
            conn.request("GET", "/?size=10")
            conn.getresponse().read()
            count[0] += 1
    except OSError:
        pass
    finally:
        conn.close()


@contextlib.contextmanager
def busy(port, clients=8):
    """`clients` threads sending keep-alive GETs to `port` as fast as answered, for the block's
    length; yields a list whose sum is the requests they got answered (read it after the block)."""
    stop = threading.Event()
    counts = [[0] for _ in range(clients)]
    threads = [threading.Thread(target=_load, args=(port, stop, counts[i]), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    served = []
    try:
        yield served
    finally:
        stop.set()
        for t in threads:
            t.join(15)
        served.append(sum(c[0] for c in counts))


def requests_in(backends, seconds):
    """Each backend's requests answered in the next `seconds`."""
    before = [b.stats()["requests"] for b in backends]
    time.sleep(seconds)
    return [b.stats()["requests"] - n for b, n in zip(backends, before)]


def answered_over(backend, seconds, every=0.02):
    """(monotonic time, requests `backend` has answered) every `every` s for `seconds`."""
    samples = []
    end = time.monotonic() + seconds
    while True:
        t = time.monotonic()
        samples.append((t, backend.stats()["requests"]))
        if t >= end:
            return samples
        time.sleep(every)


def per_second(samples):
    """The requests answered in each whole second after the first sample (a second's edge
    counted at the last sample before it)."""
    t0 = samples[0][0]
    edges = [max(n for t, n in samples if t <= t0 + k) for k in range(int(samples[-1][0] - t0) + 1)]
    return [b - a for a, b in zip(edges, edges[1:])]


def bursts(samples, quiet=0.4):
    """The requests answered in each burst: runs of growth separated by `quiet` s or more without any."""
    found, last_growth = [], None
    for (_, before), (t, n) in zip(samples, samples[1:]):
        if n == before:
            continue
        if last_growth is None or t - last_growth >= quiet:
            found.append(0)
        found[-1] += n - before
        last_growth = t
    return found


def slow_start_run(tmp_path, backends, *extra, new_delay=0.0, seconds=4, metrics_at_end=False):
    """A new backend bound through the admin port while 8 clients keep the proxy (both
    workers) busy, under slow start at 10 requests a second (manual unless `extra` says
    otherwise); the new backend answers after `new_delay` s. Returns the samples of its
    requests answered for `seconds` after (answered_over), the requests served, and
    (metrics_at_end) the admin port's /metrics then."""
    b1, b2 = backends(2)
    new, = backends(1, new_delay)
    admin = free_ports(3)
    (tmp_path / "token").write_text("t0ken\n")
    cli = ProxyProcess(["--listen", "127.0.0.1:0", "--workers", "2", "--admin", f"127.0.0.1:{admin}",
                        "--admin-token-file", str(tmp_path / "token"), "--health-check", "none",
                        "--new-service-request", "10", "--backend", f"b1={b1.address}", "--backend", f"b2={b2.address}",
                        *extra])
    try:
        with busy(cli.port) as served:
            time.sleep(1.0)
            assert command(admin, "t0ken", "add", "service", "new", "127.0.0.1", "HTTP", str(new.port))["ok"]
            assert command(admin, "t0ken", "bind", "lb", "vserver", "leastload", "new")["ok"]
            answered = answered_over(new, seconds)
            text = metrics(admin) if metrics_at_end else None
        if metrics_at_end:
            return answered, served[0], text
        return answered, served[0]
    finally:
        assert cli.stop() == 0


def test_slow_start_grants_its_rate_once_for_the_whole_proxy(tmp_path, backends):
    answered, served = slow_start_run(tmp_path, backends)
    assert served > 400, served  # the clients asked far more than the new backend may get
    # 10 a second, as one process would grant: the engine grants a second's 10 at once, so they
    # come as a burst a second. Counted per burst, not per wall-clock second, which can catch
    # parts of two on a busy machine; the first burst may be part of the bind's second and the
    # last one cut off by the end of the sampling
    found = bursts(answered)
    assert len(found) >= 4 and all(9 <= n <= 11 for n in found[1:-1]), found


def test_private_engines_grant_the_rate_once_per_worker(tmp_path, backends):
    seconds = 6
    answered, served = slow_start_run(tmp_path, backends, "--private-engines", seconds=seconds)
    assert served > 400, served
    # One engine grants 10 in each of its seconds, so over `seconds` of sampling (which can
    # overlap seconds + 1 of the engine's) the new backend answers at most 10 * (seconds + 1)
    # = 70. Each worker's engine granting its own 10 makes about 20 a second (about 120): more
    # than one engine can grant even if a worker gets little CPU for a second on a busy machine
    # (counted over the whole sampling, not per wall-clock second, for that reason).
    total = answered[-1][1] - answered[0][1]
    assert total > 10 * (seconds + 1), (total, per_second(answered))


def test_a_worker_that_has_not_learned_of_a_backend_yet_picks_again(backends):
    """Two in-process proxies on one shared engine: A binds a new backend; B, which has not
    heard of it (no address, no pool), picks it (least connection: it is idle), ends that pick
    with no outcome and picks again. Every request is answered, nothing stays open."""
    import asyncio
    import uuid

    import leastload
    from leastload.proxy import Proxy
    from test_proxy import load

    b1, new = backends(2)
    name = "test-" + uuid.uuid4().hex[:12]
    from leastload.engine import native
    settings = dict(listen=("127.0.0.1", 0), health_check="none", shared=name, engine=native.VirtualServer)

    async def main():
        async with Proxy([f"b1={b1.address}"], **settings) as a, \
                Proxy([f"b1={b1.address}"], health_probes=False, **settings) as b:
            a.add_backend(f"new={new.address}")
            assert "new" in b.vserver and "new" not in b.backends
            outcome = await load(f"http://127.0.0.1:{b.address[1]}/?size=10", 20, 2)
            assert outcome == {200: 20}
            assert b.vserver.info("new")["selected"] >= 1  # picked, and picked again
            assert b.stats.backends.get("new") is None or b.stats.backends["new"].requests == 0
            assert [b.vserver.active(s) for s in b.vserver.services] == [0, 0]

    try:
        asyncio.run(main())
    finally:
        leastload.unlink_shared(name)
