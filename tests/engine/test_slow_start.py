"""Slow start (docs/slow-start.md), on both engines.

The vendor tables come out exactly through simulate(); the other least-*
methods keep every cap and send the surplus where their own N says; each
automated exit is reached alone; the lifecycle (bind, DOWN -> UP,
OUT_OF_SERVICE -> UP, unbind, last normal service DOWN), settings changed
mid-ramp, bad settings, and the startup round-robin factor.

Every expected number is either printed by the vendor's tables or derived by hand
in a comment from the rules of docs/slow-start.md and docs/semantics.md.
"""
import pytest

from leastload.engine.errors import UnknownService
from leastload.sim.simulate import simulate

# The reasons logged in vs.slow_start_exits.
QUIET = "no traffic for three intervals"
BELOW = "the request rate is below the new-service rate"
MAX_INCREMENTS = "incremented 200 times"
PERCENT_100 = "the percentage reached 100"
FAIR_SHARE = "the cap reached the fair share"
SWITCHED_OFF = "slow start switched off"
NOBODY_LEFT = "no other service UP"

LEAST_METHODS = ["LEASTCONNECTION", "LEASTBANDWIDTH", "LEASTPACKETS", "LEASTRESPONSETIME"]
WINDOWED = ("LEASTBANDWIDTH", "LEASTPACKETS")  # N = traffic of the last 14 s


def vserver(impl, method="ROUNDROBIN", names=("S1", "S2"), settings=None, **options):
    """A vserver on a ManualClock at 0 with `names` bound, then `settings` set: the
    services bound here are all normal (slow start starts on later binds)."""
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer(method, clock=clock, **options)
    for name in names:
        vs.bind(name)
    if settings:
        vs.set(**settings)
    return vs, clock


def rows(sim, seconds):
    return [sim.at(t) for t in seconds]


# ---- the vendor's manual table --------------------------------------------------

MANUAL_EVENTS = [
    (0, "set", {"new_service_request": 10}), (0, "bind", "S3"),
    (1, "set", {"new_service_request": 20}),
    (2, "set", {"new_service_request": 40}), (2, "bind", "S4"),
    (3, "set", {"new_service_request": 0}),
]
MANUAL_TABLE = [  # seconds 0..3; S4 is not bound before t = 2
    {"S1": 115, "S2": 115, "S3": 10, "S4": 0},
    {"S1": 110, "S2": 110, "S3": 20, "S4": 0},
    {"S1": 80, "S2": 80, "S3": 40, "S4": 40},
    {"S1": 60, "S2": 60, "S3": 60, "S4": 60},
]


def manual_run(impl, method="ROUNDROBIN", setup=None, extra_events=(), **options):
    """S1, S2 bound with slow start off; then the vendor's steps at t = 0, 1, 2, 3."""
    vs, clock = vserver(impl, method, **options)
    if setup:
        setup(vs)
    sim = simulate(vs, clock, rate=240, duration=4, events=[*MANUAL_EVENTS, *extra_events])
    return vs, sim


def test_manual_table_round_robin(impl):
    seen = []
    state = lambda vs, name: vs.slow_start(name) if name in vs.services else None
    probe = [(t, lambda vs: seen.append((state(vs, "S3"), state(vs, "S4")))) for t in (0.5, 1.5, 2.5, 3.5)]
    vs, sim = manual_run(impl, extra_events=probe)
    assert rows(sim, range(4)) == MANUAL_TABLE
    assert sim.dropped.tolist() == [0, 0, 0, 0]
    assert seen[0] == ({"cap": 10, "increments": 0, "since": 0.0, "mode": "manual"}, None)
    assert seen[1][0]["cap"] == 20 and seen[1][1] is None
    assert seen[2] == ({"cap": 40, "increments": 0, "since": 0.0, "mode": "manual"},
                       {"cap": 40, "increments": 0, "since": 2.0, "mode": "manual"})
    assert seen[3] == (None, None)
    # Rate 0 ends every slow start, at the moment it is set.
    assert sorted(vs.slow_start_exits) == [(3.0, "S3", SWITCHED_OFF), (3.0, "S4", SWITCHED_OFF)]


def test_manual_table_holds_under_the_vendor_startup_round_robin(impl):
    # Startup round robin picks among *eligible* services only: the caps still hold,
    # and with round robin's own order the table is unchanged.
    vs, sim = manual_run(impl, "LEASTBANDWIDTH", startup_rr_factor=10_000)
    assert rows(sim, range(4)) == MANUAL_TABLE
    assert vs.startup_rr_left == 10_000 - 960


@pytest.mark.parametrize("method", LEAST_METHODS)
def test_manual_table_other_methods(impl, method):
    """Requests finish at once, so LEASTCONNECTION / LEASTRESPONSETIME see N = 0
    everywhere: every pick is a tie, i.e. round robin, and the table is exact.
    LEASTBANDWIDTH / LEASTPACKETS: seconds 0-2 come out as the table too (the
    new services have the least traffic, take their cap first, the two old ones
    are level and alternate). At rate 0 the window decides: S1, S2 have 305
    requests' worth each, S3 70, S4 40: S4 takes 30 alone, then S3 and S4
    alternate (105 each): S1 0, S2 0, S3 105, S4 135."""
    vs, sim = manual_run(impl, method)
    assert sim.counts.sum(axis=1).tolist() == [240] * 4 and sim.dropped.sum() == 0
    assert rows(sim, range(3)) == MANUAL_TABLE[:3]
    if method in WINDOWED:
        assert sim.at(3) == {"S1": 0, "S2": 0, "S3": 105, "S4": 135}
    else:
        assert sim.at(3) == MANUAL_TABLE[3]


