"""The control plane at scale (C engine): state changes, bind/unbind with slow
start, drain + rebind, on one vserver of 10**5 and one of 10**6 services.

Each step makes a pair of calls that leaves the vserver as it found it (so the
rounds measure the same state); the figure is per pair. The vservers are built
once per module and size (binding 10**6 services takes seconds). Sizes:
10**5 and 10**6; LEASTLOAD_BENCH_QUICK=1: 300 and 3000;
LEASTLOAD_BENCH_CONTROL_SIZES=100000,400000 chooses.
"""
import os

import pytest

from leastload.bench import cases

QUICK = os.environ.get("LEASTLOAD_BENCH_QUICK", "").strip() not in ("", "0")
CONTROL_SIZES = (300, 3000) if QUICK else (10**5, 10**6)
if os.environ.get("LEASTLOAD_BENCH_CONTROL_SIZES"):
    CONTROL_SIZES = tuple(int(x) for x in os.environ["LEASTLOAD_BENCH_CONTROL_SIZES"].split(","))

# automated slow start: 4 requests a second more every 10 seconds (the clock
# stands still here, so no boundary is ever crossed: what is measured is the
# bookkeeping of a ramp's start and end)
SLOW_START = dict(new_service_request=4, new_service_request_increment_interval=10)
SLOW_START_OFF = dict(new_service_request=0, new_service_request_increment_interval=0)


@pytest.fixture(scope="module", params=CONTROL_SIZES, ids=lambda n: f"n={n}")
def n(request):
    """Overrides the suite's n: this module's sizes (the groups are still split by n)."""
    return request.param


@pytest.fixture(scope="module")
def big(c_impl, n):
    """(vs, names): n services bound, LEASTCONNECTION, a few transactions open, ManualClock at 0."""
    vs = c_impl.VirtualServer("LEASTCONNECTION", clock=c_impl.ManualClock(0.0))
    vs.reserve(n + 16)
    all_names = cases.names(n)
    bind = vs.bind
    for name in all_names:
        bind(name)
    for _ in range(64):  # some load, so the selection trees are not all ties
        vs.select()
    return vs, all_names


@pytest.fixture
def vserver(big):
    """The module's vserver, slow start off again after each test."""
    vs, all_names = big
    yield vs, all_names[len(all_names) // 2]
    vs.set(**SLOW_START_OFF)
    assert len(vs) == len(all_names)


def _slow_start(vs, on):
    vs.set(**(SLOW_START if on else SLOW_START_OFF))


@pytest.mark.benchmark(group="control: set_state UP -> OUT_OF_SERVICE -> UP (c, per pair)")
def test_set_state_out_of_service(benchmark, vserver):
    vs, name = vserver
    set_state = vs.set_state

    def step():
        set_state(name, "OUT_OF_SERVICE")
        set_state(name, "UP")

    benchmark(step)
    assert vs.state(name) == "UP"


@pytest.mark.parametrize("slow_start", [False, True], ids=["slow start off", "slow start on"])
@pytest.mark.benchmark(group="control: set_state UP -> DOWN -> UP (c, per pair)")
def test_set_state_down_up(benchmark, vserver, slow_start):
    vs, name = vserver
    _slow_start(vs, slow_start)
    set_state = vs.set_state

    def step():
        set_state(name, "DOWN")
        set_state(name, "UP")

    benchmark(step)
    assert vs.state(name) == "UP"
    assert (vs.slow_start(name) is not None) == slow_start  # DOWN -> UP started a ramp


@pytest.mark.parametrize("slow_start", [False, True], ids=["slow start off", "slow start on"])
@pytest.mark.benchmark(group="control: bind + unbind of a new service (c, per pair)")
def test_bind_unbind(benchmark, vserver, slow_start):
    vs, _ = vserver
    _slow_start(vs, slow_start)
    bind, unbind = vs.bind, vs.unbind
    seen = []

    def step():
        bind("new")
        if not seen:
            seen.append(vs.slow_start("new"))
        unbind("new")

    benchmark(step)
    assert (seen[0] is not None) == slow_start
    assert "new" not in vs


@pytest.mark.benchmark(group="control: drain (idle: unbinds at once) + bind again (c, per pair)")
def test_drain_rebind(benchmark, vserver):
    vs, name = vserver
    drain, bind = vs.drain, vs.bind
    weight = vs.weight(name)

    def step():
        drain(name)
        bind(name, weight)

    benchmark(step)
    assert name in vs and not vs.info(name)["draining"]


@pytest.mark.benchmark(group="control: begin, drain, finish (unbinds), bind again (c, per four calls)")
def test_drain_busy_rebind(benchmark, vserver):
    vs, name = vserver
    begin, drain, finish, bind = vs.begin, vs.drain, vs.finish, vs.bind
    weight = vs.weight(name)

    def step():
        begin(name)
        drain(name)
        finish(name)  # the last open transaction ends: the drain unbinds it
        bind(name, weight)

    benchmark(step)
    assert name in vs and vs.active(name) == 0
