"""The proxy's own work per request, without sockets, and the engine's part of it.

One request through `leastload.proxy`'s real protocol objects: the client
connection parses a GET, the exchange picks a backend (C engine or the
reference) and sends on a pooled connection, the backend connection parses a
1 KB answer and passes it on, the transaction ends (proxy_stages.started_proxy
sets this up). The transports are stand-ins that drop the bytes, so what is
measured is Python and the engine: the kernel's part (reads, writes, TCP_INFO)
and the event loop's are not in it. The "engine calls" row is the same
request's acquire, three records and finish alone.
benchmarks/proxy_vs_haproxy.py measures the whole proxy on real sockets.
"""

import pytest
from benchmarks.proxy_stages import started_proxy  # the stage table's whole path starts its proxy the same way

REQUEST = b"GET /item?id=7 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\nContent-Type: text/plain\r\n\r\n" + b"x" * 1024)


@pytest.fixture
def proxied(impl):
    """one_request(): a request through a started Proxy over three pooled stand-in connections."""
    pytest.importorskip("httptools", reason="the proxy needs httptools (pip install leastload[proxy])")
    with started_proxy("LEASTCONNECTION", impl.VirtualServer) as (proxy, client):
        def one_request():
            client.data_received(REQUEST)
            client.backend.data_received(RESPONSE)

        yield one_request, proxy


@pytest.mark.benchmark(group="proxy path: one request, no sockets")
def test_proxy_request_path(benchmark, proxied):
    one_request, proxy = proxied
    benchmark(one_request)
    served = sum(c.by_class[2] for c in proxy.stats.backends.values())
    assert served >= 1  # every round was a whole request answered 200
    assert all(proxy.vserver.info(n)["active"] == 0 for n in proxy.vserver.services)


@pytest.mark.benchmark(group="proxy path: one request, no sockets")
def test_engine_calls_of_one_request(benchmark, impl):
    vs = impl.VirtualServer("LEASTCONNECTION", outlier_failures=5)
    for name in ("a", "b", "c"):
        vs.bind(name)

    def engine_calls():
        t = vs.acquire()
        t.record(bytes=len(REQUEST))
        t.record(bytes=len(RESPONSE))
        t.record(packets=2)
        t.finish(ttfb=0.002, status=200)

    benchmark(engine_calls)
    assert all(vs.info(n)["active"] == 0 for n in vs.services)


def test_stages_of_one_request(impl):
    """benchmarks/proxy_stages.py (the stage table of proxy_vs_haproxy.py) on small numbers: every
    timed stage a positive time, the whole path more than its parse, every request it sent answered."""
    pytest.importorskip("httptools", reason="the proxy needs httptools (pip install leastload[proxy])")
    import math

    from benchmarks.proxy_stages import STAGES, stages_ns_per_request

    stages = stages_ns_per_request("LEASTCONNECTION", 1024, number=200, repeat=2, engine=impl.VirtualServer)
    # Timed directly: positive. Differences of two timings ("account", "engine_records_and_finish",
    # "other") are only finite: on a busy machine one timing can exceed the other it is taken from.
    timed = ("parse", "pick", "forward", "whole", "acquire", "encode_request", "response_read",
             "engine_calls", "counters")
    for name in (*STAGES, "whole", "other", *stages["parts"]):
        figure = stages["parts"][name] if name in stages["parts"] else stages[name]
        assert math.isfinite(figure), (name, figure)
        if name in timed:
            assert figure > 0, (name, figure)
    assert stages["whole"] > stages["parse"]
    assert stages["whole_requests"] >= 200 * 2  # the timed runs' requests, and the warm-up's
    assert stages["whole_answered_2xx"] == stages["whole_requests"]
    assert stages["whole_active_after"] == 0
    assert stages["http_layer"] in ("compiled", "python")
    assert stages["engine"] == f"{impl.VirtualServer.__module__}.{impl.VirtualServer.__name__}"