@pytest.mark.parametrize("method", ["LEASTCONNECTION", "LEASTRESPONSETIME"])
def test_manual_surplus_goes_to_the_least_busy(impl, method):
    """S1 holds 3 open transactions (TTFB 1 s): N(S1) > 0 while everyone else is at
    N = 0, so the whole surplus goes to S2 (then to S2..S4 after rate 0), none to S1."""
    def busy_s1(vs):
        vs.begin("S1")
        vs.finish("S1", ttfb=1.0)
        for _ in range(3):
            vs.begin("S1")

    vs, sim = manual_run(impl, method, setup=busy_s1)
    assert rows(sim, range(4)) == [
        {"S1": 0, "S2": 230, "S3": 10, "S4": 0},
        {"S1": 0, "S2": 220, "S3": 20, "S4": 0},
        {"S1": 0, "S2": 160, "S3": 40, "S4": 40},
        {"S1": 0, "S2": 80, "S3": 80, "S4": 80},
    ]


@pytest.mark.parametrize("method", WINDOWED)
def test_manual_surplus_follows_the_window(impl, method):
    """S1 starts with 100 requests' worth of traffic in its window. Second 0: S2 and
    S3 (both at 0) alternate until S3 reaches its cap of 10; S2 alone then climbs
    to S1's level (90 more, 100 in all); the 130 left alternate S1/S2: S1 65,
    S2 165. From second 1 on S1 and S2 are level and the table holds again."""
    charge = {"bytes": 100 * 1500} if method == "LEASTBANDWIDTH" else {"packets": 100 * 2}
    vs, sim = manual_run(impl, method, setup=lambda vs: vs.record("S1", **charge))
    assert sim.at(0) == {"S1": 65, "S2": 165, "S3": 10, "S4": 0}
    assert rows(sim, (1, 2)) == MANUAL_TABLE[1:3]


def test_manual_rate_change_applies_at_once(impl):
    vs, clock = vserver(impl, names=("S1", "S2"))
    vs.set(new_service_request=10)
    vs.bind("S3")
    got = [vs.select() for _ in range(60)]  # t = 0: S3 capped after 30 (10 rounds)
    assert got.count("S3") == 10 and got[30:].count("S3") == 0
    clock.set(0.5)
    vs.set(new_service_request=25)
    assert vs.slow_start("S3")["cap"] == 25  # same second, no boundary needed
    got += [vs.select() for _ in range(60)]
    assert got.count("S3") == 25


def test_manual_percent_follows_the_others_each_second(impl):
    """Manual, 50 PERCENT, 100 req/s, S1, S2 then S3 at t = 0. The cap is 50% of the
    others' average in the last second, re-evaluated each second: second 0: no
    traffic yet -> 0; 1: 50% of 50 = 25; 2: 50% of 75/2 -> 18; 3: 50% of 82/2 ->
    20; then 50% of 80/2 = 20 for good. Manual mode never exits by itself."""
    vs, clock = vserver(impl)
    sim = simulate(vs, clock, rate=100, duration=6, events=[
        (0, "set", {"new_service_request": 50, "new_service_request_unit": "PERCENT"}), (0, "bind", "S3")])
    assert sim.of("S3").tolist() == [0, 25, 18, 20, 20, 20]
    assert sim.counts.sum(axis=1).tolist() == [100] * 6
    assert vs.slow_start("S3")["mode"] == "manual" and vs.slow_start_exits == []


# ---- the automated tables ------------------------------------------------------

def automated_run(impl, method="ROUNDROBIN", duration=51, rate=4, unit="PER_SECOND", interval=10, events=(),
                  requests=100):
    """S1..S4 bound first, then the settings, then S5 bound at t = 0."""
    vs, clock = vserver(impl, method, names=("S1", "S2", "S3", "S4"))
    vs.set(new_service_request=rate, new_service_request_unit=unit, new_service_request_increment_interval=interval)
    sim = simulate(vs, clock, rate=requests, duration=duration, events=[(0, "bind", "S5"), *events])
    return vs, sim


OTHERS = ("S1", "S2", "S3", "S4")


@pytest.mark.parametrize("method", ["ROUNDROBIN", *LEAST_METHODS])
def test_automated_table(impl, method):
    """The vendor's automated table (docs/slow-start.md): S5 gets 4 x floor(t / 10) req/s, the others share the rest evenly,
    and S5 leaves slow start at t = 50 (cap 20 x 5 UP services >= 100: fair share).
    Every second of every interval is checked, not only the printed ones."""
    vs, sim = automated_run(impl, method)
    for t in range(50):
        k = t // 10
        assert sim.at(t) == {**{n: 25 - k for n in OTHERS}, "S5": 4 * k}, f"second {t}"
    assert vs.slow_start_exits == [(50.0, "S5", FAIR_SHARE)]
    assert vs.slow_start("S5") is None
    if method in WINDOWED:
        # Out of slow start S5 is simply the least loaded: window 37..50 holds
        # 3 x 22 + 10 x 21 = 276 requests' worth on each old service and
        # 3 x 12 + 10 x 16 = 196 on S5: it takes 80 alone, then 20 split 5 ways.
        assert sim.at(50) == {**{n: 4 for n in OTHERS}, "S5": 84}
    else:
        assert sim.at(50) == {**{n: 20 for n in OTHERS}, "S5": 20}


