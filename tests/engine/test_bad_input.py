"""docs/semantics.md, "Bad input": every bad input raises a clear exception and changes nothing.

Each case names the exception and the fragments its message must hold (the
argument's name and the value's repr); a full snapshot() is compared before
and after the call. (Overflow of a window total, which is checked after the
window moved, is in test_window.py.)
"""
import math

import pytest

from leastload.engine.errors import DuplicateService, UnknownService

NAN, INF = math.nan, math.inf


def make_busy(impl, clock=None):
    """A vserver with some of everything, so that a stray change would show."""
    vs = impl.VirtualServer("LEASTCONNECTION", clock=clock or impl.ManualClock(100.25))
    vs.bind("S1", 2)
    vs.bind("S2", 3)
    vs.record("S1", bytes=1000, packets=10)
    vs.begin("S1")
    vs.finish("S1", ttfb=0.25)
    vs.begin("S1")
    assert vs.select() == "S2"
    vs.finish("S2", status=404)  # S2: selected once, nothing active
    vs._set_cap("S2", 5)
    return vs


def case(call, exc, *fragments, id=None):
    return pytest.param(call, exc, fragments, id=id)


# Every call that takes a service name, with otherwise valid arguments.
NAMED_CALLS = {
    "unbind": lambda vs, n: vs.unbind(n),
    "set_weight": lambda vs, n: vs.set_weight(n, 1),
    "set_state": lambda vs, n: vs.set_state(n, "UP"),
    "record": lambda vs, n: vs.record(n, bytes=1),
    "begin": lambda vs, n: vs.begin(n),
    "finish": lambda vs, n: vs.finish(n, ttfb=1.0),
    "load": lambda vs, n: vs.load(n),
    "score": lambda vs, n: vs.score(n),
    "weight": lambda vs, n: vs.weight(n),
    "state": lambda vs, n: vs.state(n),
    "active": lambda vs, n: vs.active(n),
    "info": lambda vs, n: vs.info(n),
    "_set_cap": lambda vs, n: vs._set_cap(n, 1),
}
BAD_NAMES = [(1, TypeError), (None, TypeError), (b"S1", TypeError), (("S1",), TypeError), ("", ValueError)]


def name_cases():
    for call_id, call in {**NAMED_CALLS, "bind": lambda vs, n: vs.bind(n)}.items():
        for bad, exc in BAD_NAMES:
            yield case(lambda vs, call=call, bad=bad: call(vs, bad), exc, "name", repr(bad),
                       id=f"{call_id}-name={bad!r}")
        if call_id != "bind":
            yield case(lambda vs, call=call: call(vs, "nope"), UnknownService, "'nope'",
                       id=f"{call_id}-unknown")


def value_cases(id, call, values):
    """call(vs, value); values: (value, exception, argument name)."""
    for value, exc, arg in values:
        yield case(lambda vs, value=value: call(vs, value), exc, arg, repr(value), id=f"{id}={value!r}")


BAD_WEIGHTS = [(0, ValueError, "weight"), (101, ValueError, "weight"), (-1, ValueError, "weight"),
               (1.5, TypeError, "weight"), (True, TypeError, "weight"), ("2", TypeError, "weight"),
               (None, TypeError, "weight")]


def count_values(arg):
    return [(-1, ValueError, arg), (1.5, TypeError, arg), (2.0, TypeError, arg), (True, TypeError, arg),
            (False, TypeError, arg), ("3", TypeError, arg), (None, TypeError, arg),
            (2**64, OverflowError, arg)]


