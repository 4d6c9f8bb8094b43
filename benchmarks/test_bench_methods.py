"""Every method's per-call pair at n = 64, beside LEASTCONNECTION's (C engine).

`python -m leastload bench` prints the same with each method's ratio to
LEASTCONNECTION (the goal: none over 2x).
"""
import pytest

from leastload.bench import cases


@pytest.mark.parametrize("method", cases.METHODS)
@pytest.mark.benchmark(group="per-call pair of every method, n=64 (C)")
def test_method_pair_n64(benchmark, c_impl, method):
    vs, _ = cases.loaded(c_impl, method, 64)
    step = cases.pair_step(vs, method)
    benchmark(step)
    assert vs.method == method


@pytest.mark.parametrize("method", ["P2C", "PEAKEWMA"])
@pytest.mark.benchmark(group="P2C, PEAKEWMA select+finish by number of services (C): O(1), flat")
def test_sampled_by_n(benchmark, c_impl, n, method):
    vs, _ = cases.loaded(c_impl, method, n)
    benchmark(cases.pair_step(vs, method))
    assert vs.method == method