@pytest.mark.parametrize("method", ["ROUNDROBIN", *LEAST_METHODS])
def test_automated_percent(impl, method):
    """25 PERCENT, interval 5. Cap at a boundary = floor(increments x 25% of the
    others' average in the last second): t=5: 25% of 25 -> 6; t=10: 50% of 94/4
    -> 11; t=15: 75% of 89/4 -> 16; t=20: 4 x 25 = 100%: S5 leaves slow start
    and (seed) gets the full share, 20 req/s."""
    vs, sim = automated_run(impl, method, duration=21, rate=25, unit="PERCENT", interval=5)
    assert sim.of("S5")[:20].tolist() == [0] * 5 + [6] * 5 + [11] * 5 + [16] * 5
    assert sim.counts.sum(axis=1).tolist() == [100] * 21
    for t in range(20):  # the surplus is spread evenly over the others...
        if method in WINDOWED:  # ...by their 14-second totals (seconds t-13..t) for these two
            others = sim.counts[max(0, t - 13):t + 1, :4].sum(axis=0).tolist()
        else:
            others = [sim.at(t)[n] for n in OTHERS]
        assert max(others) - min(others) <= 1, f"second {t}: {others}"
    assert vs.slow_start_exits == [(20.0, "S5", PERCENT_100)]
    if method not in WINDOWED:
        assert sim.at(20) == {**{n: 20 for n in OTHERS}, "S5": 20}


def test_automated_state_between_boundaries(impl):
    seen = {}
    probe = [(t, lambda vs, t=t: seen.__setitem__(t, vs.slow_start("S5"))) for t in (0, 9.5, 10, 35)]
    vs, sim = automated_run(impl, duration=36, events=probe)
    assert seen[0] == {"cap": 0, "increments": 0, "since": 0.0, "mode": "automated"}
    assert seen[9.5]["cap"] == 0
    # The policy runs at the first call that reaches the boundary (the select at 10.0),
    # so a probe just before that request still sees the old cap.
    assert seen[10]["cap"] == 0
    assert sim.at(10)["S5"] == 4
    assert seen[35] == {"cap": 12, "increments": 3, "since": 0.0, "mode": "automated"}


# ---- each exit, alone ---------------------------------------------------------------

def test_exit_no_traffic_on_an_idle_vserver(impl):
    """Interval 10, rate 1. [0, 10) has cap 0 and does not count; [10, 20), [20, 30),
    [30, 40) have a cap and no traffic: out at t = 40, nothing else fires (an idle
    vserver has a last-second rate of 0, which neither the rate nor the fair-share
    exit look at)."""
    vs, clock = vserver(impl, names=("S1", "S2"))
    vs.set(new_service_request=1, new_service_request_increment_interval=10)
    vs.bind("S3")
    state = {}
    for t in range(45):
        clock.set(float(t))
        vs.info("S1")  # reads the clock: the policy runs when a boundary is due
        state[t] = vs.slow_start("S3")
    assert state[9] == {"cap": 0, "increments": 0, "since": 0.0, "mode": "automated"}
    assert state[10] == {"cap": 1, "increments": 1, "since": 0.0, "mode": "automated"}
    assert state[39] == {"cap": 3, "increments": 3, "since": 0.0, "mode": "automated"}
    assert state[40] is None
    assert vs.slow_start_exits == [(40.0, "S3", QUIET)]


def test_exit_no_traffic_when_the_method_never_picks_it(impl):
    """LEASTCONNECTION, S3 holds 5 open transactions, S1 and S2 finish at once: S3 is
    never the least loaded. Rate 1, interval 2, 20 req/s: caps 1, 2, 3 (x 3 UP <
    20, so no fair share) while S3 gets nothing; the quiet intervals are [2,4),
    [4,6), [6,8): out at t = 8."""
    vs, clock = vserver(impl, "LEASTCONNECTION")
    vs.set(new_service_request=1, new_service_request_increment_interval=2)
    vs.bind("S3")
    for _ in range(5):
        vs.begin("S3")
    sim = simulate(vs, clock, rate=20, duration=10)
    assert sim.of("S3").sum() == 0
    assert vs.slow_start_exits == [(8.0, "S3", QUIET)]


def test_exit_rate_below_cap(impl):
    """Rate 10, interval 5, S3 bound at 0. 100 req/s until t = 9: at t = 5 the cap is
    10 (10 x 3 < 100). Then the vserver drops to 5 req/s: at t = 10 the last
    second had 5 requests, fewer than the cap of 10: out."""
    vs, clock = vserver(impl)
    vs.set(new_service_request=10, new_service_request_increment_interval=5)
    vs.bind("S3")
    busy = simulate(vs, clock, rate=100, duration=9)
    assert busy.of("S3").tolist() == [0] * 5 + [10] * 4
    quiet = simulate(vs, clock, rate=5, duration=3, start=9)
    assert vs.slow_start_exits == [(10.0, "S3", BELOW)]
    assert quiet.counts.sum() == 15 and quiet.dropped.sum() == 0


