"""The hash methods per call: select(key=...) + finish beside LEASTCONNECTION's select() + finish.

Each group holds both at one n, so a table reads as the ratio. A hash pick
scores every eligible service (rendezvous hashing), so its cost grows with
n, where LEASTCONNECTION's is O(log n). Weights: all equal (the usual hash
configuration; the pick needs no logarithm) and random 1..100 (a service
whose weight differs from the best one's so far costs a table lookup).
The keys cycle through 1,024 of each method's form (leastload.bench.cases).

    python -m pytest benchmarks/test_bench_hash.py
"""
import pytest

from leastload.bench import cases

SIZES = (64, 1024)


def _vserver(impl, method, n, weights):
    if weights == "equal":
        vs, _ = cases.bound(impl, method, n)
    else:  # the random-load case: random weights 1..100 (and loads, for LEASTCONNECTION)
        vs, _ = cases.loaded(impl, method, n)
    return vs


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"n={n}")
@pytest.mark.parametrize("weights", ["equal", "random"])
@pytest.mark.parametrize("method", ["LEASTCONNECTION", "URLHASH", "SOURCEIPHASH"])
@pytest.mark.benchmark(group="per-call select(key)+finish: hash vs LEASTCONNECTION")
def test_select_key_finish(benchmark, impl, n, weights, method):
    vs = _vserver(impl, method, n, weights)
    before = [vs.active(name) for name in vs.services]
    benchmark(cases.pair_step(vs, method))
    assert [vs.active(name) for name in vs.services] == before  # every transaction ended