CASES = [
    *name_cases(),
    case(lambda vs: vs.bind("S1"), DuplicateService, "'S1'", id="bind-duplicate"),
    # The name is checked (type, then bound or not) before the other arguments.
    case(lambda vs: vs.bind("S1", 0), DuplicateService, "'S1'", id="bind-duplicate-bad-weight"),
    case(lambda vs: vs.record("nope", bytes=-1), UnknownService, "'nope'", id="record-unknown-bad-bytes"),
    case(lambda vs: vs.set_weight("nope", 0), UnknownService, "'nope'", id="set_weight-unknown-bad-weight"),
    *value_cases("bind-weight", lambda vs, w: vs.bind("S3", w), BAD_WEIGHTS),
    *value_cases("set_weight-weight", lambda vs, w: vs.set_weight("S1", w), BAD_WEIGHTS),
    *value_cases("record-bytes", lambda vs, v: vs.record("S1", bytes=v), count_values("bytes")),
    *value_cases("record-packets", lambda vs, v: vs.record("S1", packets=v), count_values("packets")),
    *value_cases("record-control", lambda vs, v: vs.record("S1", bytes=1, control=v),
                 [(1, TypeError, "control"), ("yes", TypeError, "control"), (None, TypeError, "control")]),
    *value_cases("finish-ttfb", lambda vs, v: vs.finish("S1", ttfb=v),
                 [(NAN, ValueError, "ttfb"), (-0.5, ValueError, "ttfb"), (-1e-9, ValueError, "ttfb"),
                  (INF, ValueError, "ttfb"), (3600.5, ValueError, "ttfb"), (1e300, ValueError, "ttfb"),
                  ("1", TypeError, "ttfb"), (True, TypeError, "ttfb")]),
    *value_cases("finish-status", lambda vs, v: vs.finish("S1", ttfb=1.0, status=v),
                 [(99, ValueError, "status"), (600, ValueError, "status"), (0, ValueError, "status"),
                  ("200", TypeError, "status"), (200.0, TypeError, "status"), (True, TypeError, "status"),
                  (None, TypeError, "status")]),
    *value_cases("set_method", lambda vs, v: vs.set_method(v),
                 [("FASTEST", ValueError, "method"), ("leastconnection", ValueError, "method"),
                  ("", ValueError, "method"), (1, TypeError, "method"), (None, TypeError, "method")]),
    *value_cases("set_state", lambda vs, v: vs.set_state("S1", v),
                 [("up", ValueError, "state"), ("DRAINING", ValueError, "state"), (0, TypeError, "state"),
                  (None, TypeError, "state")]),
    *value_cases("startup_rr_factor", lambda vs, v: setattr(vs, "startup_rr_factor", v),
                 [(-1, ValueError, "startup_rr_factor"), (2**64, ValueError, "startup_rr_factor"),
                  (1.5, TypeError, "startup_rr_factor"), (True, TypeError, "startup_rr_factor")]),
    *value_cases("rtsp_nat", lambda vs, v: setattr(vs, "rtsp_nat", v),
                 [(1, TypeError, "rtsp_nat"), ("yes", TypeError, "rtsp_nat"), (None, TypeError, "rtsp_nat")]),
    *value_cases("_set_cap", lambda vs, v: vs._set_cap("S1", v),
                 [(-1, ValueError, "cap"), (2**32 - 1, ValueError, "cap"), (1.5, TypeError, "cap"),
                  ("1", TypeError, "cap"), (True, TypeError, "cap")]),
    case(lambda vs: vs.finish("S2"), ValueError, "'S2'", "no active transaction", id="finish-nothing-active"),
]


@pytest.mark.parametrize("call, exc, fragments", CASES)
def test_bad_input_raises_and_changes_nothing(impl, call, exc, fragments):
    clock = impl.ManualClock(100.25)
    vs = make_busy(impl, clock)
    before = vs.snapshot()
    clock.advance(1.0)  # were the clock read before validating, the window would move
    with pytest.raises(exc) as raised:
        call(vs)
    assert type(raised.value) is exc
    for fragment in fragments:
        assert fragment in str(raised.value)
    assert vs.snapshot() == before


def test_messages_of_service_errors(impl):
    vs = make_busy(impl)
    with pytest.raises(KeyError) as raised:  # UnknownService is a KeyError
        vs.weight("nope")
    assert str(raised.value) == "unknown service 'nope'"
    with pytest.raises(ValueError) as raised:  # DuplicateService is a ValueError
        vs.bind("S2")
    assert str(raised.value) == "service 'S2' is already bound"
    with pytest.raises(ValueError) as raised:
        vs.finish("S2")
    assert str(raised.value) == "service 'S2' has no active transaction"


class SettableClock:
    """Any object with now() is a clock; this one can return what a test wants."""

    def __init__(self, t):
        self.t = t

    def now(self):
        return self.t


