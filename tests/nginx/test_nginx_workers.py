"""One engine for every nginx worker: slow start exact across 2 workers after a reload
adds a server, a reload that keeps the services' state, a worker killed with SIGKILL while
it holds transactions, and a killed backend ejected with no client error."""
import concurrent.futures
import math
import os
import signal
import threading
import time

from nginxrun import attach, unique
from leastload_testkit.nginx_conf import upstream_block
from leastload_testkit.waits import wait_until

LOAD_SECONDS = 6.0
LOAD_THREADS = 6


def load(ng, stop, counts, errors):
    """Requests on one keep-alive connection until `stop` (bounded by LOAD_SECONDS + 5 s)."""
    import http.client
    deadline = time.monotonic() + LOAD_SECONDS + 5
    c = http.client.HTTPConnection("127.0.0.1", ng.port, timeout=10)
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                c.request("GET", "/")
                r = c.getresponse()
                r.read()
            except (OSError, http.client.HTTPException) as exc:
                errors.append(repr(exc))
                c.close()
                continue
            if r.status != 200:
                errors.append(r.status)
            up = r.getheader("X-Up")
            counts[up] = counts.get(up, 0) + 1
    finally:
        c.close()


def start_of_next_second():
    """Sleeps until just after the next whole second of the clock nginx and the engine use."""
    time.sleep(math.floor(time.monotonic()) + 1.02 - time.monotonic())


def test_reload_adds_a_server_under_slow_start_exact_across_two_workers(nginx, backends):
    """S3 added by a reload is a new service: 3 requests per second more at each 1-second
    interval. With one engine for both workers S3 gets exactly its cap in every second
    (two engines would give it twice that)."""
    bs = backends(3)
    shared = unique("t.ss")
    directives = ("leastload LEASTCONNECTION", "leastload_slow_start 3 per_second interval=1",
                  f"leastload_shared {shared}")
    ng = nginx("ss", upstream_block("ss", [b.address for b in bs[:2]], *directives), workers=2)
    vs = attach(shared)
    try:
        for _ in range(4):
            assert ng.get()[0] == 200
        before = {b.address: vs.info(b.address)["selected"] for b in bs[:2]}
        assert sum(before.values()) == 4
        # A ramp's boundary looks back on the whole second before it: a few requests there
        # (1..8 here) end the ramp (the fair share, the rate below the cap). So the 4 requests
        # fall in an earlier second than the bind, and the load starts as a second begins:
        # each second a boundary looks back on has no requests or about a second of the load.
        start_of_next_second()
        ng.reload(upstream_block("ss", [b.address for b in bs], *directives))
        new = bs[2].address
        assert vs.slow_start(new) is not None  # bound under slow start
        for b in bs[:2]:  # the services that remain kept their state
            assert vs.info(b.address)["selected"] == before[b.address]
        stop = threading.Event()
        counts, errors = {}, []
        threads = [threading.Thread(target=load, args=(ng, stop, counts, errors)) for _ in range(LOAD_THREADS)]
        start_of_next_second()
        for t in threads:
            t.start()
        seen = {}  # second -> (the cap last seen in it, S3's selections in the second before it, when)
        end = time.monotonic() + LOAD_SECONDS
        try:
            while time.monotonic() < end:
                with vs.atomic():  # one lock span: nginx's workers change nothing between the reads
                    info = vs.info(new)
                    ramp = vs.slow_start(new)
                    now = time.monotonic()
                if ramp is not None:  # the vendor's automated ramp: the rate times the intervals passed
                    assert ramp["cap"] == 3 * ramp["increments"], ramp
                seen[math.floor(now)] = (ramp["cap"] if ramp is not None else None, info["sel_last_sec"], now)
                time.sleep(0.01)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=20)
        assert errors == []
        checked = []
        for second in sorted(seen):
            cap, _, last = seen[second]
            following = seen.get(second + 1)
            # the cap at the second's end: read in its last fifth (a boundary falls inside each second)
            if cap is None or following is None or last < second + 0.8 or second == min(seen):
                continue
            served = following[1]  # S3's selections in `second`, read in the next one
            checked.append((second, cap, served))
            assert served == cap, (second, cap, served, sorted(seen.items()))
        assert len(checked) >= 3, (checked, sorted(seen.items()), list(vs.slow_start_exits))
        caps = [cap for _, cap, _ in checked]
        assert all(cap % 3 == 0 and cap > 0 for cap in caps) and caps == sorted(caps), caps
        assert counts.get(new, 0) > 0
    finally:
        vs._close_shared()


