"""The batch path: a trace replayed inside C must decide exactly as the same
calls made one at a time, on the C engine and on the reference."""
import dataclasses
import math

import numpy as np
import pytest

from leastload.sim import workloads
from leastload.engine.methods import KEYLESS_METHODS
from leastload.sim.replay import ReplayResult, replay, replay_per_call

EVENTS = (
    *workloads.down_up(1, 0.05, 0.15),
    *workloads.out_of_service(2, 0.08, 0.2),
    *workloads.bind_at(5, 0.1),
    *workloads.unbind_at(3, 0.12),
    *workloads.bind_at(3, 0.18),
)


def trace(seed, n_services=6, n_requests=1500, rate=6000.0, pattern="poisson", events=EVENTS):
    return workloads.make_trace(n_services=n_services, n_requests=n_requests, rate=rate, pattern=pattern,
                                seed=seed, weights="random", degrading=1, events=events)


def run(impl, method, tr, driver, **settings):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer(method, clock=clock, **settings)
    result = driver(vs, clock, tr)
    return result, vs.snapshot(), clock.now()


@pytest.mark.parametrize("method", KEYLESS_METHODS)  # a trace carries no request keys
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_replay_equals_per_call_and_the_reference(c_impl, ref_impl, method, seed):
    tr = trace(seed, pattern=("poisson", "bursty", "diurnal")[seed])
    fast = run(c_impl, method, tr, replay)
    assert fast[0].equals(run(c_impl, method, tr, replay_per_call)[0])
    reference = run(ref_impl, method, tr, replay_per_call)
    assert fast[0].equals(reference[0])
    assert fast[1:] == reference[1:]  # the whole engine state, and the clock, agree too
    served = fast[0].chosen >= 0
    assert served.sum() > 1000  # the trace really exercised the engine
    assert set(np.unique(fast[0].chosen[served])) == set(range(6))  # S5 too, after its bind


def test_c_replay_ttfb_is_ttfb_of_bit_for_bit(c_impl):
    """The C replay's TTFB (csrc/ll_replay.c) is workloads.ttfb_of's double, to the last bit.

    The equality tests above compare decisions, which a last-bit difference
    changes only at a tie in completion order or a microsecond boundary of the
    TTFB average, so they do not imply this. Here each replay is one request
    with transfer 0: the clock ends at its completion, arrival + TTFB, computed
    in C. The arrival is a small dyadic number, and only draws where this sum
    moves with a one-ulp change of the TTFB either way are kept (rounding is
    monotonic, so then any other TTFB would show), so an equal clock means an
    equal TTFB.
    """
    rng = np.random.default_rng(20240611)
    one = workloads.make_trace(n_services=1, n_requests=1, seed=0)
    clock = c_impl.ManualClock(0.0)
    vs = c_impl.VirtualServer("LEASTRESPONSETIME", clock=clock)
    checked = 0
    while checked < 2000:
        t = float(rng.integers(1, 1 << 10)) * 2.0 ** -float(rng.integers(20, 41))
        base = float(rng.uniform(0.001, 0.25))
        slope = float(rng.uniform(-0.9, 9.0)) / t * float(rng.uniform(0.0, 1.0))  # 1 + slope * t in (0.1, 10)
        factor = float(rng.uniform(0.05, 4.0))
        want = workloads.ttfb_of(base, slope, t, factor)
        done = t + want
        if t + math.nextafter(want, 0.0) == done or t + math.nextafter(want, math.inf) == done:
            continue  # this arrival would hide a one-ulp difference
        tr = dataclasses.replace(one, ttfb_base=np.array([base]), ttfb_slope=np.array([slope]),
                                 arrival=np.array([t]), ttfb_factor=np.array([factor]), transfer=np.zeros(1))
        assert tr.ttfb(0)[0] == want  # the vectorized form, the same bits
        clock.set(0.0)  # the run moves the clock forward only
        res = replay(vs, clock, tr)
        assert res.completed[0] == 1
        assert clock.now() == done, (base, slope, t, factor)
        checked += 1


@pytest.mark.parametrize("method", ["LEASTCONNECTION", "LEASTBANDWIDTH", "ROUNDROBIN"])
def test_replay_stops_for_the_slow_start_policy(c_impl, ref_impl, method):
    """S5 bound mid-trace starts slow (automated, 1-second interval): the C run must
    stop at each boundary for the Python policy, exactly where per-call calls run it."""
    tr = trace(7, n_requests=4000, rate=1000.0, events=tuple(workloads.bind_at(5, 0.5)))
    settings = dict(new_service_request=20, new_service_request_increment_interval=1)
    fast, fast_state, _ = run(c_impl, method, tr, replay, **settings)
    per_call, per_call_state, _ = run(ref_impl, method, tr, replay_per_call, **settings)
    assert fast.equals(per_call) and fast_state == per_call_state
    first_interval = (tr.arrival >= 0.5) & (tr.arrival < 1.5)
    assert (fast.chosen[first_interval] == 5).sum() == 0  # automated: cap 0 for the first interval
    second_2 = (tr.arrival >= 2.0) & (tr.arrival < 3.0)
    assert 0 < (fast.chosen[second_2] == 5).sum() <= 40  # cap 20, then 40 from t = 2.5
    assert (fast.chosen == 5).sum() > 50  # and it ramps up