TICKING = {  # the calls that read the clock (docs/semantics.md "Time")
    "select": lambda vs: vs.select(),
    "record": lambda vs: vs.record("S1", bytes=1),
    "load": lambda vs: vs.load("S1"),
    "score": lambda vs: vs.score("S1"),
    "info": lambda vs: vs.info("S1"),
}


@pytest.mark.parametrize("reading, exc", [(NAN, ValueError), (INF, ValueError), (-INF, ValueError),
                                          ("abc", TypeError), (None, TypeError)])
@pytest.mark.parametrize("call", TICKING.values(), ids=TICKING.keys())
def test_a_bad_clock_reading_raises_and_changes_nothing(impl, call, reading, exc):
    clock = SettableClock(100.25)
    vs = make_busy(impl, clock)
    before = vs.snapshot()
    clock.t = reading
    with pytest.raises(exc) as raised:
        call(vs)
    assert "clock.now()" in str(raised.value) and repr(reading) in str(raised.value)
    assert vs.snapshot() == before


def test_calls_that_do_not_read_the_clock_ignore_a_bad_one(impl):
    clock = SettableClock(100.25)
    vs = make_busy(impl, clock)
    clock.t = NAN
    vs.bind("S3")
    vs.begin("S3")
    vs.finish("S3", ttfb=0.5)
    vs.set_weight("S3", 4)
    vs.set_state("S3", "DOWN")
    vs.set_method("ROUNDROBIN")
    vs.unbind("S3")
    assert (vs.weight("S1"), vs.state("S1"), vs.active("S1")) == (2, "UP", 1)
    assert vs.snapshot()["second"] == 100
    clock.t = 101.5
    assert vs.select() == "S1"  # round robin after the cursor (S2)


@pytest.mark.parametrize("kwargs, exc, fragments", [
    ({"method": "FASTEST"}, ValueError, ("method", "'FASTEST'")),
    ({"method": None}, TypeError, ("method", "None")),
    ({"startup_rr_factor": -1}, ValueError, ("startup_rr_factor", "-1")),
    ({"startup_rr_factor": 1.5}, TypeError, ("startup_rr_factor", "1.5")),
    ({"rtsp_nat": 1}, TypeError, ("rtsp_nat", "1")),
    ({"clock": SettableClock(NAN)}, ValueError, ("clock.now()", "nan")),
    ({"clock": object()}, TypeError, ("clock",)),
])
def test_bad_constructor_arguments(impl, kwargs, exc, fragments):
    with pytest.raises(exc) as raised:
        impl.VirtualServer(**{"clock": impl.ManualClock(0.0), **kwargs})
    assert type(raised.value) is exc
    for fragment in fragments:
        assert fragment in str(raised.value)


@pytest.mark.parametrize("call, exc, fragments", [
    case(lambda c: c.advance(NAN), ValueError, "seconds", "nan", id="advance-nan"),
    case(lambda c: c.advance(INF), ValueError, "seconds", "inf", id="advance-inf"),
    case(lambda c: c.advance("1"), TypeError, "seconds", "'1'", id="advance-str"),
    case(lambda c: c.advance(True), TypeError, "seconds", "True", id="advance-bool"),
    case(lambda c: c.advance(2.0**52), ValueError, "seconds", repr(2.0**52), id="advance-to-2**53"),
    case(lambda c: c.set(-INF), ValueError, "t", "-inf", id="set-minus-inf"),
    case(lambda c: c.set(-2.0**53), ValueError, "t", repr(-2.0**53), id="set-minus-2**53"),
    case(lambda c: c.set(None), TypeError, "t", "None", id="set-None"),
])
def test_bad_manual_clock_input(impl, call, exc, fragments):
    """Clocks hold finite seconds below 2**53 in magnitude, as check_time demands of readings."""
    clock = impl.ManualClock(2.0**52)
    with pytest.raises(exc) as raised:
        call(clock)
    assert type(raised.value) is exc
    for fragment in fragments:
        assert fragment in str(raised.value)
    assert clock.now() == 2.0**52


@pytest.mark.parametrize("start, exc", [(NAN, ValueError), (INF, ValueError), (2.0**53, ValueError),
                                        ("0", TypeError), (None, TypeError), (False, TypeError)])
def test_bad_manual_clock_start(impl, start, exc):
    with pytest.raises(exc, match="start"):
        impl.ManualClock(start)
