"""One call at a time from Python: the pairs a request makes, and the empty call under them."""
import pytest

from leastload.bench import cases


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


# ---- select(exclude=...) and transaction handles ---------------------------------------

def _best_and_other(vs):
    """The service select() picks on a steady LEASTBANDWIDTH vserver, and another one."""
    best = vs.select()  # LEASTBANDWIDTH keys ignore active: the pick does not move them
    other = next(name for name in vs.services if name != best)
    return best, other


@pytest.mark.parametrize("exclude", ["none", "the best", "another"])
@pytest.mark.benchmark(group="per-call select() vs select(exclude={one}) LEASTBANDWIDTH")
def test_select_exclude(benchmark, impl, n, exclude):
    # LEASTBANDWIDTH without record(): every select leaves the keys as they were,
    # so a bare select() loop measures one steady state. "the best": the service
    # select() would pick is excluded, so the engine must find the next one.
    vs, _ = cases.loaded(impl, "LEASTBANDWIDTH", n)
    best, other = _best_and_other(vs)
    select = vs.select
    if exclude == "none":
        picked = benchmark(select)
    else:
        excluded = {best if exclude == "the best" else other}
        picked = benchmark(select, exclude=excluded)
        assert picked not in excluded
    assert picked in vs


@pytest.mark.parametrize("how", ["select()+finish(name)", "acquire()+t.finish()", "with acquire()"])
@pytest.mark.benchmark(group="per-call select+finish vs acquire+t.finish LEASTCONNECTION")
def test_acquire_finish(benchmark, impl, n, how):
    vs, _ = cases.loaded(impl, "LEASTCONNECTION", n)
    select, finish, acquire = vs.select, vs.finish, vs.acquire
    if how == "select()+finish(name)":
        def step():
            finish(select())
    elif how == "acquire()+t.finish()":
        def step():
            acquire().finish()
    else:
        def step():
            with acquire():
                pass
    before = vs.snapshot()["services"]
    benchmark(step)
    after = vs.snapshot()["services"]
    assert [s["active"] for s in after] == [s["active"] for s in before]  # every transaction ended