def test_dropped_requests_when_nothing_is_up(c_impl, ref_impl):
    events = tuple(e for s in range(3) for e in workloads.down_up(s, 0.1, 0.2))
    tr = trace(3, n_services=3, n_requests=600, rate=2000.0, events=events)
    fast = run(c_impl, "LEASTCONNECTION", tr, replay)[0]
    assert fast.equals(run(ref_impl, "LEASTCONNECTION", tr, replay_per_call)[0])
    gap = (tr.arrival >= 0.1) & (tr.arrival < 0.2)
    assert gap.any() and (fast.chosen[gap] == -1).all() and (fast.chosen[~gap] >= 0).all()


def test_totals_add_up(c_impl):
    tr = trace(4, events=())
    res = run(c_impl, "LEASTBANDWIDTH", tr, replay)[0]
    assert res.selected.sum() == len(tr)
    assert res.completed.sum() == len(tr)  # every transaction finished by the end
    assert res.bytes.sum() == tr.req_bytes.sum() + tr.resp_bytes.sum()
    assert res.packets.sum() == tr.req_packets.sum() + tr.resp_packets.sum()
    assert np.array_equal(np.bincount(res.chosen, minlength=6), res.selected)


def test_replay_needs_the_vservers_own_manual_clock(c_impl):
    tr = trace(5, events=())
    vs = c_impl.VirtualServer("LEASTCONNECTION", clock=c_impl.ManualClock(0.0))
    with pytest.raises(ValueError, match="ManualClock"):
        replay(vs, c_impl.ManualClock(0.0), tr)


def test_empty_trace(c_impl):
    tr = trace(6, n_requests=0, events=())
    res = run(c_impl, "LEASTCONNECTION", tr, replay)[0]
    assert isinstance(res, ReplayResult) and len(res.chosen) == 0 and res.selected.sum() == 0


def test_replays_on_one_vserver_follow_every_change_of_its_services(c_impl, ref_impl):
    """The C engine keeps replay()'s name -> slot mapping between replays: every change
    of the bound services (unbind, bind again elsewhere, slots renumbered by compaction,
    a refused stranger, re-init) must reach the next replay, as the per-call driver sees it."""
    tr = workloads.make_trace(n_services=80, n_requests=3000, rate=20000.0, seed=12, weights="random")
    same_names = workloads.make_trace(n_services=80, n_requests=3000, rate=20000.0, seed=13, weights="random")
    assert same_names.services == tr.services and same_names.services is not tr.services
    names = tr.services

    def unbind_most(vs):
        for name in names[10:70]:  # 60 holes > max(20, 32): the C engine compacts its slots
            vs.unbind(name)

    def stranger(vs):
        vs.bind("stranger")
        with pytest.raises(ValueError, match="not in the trace"):
            replay(vs, vs_clock[vs], tr)
        vs.unbind("stranger")

    steps = [
        ("again", None, tr),
        ("unbind one", lambda vs: vs.unbind("S2"), tr),
        ("bind one again", lambda vs: (vs.unbind("S0"), vs.bind("S0", weight=7)), tr),
        ("compaction", unbind_most, tr),
        ("equal names", None, same_names),
        ("stranger refused", stranger, tr),
        ("re-init", lambda vs: vs.__init__("LEASTBANDWIDTH", clock=vs_clock[vs]), same_names),
    ]
    vs_clock = {}
    runs = []
    for impl, driver in ((c_impl, replay), (ref_impl, replay_per_call)):
        clock = impl.ManualClock(0.0)
        vs = impl.VirtualServer("LEASTCONNECTION", clock=clock)
        vs_clock[vs] = clock
        seen = [driver(vs, clock, tr)]
        for _, change, t in steps:
            if change:
                change(vs)
            clock.set(0.0)
            seen.append((driver(vs, clock, t), vs.snapshot()))
        runs.append(seen)
    fast, per_call = runs
    assert fast[0].equals(per_call[0])
    for (label, _, _), (f, f_state), (p, p_state) in zip(steps, fast[1:], per_call[1:]):
        assert f.equals(p) and f_state == p_state, label
        assert len(f_state["services"]) == 80, label  # the initially bound services are bound again


def test_other_threads_wait_while_a_replay_runs(c_impl):
    """replay() runs C with the GIL released but holds the vserver for its whole
    run: another thread's select() meanwhile waits, so the replay decides exactly
    as it does alone, and the waiting calls land after it."""
    import threading

    tr = trace(8, n_services=64, n_requests=100_000, rate=50_000.0, events=())
    alone = run(c_impl, "LEASTCONNECTION", tr, replay)[0]
    clock = c_impl.ManualClock(0.0)
    vs = c_impl.VirtualServer("LEASTCONNECTION", clock=clock)
    results = []
    worker = threading.Thread(target=lambda: results.append(replay(vs, clock, tr)))
    picks = []
    worker.start()
    for _ in range(10_000):  # bounded: the replay takes well under a second of C time
        if not worker.is_alive():
            break
        try:
            picks.append(vs.select())
        except Exception:  # NoServiceAvailable before the trace's services are bound
            pass
    worker.join(60)
    assert not worker.is_alive()
    assert results[0].equals(alone)
    total = sum(vs.info(n)["selected"] for n in vs.services)
    assert total == int(alone.selected.sum()) + len(picks)
