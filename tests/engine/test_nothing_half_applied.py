"""Nothing half-applied, and the batch path with the proxy-facing features.

- replay() checks everything before it binds anything, and reads its own copy
  of the trace (arrays changed during the run cannot reach C), or a sealed
  trace as it is (its arrays cannot change);
- bind() with slow start binds nothing if the clock raises;
- a replay with passive ejection, or with services drained mid-run, decides
  exactly as the same calls made one at a time, on both engines.
"""
import dataclasses

import numpy as np
import pytest

from leastload.sim import replay as replay_module
from leastload.sim import workloads
from leastload.sim.replay import replay, replay_per_call


def trace(seed, n_services=6, n_requests=3000, rate=3000.0, error_rate=0.3, events=()):
    return workloads.make_trace(n_services=n_services, n_requests=n_requests, rate=rate, seed=seed,
                                weights="random", error_rate=error_rate, events=events)


def run(impl, tr, driver, cls=None, **settings):
    clock = impl.ManualClock(0.0)
    vs = (cls or impl.VirtualServer)("LEASTCONNECTION", clock=clock, **settings)
    result = driver(vs, clock, tr)
    return result, vs


@pytest.mark.parametrize("seed", [0, 1])
def test_replay_with_ejection_equals_per_call_and_the_reference(c_impl, ref_impl, seed):
    tr = trace(seed)
    settings = dict(outlier_failures=2, outlier_ejection_time=0.05, outlier_max_ejection_percent=50,
                    new_service_request=50, new_service_request_increment_interval=1)
    fast, fast_vs = run(c_impl, tr, replay, **settings)
    per_call, per_call_vs = run(c_impl, tr, replay_per_call, **settings)
    reference, ref_vs = run(ref_impl, tr, replay_per_call, **settings)
    assert fast.equals(per_call) and fast.equals(reference)
    assert fast_vs.snapshot() == ref_vs.snapshot() == per_call_vs.snapshot()
    assert fast_vs.outlier_events == ref_vs.outlier_events
    what = {w for _, _, w in fast_vs.outlier_events}
    assert {"ejected", "returned"} <= what  # the trace's 30 % errors really ejected services


def draining_class(impl):
    class DrainsOutliers(impl.VirtualServer):
        """Drains a service at its first failure instead of ejecting it."""

        def _on_outlier(self, name):
            self.drain(name)

    return DrainsOutliers


def test_replay_with_drains_equals_per_call_and_the_reference(c_impl, ref_impl):
    tr = trace(3, error_rate=0.02)
    fast, fast_vs = run(c_impl, tr, replay, draining_class(c_impl), outlier_failures=1)
    per_call, _ = run(c_impl, tr, replay_per_call, draining_class(c_impl), outlier_failures=1)
    reference, ref_vs = run(ref_impl, tr, replay_per_call, draining_class(ref_impl), outlier_failures=1)
    assert fast.equals(per_call) and fast.equals(reference)
    assert fast_vs.snapshot() == ref_vs.snapshot()
    assert len(fast_vs.services) < len(tr.services)  # drained services were unbound mid-run
    assert (fast.chosen == -1).any()  # ... until nobody was left for some requests


def test_replay_binds_nothing_when_the_trace_is_refused(impl):
    tr = trace(4)
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer("LEASTCONNECTION", clock=clock)
    vs.bind("stranger")  # bound but not a service of the trace
    before = vs.snapshot()
    with pytest.raises(ValueError, match="not in the trace"):
        replay(vs, clock, tr)
    assert vs.snapshot() == before


def test_c_replay_with_a_foreign_clock_binds_nothing(c_impl):
    tr = trace(5)
    vs = c_impl.VirtualServer("LEASTCONNECTION", clock=c_impl.ManualClock(0.0))
    with pytest.raises(ValueError, match="ManualClock"):
        replay(vs, c_impl.ManualClock(0.0), tr)
    assert vs.services == ()


def scribbling_class(impl, original):
    class Scribbler(impl.VirtualServer):
        """At every slow-start boundary, overwrites the caller's trace arrays."""

        def _on_deadline(self, now):
            original.arrival[:] = 1e300
            original.ttfb_factor[:] = np.nan
            original.status[:] = 0
            original.resp_bytes[:] = 2**64 - 1
            super()._on_deadline(now)

    return Scribbler


def test_replay_reads_its_own_copy_of_the_trace(c_impl):
    events = tuple(workloads.bind_at(5, 0.2))
    clean = trace(6, events=events)
    settings = dict(new_service_request=10, new_service_request_increment_interval=1)
    expected, _ = run(c_impl, clean, replay, **settings)
    scribbled = trace(6, events=events)
    got, _ = run(c_impl, scribbled, replay, scribbling_class(c_impl, scribbled), **settings)
    assert (scribbled.status == 0).all()  # the hook ran and overwrote the caller's arrays
    assert got.equals(expected)


@pytest.mark.parametrize("driver", [replay, replay_per_call])
def test_a_sealed_trace_is_replayed_as_it_is(c_impl, driver):
    events = tuple(workloads.bind_at(5, 0.2))
    clean = trace(6, events=events)
    sealed = clean.sealed()
    assert sealed.is_sealed() and not clean.is_sealed()
    assert sealed == clean and sealed.sealed() is sealed
    with pytest.raises(ValueError, match="read-only"):
        sealed.status[0] = 0  # the promise that lets the replay skip its copy
    assert replay_module._own_copy(sealed) is sealed
    assert replay_module._own_copy(clean) is not clean
    settings = dict(new_service_request=10, new_service_request_increment_interval=1)
    expected, expected_vs = run(c_impl, clean, driver, **settings)
    got, got_vs = run(c_impl, sealed, driver, **settings)
    assert got.equals(expected) and got_vs.snapshot() == expected_vs.snapshot()


def test_a_read_only_view_of_writeable_memory_is_not_sealed():
    clean = trace(7)
    view = clean.arrival.view()
    view.flags.writeable = False  # read-only here, but clean.arrival can still change it
    half = dataclasses.replace(clean.sealed(), arrival=view)
    assert not half.is_sealed()
    assert replay_module._own_copy(half) is not half  # copied, as any trace that may change


class FailingClock:
    def __init__(self, t):
        self.t, self.fail = t, False

    def now(self):
        if self.fail:
            raise RuntimeError("clock broke")
        return self.t


@pytest.mark.parametrize("interval", [0, 10])
def test_bind_with_slow_start_binds_nothing_if_the_clock_raises(impl, interval):
    clock = FailingClock(5.0)
    vs = impl.VirtualServer("ROUNDROBIN", clock=clock, new_service_request=4,
                            new_service_request_increment_interval=interval)
    vs.bind("S1")
    vs.bind("S2")
    before = vs.snapshot()
    clock.fail = True
    with pytest.raises(RuntimeError, match="clock broke"):
        vs.bind("S3")
    clock.fail = False
    assert vs.snapshot() == before and "S3" not in vs
    vs.bind("S3")  # and it can be bound afterwards, into slow start
    assert vs.slow_start("S3") is not None


def test_set_state_down_up_with_slow_start_changes_nothing_if_the_clock_raises(impl):
    clock = FailingClock(5.0)
    vs = impl.VirtualServer("ROUNDROBIN", clock=clock, new_service_request=4)
    for name in ("S1", "S2"):
        vs.bind(name)
    vs.set_state("S2", "DOWN")
    before = vs.snapshot()
    clock.fail = True
    with pytest.raises(RuntimeError, match="clock broke"):
        vs.set_state("S2", "UP")
    assert vs.snapshot() == before and vs.state("S2") == "DOWN"
