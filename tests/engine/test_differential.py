"""The C engine against the reference: the same random operations on both.

After every step both engines must have returned the same value (or raised
the same exception type with the same message) and have equal snapshot()s.
Invalid arguments are drawn on purpose, now and then, so the error paths are
compared too. LEASTLOAD_HYPOTHESIS_EXAMPLES sets the number of examples.

The embedding API adds select(exclude=...) (good and bad excludes), transaction handles
(kept in pairs, one per engine, and given the same calls), fail(), drain(),
the outlier settings, and a clock that, when armed, re-enters its vserver
from inside now() (unbind, bind, drain, ...) before returning the time: the
inner calls' outcomes, ejection() of every service and outlier_events are
compared too.

The policy (the C core's and the reference's own, written twice): slow-start
settings (rates, units, intervals, the guard and the handover), traffic over
whole seconds so that ramps step and leave, failures in a row that eject,
end_ejection(), drains, load reports and weights from them; after every
step each service's cap, phase, ramp and ejection, the exits and the
ejection log are compared.
"""
import ipaddress
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

from leastload.engine.errors import METHODS, STATES
from leastload.engine.methods import TABLE

UNSUPPORTED = tuple(m.name for m in TABLE if not m.supported)  # the vendor's, refused alike

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
# report_load(): (value, weight, threshold) per metric, with bad ones among them
METRIC_SPECS = st.one_of(
    st.tuples(st.integers(0, 120), st.integers(1, 100), st.integers(1, 100)),
    st.sampled_from([(1, 0, 10), (1, 101, 10), (-1, 1, 10), (1, 1, 0), (2**62, 2, 10), (1.5, 1, 10), (1, 1)]),
)
METRICS = st.one_of(
    st.dictionaries(st.sampled_from(["cpu", "mem", "conns"]), METRIC_SPECS, max_size=3),
    st.sampled_from([None, [("cpu", (1, 1, 10))], {7: (1, 1, 10)}]),
)
CAPS = st.one_of(st.none(), st.integers(0, 3), st.sampled_from([-1, 2**32 - 1, 1.5]))
READS = st.sampled_from(["load", "score", "info", "weight", "state", "active", "ejection"])

# select(exclude=...): a kind of collection and the names in it; each engine gets its
# own fresh object (a generator can be iterated once only).
EXCLUDE_KINDS = {
    "none": lambda names: None,
    "set": set,
    "list": list,
    "tuple": tuple,
    "generator": lambda names: (n for n in names),
    "dict keys": lambda names: dict.fromkeys(names).keys(),
    "str": lambda names: "a",  # a single str: TypeError
    "bytes": lambda names: b"a",
    "int": lambda names: 5,
    "bad item": lambda names: [*names, None],
    "bytes item": lambda names: [b"a", *names],
}
EXCLUDES = st.tuples(
    st.sampled_from(["none", "set", "set", "list", "tuple", "generator", "dict keys", "str", "bytes", "int",
                     "bad item", "bytes item"]),
    st.lists(st.sampled_from(["a", "b", "c", "d", "e", "zz", ""]), max_size=4),
)
# select(key=...): every form a hash method takes, and some it does not; the other
# methods ignore the key
_IP_TEXTS = ["10.0.0.1", "10.0.0.200", "10.0.7.1", "::ffff:10.0.0.1", "2001:db8::1", "2001:db8:0:1::1"]
IP_KEYS = st.one_of(st.sampled_from(_IP_TEXTS), st.sampled_from(_IP_TEXTS).map(ipaddress.ip_address),
                    st.sampled_from(_IP_TEXTS).map(lambda t: ipaddress.ip_address(t).packed))
TEXT_KEYS = st.one_of(st.sampled_from(["/", "/a", "/b?x=1", "Example.COM", "example.com.", "", ".", "caf\u00e9"]),
                      st.text(max_size=12), st.binary(max_size=12))