def busy_s1_then_s2(impl):
    """LEASTCONNECTION; S1 holds 2 open transactions, so S2 (new, rate 10, interval 5)
    is always picked first up to its cap and S1 takes the rest. 100 req/s for
    seconds 0..8: cap 0, then 10 from t = 5 (10 x 2 < 100)."""
    vs, clock = vserver(impl, "LEASTCONNECTION", names=("S1",))
    vs.begin("S1")
    vs.begin("S1")
    vs.set(new_service_request=10, new_service_request_increment_interval=5)
    vs.bind("S2")
    sim = simulate(vs, clock, rate=100, duration=9)
    assert sim.of("S2").tolist() == [0] * 5 + [10] * 4
    return vs, clock


def test_request_rate_equal_to_the_cap_is_not_below(impl):
    """Second 9 has exactly 10 requests (all to S2), the cap in force is 10: not
    below. The increment gives 20 (S1 had 0: nothing to cut to), 20 x 2 >= 10:
    fair share."""
    vs, clock = busy_s1_then_s2(impl)
    simulate(vs, clock, rate=10, duration=1, start=9)
    clock.set(10.0)
    vs.info("S1")
    assert vs.slow_start_exits == [(10.0, "S2", FAIR_SHARE)]


def test_final_increment_is_cut_to_the_others_average(impl):
    """Second 9 has 15 requests: S2 its cap of 10, S1 5. At t = 10: 15 is not below
    10; 2 x 10 = 20 is cut to S1's 5 (the others' average), and 5 x 2 < 15, so the
    ramp goes on with cap 5."""
    vs, clock = busy_s1_then_s2(impl)
    sim = simulate(vs, clock, rate=15, duration=1, start=9)
    assert sim.at(9) == {"S1": 5, "S2": 10}
    clock.set(10.0)
    vs.info("S1")
    assert vs.slow_start_exits == []
    assert vs.slow_start("S2") == {"cap": 5, "increments": 2, "since": 0.0, "mode": "automated"}


def test_exit_after_200_increments(impl):
    """Rate 1 every second, 400 req/s, S1 then S2: at boundary k the cap is k (S1
    had 400 - (k - 1) >= k), and k x 2 < 400 up to k = 199, so neither the cut nor
    the fair share ends it; the 200th increment does, at t = 200."""
    vs, clock = vserver(impl, names=("S1",), new_service_request=1, new_service_request_increment_interval=1)
    vs.bind("S2")
    assert vs.slow_start("S2")["cap"] == 0
    sim = simulate(vs, clock, rate=400, duration=201, bytes_per_request=0, packets_per_request=0)
    assert sim.of("S2")[:200].tolist() == list(range(200))
    assert sim.at(200) == {"S1": 200, "S2": 200}
    assert vs.slow_start_exits == [(200.0, "S2", MAX_INCREMENTS)]


def test_exit_percentage_reached_100(impl):
    """30 PERCENT, interval 2: caps floor(30% of 25) = 7, floor(60% of 93/4) = 13,
    floor(90% of 87/4) = 19 (19 x 5 = 95 < 100: no fair share), then 4 x 30 >= 100
    at t = 8."""
    vs, sim = automated_run(impl, rate=30, unit="PERCENT", interval=2, duration=9)
    assert sim.of("S5").tolist() == [0, 0, 7, 7, 13, 13, 19, 19, 20]
    assert vs.slow_start_exits == [(8.0, "S5", PERCENT_100)]


def test_exit_fair_share(impl):
    """Rate 7, interval 2, S1, S2 then S3, 30 req/s. t = 2: cap 7 (21 < 30). t = 4:
    14, cut to the others' average 23/2 -> 11; 11 x 3 = 33 >= 30: out."""
    vs, clock = vserver(impl)
    vs.set(new_service_request=7, new_service_request_increment_interval=2)
    sim = simulate(vs, clock, rate=30, duration=5, events=[(0, "bind", "S3")])
    assert sim.of("S3").tolist() == [0, 0, 7, 7, 10]
    assert vs.slow_start_exits == [(4.0, "S3", FAIR_SHARE)]


# ---- lifecycle ------------------------------------------------------------------------

def test_down_up_restarts_the_ramp(impl):
    """S5 at increments 2 (cap 8) at t = 25; DOWN at 25, UP at 27: a new ramp from 0,
    next boundary 37."""
    seen = {}
    vs, sim = automated_run(impl, duration=40, events=[
        (25, "set_state", "S5", "DOWN"), (27, "set_state", "S5", "UP"),
        (27, lambda vs: seen.setdefault("up", vs.slow_start("S5")))])
    assert seen["up"] == {"cap": 0, "increments": 0, "since": 27.0, "mode": "automated"}
    assert sim.of("S5")[20:40].tolist() == [8] * 5 + [0] * 12 + [4] * 3
    assert vs.slow_start_exits == []


def test_down_up_of_a_normal_service_starts_slow_start(impl):
    vs, clock = vserver(impl, names=("S1", "S2", "S3"))
    vs.set(new_service_request=4, new_service_request_increment_interval=10)
    assert [vs.slow_start(n) for n in ("S1", "S2", "S3")] == [None] * 3  # a setting does not start it
    clock.set(3.0)
    vs.set_state("S2", "DOWN")
    assert vs.slow_start("S2") is None
    vs.set_state("S2", "UP")
    assert vs.slow_start("S2") == {"cap": 0, "increments": 0, "since": 3.0, "mode": "automated"}
    assert [vs.select() for _ in range(6)] == ["S1", "S3"] * 3  # cap 0: S2 gets nothing yet


