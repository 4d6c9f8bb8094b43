"""Scaling in n of the C engine: one group, all sizes (the parameter is `size`, so groups are not split)."""
import pytest

from leastload.bench import cases


@pytest.mark.benchmark(group="scaling: select+finish LEASTCONNECTION (c)")
def test_scaling_select_finish(benchmark, c_impl, size):
    vs, _ = cases.loaded(c_impl, "LEASTCONNECTION", size)
    benchmark(cases.pair_step(vs, "LEASTCONNECTION"))


@pytest.mark.benchmark(group="scaling: select+record LEASTBANDWIDTH (c)")
def test_scaling_select_record(benchmark, c_impl, size):
    vs, _ = cases.loaded(c_impl, "LEASTBANDWIDTH", size)
    benchmark(cases.pair_step(vs, "LEASTBANDWIDTH"))