KEYS = st.one_of(
    IP_KEYS, TEXT_KEYS,
    st.tuples(IP_KEYS, IP_KEYS),
    st.tuples(IP_KEYS, st.one_of(st.integers(0, 65535), st.sampled_from([-1, 65536, True, "80"]))),
    st.sampled_from([None, 5, 1.5, ["10.0.0.1", 80], ("10.0.0.1",), b"\x01\x02\x03", "10.0.0.256"]),
)
HASH_SETTINGS = st.one_of(
    st.fixed_dictionaries({}, optional={
        "netmask": st.sampled_from(["255.255.255.255", "255.255.255.0", "255.255.0.0", "0.0.0.0"]),
        "v6netmasklen": st.sampled_from([0, 48, 64, 127, 128]),
        "hashlength": st.sampled_from([1, 2, 5, 80, 4096]),
        "hash_seed": st.one_of(st.integers(0, 2**64 - 1), st.just(0))}),
    st.sampled_from([{"netmask": "255.0.255.0"}, {"v6netmasklen": 129}, {"hashlength": 0},
                     {"hash_seed": -1}, {"hash_seed": 1, "netmask": 24}]),
)
OUTLIER_FAILURES = st.one_of(st.integers(0, 3), st.sampled_from([-1, 2**32, 1.5, True, "2"]))
OUTLIER_TIMES = st.one_of(st.sampled_from([0.5, 1, 2.5, 3, 10, 30, 300]), st.floats(0.01, 20),
                          st.sampled_from([0, -1, 300.5, math.nan, math.inf, "1", True]))
OUTLIER_PERCENTS = st.one_of(st.integers(0, 100), st.sampled_from([0, 25, 50, 100]),
                             st.sampled_from([-1, 101, 50.0, True]))
# What an armed clock does to its own vserver inside now(), before returning the time.
CLOCK_ACTIONS = st.one_of(
    st.tuples(st.sampled_from(["unbind", "bind", "drain", "fail", "begin"]), NAMES),
    st.tuples(st.just("set_state"), NAMES, st.sampled_from(STATES)),
    st.tuples(st.just("select")),
)


class _Escaping(Exception):
    """Raised inside a transaction's with-block by the tests."""


def make_exclude(exclude):
    kind, names = exclude
    return EXCLUDE_KINDS[kind](names)


def view(value):
    """A handle is compared by what it shows; everything else as it is."""
    if hasattr(value, "service") and hasattr(value, "done"):
        return ("handle", value.service, value.done)
    return value


def outcome(call):
    try:
        return ("returned", view(call()))
    except Exception as exc:  # compared, not swallowed: both engines must raise alike
        return ("raised", type(exc), str(exc))


def run_action(vs, action):
    kind, *args = action
    return getattr(vs, kind)(*args)


class ActingClock:
    """A ManualClock whose now(), when armed, first performs one queued action on
    the vserver that reads it (a callback re-entering the engine mid-call). The
    outcomes are kept, so the two engines' can be compared."""

    def __init__(self, module, start):
        self.inner = module.ManualClock(start)
        self.vs = None
        self.queued = None
        self.paused = False
        self.results = []

    def now(self):
        if self.queued is not None and self.vs is not None and not self.paused:
            action, self.queued = self.queued, None
            self.results.append((action, outcome(lambda: run_action(self.vs, action))))
        return self.inner.now()

    def advance(self, seconds):
        self.inner.advance(seconds)