def test_out_of_service_to_up_does_not_start_slow_start(impl):
    """Only DOWN -> UP does; OUT_OF_SERVICE -> UP (even DOWN -> OUT_OF_SERVICE ->
    UP) brings a normal service straight back to its full share."""
    vs, clock = vserver(impl, names=("S1", "S2", "S3"))
    vs.set(new_service_request=4, new_service_request_increment_interval=10)
    vs.set_state("S3", "OUT_OF_SERVICE")
    vs.set_state("S3", "UP")
    assert vs.slow_start("S3") is None
    vs.set_state("S3", "DOWN")
    vs.set_state("S3", "OUT_OF_SERVICE")
    vs.set_state("S3", "UP")
    assert vs.slow_start("S3") is None
    assert [vs.select() for _ in range(6)] == ["S1", "S2", "S3"] * 2


def test_out_of_service_to_up_keeps_a_running_ramp_whose_clock_stood(impl):
    """A service in slow start taken OUT_OF_SERVICE and back keeps its ramp as it was,
    and the ramp's clock stood while it could not be picked: OUT_OF_SERVICE from 25 to
    27 moves its next boundary from 30 to 32."""
    seen = {}
    vs, sim = automated_run(impl, duration=34, events=[
        (25, "set_state", "S5", "OUT_OF_SERVICE"), (27, "set_state", "S5", "UP"),
        (27, lambda vs: seen.setdefault("up", vs.slow_start("S5")))])
    assert seen["up"] == {"cap": 8, "increments": 2, "since": 0.0, "mode": "automated"}
    assert sim.of("S5")[25:34].tolist() == [0, 0, 8, 8, 8, 8, 8, 12, 12]


def test_a_new_interval_set_while_the_ramp_stands_applies_to_the_time_it_has_left(impl):
    """S3 ramps from 0 (interval 10); OUT_OF_SERVICE at 3 (7 s left to its boundary);
    the interval set to 5 at 4 cuts what is left to 5 s, but the clock still stands:
    no boundary while it is out, and back UP at 30 its first boundary is at 35."""
    vs, clock = vserver(impl, names=("S1", "S2"), settings={"new_service_request": 4,
                                                            "new_service_request_increment_interval": 10})
    vs.bind("S3")
    clock.set(3.0)
    vs.set_state("S3", "OUT_OF_SERVICE")
    clock.set(4.0)
    vs.set(new_service_request_increment_interval=5)
    seen = {}
    for t in range(5, 37):
        clock.set(float(t))
        if t == 30:
            vs.set_state("S3", "UP")
        vs.info("S1")  # reads the clock: a due boundary runs
        seen[t] = vs.slow_start("S3")["increments"]
    assert [seen[t] for t in (5, 9, 10, 29, 30, 34)] == [0] * 6
    assert (seen[35], seen[36]) == (1, 1)
    assert vs.slow_start_exits == []


def test_unbind_drops_the_ramp_and_rebind_starts_a_new_one(impl):
    seen = {}
    # unbound from 25 to 32: across the old ramp's boundary at 30, which must not matter
    vs, sim = automated_run(impl, duration=45, events=[
        (25, "unbind", "S5"),
        (25, lambda vs: seen.setdefault("unbound", "S5" in vs.services)),
        (32, "bind", "S5"),
        (32, lambda vs: seen.setdefault("rebound", vs.slow_start("S5")))])
    assert seen == {"unbound": False,
                    "rebound": {"cap": 0, "increments": 0, "since": 32.0, "mode": "automated"}}
    assert sim.of("S5")[20:45].tolist() == [8] * 5 + [0] * 17 + [4] * 3
    assert sim.counts.sum(axis=1).tolist() == [100] * 45  # others took everything meanwhile
    assert vs.slow_start_exits == []


def test_unbound_service_has_no_slow_start_entry(impl):
    vs, clock = vserver(impl)
    vs.set(new_service_request=5)
    vs.bind("S3")
    vs.unbind("S3")
    with pytest.raises(UnknownService):
        vs.slow_start("S3")


def test_alone_in_an_empty_vserver_no_slow_start(impl):
    vs, clock = vserver(impl, names=(), new_service_request=10)
    vs.bind("S1")
    assert vs.slow_start("S1") is None
    assert [vs.select() for _ in range(30)] == ["S1"] * 30  # no cap of 10


def test_no_slow_start_when_every_other_service_is_down(impl):
    vs, clock = vserver(impl, names=("S1",), new_service_request=10)
    vs.set_state("S1", "DOWN")
    vs.bind("S2")
    assert vs.slow_start("S2") is None
    assert [vs.select() for _ in range(20)] == ["S2"] * 20
    # S1 comes back DOWN -> UP, with S2 normal: now S1 is the new service.
    vs.set_state("S1", "UP")
    assert vs.slow_start("S1")["cap"] == 10


def test_new_services_next_to_a_normal_one_are_all_new(impl):
    vs, clock = vserver(impl, names=("S1",), new_service_request=10)
    vs.bind("S2")
    vs.bind("S3")  # S1 is normal and UP: S3 is new too, whatever S2 is
    assert vs.slow_start("S2")["cap"] == 10 and vs.slow_start("S3")["cap"] == 10


