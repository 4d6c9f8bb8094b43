"""leastload.sim.simulate: the Simulation it returns, events, open transactions, bad arguments."""
import dataclasses

import numpy as np
import pytest

from leastload.sim.simulate import Simulation, simulate


def vserver(impl, method="ROUNDROBIN", names=("S1", "S2"), t0=0.0):
    clock = impl.ManualClock(t0)
    vs = impl.VirtualServer(method, clock=clock)
    for name in names:
        vs.bind(name)
    return vs, clock


# ---- the Simulation ------------------------------------------------------------

def test_simulation_shape_and_accessors(impl):
    vs, clock = vserver(impl)
    sim = simulate(vs, clock, rate=10, duration=3)
    assert isinstance(sim, Simulation)
    assert sim.services == ("S1", "S2") and sim.start == 0
    assert sim.counts.shape == (3, 2) and sim.counts.dtype == np.int64
    assert sim.dropped.shape == (3,) and sim.dropped.dtype == np.int64
    assert sim.counts.tolist() == [[5, 5]] * 3 and sim.dropped.tolist() == [0, 0, 0]
    assert sim.at(2) == {"S1": 5, "S2": 5}
    assert all(type(v) is int for v in sim.at(0).values())
    assert sim.of("S2").tolist() == [5, 5, 5]
    with pytest.raises(dataclasses.FrozenInstanceError):
        sim.start = 7
    assert vs.info("S1")["selected"] == 15  # every request really went through select()


def test_simulation_table(impl):
    vs, clock = vserver(impl, names=("S1", "a-long-service-name"))
    sim = simulate(vs, clock, rate=4, duration=2, start=7)
    lines = sim.table().splitlines()
    assert len(lines) == 3
    assert lines[0].split() == ["t(s)", "S1", "a-long-service-name", "dropped"]
    assert [line.split() for line in lines[1:]] == [["7", "2", "2", "0"], ["8", "2", "2", "0"]]


def test_start_defaults_to_the_clock_second(impl):
    vs, clock = vserver(impl, t0=41.0)
    sim = simulate(vs, clock, rate=2, duration=2)
    assert sim.start == 41 and sim.at(42) == {"S1": 1, "S2": 1}
    assert 42.0 <= clock.now() < 43.0
    later = simulate(vs, clock, rate=2, duration=1, start=100)
    assert later.start == 100 and later.at(100) == {"S1": 1, "S2": 1}
    assert vs.info("S1")["selected"] == 3


def test_requests_are_spread_evenly_over_each_second(impl):
    vs, clock = vserver(impl)
    times = []
    sim = simulate(vs, clock, rate=4, duration=2, events=[
        (t, lambda vs: times.append(vs.now())) for t in (0.1, 0.6, 1.3)])
    # each event is applied at its own time, before the request due then or after
    assert times == [0.1, 0.6, 1.3]
    assert 1.75 <= clock.now() < 2.0  # the last request, 1 + 3/4
    assert sim.counts.sum() == 8


def test_services_in_first_bind_order_including_bound_and_unbound_midway(impl):
    vs, clock = vserver(impl)
    sim = simulate(vs, clock, rate=6, duration=3, events=[
        (1, "bind", "S3"), (2, "unbind", "S1")])
    assert sim.services == ("S1", "S2", "S3")
    assert sim.at(0) == {"S1": 3, "S2": 3, "S3": 0}
    assert sim.at(1) == {"S1": 2, "S2": 2, "S3": 2}
    assert sim.at(2) == {"S1": 0, "S2": 3, "S3": 3}
    assert "S1" not in vs.services


def test_dropped_when_no_service_is_available(impl):
    vs, clock = vserver(impl, names=("S1",))
    sim = simulate(vs, clock, rate=10, duration=3, events=[
        (1, "set_state", "S1", "DOWN"), (2.5, "set_state", "S1", "UP")])
    assert sim.dropped.tolist() == [0, 10, 5]
    assert sim.of("S1").tolist() == [10, 0, 5]
    assert sim.table().splitlines()[2].split() == ["1", "0", "10"]


# ---- events ---------------------------------------------------------------------

