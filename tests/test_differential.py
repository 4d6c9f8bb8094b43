"""The C engine against the reference: the same random operations on both.

After every step both engines must have returned the same value (or raised
the same exception type with the same message) and have equal snapshot()s.
Invalid arguments are drawn on purpose, now and then, so the error paths are
compared too. LEASTLOAD_HYPOTHESIS_EXAMPLES sets the number of examples.
"""
import math
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from leastload._errors import METHODS, STATES

SETTINGS = settings(
    # 600 examples: about 520 of them make the full 50+ steps (Hypothesis also tries short ones)
    max_examples=int(os.environ.get("LEASTLOAD_HYPOTHESIS_EXAMPLES", "600")),
    stateful_step_count=60,  # the initialize step counts too: most runs make 50+ rule steps
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
ANY_NAME = st.one_of(NAMES, st.sampled_from(["", 7, None]))
WEIGHTS = st.one_of(st.integers(1, 4), st.integers(1, 100), st.sampled_from([0, 101, 1.5, True]))
COUNTS = st.one_of(
    st.integers(0, 1000),
    st.integers(2**63, 2**64 - 1),  # a few of these overflow a window total
    st.sampled_from([-1, 1.5, 2**64]),
)
TTFBS = st.one_of(st.none(), st.floats(0, 5), st.sampled_from([0.0, 3600.0, 3600.5, -0.1, math.nan, "1"]))
STATUSES = st.sampled_from([200, 200, 200, 404, 503, 99, "200"])
CLOCK_STEPS = st.one_of(
    st.floats(-3, 3),
    st.floats(-16, 16),
    st.sampled_from([0.001, 0.999, 1.0, 13.0, 13.999, 14.0, 15.0, 1000.0, -0.5, -14.0, -1000.0]),
)
CAPS = st.one_of(st.none(), st.integers(0, 3), st.sampled_from([-1, 2**32 - 1, 1.5]))
READS = st.sampled_from(["load", "score", "info", "weight", "state", "active"])


def outcome(call):
    try:
        return ("returned", call())
    except Exception as exc:  # compared, not swallowed: both engines must raise alike
        return ("raised", type(exc), str(exc))


class EnginesAgree(RuleBasedStateMachine):
    modules = ()  # (C module, reference module), set by the test

    @initialize(method=st.sampled_from(METHODS), start=st.floats(-1e6, 1e6),
                factor=st.one_of(st.just(0), st.integers(0, 6)), rtsp_nat=st.booleans(),
                services=st.lists(st.tuples(NAMES, st.integers(1, 5)), max_size=5, unique_by=lambda s: s[0]))
    def create(self, method, start, factor, rtsp_nat, services):
        self.clocks = [module.ManualClock(start) for module in self.modules]
        self.vservers = [
            module.VirtualServer(method, clock=clock, startup_rr_factor=factor, rtsp_nat=rtsp_nat)
            for module, clock in zip(self.modules, self.clocks)
        ]
        for name, weight in services:  # most runs start with services bound, so most steps do work
            self.both(lambda vs: vs.bind(name, weight))

    def both(self, call):
        c_result, ref_result = (outcome(lambda: call(vs)) for vs in self.vservers)
        assert c_result == ref_result

    @invariant()
    def same_state(self):
        c_vs, ref_vs = self.vservers
        assert c_vs.snapshot() == ref_vs.snapshot()
        assert (c_vs.services, c_vs.method, c_vs.startup_rr_left, c_vs.now()) == (
            ref_vs.services, ref_vs.method, ref_vs.startup_rr_left, ref_vs.now())

    @rule(name=ANY_NAME, weight=WEIGHTS)
    def bind(self, name, weight):
        self.both(lambda vs: vs.bind(name, weight))

    @rule(name=ANY_NAME)
    def unbind(self, name):
        self.both(lambda vs: vs.unbind(name))

    @rule(name=NAMES, weight=WEIGHTS)
    def set_weight(self, name, weight):
        self.both(lambda vs: vs.set_weight(name, weight))

    @rule(name=NAMES, state=st.sampled_from(STATES + ("up",)))
    def set_state(self, name, state):
        self.both(lambda vs: vs.set_state(name, state))

    @rule(method=st.sampled_from(METHODS + ("FASTEST",)))
    def set_method(self, method):
        self.both(lambda vs: vs.set_method(method))

    @rule(factor=st.one_of(st.integers(0, 6), st.sampled_from([-1, True])))
    def set_startup_rr_factor(self, factor):
        self.both(lambda vs: setattr(vs, "startup_rr_factor", factor))

    @rule(value=st.sampled_from([True, False, 1]))
    def set_rtsp_nat(self, value):
        self.both(lambda vs: setattr(vs, "rtsp_nat", value))

    @rule(name=NAMES, nbytes=COUNTS, packets=COUNTS, control=st.sampled_from([False, False, True]))
    def record(self, name, nbytes, packets, control):
        self.both(lambda vs: vs.record(name, bytes=nbytes, packets=packets, control=control))

    @rule(name=NAMES)
    def begin(self, name):
        self.both(lambda vs: vs.begin(name))

    @rule(name=NAMES, ttfb=TTFBS, status=STATUSES)
    def finish(self, name, ttfb, status):
        self.both(lambda vs: vs.finish(name, ttfb=ttfb, status=status))

    def busy_names(self):
        return [info["name"] for info in self.vservers[1].snapshot()["services"] if info["active"]]

    # Random finish() calls rarely move a TTFB average twice; this one always moves it.
    @precondition(lambda self: self.busy_names())
    @rule(data=st.data(), ttfb=st.floats(0, 5))
    def finish_ok(self, data, ttfb):
        name = data.draw(st.sampled_from(self.busy_names()), label="name")
        self.both(lambda vs: vs.finish(name, ttfb=ttfb, status=200))

    @rule(seconds=CLOCK_STEPS)
    def advance_clock(self, seconds):
        results = [outcome(lambda clock=clock: clock.advance(seconds)) for clock in self.clocks]
        assert results[0] == results[1]

    @rule(count=st.integers(1, 12))
    def select(self, count):
        for _ in range(count):
            self.both(lambda vs: vs.select())

    @rule(name=ANY_NAME, read=READS)
    def read(self, name, read):
        self.both(lambda vs: getattr(vs, read)(name))

    @rule(name=NAMES, cap=CAPS)
    def set_cap(self, name, cap):
        self.both(lambda vs: vs._set_cap(name, cap))

    # Slow start: the facade is shared, so this compares the engines' caps, their
    # per-second counters and the policy's view of them, step by step.
    @rule(rate=st.one_of(st.integers(0, 6), st.integers(0, 100), st.sampled_from([-1, 101, 1.5])),
          unit=st.sampled_from(["PER_SECOND", "PERCENT", "PER_MINUTE"]),
          interval=st.one_of(st.integers(0, 3), st.sampled_from([10, -1, 2.5])))
    def set_slow_start(self, rate, unit, interval):
        self.both(lambda vs: vs.set(new_service_request=rate, new_service_request_unit=unit,
                                    new_service_request_increment_interval=interval))

    @invariant()
    def same_slow_start(self):
        c_vs, ref_vs = self.vservers
        assert c_vs.slow_start_exits == ref_vs.slow_start_exits
        assert [c_vs.slow_start(n) for n in c_vs.services] == [ref_vs.slow_start(n) for n in ref_vs.services]


def test_c_engine_agrees_with_the_reference(c_impl, ref_impl):
    class Machine(EnginesAgree):
        modules = (c_impl, ref_impl)

    run_state_machine_as_test(Machine, settings=SETTINGS)


def test_many_unbinds_agree(c_impl, ref_impl):
    """The C engine closes the holes unbind() leaves once they outnumber the bound
    services (past 32): bind order and the tie cursor must survive that, as the
    reference (which has no holes) says."""
    results = []
    for module in (c_impl, ref_impl):
        clock = module.ManualClock(0.0)
        vs = module.VirtualServer("ROUNDROBIN", clock=clock)
        for i in range(100):
            vs.bind(f"S{i}", weight=1 + i % 3)
        picks = [vs.select() for _ in range(137)]
        last = picks[-1]
        for i in range(100):  # keep every tenth, and drop the one selected last
            if i % 10 or f"S{i}" == last:
                vs.unbind(f"S{i}")
        for i in range(5):
            vs.bind(f"T{i}")  # rebinding goes to the end of bind order
        picks += [vs.select() for _ in range(40)]
        vs.set_method("LEASTCONNECTION")
        picks += [vs.select() for _ in range(40)]
        results.append((picks, vs.services, vs.snapshot()))
    assert results[0] == results[1]
    kept = 10 - (int(last[1:]) % 10 == 0)  # S0, S10, ... S90, less the one selected last
    assert len(results[0][1]) == kept + 5