def test_unbinding_the_last_normal_service_makes_the_new_ones_normal(impl):
    """With S1 gone, S2's ramp ends (nobody else takes the surplus), so S2 is the
    normal service beside which S3, bound next, starts slow."""
    vs, clock = vserver(impl, names=("S1",), new_service_request=10)
    vs.bind("S2")
    vs.unbind("S1")
    assert vs.slow_start("S2") is None
    vs.bind("S3")
    assert vs.slow_start("S3")["cap"] == 10


def test_last_normal_service_down_ends_every_ramp(impl):
    vs, clock = vserver(impl, names=("S1",), new_service_request=10)
    vs.bind("S2")
    vs.bind("S3")
    clock.set(7.25)
    vs.set_state("S1", "DOWN")
    assert vs.slow_start("S2") is None and vs.slow_start("S3") is None
    assert sorted(vs.slow_start_exits) == [(7.25, "S2", NOBODY_LEFT), (7.25, "S3", NOBODY_LEFT)]
    assert [vs.select() for _ in range(30)].count("S2") == 15  # no cap left


def test_last_normal_service_out_of_service_ends_every_ramp(impl):
    vs, clock = vserver(impl, names=("S1", "S2"), settings={"new_service_request": 10})
    vs.bind("S3")
    vs.set_state("S1", "DOWN")
    assert vs.slow_start("S3") is not None  # S2 is still normal and UP
    vs.set_state("S2", "OUT_OF_SERVICE")
    assert vs.slow_start("S3") is None
    assert vs.slow_start_exits == [(0.0, "S3", NOBODY_LEFT)]


def test_unbinding_the_last_normal_service_ends_every_ramp(impl):
    vs, clock = vserver(impl, names=("S1",), new_service_request=1, new_service_request_increment_interval=10)
    vs.bind("S2")  # automated: cap 0 for the first 10 s
    vs.unbind("S1")
    # S2 is the only service and UP; with its ramp left in place select() has nobody.
    assert vs.slow_start("S2") is None
    assert vs.select() == "S2"


# ---- settings changed mid-ramp --------------------------------------------------------

def test_automated_rate_change_applies_from_the_next_boundary(impl):
    """Rate 4 -> 6 at t = 25 (S5 at increments 2, cap 8): the cap stays 8 until t = 30,
    then 3 x 6 = 18 (the others had 23 each in second 29: no cut; 18 x 5 < 100). At
    t = 40: 4 x 6 = 24, cut to the others' 82/4 -> 20, and 20 x 5 >= 100: out."""
    seen = {}
    vs, sim = automated_run(impl, duration=41, events=[
        (25, "set", {"new_service_request": 6}),
        (25, lambda vs: seen.setdefault(25, vs.slow_start("S5")))])
    assert seen[25] == {"cap": 8, "increments": 2, "since": 0.0, "mode": "automated"}
    assert sim.of("S5")[20:41].tolist() == [8] * 10 + [18] * 10 + [20]
    assert vs.slow_start_exits == [(40.0, "S5", FAIR_SHARE)]


def test_automated_interval_change_counts_from_now(impl):
    """Interval 10 -> 3 at t = 25: the next boundary is min(30, 25 + 3) = 28, then
    every 3 s: caps 12 (28), 16 (31), then 20 at 34 (cut to 84/4 = 21 does not
    bite; 20 x 5 >= 100: out)."""
    vs, sim = automated_run(impl, duration=35, events=[(25, "set", {"new_service_request_increment_interval": 3})])
    assert sim.of("S5")[25:35].tolist() == [8] * 3 + [12] * 3 + [16] * 3 + [20]
    assert vs.slow_start_exits == [(34.0, "S5", FAIR_SHARE)]


def test_manual_to_automated_restarts_ramps_from_zero(impl):
    vs, clock = vserver(impl, settings={"new_service_request": 10})
    vs.bind("S3")
    assert vs.slow_start("S3") == {"cap": 10, "increments": 0, "since": 0.0, "mode": "manual"}
    clock.set(5.0)
    vs.set(new_service_request_increment_interval=10)
    assert vs.slow_start("S3") == {"cap": 0, "increments": 0, "since": 5.0, "mode": "automated"}
    clock.set(14.5)
    vs.info("S1")
    assert vs.slow_start("S3")["increments"] == 0
    clock.set(15.0)
    vs.info("S1")  # idle vserver: no others' rate to cut to
    assert vs.slow_start("S3") == {"cap": 10, "increments": 1, "since": 5.0, "mode": "automated"}


def test_automated_to_manual_holds_the_rate(impl):
    vs, sim = automated_run(impl, duration=26, events=[(25, "set", {"new_service_request_increment_interval": 0})])
    # increments are kept, the cap is the plain rate (4), and no boundary comes any more
    assert vs.slow_start("S5") == {"cap": 4, "increments": 2, "since": 0.0, "mode": "manual"}
    assert sim.of("S5")[24:26].tolist() == [8, 4]
    assert vs.slow_start_exits == []


def test_rate_zero_ends_automated_ramps(impl):
    vs, sim = automated_run(impl, duration=22, events=[(21.5, "set", {"new_service_request": 0})])
    assert vs.slow_start("S5") is None
    assert vs.slow_start_exits == [(21.5, "S5", SWITCHED_OFF)]
    # 21.0-21.49: S5 reaches its cap of 8 after 40 requests; from 21.5 the 50 requests
    # left go round robin over 5 free services: 10 each.
    assert sim.at(21)["S5"] == 8 + 10