def test_callable_events(impl):
    """S1 goes DOWN at 1.5, applied before the request due at 1.5. Second 0: 5/5, the
    last pick S2; second 1: S1 S2 S1 S2 S1 then S2 alone for 1.5..1.9."""
    vs, clock = vserver(impl)
    sim = simulate(vs, clock, rate=10, duration=3, events=[(1.5, lambda vs: vs.set_state("S1", "DOWN"))])
    assert [sim.at(t) for t in range(3)] == [{"S1": 5, "S2": 5}, {"S1": 3, "S2": 7}, {"S1": 0, "S2": 10}]


def test_named_events_with_args_and_kwargs(impl):
    vs, clock = vserver(impl)
    sim = simulate(vs, clock, rate=9, duration=2, events=[
        (1, "set", {"new_service_request": 0, "startup_rr_factor": 3}),  # kwargs only
        (1, "bind", "S3", {"weight": 7}),                                 # args and kwargs
        (1, "set_weight", "S1", 2),                                       # args only
    ])
    assert vs.weight("S3") == 7 and vs.weight("S1") == 2 and vs.startup_rr_factor == 3
    # Second 0: S1 S2 ... S1 (9 requests, the cursor ends on S1, round 1). Second 1,
    # weights 2, 1, 7: round 1 after S1: S2 S3; round 2: S1 S3; rounds 3..7: S3.
    assert sim.at(0) == {"S1": 5, "S2": 4, "S3": 0}
    assert sim.at(1) == {"S1": 1, "S2": 1, "S3": 7}


def test_events_are_applied_in_time_order_then_given_order(impl):
    vs, clock = vserver(impl)
    order = []
    simulate(vs, clock, rate=2, duration=2, events=[
        (1, lambda vs: order.append("b")), (0.2, lambda vs: order.append("a")),
        (1, lambda vs: order.append("c"))])
    assert order == ["a", "b", "c"]


# ---- open transactions ---------------------------------------------------------------

def busy_s1(impl):
    vs, clock = vserver(impl, "LEASTCONNECTION", names=("S1", "S2", "S3"))
    for _ in range(3):
        vs.begin("S1")
    return vs, clock


def test_request_duration_zero_finishes_at_once(impl):
    vs, clock = busy_s1(impl)
    sim = simulate(vs, clock, rate=10, duration=1)
    # S1's 3 open transactions keep it out; S2 and S3 stay at 0 and alternate
    assert sim.at(0) == {"S1": 0, "S2": 5, "S3": 5}
    assert [vs.active(n) for n in ("S1", "S2", "S3")] == [3, 0, 0]


def test_request_duration_keeps_transactions_open(impl):
    """Nothing finishes within the run: S2 and S3 climb to S1's 3 (6 requests), then
    all three tie and go round robin after S3: S1 S2 S3 S1."""
    vs, clock = busy_s1(impl)
    sim = simulate(vs, clock, rate=10, duration=1, request_duration=100.0)
    assert sim.at(0) == {"S1": 2, "S2": 4, "S3": 4}
    assert [vs.active(n) for n in ("S1", "S2", "S3")] == [5, 4, 4]  # still open at the end


@pytest.mark.parametrize("request_duration, still_open", [(0.2, 0), (0.25, 1), (0.6, 2), (0.75, 3), (0.76, 3)])
def test_request_duration_finishes_on_time(impl, request_duration, still_open):
    """Requests at 0, .25, .5, .75 each finish request_duration later, if that is
    before the run ends (t = 1.0, which belongs to the next second); the rest are
    still open when the run ends."""
    vs, clock = vserver(impl, "LEASTCONNECTION")
    sim = simulate(vs, clock, rate=4, duration=1, request_duration=request_duration)
    assert sim.counts.sum() == 4
    assert vs.active("S1") + vs.active("S2") == still_open


def test_events_between_a_request_and_its_finish_see_it_open(impl):
    """The docstring: events are "applied to vs at that time". An event at 0.125 comes
    before the finish due at 0.25 of the request made at 0.0."""
    vs, clock = vserver(impl, "LEASTCONNECTION")
    seen = []
    simulate(vs, clock, rate=4, duration=1, request_duration=0.25,
             events=[(0.125, lambda vs: seen.append((vs.now(), vs.active("S1") + vs.active("S2"))))])
    assert seen == [(0.125, 1)]


