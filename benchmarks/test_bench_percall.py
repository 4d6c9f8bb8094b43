"""One call at a time from Python: the pairs a request makes, and the empty call under them."""
import pytest

from leastload import _bench_cases as cases


@pytest.mark.benchmark(group="per-call select+record LEASTBANDWIDTH")
def test_select_record(benchmark, impl, n):
    vs, _ = cases.loaded(impl, "LEASTBANDWIDTH", n)
    benchmark(cases.pair_step(vs, "LEASTBANDWIDTH"))


@pytest.mark.benchmark(group="per-call select+finish LEASTCONNECTION")
def test_select_finish(benchmark, impl, n):
    vs, _ = cases.loaded(impl, "LEASTCONNECTION", n)
    benchmark(cases.pair_step(vs, "LEASTCONNECTION"))


@pytest.mark.benchmark(group="per-call select+record LEASTBANDWIDTH, monotonic clock")
def test_select_record_monotonic_clock(benchmark, impl, n):
    # the default clock: compare with test_select_record to see what reading it costs
    vs, _ = cases.loaded(impl, "LEASTBANDWIDTH", n, monotonic=True)
    benchmark(cases.pair_step(vs, "LEASTBANDWIDTH"))


@pytest.mark.benchmark(group="floor: the empty call _noop(1) (C only)")
def test_noop(benchmark, c_impl):
    vs, _ = cases.bound(c_impl, "LEASTCONNECTION", 3)
    assert benchmark(vs._noop, 1) == 1
