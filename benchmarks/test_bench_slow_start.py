"""What slow start costs on the select path: one service in slow start vs none.

The cap is enforced in the engine (a capped-out service holds an infinite key
until the next second), so select() should cost the same either way; the
policy runs in Python only at interval boundaries, which these loops never
cross (the clock stands still).
"""
import pytest

from leastload.bench import cases


def _vserver(impl, n, in_slow_start):
    vs, clock = cases.bound(impl, "LEASTCONNECTION", n)
    if in_slow_start:
        vs.set(new_service_request=5)  # manual: 5 requests a second, then skipped
        vs.bind("new")
        assert vs.slow_start("new")["cap"] == 5
    return vs


@pytest.mark.parametrize("in_slow_start", [False, True], ids=["none in slow start", "one in slow start"])
@pytest.mark.benchmark(group="per-call select+finish LEASTCONNECTION, slow start")
def test_select_finish_slow_start(benchmark, impl, n, in_slow_start):
    vs = _vserver(impl, n, in_slow_start)
    select, finish = vs.select, vs.finish

    def step():
        finish(select())

    benchmark(step)
    if in_slow_start:  # the cap held: at most its 5 in this (frozen) second
        assert vs.info("new")["selected"] <= 5