def test_least_response_time_with_open_transactions(impl):
    """TTFB 0.5 s on S1, 0.01 s on S2; nothing finishes: N = active x TTFB. S1 first
    (tie at 0), then S2 until 50 x 0.01 >= 0.5: S2 takes the 9 others."""
    vs, clock = vserver(impl, "LEASTRESPONSETIME")
    for name, ttfb in (("S1", 0.5), ("S2", 0.01)):
        vs.begin(name)
        vs.finish(name, ttfb=ttfb)
    sim = simulate(vs, clock, rate=10, duration=1, request_duration=100.0)
    assert sim.at(0) == {"S1": 1, "S2": 9}


def test_ttfb_per_service(impl):
    vs, clock = vserver(impl, "LEASTRESPONSETIME")
    simulate(vs, clock, rate=4, duration=1, ttfb={"S1": 0.25})
    assert vs.info("S1")["ttfb"] == 0.25
    assert vs.info("S2")["ttfb"] == 0.01  # not in the dict: the default


def test_traffic_is_recorded(impl):
    vs, clock = vserver(impl, "LEASTBANDWIDTH")
    simulate(vs, clock, rate=4, duration=1, bytes_per_request=100, packets_per_request=3)
    assert (vs.info("S1")["bytes"], vs.info("S1")["packets"]) == (200, 6)
    vs2, clock2 = vserver(impl, "LEASTBANDWIDTH")
    simulate(vs2, clock2, rate=4, duration=1, bytes_per_request=0, packets_per_request=0)
    assert (vs2.info("S1")["bytes"], vs2.info("S1")["packets"]) == (0, 0)


# ---- bad arguments -------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, arg", [
    ({"rate": 0}, "rate"), ({"rate": -5}, "rate"), ({"rate": 2.5}, "rate"), ({"rate": 10.0}, "rate"),
    ({"rate": True}, "rate"), ({"rate": "10"}, "rate"), ({"rate": None}, "rate"),
    ({"duration": 0}, "duration"), ({"duration": -1}, "duration"), ({"duration": 1.5}, "duration"),
    ({"duration": True}, "duration"), ({"duration": "3"}, "duration"),
])
def test_bad_rate_or_duration(impl, kwargs, arg):
    vs, clock = vserver(impl)
    before = vs.snapshot()
    args = {"rate": 10, "duration": 2, **kwargs}
    with pytest.raises(ValueError) as info:
        simulate(vs, clock, **args)
    assert arg in str(info.value) and repr(kwargs[arg]) in str(info.value)
    assert vs.snapshot() == before and clock.now() == 0.0


def test_at_outside_the_run_raises(impl):
    vs, clock = vserver(impl)
    sim = simulate(vs, clock, rate=2, duration=3, start=10)
    assert sim.at(12) == sim.at(12)  # the last second is inside
    with pytest.raises(ValueError, match="10..12, got 13"):
        sim.at(13)
    with pytest.raises(ValueError, match="got 9"):
        sim.at(9)  # not numpy's negative index into the last rows


def test_back_to_back_runs_do_not_move_the_clock_back(impl):
    vs, clock = vserver(impl)
    simulate(vs, clock, rate=4, duration=2)  # ends at 1.75
    second = simulate(vs, clock, rate=4, duration=1)
    assert second.start == 2  # not second 1 again, which would move the clock back to 1.0