# ---- bad settings ------------------------------------------------------------------

BAD_SETTINGS = [
    ({"new_service_request": -1}, ValueError, "new_service_request", "-1"),
    ({"new_service_request": 2.5}, TypeError, "new_service_request", "2.5"),
    ({"new_service_request": 10.0}, TypeError, "new_service_request", "10.0"),
    ({"new_service_request": True}, TypeError, "new_service_request", "True"),
    ({"new_service_request": "5"}, TypeError, "new_service_request", "'5'"),
    ({"new_service_request": None}, TypeError, "new_service_request", "None"),
    ({"new_service_request_unit": "PER_MINUTE"}, ValueError, "new_service_request_unit", "'PER_MINUTE'"),
    ({"new_service_request_unit": "percent"}, ValueError, "new_service_request_unit", "'percent'"),
    ({"new_service_request_unit": 1}, TypeError, "new_service_request_unit", "1"),
    ({"new_service_request": 101, "new_service_request_unit": "PERCENT"}, ValueError, "new_service_request", "101"),
    ({"new_service_request_increment_interval": -1}, ValueError, "new_service_request_increment_interval", "-1"),
    ({"new_service_request_increment_interval": 1.5}, TypeError, "new_service_request_increment_interval", "1.5"),
    ({"new_service_request_increment_interval": 86401}, ValueError, "new_service_request_increment_interval",
     "86401"),
    ({"new_service_request_increment_interval": False}, TypeError, "new_service_request_increment_interval",
     "False"),
]


@pytest.mark.parametrize("settings, exc, arg, value", BAD_SETTINGS)
def test_bad_settings_in_the_constructor(impl, settings, exc, arg, value):
    with pytest.raises(exc) as info:
        impl.VirtualServer("ROUNDROBIN", clock=impl.ManualClock(0.0), **settings)
    assert arg in str(info.value) and value in str(info.value)


def busy_vserver(impl):
    """A vserver in the middle of an automated ramp, so that a stray change would show."""
    vs, sim = automated_run(impl, duration=23)
    assert vs.slow_start("S5")["increments"] == 2
    return vs


def frozen(vs):
    return (vs.snapshot(), vs.new_service_request, vs.new_service_request_unit,
            vs.new_service_request_increment_interval, vs.startup_rr_factor, vs.method, vs.rtsp_nat,
            {n: vs.slow_start(n) for n in vs.services}, list(vs.slow_start_exits))


@pytest.mark.parametrize("settings, exc, arg, value", BAD_SETTINGS + [
    # a good setting next to a bad one: nothing is applied
    ({"new_service_request": 5, "new_service_request_unit": "BOGUS"}, ValueError, "new_service_request_unit",
     "'BOGUS'"),
    ({"method": "LEASTBANDWIDTH", "new_service_request": -3}, ValueError, "new_service_request", "-3"),
    ({"new_service_request": 0, "method": "FASTEST"}, ValueError, "method", "'FASTEST'"),
    ({"new_service_request": 0, "startup_rr_factor": -1}, ValueError, "startup_rr_factor", "-1"),
    ({"new_service_request": 0, "rtsp_nat": 1}, TypeError, "rtsp_nat", "1"),
    # an unknown setting name
    ({"new_service_requests": 5}, TypeError, "new_service_requests", ""),
    ({"new_service_request": 0, "interval": 5}, TypeError, "interval", ""),
])
def test_bad_settings_in_set_change_nothing(impl, settings, exc, arg, value):
    vs = busy_vserver(impl)
    before = frozen(vs)
    with pytest.raises(exc) as info:
        vs.set(**settings)
    assert arg in str(info.value) and value in str(info.value)
    assert frozen(vs) == before


def test_percent_unit_checked_against_the_current_rate(impl):
    vs, clock = vserver(impl, settings={"new_service_request": 150})
    before = frozen(vs)
    with pytest.raises(ValueError, match=r"new_service_request.*150"):
        vs.set(new_service_request_unit="PERCENT")
    assert frozen(vs) == before
    vs.set(new_service_request=100, new_service_request_unit="PERCENT")  # both at once is fine
    assert (vs.new_service_request, vs.new_service_request_unit) == (100, "PERCENT")


def test_limits_are_accepted(impl):
    vs, clock = vserver(impl, names=(), new_service_request=100, new_service_request_unit="PERCENT",
                        new_service_request_increment_interval=86400)
    assert (vs.new_service_request, vs.new_service_request_unit, vs.new_service_request_increment_interval) == \
        (100, "PERCENT", 86400)
    vs.set(new_service_request=0, new_service_request_unit="PER_SECOND", new_service_request_increment_interval=0)
    assert (vs.new_service_request, vs.new_service_request_unit, vs.new_service_request_increment_interval) == \
        (0, "PER_SECOND", 0)


# ---- startup round robin ---------------------------------------------------------

def test_default_startup_factor_is_zero(impl):
    vs = impl.VirtualServer("LEASTBANDWIDTH", clock=impl.ManualClock(0.0))
    assert vs.startup_rr_factor == 0 and vs.startup_rr_left == 0
    vendor = impl.VirtualServer("LEASTBANDWIDTH", clock=impl.ManualClock(0.0), startup_rr_factor=100)
    assert vendor.startup_rr_factor == 100 and vendor.startup_rr_left == 100


