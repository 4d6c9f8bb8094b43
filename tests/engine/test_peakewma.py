"""PEAKEWMA (not the vendor's): a peak-sensitive latency estimate that decays with
time, N = E * (active + 1), two services drawn and the lower Nw taken."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leastload.engine import peakewma as _peakewma

MS = 1e-3


def make(impl, n, weights=None, **options):
    clock = impl.ManualClock(100.0)
    vs = impl.VirtualServer("PEAKEWMA", clock=clock, **options)
    for i in range(n):
        vs.bind(f"S{i}", 1 if weights is None else weights[i])
    return vs, clock


def sample(vs, name, ttfb, status=200):
    """One transaction on `name` ending with `ttfb` (begin, so no pick is involved)."""
    vs.begin(name)
    vs.finish(name, ttfb=ttfb, status=status)


def test_the_decay_weight_follows_exp_minus_d_over_decay():
    for decay in (0.5, 10.0, 600.0):
        decay_us = round(decay * 1e6)
        for d in (0.0, decay / 100, decay / 3, decay, 2 * decay, 7 * decay):
            w = _peakewma.decay_q32(d, decay_us) / 2**32
            assert w == pytest.approx(math.exp(-d / decay), rel=2e-4, abs=2**-31)
    assert _peakewma.decay_q32(-5.0, 10_000_000) == 2**32  # the clock went back: no decay
    assert _peakewma.decay_q32(230.0, 10_000_000) == 0  # past 23 decay times


def test_fraction_constants_are_powers_of_two():
    for j, value in enumerate(_peakewma.POW2_FRACTION):
        assert abs(value - 2**32 * 2 ** -(2**j / 65536)) <= 0.5


def test_a_slower_sample_is_taken_at_once(impl):
    vs, clock = make(impl, 1)
    assert vs.info("S0")["peak_ewma"] is None
    sample(vs, "S0", 10 * MS)
    assert vs.info("S0")["peak_ewma"] == 0.010
    clock.advance(0.001)
    sample(vs, "S0", 500 * MS)
    assert vs.info("S0")["peak_ewma"] == 0.5  # the peak, not an average


def test_the_estimate_halves_in_decay_times_ln2(impl):
    vs, clock = make(impl, 1, peakewma_decay=10.0)
    sample(vs, "S0", 400 * MS)
    clock.advance(10.0 * math.log(2))
    assert vs.info("S0")["peak_ewma"] == pytest.approx(0.2, rel=1e-4)
    clock.advance(10.0 * math.log(2))
    assert vs.info("S0")["peak_ewma"] == pytest.approx(0.1, rel=1e-4)


@settings(max_examples=60, deadline=None)
@given(first=st.integers(0, 3_600_000_000), second=st.integers(0, 3_600_000_000),
       gap=st.floats(0, 120), later=st.floats(0, 120), decay=st.floats(0.001, 3600))
def test_samples_and_decay_are_exact_integers(impl, first, second, gap, later, decay):
    vs, clock = make(impl, 1, peakewma_decay=decay)
    decay_us = math.floor(decay * 1e6 + 0.5)
    expected = _peakewma.Estimate()
    sample(vs, "S0", first / 1e6)
    expected.observe(first, clock.now(), decay_us)
    clock.advance(gap)
    sample(vs, "S0", second / 1e6)
    expected.observe(second, clock.now(), decay_us)
    clock.advance(later)
    assert vs.info("S0")["peak_ewma"] == expected.at(clock.now(), decay_us) / 1e6
    # against the real numbers: the peak or the blend, decayed
    w1 = math.exp(-gap / decay)
    e1 = first * w1
    cost = second if second > e1 else first * w1 + second * (1 - w1)
    # each elapsed time is taken in whole microseconds (floored): up to 1 us of decay_us more weight
    # per interval (gap, later), a relative 1 / decay_us each beside the fixed point's 1e-3
    assert expected.at(clock.now(), decay_us) == pytest.approx(cost * math.exp(-later / decay),
                                                               rel=1e-3 + 2.0 / decay_us, abs=2)


def test_a_faster_sample_is_blended_by_the_time_since_the_last(impl):
    vs, clock = make(impl, 1, peakewma_decay=10.0)
    sample(vs, "S0", 100 * MS)
    clock.advance(10.0)  # w = 1/e
    sample(vs, "S0", 10 * MS)  # below E = 36.8 ms: 100 * w + 10 * (1 - w)
    w = math.exp(-1)
    assert vs.info("S0")["peak_ewma"] == pytest.approx(0.1 * w + 0.01 * (1 - w), rel=1e-4)


def test_only_status_200_ttfbs_under_peakewma_are_samples(impl):
    vs, clock = make(impl, 2)
    sample(vs, "S0", 50 * MS, status=503)
    vs.begin("S0")
    vs.fail("S0")
    assert vs.info("S0")["peak_ewma"] is None
    vs.set_method("LEASTCONNECTION")
    sample(vs, "S1", 50 * MS)
    assert vs.info("S1")["peak_ewma"] is None
    vs.set_method("PEAKEWMA")
    sample(vs, "S1", 50 * MS)
    assert vs.info("S1")["peak_ewma"] == 0.05


def test_the_lower_estimate_times_activity_wins(impl):
    vs, clock = make(impl, 2)  # two services: both are always drawn
    sample(vs, "S0", 10 * MS)
    sample(vs, "S1", 3 * MS)
    assert vs.select() == "S1"  # 3 ms x 1 against 10 ms x 1
    assert vs.select() == "S1"  # 3 ms x 2
    assert vs.select() == "S1"  # 3 ms x 3 = 9 ms
    assert vs.select() == "S0"  # 3 ms x 4 = 12 ms against 10 ms
    assert vs.load("S1") == pytest.approx(0.003 * 4, rel=1e-6)
    assert vs.load("S0") == pytest.approx(0.010 * 2, rel=1e-6)


def test_weights_divide_the_cost(impl):
    vs, clock = make(impl, 2, weights=[1, 4])
    sample(vs, "S0", 10 * MS)
    sample(vs, "S1", 10 * MS)
    picks = [vs.select() for _ in range(10)]  # no finishes: S1 takes 4 for S0's 1
    assert (picks.count("S0"), picks.count("S1")) == (2, 8)


def test_a_service_without_an_estimate_is_tried_idle_but_not_piled_on(impl):
    vs, clock = make(impl, 2)
    sample(vs, "S0", 2.0)  # very slow, but measured
    assert vs.select() == "S1"  # no estimate and idle: N = 0
    for _ in range(5):
        vs.begin("S0")
    assert vs.select() == "S0"  # S1 has a transaction open and still no estimate: the penalty
    assert vs.load("S1") > vs.load("S0")


def test_an_idle_service_decays_back_into_the_draw(impl):
    vs, clock = make(impl, 2, peakewma_decay=1.0)
    sample(vs, "S0", 1.0)
    sample(vs, "S1", 5 * MS)
    assert vs.select() == "S1"
    vs.finish("S1", ttfb=5 * MS)
    clock.advance(30.0)  # S0's second at 1.0 s has decayed below S1's 5 ms
    sample(vs, "S1", 5 * MS)
    assert vs.select() == "S0"


def test_slow_start_caps_a_new_service(impl):
    vs, clock = make(impl, 3)
    vs.set(new_service_request=2, new_service_request_increment_interval=5)
    vs.bind("NEW")  # in slow start: 0 picks a second for 5 s, then 2, 4, ...
    for name in vs.services:
        sample(vs, name, 1 * MS if name == "NEW" else 100 * MS)  # NEW wins every draw it is in
    counts = []
    for step in range(2):
        picks = [vs.select() for _ in range(40)]
        counts.append(picks.count("NEW"))
        clock.advance(5.0)
    assert counts == [0, 2]
    vs.set(new_service_request=0)  # slow start off: NEW takes its share of the draws
    picks = [vs.select() for _ in range(40)]
    assert picks.count("NEW") > 2


@pytest.mark.parametrize("bad, error", [(0, ValueError), (3601, ValueError), (math.nan, ValueError),
                                        ("10", TypeError), (True, TypeError), (None, TypeError)])
def test_a_bad_decay_is_refused_and_changes_nothing(impl, bad, error):
    with pytest.raises(error, match="peakewma_decay"):
        impl.VirtualServer("PEAKEWMA", peakewma_decay=bad)
    vs, clock = make(impl, 1, peakewma_decay=2.5)
    with pytest.raises(error, match="peakewma_decay"):
        vs.set(peakewma_decay=bad, method="ROUNDROBIN")
    assert (vs.peakewma_decay, vs.method) == (2.5, "PEAKEWMA")
