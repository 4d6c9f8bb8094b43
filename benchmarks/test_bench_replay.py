"""A whole trace replayed: replay() takes the C fast path for [c-extension], the per-call driver for [pure-python]."""
import pytest

from leastload.bench import cases
from leastload.sim.replay import replay
from leastload.sim.workloads import make_trace


def requests_for(n, quick):
    """Shorter traces at larger n, so the reference's O(n) per request stays bearable."""
    most = 2_000 if quick else 20_000
    return max(20, min(most, 200_000 // n))


@pytest.mark.parametrize("method", ["LEASTCONNECTION", "LEASTBANDWIDTH"])
@pytest.mark.benchmark(group="replay")
def test_replay(benchmark, impl, n, method, quick):
    trace = make_trace(n, requests_for(n, quick), rate=50_000.0, seed=0, degrading=1)

    def fresh():  # binding is setup, not replay
        vs, clock = cases.bound(impl, method, 0)
        cases.prebind(vs, trace)
        return (vs, clock, trace), {}

    benchmark.extra_info["requests"] = len(trace)
    result = benchmark.pedantic(replay, setup=fresh, rounds=3 if n > 1024 else 5, iterations=1)
    assert (result.chosen >= 0).all() and int(result.completed.sum()) == len(trace)