@pytest.mark.parametrize("implementation", ["c", "python"])
def test_command_line_prints_the_automated_table(capsys, implementation):
    from leastload.sim.simulate import main

    assert main(["--new", "0", "--slow-start", "4", "PER_SECOND", "10", "--duration", "51", "--every", "10",
                 "--implementation", implementation]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["t(s)", "S1", "S2", "S3", "S4", "new", "dropped"]
    assert [int(line.split()[5]) for line in out[1:7]] == [0, 4, 8, 12, 16, 20]  # the vendor's table
    assert out[-1].strip() == "t=50: new left slow start: the cap reached the fair share"


# ---- per-service options, weights, several events ---------------------------------------

def test_weights_reweigh_bound_services_and_weigh_bind_events(impl):
    vs, clock = vserver(impl)
    sim = simulate(vs, clock, rate=8, duration=2, weights={"S1": 3, "S3": 4},
                   events=[(1, "bind", "S3"), (1, "bind", "S4", {"weight": 1})])
    assert [vs.weight(n) for n in ("S1", "S2", "S3", "S4")] == [3, 1, 4, 1]
    # second 0, weights 3 : 1 over 8 requests: 6 and 2
    assert sim.at(0) == {"S1": 6, "S2": 2, "S3": 0, "S4": 0}
    assert sum(sim.at(1).values()) == 8 and sim.at(1)["S3"] > sim.at(1)["S2"]


def test_per_service_sizes_are_recorded(impl):
    vs, clock = vserver(impl, "LEASTBANDWIDTH")
    simulate(vs, clock, rate=4, duration=1, bytes_per_request={"S1": 1000}, packets_per_request={"S2": 7})
    # S1: 1000 bytes and the default 2 packets a request; S2: the default 1500 bytes and 7 packets
    info1, info2 = vs.info("S1"), vs.info("S2")
    requests1, requests2 = info1["selected"], info2["selected"]
    assert requests1 + requests2 == 4 and requests1 >= 1 and requests2 >= 1
    assert (info1["bytes"], info1["packets"]) == (1000 * requests1, 2 * requests1)
    assert (info2["bytes"], info2["packets"]) == (1500 * requests2, 7 * requests2)


def test_per_service_request_duration(impl):
    """S1's requests stay open 100 s, S2's finish at once: least connection sends
    S1 one request (the tie at 0, S1 first), then everything to S2."""
    vs, clock = vserver(impl, "LEASTCONNECTION")
    sim = simulate(vs, clock, rate=10, duration=1, request_duration={"S1": 100.0})
    assert sim.at(0) == {"S1": 1, "S2": 9}
    assert (vs.active("S1"), vs.active("S2")) == (1, 0)


def test_several_events_in_one_run(impl):
    vs, clock = vserver(impl, names=("S1", "S2", "S3"))
    sim = simulate(vs, clock, rate=6, duration=4, events=[
        (1, "set_state", "S1", "DOWN"), (1, "bind", "S4"), (2, "unbind", "S2"), (3, "set_state", "S1", "UP")])
    assert sim.services == ("S1", "S2", "S3", "S4")
    assert sim.at(1)["S1"] == 0 and sim.at(1)["S4"] > 0
    assert sim.at(2)["S2"] == 0 and sim.at(3)["S1"] > 0
    assert int(sim.counts.sum()) == 24


def test_on_second_reports_progress(impl):
    vs, clock = vserver(impl)
    seen = []
    simulate(vs, clock, rate=2, duration=3, on_second=seen.append)
    assert seen == [1, 2, 3]


@pytest.mark.parametrize("kwargs, fragment", [
    ({"ttfb": {"S1": -1}}, "ttfb['S1'] must be a number of seconds in 0..3600, got -1"),
    ({"ttfb": 4000}, "ttfb must be a number of seconds in 0..3600, got 4000"),
    ({"request_duration": {"S2": float("inf")}}, "request_duration['S2'] must be a finite number of seconds"),
    ({"bytes_per_request": {"S1": -5}}, "bytes_per_request['S1'] must be an int >= 0, got -5"),
    ({"packets_per_request": 1.5}, "packets_per_request must be an int >= 0, got 1.5"),
    ({"weights": {"S1": 0}}, "weights['S1'] must be an int in 1..100, got 0"),
    ({"weights": {"S1": 2, "S2": 101}}, "weights['S2'] must be an int in 1..100, got 101"),
])
def test_bad_per_service_options_change_nothing(impl, kwargs, fragment):
    vs, clock = vserver(impl)
    before = vs.snapshot()
    with pytest.raises(ValueError) as info:
        simulate(vs, clock, rate=4, duration=1, **kwargs)
    assert fragment in str(info.value)
    assert vs.snapshot() == before and clock.now() == 0.0  # S1's weight was not changed either


def test_transactions_open_across_an_unbind_and_a_rebind_are_gone(impl):
    """A request open when its service is unbound ends with the binding: it is not
    finished on the service bound again under the same name."""
    vs, clock = vserver(impl, "LEASTCONNECTION")
    sim = simulate(vs, clock, rate=200, duration=2, request_duration=0.012,
                   events=[(1.0, "unbind", "S1"), (1.001, "bind", "S1")])
    assert sim.counts.sum() == 400
    # what S1 has open at the end was dispatched after the rebind (the last 0.012 s)
    assert 0 <= vs.active("S1") <= 2 and 0 <= vs.active("S2") <= 2