def test_kill_9_of_a_worker_ends_its_transactions_within_the_bound(nginx, backends):
    """Slow requests held open on both workers; one worker is killed with SIGKILL: its open
    transactions are ended by the others' liveness sweep (250 ms, each worker's timer),
    those of the surviving worker stay counted, and all are ended once they complete."""
    bs = backends(2, delay=4.0, size=100)
    shared = unique("t.kill")
    ng = nginx("kill", upstream_block("kill", [b.address for b in bs], "leastload LEASTCONNECTION",
                                      f"leastload_shared {shared}"), workers=2)
    vs = attach(shared)
    try:
        def active():
            return sum(vs.active(b.address) for b in bs)
        def get():
            try:
                return ng.get("/", 20.0)
            except OSError as exc:  # the killed worker's clients: their connection is gone
                return exc
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            futures = [pool.submit(get) for _ in range(12)]
            assert wait_until(lambda: active() == 12, 5.0), active()
            ledger = vs._shared_stats()
            victim = ng.worker_pids()[0]
            reclaimed = ledger["reclaimed"]
            os.kill(victim, signal.SIGKILL)
            # the bound: a sweep every 250 ms on each surviving worker's timer
            assert wait_until(lambda: vs._shared_stats()["reclaimed"] > reclaimed, 2.0)
            left = active()
            assert 0 < left < 12  # the survivor's are still open
            assert vs._shared_stats()["reclaimed"] - reclaimed == 12 - left
            answers = [f.result(timeout=30) for f in futures]
        assert sum(1 for a in answers if isinstance(a, tuple) and a[0] == 200) == left
        assert wait_until(lambda: active() == 0, 5.0), active()
        # the master started a new worker, which takes part
        assert wait_until(lambda: len(ng.worker_pids()) == 2 and victim not in ng.worker_pids(), 5.0)
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            assert [a[0] for a in pool.map(lambda _: ng.get("/", 20.0), range(3))] == [200] * 3
        assert wait_until(lambda: active() == 0, 5.0)
    finally:
        vs._close_shared()


def test_a_killed_backend_is_ejected_with_no_client_error(nginx, backends):
    """outlier_failures 2: a backend killed with SIGKILL refuses connections; nginx's
    proxy_next_upstream retries elsewhere (the tried one excluded), and the engine ejects it."""
    bs = backends(3)
    shared = unique("t.eject")
    ng = nginx("ej", upstream_block("ej", [b.address for b in bs], "leastload ROUNDROBIN",
                                    "leastload_outlier_failures 2", "leastload_outlier_ejection_time 30",
                                    f"leastload_shared {shared}"), workers=2)
    vs = attach(shared)
    try:
        dead = bs[1].address
        bs[1].kill()
        answers = [ng.get() for _ in range(30)]
        assert [a[0] for a in answers] == [200] * 30
        tried = [a[1].split(", ") for a in answers]  # $upstream_addr: every address tried, in order
        retried = [t for t in tried if len(t) > 1]
        # the two failures that eject it, each retried once on another backend
        assert len(retried) == 2 and all(t[0] == dead and t[1] != dead for t in retried), retried
        assert all(t == [t[0]] and t[0] != dead for t in tried if len(t) == 1)
        info = vs.info(dead)
        assert info["ejected"] and info["failures"] == 2
        assert vs.ejection(dead) is not None
        assert {t[-1] for t in tried} == {bs[0].address, bs[2].address}
        assert "failed 2 times in a row" in ng.log()
    finally:
        vs._close_shared()


def test_a_reload_that_removes_a_busy_server_drains_it(nginx, backends):
    """S2 has transactions open when a reload removes it: it is drained (no new picks), the old
    worker's last finish unbinds it, and S1 keeps its counters."""
    bs = backends(2, delay=1.5, size=100)
    shared = unique("t.drain")
    lines = ("leastload LEASTCONNECTION", f"leastload_shared {shared}")
    ng = nginx("dr", upstream_block("dr", [b.address for b in bs], *lines))
    vs = attach(shared)
    try:
        s1, s2 = bs[0].address, bs[1].address
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(ng.get, "/", 20.0) for _ in range(4)]
            assert wait_until(lambda: vs.active(s1) == 2 and vs.active(s2) == 2, 5.0)
            ng.reload(upstream_block("dr", [s1], *lines), wait_old=False)
            assert s2 in vs.services, (vs.services, ng.log()[-3000:])
            assert vs.info(s2)["draining"] and vs.active(s2) == 2
            assert ng.get("/", 20.0)[1] == s1  # a drained service gets no new picks
            answers = [f.result(timeout=30) for f in futures]
        assert [a[0] for a in answers] == [200] * 4  # the old worker finished its requests
        assert wait_until(lambda: s2 not in vs.services, 5.0), vs.services
        assert list(vs.services) == [s1] and vs.info(s1)["selected"] == 3
    finally:
        vs._close_shared()