def heavy_s1(impl, factor):
    vs, clock = vserver(impl, "LEASTBANDWIDTH", names=("S1", "S2", "S3"), startup_rr_factor=factor)
    vs.record("S1", bytes=10**9)  # far more than anyone: the method would never pick S1
    return vs


def test_startup_round_robin_then_the_method(impl):
    vs = heavy_s1(impl, 3)
    # The first 3 are plain round robin (S1 gets its turn), then LEASTBANDWIDTH:
    # S2 and S3 tie at 0 bytes, the first after the cursor (S3) is S2.
    assert [vs.select() for _ in range(6)] == ["S1", "S2", "S3", "S2", "S3", "S2"]
    assert vs.startup_rr_left == 0
    plain = heavy_s1(impl, 0)
    assert [plain.select() for _ in range(6)] == ["S2", "S3"] * 3


def test_set_method_restarts_startup_round_robin(impl):
    vs = heavy_s1(impl, 3)
    [vs.select() for _ in range(6)]  # cursor on S2
    vs.set_method("LEASTBANDWIDTH")
    assert vs.startup_rr_left == 3
    assert [vs.select() for _ in range(4)] == ["S3", "S1", "S2", "S3"]
    vs.set(method="LEASTPACKETS")
    assert vs.startup_rr_left == 3


def test_changing_the_factor_alone_leaves_the_running_count(impl):
    vs = heavy_s1(impl, 3)
    vs.select()
    vs.set(startup_rr_factor=5)
    assert (vs.startup_rr_factor, vs.startup_rr_left) == (5, 2)
    vs.set(method="LEASTBANDWIDTH")
    assert vs.startup_rr_left == 5


def test_round_robin_does_not_count_startup_down(impl):
    vs, clock = vserver(impl, "ROUNDROBIN", names=("S1", "S2"), startup_rr_factor=4)
    [vs.select() for _ in range(10)]
    assert vs.startup_rr_left == 4


# ---- the hand-over at a ramp's end (slow_start_handover, not the vendor's) -----------------

def handover_run(impl, method, handover, duration=60):
    """S1..S4 at 200 requests a second of 1,000 bytes each, S5 bound at 10 with PERCENT slow
    start (25 % every 2 s): its ramp's last step is at 18."""
    vs, clock = vserver(impl, method, names=OTHERS)
    vs.set(new_service_request=25, new_service_request_unit="PERCENT", new_service_request_increment_interval=2,
           slow_start_handover=handover)
    sizes = {n: 1000 for n in (*OTHERS, "S5")}
    sim = simulate(vs, clock, rate=200, duration=duration, events=[(10, "bind", "S5")], bytes_per_request=sizes,
                   packets_per_request={n: 1 for n in sizes})
    return vs, sim


@pytest.mark.parametrize("method", ["LEASTBANDWIDTH", "LEASTPACKETS"])
def test_the_vendors_hand_over_is_a_cliff_for_a_windowed_method(impl, method):
    """The vendor's ramp ends at 100 %: the new service's window holds less than its
    peers', and the method sends it every request for two seconds."""
    vs, sim = handover_run(impl, method, "vendor")
    assert vs.slow_start_exits == [(18.0, "S5", "the percentage reached 100")]
    assert sim.of("S5")[18:20].tolist() == [200, 200]


@pytest.mark.parametrize("method", ["LEASTBANDWIDTH", "LEASTPACKETS"])
def test_caught_up_holds_the_fair_share_until_the_window_caught_up(impl, method):
    """slow_start_handover="caught_up": from the last step on the cap holds at the others'
    rate until the new service's Nw reaches its peers' mean: never more than twice its fair
    share (200 / 5 = 40) in any second, during the hold or after it."""
    vs, sim = handover_run(impl, method, "caught_up", duration=70)
    served = sim.of("S5").tolist()
    assert served[:18] == handover_run(impl, method, "vendor", duration=18)[1].of("S5").tolist()  # the same ramp
    assert max(served[18:]) <= 2 * 40, served
    assert min(served[20:]) >= 30, served  # it takes about its share meanwhile, not less
    (t, name, why), = vs.slow_start_exits
    assert (name, why) == ("S5", "its window caught up with the others'") and 18 < t < 70
    assert vs.slow_start("S5") is None
    assert "Slow start hand-over: caught_up" in str(vs.show())


def test_caught_up_changes_nothing_for_a_method_without_a_window(impl):
    vendor, sim_vendor = handover_run(impl, "LEASTCONNECTION", "vendor")
    caught, sim_caught = handover_run(impl, "LEASTCONNECTION", "caught_up")
    assert caught.slow_start_exits == vendor.slow_start_exits
    assert sim_caught.of("S5").tolist() == sim_vendor.of("S5").tolist()


@pytest.mark.parametrize("value, error, message", [
    ("CAUGHT_UP", ValueError, "slow_start_handover must be one of"),
    (1, TypeError, "slow_start_handover must be"),
])
def test_a_bad_handover_is_refused_and_changes_nothing(impl, value, error, message):
    vs, _ = vserver(impl)
    with pytest.raises(error) as info:
        vs.set(slow_start_handover=value, new_service_request=5)
    assert message in str(info.value)
    assert (vs.slow_start_handover, vs.new_service_request) == ("vendor", 0)
    with pytest.raises(error):
        impl.VirtualServer(slow_start_handover=value)

