"""slow_start_guard: closed-loop slow start (not the vendor's), on both engines.

An automated ramp steps up at a boundary only while the new service's TTFB
average and its failure rate are within the factor of its peers'; otherwise it
steps back one increment (never below the first) and says why in slow_start(),
show() and explain(). Off (0) by default: the vendor's open loop, whose tables
the other slow-start tests hold.
"""
import pytest

np = pytest.importorskip("numpy", reason="the steady simulation (leastload.sim) needs numpy")

from leastload.sim.steady import simulate  # noqa: E402


def ramp_vs(impl, guard):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer("LEASTCONNECTION", clock)
    vs.bind("A")
    vs.bind("B")
    vs.set(new_service_request=10, new_service_request_increment_interval=1, slow_start_guard=guard)
    return vs, clock


def test_a_newcomer_five_times_slower_stays_capped(impl):
    vs, clock = ramp_vs(impl, 2)
    run = simulate(vs, clock, rate=100, duration=20, events=[(1, "bind", "N")], ttfb={"N": 0.05})
    new = run.of("N")
    assert max(new[3:]) <= 10  # held at its first step (10 a second) from its first TTFB samples on
    assert vs.slow_start("N")["held"] == "TTFB 5.0x its peers'"
    assert vs.slow_start("N")["increments"] == 1
    assert all(name != "N" for _, name, _ in vs.slow_start_exits)  # its ramp never ended
    assert "held back: TTFB 5.0x its peers'" in str(vs.show())


def test_a_healthy_newcomer_completes_its_ramp(impl):
    vs, clock = ramp_vs(impl, 2)
    run = simulate(vs, clock, rate=100, duration=20, events=[(1, "bind", "N")], ttfb={"N": 0.012})
    assert vs.slow_start("N") is None
    assert [why for _, name, why in vs.slow_start_exits if name == "N"] == ["the cap reached the fair share"]
    assert run.of("N")[-1] >= 30  # its share of 100 a second among three


def test_the_guard_off_is_the_vendor_s_open_loop(impl):
    vs, clock = ramp_vs(impl, 0)
    simulate(vs, clock, rate=100, duration=20, events=[(1, "bind", "N")], ttfb={"N": 0.05})
    assert vs.slow_start("N") is None  # five times slower, ramped all the same
    assert [why for _, name, why in vs.slow_start_exits if name == "N"] == ["the cap reached the fair share"]


def test_a_newcomer_that_fails_steps_back(impl):
    vs, clock = ramp_vs(impl, 2)
    simulate(vs, clock, rate=100, duration=4, events=[(1, "bind", "N")])
    assert vs.slow_start("N")["increments"] >= 2 and vs.slow_start("N")["held"] is None
    before = vs.slow_start("N")["increments"]
    for _ in range(3):  # one second: its picks fail (a 503 each), the others' succeed
        clock.advance(1.0)
        for _ in range(60):
            name = vs.select()
            vs.finish(name, ttfb=0.01, status=503 if name == "N" else 200)
    state = vs.slow_start("N")
    assert state["held"].startswith("failures 100% of its requests, its peers' 0%")
    assert state["increments"] == max(1, before - 3)  # one increment back at each boundary
    assert state["cap"] == 10 * state["increments"]


def test_explain_says_why_a_held_ramp_is_capped(impl):
    vs, clock = ramp_vs(impl, 2)
    simulate(vs, clock, rate=100, duration=10, events=[(1, "bind", "N")], ttfb={"N": 0.05})
    clock.advance(1.0)
    for _ in range(30):  # past its cap of 10 this second
        vs.select()
    why = {c.name: c.why_not for c in vs.explain().candidates}["N"]
    assert why == ("slow start: 10 picks this second (held back: TTFB 5.0x its peers')",)


def test_the_guard_is_a_setting(impl):
    vs = impl.VirtualServer(slow_start_guard=3)
    assert vs.slow_start_guard == 3.0
    vs.set(slow_start_guard=0)
    assert vs.slow_start_guard == 0.0
    with pytest.raises(ValueError, match=r"^slow_start_guard must be 0 \(off\), or a number from 1 to 100, got 0.5$"):
        impl.VirtualServer(slow_start_guard=0.5)
