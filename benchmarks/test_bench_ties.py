"""The tie rule's worst case: every service tied (LEASTCONNECTION, all idle) against random loads."""
import pytest

from leastload.bench import cases


@pytest.mark.benchmark(group="ties: select+finish LEASTCONNECTION")
def test_all_tied(benchmark, impl, n):
    vs, _ = cases.tied(impl, n)
    benchmark(cases.pair_step(vs, "LEASTCONNECTION"))
    assert all(vs.load(s) == 0 for s in vs.services)  # select+finish kept every service idle: still all tied


@pytest.mark.benchmark(group="ties: select+finish LEASTCONNECTION")
def test_random_load(benchmark, impl, n):
    vs, _ = cases.loaded(impl, "LEASTCONNECTION", n)
    benchmark(cases.pair_step(vs, "LEASTCONNECTION"))
