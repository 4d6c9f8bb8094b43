"""The vendor's least-bandwidth and least-response-time tables (SPEC's conformance rows,
tests/engine/test_conformance.py) reproduced through Debian's nginx with the module:
the tables' initial N are put in the live shared vserver from Python, then real requests
through nginx to real backends must be picked as the tables say."""
import concurrent.futures

import pytest

from nginxrun import attach, unique
from leastload_testkit.nginx_conf import upstream_block
from leastload_testkit.waits import wait_until


def names_of(bs):
    return {b.address: f"S{i}" for i, b in enumerate(bs, 1)}


def ended(vs, bs):
    """Waits (bounded) until every transaction nginx began on `bs` has ended in the shared
    vserver. A worker applies an ended transaction (its answer's bytes with it, under one
    lock) at its next lock, at the latest its 250 ms sweep: a client can have its answer first."""
    assert wait_until(lambda: sum(vs.active(b.address) for b in bs) == 0, 5.0), \
        [vs.active(b.address) for b in bs]


def test_least_bandwidth_table(nginx, backends):
    """Every request costs the same C bytes (same request, same answer size): the table's
    initial N (3, 5, 2) are 3C, 5C, 2C, and each pick adds C."""
    bs = backends(3, size=700)
    shared = unique("t.lb")
    ng = nginx("lb", upstream_block("lb", [b.address for b in bs], "leastload LEASTBANDWIDTH",
                                    f"leastload_shared {shared}"))
    name = names_of(bs)
    vs = attach(shared)
    try:
        status, up, _ = ng.get()  # measures C: the tie of three zeros goes to S1
        assert (status, name[up]) == (200, "S1")
        ended(vs, bs)
        cost = vs.load(bs[0].address)
        assert cost > 700
        vs.record(bs[0].address, bytes=2 * cost)
        vs.record(bs[1].address, bytes=5 * cost)
        vs.record(bs[2].address, bytes=2 * cost)
        picks = []
        for _ in range(8):
            status, up, _ = ng.get()
            assert status == 200
            picks.append(name[up])
        assert picks == "S3 S1 S3 S1 S3 S1 S2 S3".split()
        ended(vs, bs)
        assert [vs.load(b.address) // cost for b in bs] == [6, 6, 6]  # 3+3, 5+1, 2+4: each pick cost C
        assert [vs.load(b.address) % cost for b in bs] == [0, 0, 0]
    finally:
        vs._close_shared()



def test_least_bandwidth_counts_a_request_when_it_is_sent(nginx, backends):
    """The request's bytes weigh from the pick, its answer's when it ends: requests in
    flight to a service that has not answered yet are not a burst. With S1 already heavy,
    six requests held open by their backends alternate S2, S3 (each pick adds the request's
    R bytes to its service); counted only at the end they would all have gone to S2."""
    bs = backends(3, delay=3.0, size=100)
    shared = unique("t.lbsent")
    ng = nginx("lbsent", upstream_block("lbsent", [b.address for b in bs], "leastload LEASTBANDWIDTH",
                                        f"leastload_shared {shared}"))
    name = names_of(bs)
    vs = attach(shared)
    try:
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            first = pool.submit(ng.get, "/", 20.0)  # the tie of three zeros goes to S1
            assert wait_until(lambda: vs.load(bs[0].address) > 0, 5.0)
            request = vs.load(bs[0].address)  # R: what nginx sends, counted while the answer is awaited
            assert first.result(timeout=30)[0] == 200
            ended(vs, bs[:1])
            assert vs.load(bs[0].address) > request  # and the answer's bytes at its end
            vs.record(bs[0].address, bytes=100 * request)  # S1 well above six requests' worth
            futures = []
            for k in range(6):
                futures.append(pool.submit(ng.get, "/", 20.0))
                assert wait_until(lambda: vs.load(bs[1].address) + vs.load(bs[2].address) == (k + 1) * request,
                                  5.0), k
            answers = [f.result(timeout=30) for f in futures]
        assert [s for s, _, _ in answers] == [200] * 6
        assert [name[up] for _, up, _ in answers] == "S2 S3 S2 S3 S2 S3".split()
    finally:
        vs._close_shared()

def lrt_table(nginx, backends, weights, expected):
    """TTFB (2, 1, 2) ms and active (3, 7, 0) put in from Python; then 8 requests, each
    held open by its backend until all are picked, go through nginx one after the other."""
    bs = backends(3, delay=3.0, size=100)
    shared = unique("t.lrt")
    servers = [f"{b.address} weight={w}" for b, w in zip(bs, weights)]
    ng = nginx("lrt", upstream_block("lrt", servers, "leastload LEASTRESPONSETIME", f"leastload_shared {shared}"))
    name = names_of(bs)
    vs = attach(shared)
    try:
        for b, ttfb, active in zip(bs, (0.002, 0.001, 0.002), (3, 7, 0)):
            vs.begin(b.address)
            vs.finish(b.address, ttfb=ttfb, status=200)
            for _ in range(active):
                vs.begin(b.address)
        total = sum(vs.active(b.address) for b in bs)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = []
            for k in range(8):
                futures.append(pool.submit(ng.get, "/", 20.0))
                # the next request goes once this one is picked (counted active)
                assert wait_until(lambda: sum(vs.active(b.address) for b in bs) == total + k + 1, 5.0), k
            answers = [f.result(timeout=30) for f in futures]
        assert [s for s, _, _ in answers] == [200] * 8
        assert [name[up] for _, up, _ in answers] == expected.split()
    finally:
        vs._close_shared()


def test_least_response_time_table(nginx, backends):
    lrt_table(nginx, backends, (1, 1, 1), "S3 S3 S3 S1 S3 S2 S3 S1")


def test_least_response_time_table_weighted(nginx, backends):
    lrt_table(nginx, backends, (2, 3, 4), "S3 S3 S3 S3 S3 S2 S3 S2")


def test_least_packets_counts_the_upstream_connections_segments(nginx, backends):
    """LEASTPACKETS: each request's upstream connection gives its TCP_INFO segments (in and
    out) to the engine at free, so N grows with every request and the picks spread."""
    bs = backends(2, size=20000)
    shared = unique("t.lp")
    ng = nginx("lp", upstream_block("lp", [b.address for b in bs], "leastload LEASTPACKETS",
                                    f"leastload_shared {shared}"))
    vs = attach(shared)
    try:
        picks = [ng.get()[1] for _ in range(6)]
        assert set(picks) == {b.address for b in bs}
        ended(vs, bs)
        for b in bs:
            info = vs.info(b.address)
            assert info["packets"] >= 4 * info["selected"] > 0  # a handshake, a request, an answer, a close
    finally:
        vs._close_shared()


def test_ttfb_comes_from_nginx_header_time_with_keepalive(nginx, backends):
    """LEASTRESPONSETIME learns each service's TTFB from nginx's header_time of its 200s (whole
    milliseconds), with `keepalive` after the balancer: the slow backend's average is at least
    its delay, the fast one's well under it, and the picks go to the fast one."""
    fast, slow = backends(1, delay=0.0, size=100) + backends(1, delay=0.08, size=100)
    shared = unique("t.ttfb")
    ng = nginx("tt", upstream_block("tt", [fast.address, slow.address], "leastload LEASTRESPONSETIME",
                                    f"leastload_shared {shared}", "keepalive 4"))
    vs = attach(shared)
    try:
        picks = [ng.get()[1] for _ in range(12)]
        ended(vs, [fast, slow])
        fast_ttfb, slow_ttfb = vs.info(fast.address)["ttfb"], vs.info(slow.address)["ttfb"]
        assert slow_ttfb is not None and slow_ttfb >= 0.08
        assert fast_ttfb is not None and fast_ttfb < 0.04
        # sequential requests: no service is active at a pick, so N = 0 for both and the tie
        # rule alternates (the vendor's: no active transactions, N = 0 whatever the TTFB)
        assert picks.count(fast.address) == picks.count(slow.address) == 6
        assert vs.active(fast.address) == vs.active(slow.address) == 0
    finally:
        vs._close_shared()


def test_urlhash_sends_each_url_to_one_backend_from_every_worker(nginx, backends):
    """URLHASH over $request_uri: the same URL reaches the same backend whichever of the two
    workers takes it (one engine, one seed), and the URLs spread over the backends."""
    bs = backends(3, size=100)
    shared = unique("t.hash")
    ng = nginx("uh", upstream_block("uh", [b.address for b in bs], "leastload URLHASH", f"leastload_shared {shared}"),
               workers=2)
    where = {}
    for round_ in range(3):
        for k in range(12):
            status, up, _ = ng.get(f"/item/{k}")
            assert status == 200
            assert where.setdefault(k, up) == up, (k, round_)
    assert len(set(where.values())) >= 2
    # the same picks as the engine's own URLHASH over the same names (rendezvous hashing: the
    # names' and the URL's XXH64, nothing of the order or of the process)
    from leastload.engine.native import VirtualServer
    ref = VirtualServer("URLHASH")
    for b in bs:
        ref.bind(b.address)
    assert {k: ref.select(key=f"/item/{k}") for k in where} == where


@pytest.mark.parametrize("method,expect", [
    ("ROUNDROBIN", "cycle"), ("LEASTREQUEST", "cycle"), ("LEASTCONNECTION", "cycle"),
    ("P2C", "spread"), ("PEAKEWMA", "spread"),
    ("SOURCEIPHASH", "one"), ("DOMAINHASH", "one"), ("TOKEN $arg_t", "one"),
])
def test_every_method_serves_through_nginx(nginx, backends, method, expect):
    """Sequential requests: the least-* methods and round robin go round in bind order (no
    service is busy at a pick: all ties), P2C and PEAKEWMA spread, and a hash method sends one
    client (one address, one Host, one token) to one backend."""
    bs = backends(3, size=100)
    shared = unique("t.m")
    ng = nginx("m", upstream_block("m", [b.address for b in bs], f"leastload {method}", f"leastload_shared {shared}"))
    picks = []
    for _ in range(12):
        status, up, _ = ng.get("/?t=abc")
        assert status == 200
        picks.append(up)
    if expect == "cycle":
        assert picks == [b.address for b in bs] * 4
    elif expect == "spread":
        assert len(set(picks)) >= 2
    else:
        assert len(set(picks)) == 1