class EnginesAgree(RuleBasedStateMachine):
    modules = ()  # (C module, reference module), set by the test

    @initialize(method=st.sampled_from(METHODS), start=st.floats(-1e6, 1e6),
                factor=st.one_of(st.just(0), st.integers(0, 6)), rtsp_nat=st.booleans(),
                services=st.lists(st.tuples(NAMES, st.integers(1, 5)), max_size=5, unique_by=lambda s: s[0]))
    def create(self, method, start, factor, rtsp_nat, services):
        self.clocks = [ActingClock(module, start) for module in self.modules]
        self.vservers = [
            module.VirtualServer(method, clock=clock, startup_rr_factor=factor, rtsp_nat=rtsp_nat)
            for module, clock in zip(self.modules, self.clocks)
        ]
        for clock, vs in zip(self.clocks, self.vservers):
            clock.vs = vs
        self.handles = []  # (C handle, reference handle) pairs from acquire()
        for name, weight in services:  # most runs start with services bound, so most steps do work
            self.both(lambda vs: vs.bind(name, weight))

    def both(self, call):
        c_result, ref_result = (outcome(lambda: call(vs)) for vs in self.vservers)
        assert c_result == ref_result

    @invariant()
    def same_state(self):
        c_vs, ref_vs = self.vservers
        assert c_vs.snapshot() == ref_vs.snapshot()
        assert c_vs._totals() == ref_vs._totals()  # the aggregates the policy reads
        for clock in self.clocks:
            clock.paused = True  # the invariants must not fire a queued action
        try:
            assert (c_vs.services, c_vs.method, c_vs.startup_rr_left, c_vs.now(), c_vs.window_seconds) == (
                ref_vs.services, ref_vs.method, ref_vs.startup_rr_left, ref_vs.now(), ref_vs.window_seconds)
        finally:
            for clock in self.clocks:
                clock.paused = False

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

    @rule(method=st.sampled_from(METHODS + ("FASTEST",) + UNSUPPORTED[:1]))
    def set_method(self, method):
        self.both(lambda vs: vs.set_method(method))

    @rule(factor=st.one_of(st.integers(0, 6), st.sampled_from([-1, True])))
    def set_startup_rr_factor(self, factor):
        self.both(lambda vs: setattr(vs, "startup_rr_factor", factor))

    @rule(seconds=st.one_of(st.integers(1, 16), st.sampled_from([60, 0, 61, 2.5, True])))
    def set_window(self, seconds):
        self.both(lambda vs: vs.set(window_seconds=seconds))

    @rule(value=st.sampled_from([True, False, 1]))
    def set_rtsp_nat(self, value):
        self.both(lambda vs: setattr(vs, "rtsp_nat", value))

    @rule(name=NAMES, nbytes=COUNTS, packets=COUNTS, control=st.sampled_from([False, False, True]))
    def record(self, name, nbytes, packets, control):
        self.both(lambda vs: vs.record(name, bytes=nbytes, packets=packets, control=control))

    @rule(name=NAMES)
    def begin(self, name):
        self.both(lambda vs: vs.begin(name))

    @rule(name=ANY_NAME, rtt=TTFBS)
    def probe(self, name, rtt):
        self.both(lambda vs: vs.probe(name, rtt))

    @rule(name=ANY_NAME, metrics=METRICS)
    def report_load(self, name, metrics):
        self.both(lambda vs: vs.report_load(name, metrics))

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

    @rule(exclude=EXCLUDES, count=st.integers(1, 6))
    def select_excluding(self, exclude, count):
        for _ in range(count):
            self.both(lambda vs: vs.select(exclude=make_exclude(exclude)))

    @rule(key=KEYS, exclude=EXCLUDES, count=st.integers(1, 4))
    def select_key(self, key, exclude, count):
        for _ in range(count):
            self.both(lambda vs: vs.select(exclude=make_exclude(exclude), key=key))

    @rule(method=st.sampled_from([m for m in METHODS if m.endswith("HASH") or m == "TOKEN"] or METHODS),
          keys=st.lists(KEYS, min_size=1, max_size=6))
    def hash_method_keys(self, method, keys):
        # a hash method and a burst of its keys (drawn methods are mostly not hash methods)
        self.both(lambda vs: vs.set_method(method))
        for key in keys:
            self.both(lambda vs: vs.select(key=key))

    @rule(decay=st.one_of(st.floats(0.001, 60), st.sampled_from([0, -1, 4000, math.nan, "10", True])),
          steps=st.lists(st.tuples(st.floats(0, 3), st.floats(0, 2)), min_size=1, max_size=8))
    def peakewma_burst(self, decay, steps):
        # PEAKEWMA, a decay time (some refused), then picks, samples and sub-second time
        self.both(lambda vs: vs.set_method("PEAKEWMA"))
        self.both(lambda vs: vs.set(peakewma_decay=decay))
        self.both(lambda vs: vs.peakewma_decay)
        for ttfb, seconds in steps:
            picked = [outcome(lambda vs=vs: vs.select()) for vs in self.vservers]
            assert picked[0] == picked[1]
            if picked[0][0] == "returned":
                self.both(lambda vs: vs.finish(picked[0][1], ttfb=ttfb))
            results = [outcome(lambda clock=clock: clock.advance(seconds)) for clock in self.clocks]
            assert results[0] == results[1]

    @rule(key=KEYS, exclude=EXCLUDES)
    def explain_the_pick(self, key, exclude):
        # a pick, then its explanation: the same on both engines, and the rule applied
        # to the explanation's figures gives the pick again
        picked = [outcome(lambda vs=vs: vs.select(exclude=make_exclude(exclude), key=key)) for vs in self.vservers]
        assert picked[0] == picked[1]
        explained = [outcome(lambda vs=vs: vs.explain()) for vs in self.vservers]
        assert explained[0] == explained[1]
        if picked[0][0] == "returned":
            assert explained[0][0] == "returned" and explained[0][1].chosen == picked[0][1]
            assert explained[0][1].reproduced, str(explained[0][1])

    @rule()
    def explain_later(self):
        # any time after: the same on both engines (other calls may have come between)
        self.both(lambda vs: vs.explain())

    @rule(settings=HASH_SETTINGS)
    def set_hash_settings(self, settings):
        self.both(lambda vs: vs.set(**settings))
        self.both(lambda vs: (vs.netmask, vs.v6netmasklen, vs.hashlength, vs.hash_seed))

    @rule(key=KEYS, exclude=EXCLUDES)
    def acquire_key(self, key, exclude):
        got = []

        def call(vs):
            handle = vs.acquire(exclude=make_exclude(exclude), key=key)
            got.append(handle)
            return handle

        results = [outcome(lambda vs=vs: call(vs)) for vs in self.vservers]
        assert results[0] == results[1]
        if len(got) == 2:
            self.handles.append(tuple(got))

    # ---- transactions: both handles of a pair get the same call ----------------

    @rule(k=st.one_of(st.integers(1, 6), st.sampled_from([0, -1, 1.5, True])), exclude=EXCLUDES)
    def select_many(self, k, exclude):
        self.both(lambda vs: vs.select_many(k, exclude=make_exclude(exclude)))

    @rule(exclude=EXCLUDES)
    def acquire(self, exclude):
        got = []

        def call(vs):
            handle = vs.acquire(exclude=make_exclude(exclude))
            got.append(handle)
            return handle

        results = [outcome(lambda vs=vs: call(vs)) for vs in self.vservers]
        assert results[0] == results[1]
        if len(got) == 2:
            self.handles.append(tuple(got))

    def both_handles(self, index, call):
        pair = self.handles[index]
        results = [outcome(lambda t=t: call(t)) for t in pair]
        assert results[0] == results[1]
        assert pair[0].done == pair[1].done

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), nbytes=COUNTS, packets=COUNTS)
    def handle_record(self, data, nbytes, packets):
        index = data.draw(st.integers(0, len(self.handles) - 1), label="handle")
        self.both_handles(index, lambda t: t.record(bytes=nbytes, packets=packets))

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), ttfb=TTFBS, status=STATUSES)
    def handle_finish(self, data, ttfb, status):
        index = data.draw(st.integers(0, len(self.handles) - 1), label="handle")
        self.both_handles(index, lambda t: t.finish(ttfb=ttfb, status=status))

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def handle_fail(self, data):
        index = data.draw(st.integers(0, len(self.handles) - 1), label="handle")
        self.both_handles(index, lambda t: t.fail())

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), raising=st.booleans(), end_inside=st.sampled_from([None, "finish", "fail"]))
    def handle_context_exit(self, data, raising, end_inside):
        index = data.draw(st.integers(0, len(self.handles) - 1), label="handle")

        def block(t):
            try:
                with t:
                    if end_inside:
                        getattr(t, end_inside)()
                    if raising:
                        raise _Escaping("out of the block")
            except _Escaping:
                return "propagated"
            return "left"

        self.both_handles(index, block)

    # ---- fail, drain, outlier settings ------------------------------------------

    @rule(name=ANY_NAME)
    def fail(self, name):
        self.both(lambda vs: vs.fail(name))

    @rule(name=ANY_NAME)
    def drain(self, name):
        self.both(lambda vs: vs.drain(name))

    @rule(failures=st.one_of(st.none(), OUTLIER_FAILURES), time=st.one_of(st.none(), OUTLIER_TIMES),
          percent=st.one_of(st.none(), OUTLIER_PERCENTS))
    def set_outlier(self, failures, time, percent):
        settings = {key: value for key, value in (("outlier_failures", failures), ("outlier_ejection_time", time),
                                                  ("outlier_max_ejection_percent", percent)) if value is not None}
        self.both(lambda vs: vs.set(**settings))

    # Ejection on with usable settings, and failures in a row on a bound service, so
    # that ejections (and returns, with the clock steps) really happen.
    @rule(failures=st.integers(1, 3), time=st.sampled_from([0.5, 1, 2.5, 5]), percent=st.sampled_from([50, 100]))
    def enable_outliers(self, failures, time, percent):
        self.both(lambda vs: vs.set(outlier_failures=failures, outlier_ejection_time=time,
                                    outlier_max_ejection_percent=percent))

    def bound_name(self, data):
        bound = self.vservers[1].services
        return data.draw(st.sampled_from(bound) if bound else NAMES, label="name")

    @rule(data=st.data(), count=st.integers(1, 4), status=st.sampled_from([None, 500, 503]))
    def failure_run(self, data, count, status):
        name = self.bound_name(data)
        for _ in range(count):
            self.both(lambda vs: vs.begin(name))
            if status is None:
                self.both(lambda vs: vs.fail(name))
            else:
                self.both(lambda vs: vs.finish(name, status=status))

    # ---- a clock that re-enters its vserver ---------------------------------------

    @rule(action=CLOCK_ACTIONS, data=st.data(), on_bound=st.booleans())
    def arm_clock(self, action, data, on_bound):
        if on_bound and len(action) > 1 and action[0] != "bind":  # mostly a name that is bound
            action = (action[0], self.bound_name(data), *action[2:])
        for clock in self.clocks:
            clock.queued = action

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
    def same_outliers(self):
        c_vs, ref_vs = self.vservers
        for clock in self.clocks:
            clock.paused = True
        try:
            assert c_vs.outlier_events == ref_vs.outlier_events
            assert [c_vs.ejection(n) for n in c_vs.services] == [ref_vs.ejection(n) for n in ref_vs.services]
        finally:
            for clock in self.clocks:
                clock.paused = False
        assert [(c.done, c.service) for c, r in self.handles] == [(r.done, r.service) for c, r in self.handles]
        c_clock, ref_clock = self.clocks
        assert c_clock.results == ref_clock.results
        assert c_clock.queued == ref_clock.queued

    @invariant()
    def services_is_a_cached_tuple_in_bind_order(self):
        """`services` is O(1): a tuple kept until a bind or unbind, never stale."""
        for vs in self.vservers:
            names = vs.services
            assert type(names) is tuple and vs.services is names
            assert names == tuple(s["name"] for s in vs.snapshot()["services"])

    # ---- the policy ----------------------------------------------------------------

    @rule(name=ANY_NAME)
    def end_ejection(self, name):
        self.both(lambda vs: vs.end_ejection(name))

    @rule(guard=st.sampled_from([0, 0, 1, 1.5, 3, 101, -1, "2"]),
          handover=st.sampled_from(["vendor", "caught_up", "caught_up", "other"]))
    def set_slow_start_options(self, guard, handover):
        self.both(lambda vs: vs.set(slow_start_guard=guard, slow_start_handover=handover))

    @rule(rate=st.integers(1, 20), unit=st.sampled_from(["PER_SECOND", "PERCENT"]), interval=st.integers(0, 3))
    def enable_slow_start(self, rate, unit, interval):
        # usable settings (set_slow_start draws bad ones too), so that ramps really run
        self.both(lambda vs: vs.set(new_service_request=rate, new_service_request_unit=unit,
                                    new_service_request_increment_interval=interval))

    @rule(name=ANY_NAME, cpu=st.one_of(st.floats(0, 2), st.sampled_from([-1.0, math.nan])),
          qps=st.floats(0, 1000), eps=st.floats(0, 50))
    def report_utilization(self, name, cpu, qps, eps):
        self.both(lambda vs: vs.report_utilization(name, cpu_utilization=cpu, rps_fractional=qps, eps=eps))

    @rule(on=st.sampled_from([True, False, 1]))
    def weights_from_utilization(self, on):
        self.both(lambda vs: vs.set(weights_from_utilization=on))

    @rule(seconds=st.integers(1, 12), per_second=st.integers(1, 25), failing=st.sampled_from([None, "a", "b"]))
    def traffic(self, seconds, per_second, failing):
        # requests spread over whole seconds, each ended (`failing` fails its own), so
        # that ramps step up and leave, ejections end and services come back
        for _ in range(seconds * per_second):
            picked = [outcome(lambda vs=vs: vs.select()) for vs in self.vservers]
            assert picked[0] == picked[1]
            if picked[0][0] == "returned":
                name = picked[0][1]
                self.both(lambda vs: vs.fail(name) if name == failing else vs.finish(name, ttfb=0.01))
            results = [outcome(lambda clock=clock: clock.advance(1 / per_second)) for clock in self.clocks]
            assert results[0] == results[1]

    @invariant()
    def same_policy_view(self):
        """Each service's cap and phase as show() has them (ramp, ejection, draining), and
        the weights the load reports give."""
        for clock in self.clocks:
            clock.paused = True
        try:
            views = [outcome(lambda vs=vs: [(s.name, s.state, s.weight, s.cap, s.phase) for s in vs.show().services])
                     for vs in self.vservers]
            assert views[0] == views[1]
            weights = [outcome(lambda vs=vs: vs.utilization_weights()) for vs in self.vservers]
            assert weights[0] == weights[1]
        finally:
            for clock in self.clocks:
                clock.paused = False

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


def test_services_is_one_tuple_until_a_bind_or_unbind(impl):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer("LEASTCONNECTION", clock=clock)
    assert vs.services == ()
    vs.bind("S1")
    vs.bind("S2")
    names = vs.services
    assert names == ("S1", "S2")
    vs.finish(vs.select())
    vs.set_state("S1", "DOWN")
    vs.set_weight("S2", 3)
    clock.advance(20)
    assert vs.services is names  # nothing bound or unbound: the same tuple, no copy
    vs.unbind("S1")
    assert vs.services == ("S2",)
    vs.bind("S1")
    assert vs.services == ("S2", "S1") and names == ("S1", "S2")  # a tuple handed out never changes
    vs.__init__("ROUNDROBIN", clock=clock)
    assert vs.services == ()
