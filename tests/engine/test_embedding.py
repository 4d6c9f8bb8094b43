"""The embedding API (docs/embedding.md), on both engines: select(exclude=...), transaction
handles (acquire), fail(), drain() and passive outlier ejection.

Every expected value is derived by hand, in the comments, from the rules of
the embedding API (select's exclude, transactions, fail, drain, outlier
ejection) and docs/semantics.md (tie rule, weighted round robin, startup
round robin), never read back from an engine.
"""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import leastload
from leastload.engine.errors import NoServiceAvailable, TransactionEnded, UnknownService
from leastload.engine.methods import KEYLESS_METHODS  # the hash methods' keys: tests/hashing/test_hash_methods.py

NOBODY_LEFT = "no other service UP"
EJECTED, RETURNED = "ejected", "returned"
KEPT_PERCENT, KEPT_LAST = "kept: max ejection percent", "kept: last eligible service"


def make(impl, method="LEASTCONNECTION", weights=(1, 1, 1), start=0.0, **options):
    """S1..Sn bound with `weights`, on a ManualClock at `start`."""
    clock = impl.ManualClock(start)
    vs = impl.VirtualServer(method, clock=clock, **options)
    for k, weight in enumerate(weights, 1):
        vs.bind(f"S{k}", weight)
    return vs, clock


def picks(vs, count, exclude=None):
    return [vs.select(exclude=exclude) for _ in range(count)]


def ended_message(name):
    return f"the transaction on service {name!r} has already ended"


# ==== select(exclude=...) ==================================================================

def test_exclude_weighted_round_robin(impl):
    """Weights 2, 3, 4 with S2 excluded on every pick: round robin over S1 (2) and
    S3 (4), the largest eligible weight being 4: r=1: S1 S3; r=2: S1 S3; r=3: S3;
    r=4: S3; then back to r=1."""
    vs, _ = make(impl, "ROUNDROBIN", (2, 3, 4))
    assert picks(vs, 12, exclude={"S2"}) == "S1 S3 S1 S3 S3 S3".split() * 2
    assert vs.active("S2") == 0


def test_exclude_round_robin_round_and_cursor(impl):
    """Weights 1, 3: plain order S1 S2 S2 S2, repeating. Pick 3 excludes S2: round 1
    after the cursor (S2) has nobody, r=2 exceeds the largest eligible weight (1),
    so r=1 from the start: S1, round 1. Then S2 (r=1, after S1), S2 (r=2), S2 (r=3),
    and r=4 > 3 -> r=1: S1."""
    vs, _ = make(impl, "ROUNDROBIN", (1, 3))
    got = picks(vs, 2) + [vs.select(exclude=["S2"])] + picks(vs, 4)
    assert got == ["S1", "S2", "S1", "S2", "S2", "S2", "S1"]
    assert vs.snapshot()["rr_round"] == 1


def test_exclude_unweighted_round_robin_moves_the_cursor_to_the_pick(impl):
    vs, _ = make(impl, "ROUNDROBIN")
    assert vs.select() == "S1"
    assert vs.select(exclude={"S2"}) == "S3"  # S2 skipped for this pick only
    assert vs.select() == "S1"  # the cursor is on S3: wraps round
    # Nobody eligible after S1 but S1 itself: round robin wraps back to S1.
    assert vs.select(exclude=("S2", "S3")) == "S1"
    assert vs.select() == "S2"


def test_exclude_least_connection_ties_and_cursor(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    assert picks(vs, 3) == ["S1", "S2", "S3"]  # all at 1 active now, cursor on S3
    # S2 and S3 tie at 1; nobody after the cursor (S3): the first from the start, S2.
    assert vs.select(exclude={"S1"}) == "S2"
    # S1 at 1, S2 at 2: S1.
    assert vs.select(exclude=["S3"]) == "S1"
    # S1 2, S2 2, S3 1: S3, though the last two picks skipped it.
    assert vs.select() == "S3"
    # all at 2, cursor on S3, S1 excluded: S2.
    assert vs.select(exclude={"S1"}) == "S2"
    assert [vs.active(n) for n in ("S1", "S2", "S3")] == [2, 3, 2]


def test_exclude_least_response_time(impl):
    vs, _ = make(impl, "LEASTRESPONSETIME")
    for name, ttfb in (("S1", 1.0), ("S2", 2.0), ("S3", 3.0)):
        vs.begin(name)
        vs.finish(name, ttfb=ttfb)
        vs.begin(name)  # one active each: N = 1e6, 2e6, 3e6 us
    assert vs.select() == "S1"  # S1 -> 2e6, ties S2
    assert vs.select(exclude={"S1"}) == "S2"  # S2 -> 4e6
    assert vs.select(exclude=["S1", "S2"]) == "S3"  # S3 -> 6e6
    assert vs.select(exclude={"S1"}) == "S2"  # 4e6 < 6e6
    assert vs.select() == "S1"  # 2e6 is the lowest


@pytest.mark.parametrize("method, counter", [("LEASTBANDWIDTH", "bytes"), ("LEASTPACKETS", "packets")])
def test_exclude_least_traffic(impl, method, counter):
    vs, _ = make(impl, method)
    for name, amount in (("S1", 100), ("S2", 50), ("S3", 50)):
        vs.record(name, **{counter: amount})
    assert vs.select() == "S2"  # S2, S3 tie at 50: first after the start
    assert vs.select(exclude={"S2"}) == "S3"
    assert vs.select(exclude={"S2", "S3"}) == "S1"  # only S1 (100) is left
    assert vs.select(exclude={"S3"}) == "S2"  # 50 < 100
    assert vs.select() == "S3"  # tie S2/S3 again, cursor on S2: S3


def test_exclude_under_startup_round_robin(impl):
    """LEASTBANDWIDTH with S1 far heavier; startup round robin for 3 picks: the
    first eligible, not excluded service after the cursor, counting down; then
    the method."""
    vs, _ = make(impl, "LEASTBANDWIDTH", startup_rr_factor=3)
    vs.record("S1", bytes=10**9)
    assert vs.select(exclude={"S2"}) == "S1"
    assert vs.startup_rr_left == 2
    assert vs.select(exclude={"S2"}) == "S3"
    assert vs.select(exclude={"S1"}) == "S2"  # nobody after S3: from the start
    assert vs.startup_rr_left == 0
    assert vs.select() == "S3"  # LEASTBANDWIDTH: S2 and S3 tie at 0, after S2
    assert vs.select(exclude={"S3"}) == "S2"  # not S1, far heavier


def test_failed_exclude_pick_does_not_count_startup_down(impl):
    vs, _ = make(impl, "LEASTCONNECTION", startup_rr_factor=5)
    before = vs.snapshot()
    with pytest.raises(NoServiceAvailable):
        vs.select(exclude={"S1", "S2", "S3"})
    assert vs.snapshot() == before
    assert vs.startup_rr_left == 5


@pytest.mark.parametrize("method", KEYLESS_METHODS)
def test_unknown_names_are_ignored(impl, method):
    plain, _ = make(impl, method, (1, 2, 3))
    other, _ = make(impl, method, (1, 2, 3))
    excluded = picks(other, 12, exclude={"nope", "S9", "s1"})
    assert excluded == picks(plain, 12)
    assert other.snapshot() == plain.snapshot()


@pytest.mark.parametrize("method", KEYLESS_METHODS)
def test_everything_excluded_raises_and_changes_nothing(impl, method):
    vs, _ = make(impl, method, (1, 2, 3))
    picks(vs, 4)
    vs.set_state("S2", "DOWN")
    before = vs.snapshot()
    with pytest.raises(NoServiceAvailable):
        vs.select(exclude=["S1", "S3"])  # S2 is DOWN: everyone eligible is excluded
    with pytest.raises(NoServiceAvailable):
        vs.acquire(exclude=["S1", "S3", "S2", "nope"])
    assert vs.snapshot() == before
    assert vs.select(exclude=["S1"]) == "S3"


class CountingIterable:
    def __init__(self, items):
        self.items, self.iterations = list(items), 0

    def __iter__(self):
        self.iterations += 1
        return iter(self.items)


EXCLUDE_KINDS = {
    "set": lambda names: set(names),
    "frozenset": lambda names: frozenset(names),
    "list": lambda names: list(names),
    "tuple": lambda names: tuple(names),
    "generator": lambda names: (n for n in names),
    "dict": lambda names: dict.fromkeys(names, "ignored value"),
    "dict keys": lambda names: dict.fromkeys(names).keys(),
    "iterable": lambda names: CountingIterable(names),
    "with duplicates": lambda names: list(names) * 3,
}


@pytest.mark.parametrize("kind", EXCLUDE_KINDS)
def test_exclude_collection_kinds(impl, kind):
    vs, _ = make(impl, "LEASTCONNECTION")
    assert vs.select(exclude=EXCLUDE_KINDS[kind](["S1", "S2"])) == "S3"
    assert vs.select(exclude=EXCLUDE_KINDS[kind](["S3", "S1"])) == "S2"
    assert vs.select(exclude=EXCLUDE_KINDS[kind]([])) == "S1"


def test_exclude_none_and_empty_are_no_exclusion(impl):
    vs, _ = make(impl, "ROUNDROBIN", (2, 1, 1))
    assert [vs.select(exclude=None), vs.select(exclude=()), vs.select(exclude=set()), vs.select()] == \
        ["S1", "S2", "S3", "S1"]


def test_exclude_is_iterated_once_before_the_clock_is_read(impl):
    log = []

    class LoggingClock:
        def now(self):
            log.append("clock")
            return 5.0

    def names():
        log.append("iter")
        yield "S1"
        log.append("iter done")

    vs = impl.VirtualServer("LEASTCONNECTION", clock=LoggingClock())
    vs.bind("S1")
    vs.bind("S2")
    counting = CountingIterable(["S2"])
    log.clear()
    assert vs.select(exclude=names()) == "S2"
    assert log == ["iter", "iter done", "clock"]
    assert vs.select(exclude=counting) == "S1"
    assert counting.iterations == 1


class Boom(Exception):
    pass


def exploding():
    yield "S1"
    raise Boom("from the exclude iterator")


BAD_EXCLUDES = [
    pytest.param("S1", TypeError, ["exclude", "'S1'"], id="str"),
    pytest.param("", TypeError, ["exclude"], id="empty str"),
    pytest.param(b"S1", TypeError, ["exclude", "b'S1'"], id="bytes"),
    pytest.param(5, TypeError, ["exclude", "5"], id="int"),
    pytest.param(object(), TypeError, ["exclude"], id="object"),
    pytest.param([1], TypeError, ["exclude", "1"], id="int item"),
    pytest.param(["S1", None], TypeError, ["exclude", "None"], id="None item"),
    pytest.param({"S1", b"S2"}, TypeError, ["exclude", "b'S2'"], id="bytes item"),
    pytest.param((("S1",),), TypeError, ["exclude", "('S1',)"], id="tuple item"),
]


@pytest.mark.parametrize("call", ["select", "acquire"])
@pytest.mark.parametrize("bad, exc, fragments", BAD_EXCLUDES)
def test_bad_exclude_raises_and_changes_nothing(impl, call, bad, exc, fragments):
    vs, clock = make(impl, "ROUNDROBIN", (1, 2, 3), start=100.25)
    picks(vs, 2)
    before = vs.snapshot()
    clock.advance(1.0)  # were the clock read before the check, the window would move
    with pytest.raises(exc) as raised:
        getattr(vs, call)(exclude=bad)
    assert type(raised.value) is exc
    for fragment in fragments:
        assert fragment in str(raised.value)
    assert vs.snapshot() == before
    assert vs.select() == "S3"  # the round robin goes on where it was (S1 S2 S3 S2 ...)


def test_exception_from_the_exclude_iterator_propagates_and_changes_nothing(impl):
    vs, clock = make(impl, "LEASTCONNECTION", start=100.25)
    before = vs.snapshot()
    clock.advance(1.0)
    with pytest.raises(Boom):
        vs.select(exclude=exploding())
    assert vs.snapshot() == before


def run_twin(impl, method, factor, weights, steps):
    """Applies `steps` to two vservers: `a` selects with exclude=X, `b` selects
    plainly with the UP services of X set DOWN around the pick (no slow start is
    configured, so DOWN -> UP starts no ramp). They must agree pick by pick."""
    names = [f"S{k}" for k in range(1, len(weights) + 1)]
    (a, clock_a), (b, clock_b) = (make(impl, method, weights, startup_rr_factor=factor) for _ in range(2))

    def outcome(call):
        try:
            return call()
        except NoServiceAvailable:
            return "none"

    for op, exclude, name, value in steps:
        if op == "select":
            got_a = outcome(lambda: a.select(exclude=exclude))
            taken_down = [n for n in names if n in exclude and b.state(n) == "UP"]
            for n in taken_down:
                b.set_state(n, "DOWN")
            got_b = outcome(b.select)
            for n in taken_down:
                b.set_state(n, "UP")
            assert got_a == got_b
        elif op == "finish":
            if a.active(name):
                for vs in (a, b):
                    vs.finish(name, ttfb=value)
        elif op == "record":
            for vs in (a, b):
                vs.record(name, bytes=int(value * 1000), packets=int(value * 10))
        elif op in ("DOWN", "UP", "OUT_OF_SERVICE"):
            for vs in (a, b):
                vs.set_state(name, op)
        elif op == "tick":
            for clock in (clock_a, clock_b):
                clock.advance(value)
        assert a.snapshot() == b.snapshot()
    return a


TWIN_NAMES = ["S1", "S2", "S3", "S4", "S5", "nope"]
TWIN_STEPS = st.lists(st.tuples(
    st.sampled_from(["select"] * 6 + ["finish", "finish", "record", "DOWN", "UP", "OUT_OF_SERVICE", "tick"]),
    st.frozensets(st.sampled_from(TWIN_NAMES)),
    st.sampled_from(TWIN_NAMES[:5]),
    st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0])), max_size=40)


@settings(max_examples=120, deadline=None)
@given(method=st.sampled_from(KEYLESS_METHODS), factor=st.sampled_from([0, 0, 2, 5]),
       weights=st.lists(st.integers(1, 4), min_size=5, max_size=5), steps=TWIN_STEPS)
def test_exclude_is_like_taking_the_services_down(impl, method, factor, weights, steps):
    run_twin(impl, method, factor, weights, steps)


def test_twin_example_makes_the_twin_rule_bite(impl):
    """One fixed run of the property, with a pick that only exclusion explains:
    the twin helper itself must be able to tell a difference."""
    steps = [("select", frozenset({"S1"}), "S1", 0.0)] * 3
    a = run_twin(impl, "ROUNDROBIN", 0, [1, 1, 1, 1, 1], steps)
    assert a.active("S1") == 0 and [a.active(n) for n in ("S2", "S3", "S4")] == [1, 1, 1]


def test_acquire_picks_like_select(impl):
    for method in KEYLESS_METHODS:
        a, _ = make(impl, method, (3, 1, 2), startup_rr_factor=2)
        b, _ = make(impl, method, (3, 1, 2), startup_rr_factor=2)
        excludes = [None, {"S1"}, ["S2", "S3"], (), {"S3"}, None, {"S1", "S2"}, None]
        handles = [a.acquire(exclude=x) for x in excludes]
        assert [t.service for t in handles] == [b.select(exclude=x) for x in excludes]
        assert a.snapshot() == b.snapshot()


# ==== transactions ===========================================================================

def test_handle_lifecycle(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    t = vs.acquire()
    assert (t.service, t.done) == ("S1", False)
    assert vs.active("S1") == 1
    t.record(bytes=1500, packets=3)
    t.record(packets=1)
    assert (vs.info("S1")["bytes"], vs.info("S1")["packets"]) == (1500, 4)
    t.finish(ttfb=0.5)
    assert t.done is True
    info = vs.info("S1")
    assert (info["active"], info["ttfb"], info["failures"], info["consecutive_failures"]) == (0, 0.5, 0, 0)


def test_transaction_ended_is_shared_and_a_runtime_error(impl):
    assert leastload.TransactionEnded is TransactionEnded
    assert issubclass(TransactionEnded, RuntimeError)


@pytest.mark.parametrize("first", ["finish", "fail"])
@pytest.mark.parametrize("second", ["finish", "fail", "record"])
def test_ending_twice_raises_and_changes_nothing(impl, first, second):
    vs, _ = make(impl, "LEASTCONNECTION")
    vs.begin("S2")
    t = vs.acquire()  # S1: S2 is busy
    assert t.service == "S1"
    vs.begin("S1")  # another transaction on S1, which a second end must not eat
    getattr(t, first)()
    before = vs.snapshot()
    with pytest.raises(TransactionEnded) as raised:
        getattr(t, second)()
    assert str(raised.value) == ended_message("S1")
    assert vs.snapshot() == before
    assert vs.active("S1") == 1 and t.done


def test_handle_fail(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    vs.begin("S1")
    vs.finish("S1", ttfb=0.25)
    t = vs.acquire()
    assert t.service == "S1"
    t.fail()
    info = vs.info("S1")
    assert (info["active"], info["ttfb"], info["failures"], info["consecutive_failures"]) == (0, 0.25, 1, 1)


def test_handle_finish_with_a_server_error_counts_as_failure(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    t = vs.acquire()
    t.finish(ttfb=0.75, status=503)
    info = vs.info("S1")
    assert (info["active"], info["ttfb"], info["failures"], info["consecutive_failures"]) == (0, None, 1, 1)


def test_context_manager_normal_exit_finishes(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    for _ in range(2):  # two failures first: a normal exit resets the consecutive count
        vs.begin("S1")
        vs.fail("S1")
    with vs.acquire() as t:
        assert t.service == "S1" and not t.done
        assert vs.active("S1") == 1
    assert t.done
    info = vs.info("S1")
    assert (info["active"], info["ttfb"], info["failures"], info["consecutive_failures"]) == (0, None, 2, 0)


def test_context_manager_exception_exit_fails_and_propagates(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    vs.begin("S1")
    vs.finish("S1", ttfb=1.5)
    with pytest.raises(Boom):
        with vs.acquire() as t:
            assert t.service == "S1"
            raise Boom("backend went away")
    assert t.done
    info = vs.info("S1")
    assert (info["active"], info["ttfb"], info["failures"], info["consecutive_failures"]) == (0, 1.5, 1, 1)


def test_context_manager_ended_inside_is_not_ended_again(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    vs.begin("S1")  # a second transaction on S1: a second end would take it
    vs.begin("S2")
    vs.begin("S3")
    with vs.acquire() as t:
        assert t.service == "S1"  # all tie at 1, first after the start
        t.finish(ttfb=0.2)
    assert vs.active("S1") == 1 and vs.info("S1")["ttfb"] == 0.2
    with pytest.raises(Boom):
        with vs.acquire() as t2:
            assert t2.service == "S2"  # tie S1..S3 at 1, after the cursor (S1)
            t2.fail()
            raise Boom("after the end")
    info = vs.info("S2")
    assert (info["active"], info["failures"]) == (1, 1)


def end_handle(t, how, **finish):
    """Ends handle t one way: "finish", "fail", "exit" (a with block left normally) or
    "exit with exception" (a with block left by Boom, which goes on)."""
    if how == "finish":
        t.finish(**finish)
    elif how == "fail":
        t.fail()
    elif how == "exit":
        with t:
            pass
    else:
        assert how == "exit with exception", how
        with pytest.raises(Boom):
            with t:
                raise Boom()


@pytest.mark.parametrize("end", ["finish", "fail", "record", "exit", "exit with exception"])
def test_handle_of_an_unbound_service_changes_nothing(impl, end):
    vs, _ = make(impl, "LEASTCONNECTION")
    t = vs.acquire()
    assert t.service == "S1"
    vs.unbind("S1")
    before = vs.snapshot()
    if end == "record":
        t.record(bytes=100, packets=1)
    else:
        end_handle(t, end, ttfb=0.5, status=503)
    assert vs.snapshot() == before
    assert t.done is (end != "record")
    if end != "record":
        with pytest.raises(TransactionEnded):
            t.finish()


def test_handle_of_an_earlier_incarnation_leaves_the_new_one_alone(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    t1, t2, t3 = vs.acquire(), vs.acquire(), vs.acquire()
    assert [t1.service, t2.service, t3.service] == ["S1", "S2", "S3"]
    t4 = vs.acquire()  # S1 again (all tie at 1, nobody after the cursor S3)
    assert t4.service == "S1"
    vs.unbind("S1")
    vs.bind("S1")
    vs.begin("S1")  # the new S1 has one transaction of its own
    before = vs.snapshot()
    t1.record(bytes=500, packets=5)
    t1.finish(ttfb=0.3)
    t4.fail()
    assert t1.done and t4.done
    assert vs.snapshot() == before
    info = vs.info("S1")
    assert (info["active"], info["ttfb"], info["bytes"], info["failures"]) == (1, None, 0, 0)


def test_a_name_carries_no_binding(impl):
    """finish(name) of a select() made before an unbind: UnknownService while the name is
    unbound; once bound again it ends one of the new service's transactions, and that
    service's handle then finds nothing active (ValueError, still open)."""
    vs, _ = make(impl, "LEASTCONNECTION")
    assert vs.select() == "S1"
    vs.unbind("S1")
    before = vs.snapshot()
    with pytest.raises(UnknownService):
        vs.finish("S1")
    assert vs.snapshot() == before
    vs.bind("S1")
    t = vs.acquire(exclude=["S2", "S3"])
    assert t.service == "S1" and vs.active("S1") == 1
    vs.finish("S1", ttfb=0.25)  # the old select's end, taken by the new binding
    assert vs.active("S1") == 0 and vs.info("S1")["ttfb"] == 0.25
    before = vs.snapshot()
    with pytest.raises(ValueError, match="'S1' has no active transaction"):
        t.finish()
    assert vs.snapshot() == before and not t.done


def test_handles_follow_their_service_when_unbinds_compact_the_slots(impl):
    # 40 services; S1 and S40 each get a transaction; unbinding S1..S39 leaves 39 holes,
    # more than max(1, 32): the slots are compacted and S40 moves to S1's old place. S40's
    # handle still ends on S40; S1's (an unbound service) changes nothing, S40 included.
    vs, _ = make(impl, "LEASTCONNECTION", weights=(1,) * 40)
    t1 = vs.acquire()
    t40 = vs.acquire(exclude=[f"S{k}" for k in range(1, 40)])
    assert (t1.service, t40.service) == ("S1", "S40")
    for k in range(1, 40):
        vs.unbind(f"S{k}")
    before = vs.snapshot()
    t1.record(bytes=7, packets=1)
    t1.finish(ttfb=0.1, status=503)
    assert vs.snapshot() == before
    t40.record(bytes=100, packets=2)
    t40.finish(ttfb=0.25)
    info = vs.info("S40")
    assert (info["active"], info["bytes"], info["packets"], info["ttfb"], info["failures"]) == (0, 100, 2, 0.25, 0)


HANDLE_BAD_ARGS = [
    pytest.param(lambda t: t.finish(ttfb=-1), ValueError, ["ttfb", "-1"], id="ttfb=-1"),
    pytest.param(lambda t: t.finish(ttfb=math.nan), ValueError, ["ttfb", "nan"], id="ttfb=nan"),
    pytest.param(lambda t: t.finish(ttfb=3600.5), ValueError, ["ttfb", "3600.5"], id="ttfb=3600.5"),
    pytest.param(lambda t: t.finish(ttfb="1"), TypeError, ["ttfb", "'1'"], id="ttfb='1'"),
    pytest.param(lambda t: t.finish(ttfb=True), TypeError, ["ttfb", "True"], id="ttfb=True"),
    pytest.param(lambda t: t.finish(status=99), ValueError, ["status", "99"], id="status=99"),
    pytest.param(lambda t: t.finish(status=600), ValueError, ["status", "600"], id="status=600"),
    pytest.param(lambda t: t.finish(status="200"), TypeError, ["status", "'200'"], id="status='200'"),
    pytest.param(lambda t: t.finish(ttfb=0.5, status=200.0), TypeError, ["status", "200.0"], id="status=200.0"),
    pytest.param(lambda t: t.record(bytes=-1), ValueError, ["bytes", "-1"], id="bytes=-1"),
    pytest.param(lambda t: t.record(packets=1.5), TypeError, ["packets", "1.5"], id="packets=1.5"),
    pytest.param(lambda t: t.record(bytes=2**64), OverflowError, ["bytes"], id="bytes=2**64"),
]


@pytest.mark.parametrize("call, exc, fragments", HANDLE_BAD_ARGS)
def test_bad_handle_arguments_raise_and_leave_the_handle_open(impl, call, exc, fragments):
    vs, clock = make(impl, "LEASTCONNECTION", start=100.25)
    vs.record("S1", bytes=10, packets=1)
    t = vs.acquire()
    assert t.service == "S1"
    before = vs.snapshot()
    clock.advance(1.0)  # were the clock read before the check, the window would move
    with pytest.raises(exc) as raised:
        call(t)
    assert type(raised.value) is exc
    for fragment in fragments:
        assert fragment in str(raised.value)
    assert vs.snapshot() == before
    assert not t.done
    t.finish(ttfb=0.5)  # still open: the good call ends it
    assert t.done and vs.active("S1") == 0 and vs.info("S1")["ttfb"] == 0.5


# ==== vs.fail() and failure counting ===========================================================

def test_fail_by_name(impl):
    vs, _ = make(impl, "LEASTRESPONSETIME")
    for _ in range(3):
        vs.begin("S1")
    vs.finish("S1", ttfb=0.5)
    vs.fail("S1")
    info = vs.info("S1")
    assert (info["active"], info["ttfb"], info["failures"], info["consecutive_failures"]) == (1, 0.5, 1, 1)
    vs.fail("S1")
    info = vs.info("S1")
    assert (info["active"], info["failures"], info["consecutive_failures"]) == (0, 2, 2)


def test_new_info_keys_start_at_zero(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    info = vs.info("S1")
    assert (info["draining"], info["ejected"], info["failures"], info["consecutive_failures"]) == (False, False, 0, 0)
    for service in vs.snapshot()["services"]:
        assert {"draining", "ejected", "failures", "consecutive_failures"} <= set(service)


@pytest.mark.parametrize("status, counts", [(500, True), (503, True), (599, True), (499, False), (404, False),
                                            (302, False), (201, False), (200, False), (100, False)])
def test_finish_status_and_the_consecutive_count(impl, status, counts):
    vs, _ = make(impl, "LEASTCONNECTION")
    for _ in range(3):
        vs.begin("S1")
    vs.fail("S1")
    vs.fail("S1")  # 2 failures, 2 in a row
    vs.finish("S1", status=status)
    info = vs.info("S1")
    if counts:
        assert (info["failures"], info["consecutive_failures"]) == (3, 3)
    else:
        assert (info["failures"], info["consecutive_failures"]) == (2, 0)
    assert info["active"] == 0


def test_failures_count_since_bind(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    vs.begin("S1")
    vs.fail("S1")
    vs.unbind("S1")
    vs.bind("S1")
    info = vs.info("S1")
    assert (info["failures"], info["consecutive_failures"]) == (0, 0)


FAIL_DRAIN_BAD = [
    pytest.param("nope", UnknownService, ["'nope'"], id="unknown"),
    pytest.param(1, TypeError, ["name", "1"], id="int"),
    pytest.param(None, TypeError, ["name", "None"], id="None"),
    pytest.param(b"S1", TypeError, ["name", "b'S1'"], id="bytes"),
    pytest.param("", ValueError, ["name", "''"], id="empty"),
]


@pytest.mark.parametrize("call", ["fail", "drain"])
@pytest.mark.parametrize("bad, exc, fragments", FAIL_DRAIN_BAD)
def test_fail_and_drain_bad_names(impl, call, bad, exc, fragments):
    vs, _ = make(impl, "LEASTCONNECTION", start=100.25)
    vs.set(outlier_failures=1)
    vs.begin("S1")
    vs.begin("S2")
    before = vs.snapshot()
    with pytest.raises(exc) as raised:
        getattr(vs, call)(bad)
    assert type(raised.value) is exc
    for fragment in fragments:
        assert fragment in str(raised.value)
    assert vs.snapshot() == before
    assert vs.outlier_events == []


def test_fail_without_an_active_transaction(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    vs.set(outlier_failures=1)
    before = vs.snapshot()
    with pytest.raises(ValueError) as raised:
        vs.fail("S2")
    assert "'S2'" in str(raised.value) and "no active transaction" in str(raised.value)
    assert vs.snapshot() == before
    assert vs.ejection("S2") is None and vs.outlier_events == []


# ==== drain() ========================================================================================

def test_drain_stops_new_picks_and_unbinds_at_the_last_end(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    t1, t2, t3 = vs.acquire(), vs.acquire(), vs.acquire()
    assert [t1.service, t2.service, t3.service] == ["S1", "S2", "S3"]
    vs.drain("S2")
    assert "S2" in vs.services
    assert vs.info("S2")["draining"] is True and vs.info("S1")["draining"] is False
    # S1..S3 all at 1, cursor on S3. Without the drain S2 would be the second pick.
    assert picks(vs, 4) == ["S1", "S3", "S1", "S3"]
    vs.begin("S2")  # still allowed
    assert vs.active("S2") == 2
    vs.finish("S2", ttfb=0.5)
    assert "S2" in vs.services and vs.active("S2") == 1
    t2.finish()
    assert "S2" not in vs.services
    assert t2.done
    assert vs.services == ("S1", "S3")


@pytest.mark.parametrize("end", ["finish by name", "fail by name", "finish", "fail", "exit",
                                 "exit with exception"])
def test_drain_completes_with_any_end(impl, end):
    vs, _ = make(impl, "LEASTCONNECTION")
    vs.begin("S3")
    t = vs.acquire()
    assert t.service == "S1"
    vs.drain("S1")
    assert "S1" in vs.services
    if end == "finish by name":
        vs.finish("S1", status=200)
    elif end == "fail by name":
        vs.fail("S1")
    else:
        end_handle(t, end, ttfb=0.1)
    assert vs.services == ("S2", "S3")
    assert vs.active("S3") == 1  # the others untouched
    if not end.endswith("by name"):
        assert t.done
    else:
        t.finish()  # its service is gone: ends without error, changes nothing
        assert vs.services == ("S2", "S3")


def test_drain_of_an_idle_service_unbinds_at_once(impl):
    vs, _ = make(impl, "ROUNDROBIN")
    vs.drain("S2")
    assert vs.services == ("S1", "S3")
    with pytest.raises(UnknownService):
        vs.info("S2")


def test_drain_again_is_a_no_op(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    vs.begin("S1")
    vs.begin("S1")
    vs.drain("S1")
    before = vs.snapshot()
    vs.drain("S1")
    assert vs.snapshot() == before
    vs.finish("S1")
    assert "S1" in vs.services  # one transaction is still open
    vs.fail("S1")
    assert "S1" not in vs.services


def test_unbind_of_a_draining_service_is_at_once(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    t = vs.acquire()
    vs.drain("S1")
    vs.unbind("S1")
    assert "S1" not in vs.services
    before = vs.snapshot()
    t.finish()
    assert vs.snapshot() == before and t.done


def test_drained_service_with_nobody_else(impl):
    vs, _ = make(impl, "LEASTCONNECTION", weights=(1,))
    t = vs.acquire()
    vs.drain("S1")
    with pytest.raises(NoServiceAvailable):
        vs.select()
    with pytest.raises(NoServiceAvailable):
        vs.acquire()
    assert vs.active("S1") == 1
    t.fail()
    assert vs.services == ()


def test_drain_shows_in_show(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    vs.begin("S2")
    vs.drain("S2")
    phases = {s.name: s.phase for s in vs.show().services}
    assert "draining" in phases["S2"]
    assert phases["S1"] == "normal" and phases["S3"] == "normal"
    assert "draining" in str(vs.show())


def test_drain_ends_through_the_normal_unbind(impl):
    """S1 is the only normal service, S2 is in slow start beside it. When the
    drained S1's last transaction ends, S1 is unbound the normal way: S2 is then
    left with nobody to take its surplus, and its ramp ends (docs/slow-start.md)."""
    vs, clock = make(impl, "ROUNDROBIN", weights=(1,), start=3.0)
    vs.set(new_service_request=10)
    vs.bind("S2")
    assert vs.slow_start("S2") == {"cap": 10, "increments": 0, "since": 3.0, "mode": "manual"}
    t = vs.acquire()
    assert t.service == "S1"
    clock.set(4.5)
    vs.drain("S1")
    assert "S1" in vs.services  # one transaction still open
    t.finish()
    assert vs.services == ("S2",)
    assert vs.slow_start("S2") is None
    assert vs.slow_start_exits == [(4.5, "S2", NOBODY_LEFT)]
    assert picks(vs, 15) == ["S2"] * 15  # no cap of 10 any more


# ==== outlier ejection ===================================================================================

def outlier_vs(impl, n=4, method="LEASTCONNECTION", start=1000.0, **outlier):
    vs, clock = make(impl, method, weights=(1,) * n, start=start)
    vs.set(**{f"outlier_{k}": v for k, v in outlier.items()})
    return vs, clock


def fail(vs, name, times=1):
    for _ in range(times):
        vs.begin(name)
        vs.fail(name)


def test_outlier_ejection_is_off_by_default(impl):
    vs, _ = make(impl, "LEASTCONNECTION")
    fail(vs, "S1", 10)
    info = vs.info("S1")
    assert (info["ejected"], info["failures"], info["consecutive_failures"]) == (False, 10, 10)
    assert vs.ejection("S1") is None and vs.outlier_events == []
    assert vs.select() == "S1"


def test_k_consecutive_failures_eject_for_s_seconds(impl):
    vs, clock = outlier_vs(impl, failures=3, ejection_time=30)
    fail(vs, "S1", 2)
    assert vs.info("S1")["ejected"] is False and vs.info("S1")["consecutive_failures"] == 2
    clock.set(1001.0)
    fail(vs, "S1")
    info = vs.info("S1")
    assert (info["ejected"], info["failures"], info["consecutive_failures"], info["active"]) == (True, 3, 0, 0)
    assert vs.ejection("S1") == {"until": 1031.0, "ejections": 1, "since": 1001.0}
    assert vs.outlier_events == [(1001.0, "S1", EJECTED)]
    # S1 (idle) would be first; ejected, it is skipped: S2 S3 S4 round robin.
    assert picks(vs, 6) == ["S2", "S3", "S4"] * 2
    clock.set(1030.999)
    assert vs.select() == "S2"
    assert vs.info("S1")["ejected"] is True
    clock.set(1031.0)
    assert vs.snapshot()["services"][0]["ejected"] is True  # nobody read the clock yet
    assert vs.select() == "S1"  # this call returns it, then picks it (the least busy)
    assert vs.info("S1")["ejected"] is False
    assert vs.ejection("S1") is None
    assert vs.outlier_events == [(1001.0, "S1", EJECTED), (1031.0, "S1", RETURNED)]


def test_return_is_applied_by_any_clock_reading_call(impl):
    vs, clock = outlier_vs(impl, failures=1, ejection_time=5)
    fail(vs, "S1")
    clock.set(1012.75)  # well past the end
    assert vs.select(exclude={"S2", "S3", "S4"}) == "S1"
    assert [e[1:] for e in vs.outlier_events] == [("S1", EJECTED), ("S1", RETURNED)]


def test_server_errors_eject_and_successes_reset(impl):
    vs, clock = outlier_vs(impl, failures=3)
    for _ in range(6):
        vs.begin("S1")
    vs.fail("S1")
    vs.finish("S1", status=500)
    vs.finish("S1", status=200)  # resets the run
    vs.fail("S1")
    vs.finish("S1", status=404)  # a client error resets it too
    vs.finish("S1", status=502)
    info = vs.info("S1")
    assert (info["ejected"], info["failures"], info["consecutive_failures"]) == (False, 4, 1)
    for _ in range(2):
        vs.begin("S1")
        vs.finish("S1", ttfb=0.1, status=503)
    info = vs.info("S1")
    assert (info["ejected"], info["failures"], info["consecutive_failures"]) == (True, 6, 0)
    assert vs.ejection("S1") == {"until": 1030.0, "ejections": 1, "since": 1000.0}  # S defaults to 30


def eject_and_return(vs, clock, name, at):
    """Fails `name` once at `at` (K = 1), returns its ejection, then lets it come back."""
    clock.set(at)
    fail(vs, name)
    ejection = vs.ejection(name)
    clock.set(ejection["until"])
    vs.info("S4")  # reads the clock: the return is applied
    assert vs.ejection(name) is None
    return ejection


def test_ejection_time_grows_and_is_capped_at_300(impl):
    vs, clock = outlier_vs(impl, failures=1, ejection_time=100)
    got = []
    at = 1000.0
    for _ in range(4):  # each one right at the return of the last: no decay
        ejection = eject_and_return(vs, clock, "S1", at)
        got.append((ejection["ejections"], ejection["until"] - at))
        at = ejection["until"]
    assert got == [(1, 100.0), (2, 200.0), (3, 300.0), (4, 300.0)]


def test_longest_ejection_time_is_capped(impl):
    vs, clock = outlier_vs(impl, failures=1, ejection_time=300)
    first = eject_and_return(vs, clock, "S1", 1000.0)
    second = eject_and_return(vs, clock, "S1", 1300.0)
    assert (first["until"], second["until"], second["ejections"]) == (1300.0, 1600.0, 2)


def test_ejection_count_decays(impl):
    """S = 10. e drops by one per full 10 s since the last return, then counts
    this ejection: 1 at 1000; 5 s after the return: 1 + 1 = 2; 19.5 s after:
    2 - 1 + 1 = 2; 30 s after: max(0, 2 - 3) + 1 = 1; exactly 10 s after:
    1 - 1 + 1 = 1; 9.75 s after: 1 + 1 = 2."""
    vs, clock = outlier_vs(impl, failures=1, ejection_time=10)
    steps = [(1000.0, 1, 1010.0), (1015.0, 2, 1035.0), (1054.5, 2, 1074.5), (1104.5, 1, 1114.5),
             (1124.5, 1, 1134.5), (1144.25, 2, 1164.25)]
    for at, count, until in steps:
        ejection = eject_and_return(vs, clock, "S1", at)
        assert ejection == {"until": until, "ejections": count, "since": at}, at
    assert [what for _, _, what in vs.outlier_events] == [EJECTED, RETURNED] * len(steps)
    assert [t for t, _, _ in vs.outlier_events] == [t for at, _, until in steps for t in (at, until)]


def test_float_ejection_time(impl):
    vs, clock = outlier_vs(impl, failures=2, ejection_time=2.5)
    fail(vs, "S3", 2)
    assert vs.ejection("S3") == {"until": 1002.5, "ejections": 1, "since": 1000.0}


def test_constructor_keywords(impl):
    clock = impl.ManualClock(50.0)
    vs = impl.VirtualServer("LEASTCONNECTION", clock=clock, outlier_failures=2, outlier_ejection_time=7,
                            outlier_max_ejection_percent=100)
    vs.bind("S1")
    vs.bind("S2")
    fail(vs, "S1", 2)  # 1 of 2 ejected: 100 <= 100 x 2, and S2 stays
    assert vs.ejection("S1") == {"until": 57.0, "ejections": 1, "since": 50.0}
    assert picks(vs, 3) == ["S2"] * 3


def test_max_ejection_percent_default_50(impl):
    """4 bound, P = 50: ejecting a first (1 x 100 <= 200) and a second (200 <= 200)
    is allowed, a third (300 > 200) is not: it stays eligible and is tried again
    at its next failure; once one has returned the third can go."""
    vs, clock = outlier_vs(impl, failures=1, ejection_time=10)
    fail(vs, "S1")
    fail(vs, "S2")
    clock.set(1001.0)
    fail(vs, "S3")
    info = vs.info("S3")
    assert (info["ejected"], info["consecutive_failures"]) == (False, 1)
    assert vs.ejection("S3") is None
    clock.set(1002.0)
    fail(vs, "S3")
    assert vs.info("S3")["consecutive_failures"] == 2
    assert vs.outlier_events == [(1000.0, "S1", EJECTED), (1000.0, "S2", EJECTED),
                                 (1001.0, "S3", KEPT_PERCENT), (1002.0, "S3", KEPT_PERCENT)]
    assert sorted(picks(vs, 2)) == ["S3", "S4"]
    clock.set(1010.0)
    vs.info("S1")  # S1 and S2 return
    clock.set(1011.0)
    fail(vs, "S3")  # 0 ejected now
    assert vs.ejection("S3") == {"until": 1021.0, "ejections": 1, "since": 1011.0}
    assert vs.info("S3")["consecutive_failures"] == 0


def test_max_ejection_percent_three_services(impl):
    vs, clock = outlier_vs(impl, n=3, failures=1)
    fail(vs, "S1")  # 100 <= 150
    fail(vs, "S2")  # 200 > 150: kept
    assert [e[1:] for e in vs.outlier_events] == [("S1", EJECTED), ("S2", KEPT_PERCENT)]


def test_max_ejection_percent_zero_ejects_nobody(impl):
    vs, clock = outlier_vs(impl, failures=1, max_ejection_percent=0)
    fail(vs, "S1", 3)
    assert vs.info("S1")["ejected"] is False
    assert vs.outlier_events == [(1000.0, "S1", KEPT_PERCENT)] * 3


def test_max_ejection_percent_counts_every_bound_service(impl):
    """5 bound, S5 DOWN, P = 40: the cap is against the bound services (5), DOWN
    ones included: S1 100 <= 200, S2 200 <= 200 (against the 4 UP ones it would
    be 200 > 160), S3 300 > 200."""
    vs, clock = outlier_vs(impl, n=5, failures=1, max_ejection_percent=40)
    vs.set_state("S5", "DOWN")
    for name in ("S1", "S2", "S3"):
        fail(vs, name)
    assert [e[1:] for e in vs.outlier_events] == [("S1", EJECTED), ("S2", EJECTED), ("S3", KEPT_PERCENT)]


def test_a_new_incarnation_starts_with_no_ejections(impl):
    vs, clock = outlier_vs(impl, failures=1, ejection_time=10)
    eject_and_return(vs, clock, "S1", 1000.0)
    fail(vs, "S1")  # right at its return: the second ejection, 20 s
    assert vs.ejection("S1")["ejections"] == 2
    vs.unbind("S1")
    vs.bind("S1")  # all its counters went with the unbind
    info = vs.info("S1")
    assert (info["ejected"], info["failures"]) == (False, 0)
    fail(vs, "S1")
    assert vs.ejection("S1") == {"until": 1020.0, "ejections": 1, "since": 1010.0}


def test_an_earlier_incarnations_ejection_does_not_touch_the_new_one(impl):
    """S1 ejected until 1010, unbound at 1005, bound again at 1006 and ejected at
    1007 (its first ejection: 10 s, until 1017). The old end time (1010) must
    not return the new S1."""
    vs, clock = outlier_vs(impl, failures=1, ejection_time=10)
    fail(vs, "S1")
    clock.set(1005.0)
    vs.unbind("S1")
    clock.set(1006.0)
    vs.bind("S1")
    clock.set(1007.0)
    fail(vs, "S1")
    clock.set(1010.0)
    assert vs.select(exclude={"S2", "S3"}) == "S4"
    assert vs.ejection("S1") == {"until": 1017.0, "ejections": 1, "since": 1007.0}
    assert vs.outlier_events == [(1000.0, "S1", EJECTED), (1007.0, "S1", EJECTED)]
    clock.set(1017.0)
    assert vs.select(exclude={"S2", "S3", "S4"}) == "S1"
    assert vs.outlier_events[-1] == (1017.0, "S1", RETURNED)


def test_a_draining_service_failing_completes_its_drain(impl):
    vs, clock = outlier_vs(impl, failures=1)
    vs.begin("S1")
    vs.drain("S1")
    vs.fail("S1")
    assert vs.services == ("S2", "S3", "S4")
    fail(vs, "S2")  # the others are judged as usual: 1 of 3 bound, 100 <= 150
    assert vs.ejection("S2") == {"until": 1030.0, "ejections": 1, "since": 1000.0}


def test_last_eligible_service_is_kept(impl):
    vs, clock = outlier_vs(impl, n=2, failures=1, max_ejection_percent=100)
    fail(vs, "S1")  # 100 <= 200, S2 stays eligible
    fail(vs, "S2")  # 200 <= 200, but nobody else would be left
    assert vs.info("S2")["ejected"] is False
    assert vs.outlier_events == [(1000.0, "S1", EJECTED), (1000.0, "S2", KEPT_LAST)]
    assert vs.select() == "S2"


def test_last_eligible_service_alone(impl):
    vs, clock = outlier_vs(impl, n=1, failures=1, max_ejection_percent=100)
    fail(vs, "S1")
    assert vs.outlier_events == [(1000.0, "S1", KEPT_LAST)]
    assert vs.select() == "S1"


def test_down_and_draining_services_do_not_count_as_left(impl):
    vs, clock = outlier_vs(impl, n=3, failures=1, max_ejection_percent=100)
    vs.set_state("S2", "DOWN")
    fail(vs, "S1")  # S3 is left
    fail(vs, "S3")  # S1 ejected, S2 DOWN: nobody
    assert [e[1:] for e in vs.outlier_events] == [("S1", EJECTED), ("S3", KEPT_LAST)]

    vs, clock = outlier_vs(impl, n=2, failures=1, max_ejection_percent=100)
    vs.begin("S2")
    vs.drain("S2")
    fail(vs, "S1")  # S2 is draining: nobody would be left
    assert vs.outlier_events == [(1000.0, "S1", KEPT_LAST)]


def test_outlier_and_exclude_together(impl):
    vs, clock = outlier_vs(impl, failures=1)
    fail(vs, "S1")
    with pytest.raises(NoServiceAvailable):
        vs.select(exclude={"S2", "S3", "S4"})
    assert vs.select(exclude={"S2", "S3"}) == "S4"


def test_a_failure_after_an_ejection_ended_sees_the_return(impl):
    """S1 is ejected until 1010. At 1015, before any other call read the clock,
    S2 fails: the call reads the clock (its event is stamped 1015), so it sees
    S1's end time reached; S1 has returned, and S2 may go (1 x 100 <= 100 x 2,
    S1 left eligible)."""
    vs, clock = outlier_vs(impl, n=2, failures=1, ejection_time=10, max_ejection_percent=100)
    fail(vs, "S1")
    vs.begin("S2")
    clock.set(1015.0)
    vs.fail("S2")
    assert vs.outlier_events == [(1000.0, "S1", EJECTED), (1015.0, "S1", RETURNED), (1015.0, "S2", EJECTED)]


def test_return_starts_slow_start_like_down_up(impl):
    vs, clock = outlier_vs(impl, n=3, method="ROUNDROBIN", failures=1, ejection_time=10)
    vs.set(new_service_request=10)
    fail(vs, "S3")  # 1 of 3: 100 <= 150
    assert vs.ejection("S3")["until"] == 1010.0
    clock.set(1010.0)
    got = picks(vs, 60)  # the first select returns S3: then a cap of 10 in this second
    assert vs.slow_start("S3") == {"cap": 10, "increments": 0, "since": 1010.0, "mode": "manual"}
    assert got.count("S3") == 10 and got.count("S1") == 25


def test_return_starts_an_automated_ramp(impl):
    """Automated slow start (interval 10): like DOWN -> UP, the returned service
    starts at cap 0 (docs/slow-start.md): no picks before its first boundary."""
    vs, clock = outlier_vs(impl, n=3, method="ROUNDROBIN", failures=1, ejection_time=10)
    vs.set(new_service_request=4, new_service_request_increment_interval=10)
    fail(vs, "S3")
    clock.set(1010.0)
    got = picks(vs, 30)
    assert vs.slow_start("S3") == {"cap": 0, "increments": 0, "since": 1010.0, "mode": "automated"}
    assert got.count("S3") == 0 and got.count("S1") == 15


def test_return_without_slow_start_gets_the_full_share(impl):
    vs, clock = outlier_vs(impl, n=3, method="ROUNDROBIN", failures=1, ejection_time=10)
    fail(vs, "S3")
    clock.set(1010.0)
    got = picks(vs, 60)
    assert vs.slow_start("S3") is None
    assert got.count("S3") == 20


def test_end_ejection_returns_a_service_at_once(impl):
    """What a passed active health check does in the proxy: the ejection ends now."""
    vs, clock = outlier_vs(impl, n=3, method="ROUNDROBIN", failures=1, ejection_time=30)
    fail(vs, "S3")
    clock.set(1004.5)
    assert vs.end_ejection("S3") is True
    assert vs.ejection("S3") is None and vs.info("S3")["ejected"] is False
    assert vs.outlier_events == [(1000.0, "S3", EJECTED), (1004.5, "S3", "returned early")]
    assert picks(vs, 6).count("S3") == 2  # its full share: no slow start configured
    assert vs.end_ejection("S3") is False  # not ejected: nothing changes
    assert vs.outlier_events[-1] == (1004.5, "S3", "returned early")
    clock.set(1030.0)  # its old end time passes: nothing more happens
    picks(vs, 3)
    assert len(vs.outlier_events) == 2


def test_end_ejection_of_unknown_and_bad_names(impl):
    vs, _ = outlier_vs(impl, failures=1)
    with pytest.raises(UnknownService):
        vs.end_ejection("nope")
    with pytest.raises(TypeError):
        vs.end_ejection(3)


def test_a_ramp_waits_for_the_ejection_and_runs_once(impl):
    """The issue's case: a service killed under load is ejected and marked DOWN; it
    comes back UP while still ejected. Its ramp does not run while it cannot be
    picked (no "no traffic" exit, no ramp run out); it begins when the ejection
    ends, once."""
    vs, clock = outlier_vs(impl, n=3, method="ROUNDROBIN", failures=1, ejection_time=60)
    vs.set(new_service_request=4, new_service_request_increment_interval=2)
    fail(vs, "S3")  # ejected until 1060
    vs.set_state("S3", "DOWN")
    clock.set(1005.0)
    vs.set_state("S3", "UP")  # its probe passes: UP, but still ejected
    assert vs.slow_start("S3") is None
    for t in range(1006, 1050):  # many intervals pass: no ramp to run out
        clock.set(float(t))
        picks(vs, 5)
    assert vs.slow_start_exits == [] and vs.slow_start("S3") is None
    assert vs.end_ejection("S3")  # at 1049: the ramp begins now, at cap 0
    assert vs.slow_start("S3") == {"cap": 0, "increments": 0, "since": 1049.0, "mode": "automated"}
    clock.set(1051.0)
    assert picks(vs, 12).count("S3") == 4  # its first increment: cap 4
    assert vs.slow_start("S3")["since"] == 1049.0  # the same ramp: it began once


def test_kept_ejection_then_the_ramp_begins_at_its_end(impl):
    """Without end_ejection (a proxy that keeps ejections): the ramp begins when
    the ejection's time is up, not when the service came UP."""
    vs, clock = outlier_vs(impl, n=3, method="ROUNDROBIN", failures=1, ejection_time=20)
    vs.set(new_service_request=4, new_service_request_increment_interval=2)
    fail(vs, "S3")
    vs.set_state("S3", "DOWN")
    clock.set(1003.0)
    vs.set_state("S3", "UP")
    clock.set(1020.0)
    picks(vs, 3)
    assert vs.slow_start("S3") == {"cap": 0, "increments": 0, "since": 1020.0, "mode": "automated"}
    assert vs.slow_start_exits == []


def test_an_ejected_service_in_slow_start_does_not_run_out_its_ramp(impl):
    """Ejected in the middle of its ramp for longer than three intervals: no "no
    traffic" exit while ejected; at its return a new ramp begins."""
    vs, clock = outlier_vs(impl, n=3, method="ROUNDROBIN", failures=1, ejection_time=30,
                           max_ejection_percent=100)
    vs.set(new_service_request=4, new_service_request_increment_interval=2)
    vs.set_state("S3", "DOWN")
    vs.set_state("S3", "UP")  # a ramp from 1000
    clock.set(1002.0)
    picks(vs, 6)
    assert vs.slow_start("S3")["cap"] == 4
    fail(vs, "S3")  # ejected at 1002 until 1032, ramp paused
    for t in range(1003, 1032):
        clock.set(float(t))
        picks(vs, 4)
    assert vs.slow_start_exits == []
    clock.set(1032.0)
    picks(vs, 2)
    assert vs.slow_start("S3") == {"cap": 0, "increments": 0, "since": 1032.0, "mode": "automated"}


def test_up_again_while_ejected_does_not_restart_a_standing_ramp(impl):
    """S3 ramps, goes OUT_OF_SERVICE, is ejected meanwhile, and is set UP while still
    ejected: its ramp's clock keeps standing until the ejection ends."""
    vs, clock = outlier_vs(impl, n=3, method="ROUNDROBIN", failures=1, ejection_time=30,
                           max_ejection_percent=100)
    vs.set(new_service_request=4, new_service_request_increment_interval=2)
    vs.set_state("S3", "DOWN")
    vs.set_state("S3", "UP")  # a ramp from 1000
    vs.begin("S3")
    vs.set_state("S3", "OUT_OF_SERVICE")
    vs.fail("S3")  # ejected until 1030
    vs.set_state("S3", "UP")
    for t in range(1001, 1030):
        clock.set(float(t))
        vs.info("S1")
        assert vs.slow_start("S3")["increments"] == 0, t
    assert vs.slow_start_exits == []


def test_a_draining_service_does_not_begin_a_ramp(impl):
    vs, clock = outlier_vs(impl, n=3, method="ROUNDROBIN")
    vs.set(new_service_request=4, new_service_request_increment_interval=2)
    vs.begin("S3")
    vs.set_state("S3", "DOWN")
    vs.drain("S3")  # still bound: one transaction open
    vs.set_state("S3", "UP")
    assert vs.slow_start("S3") is None
    vs.finish("S3")
    assert "S3" not in vs


def test_outlier_failures_zero_returns_everyone(impl):
    vs, clock = outlier_vs(impl, failures=1)
    fail(vs, "S1")
    fail(vs, "S2")
    clock.set(1002.0)
    vs.set(outlier_failures=0)
    assert vs.ejection("S1") is None and vs.ejection("S2") is None
    assert vs.info("S1")["ejected"] is False
    assert sorted(vs.outlier_events[2:]) == [(1002.0, "S1", RETURNED), (1002.0, "S2", RETURNED)]
    assert sorted(picks(vs, 4)) == ["S1", "S2", "S3", "S4"]
    fail(vs, "S3", 5)
    assert vs.info("S3")["ejected"] is False and len(vs.outlier_events) == 4


def test_ejection_shows_in_show(impl):
    vs, clock = outlier_vs(impl, failures=1)
    fail(vs, "S2")
    phases = {s.name: s.phase for s in vs.show().services}
    left = vs.ejection("S2")["until"] - clock.now()
    assert left > 0 and phases["S2"] == f"ejected, {left:.1f} s left", phases
    assert phases["S1"] == "normal"


def test_ejection_of_unknown_and_bad_names(impl):
    vs, clock = outlier_vs(impl, failures=1)
    with pytest.raises(UnknownService):
        vs.ejection("nope")
    with pytest.raises(TypeError):
        vs.ejection(3)


BAD_OUTLIER = [
    ("outlier_failures", -1, ValueError), ("outlier_failures", 2**32, ValueError),
    ("outlier_failures", 1.5, TypeError), ("outlier_failures", 3.0, TypeError),
    ("outlier_failures", True, TypeError), ("outlier_failures", "3", TypeError),
    ("outlier_failures", None, TypeError),
    ("outlier_ejection_time", 0, ValueError), ("outlier_ejection_time", 0.0, ValueError),
    ("outlier_ejection_time", -1, ValueError), ("outlier_ejection_time", 300.5, ValueError),
    ("outlier_ejection_time", 301, ValueError), ("outlier_ejection_time", math.nan, ValueError),
    ("outlier_ejection_time", math.inf, ValueError), ("outlier_ejection_time", True, TypeError),
    ("outlier_ejection_time", "30", TypeError), ("outlier_ejection_time", None, TypeError),
    ("outlier_max_ejection_percent", -1, ValueError), ("outlier_max_ejection_percent", 101, ValueError),
    ("outlier_max_ejection_percent", 50.0, TypeError), ("outlier_max_ejection_percent", True, TypeError),
    ("outlier_max_ejection_percent", "50", TypeError), ("outlier_max_ejection_percent", None, TypeError),
]


@pytest.mark.parametrize("arg, value, exc", BAD_OUTLIER)
def test_bad_outlier_settings_in_set_change_nothing(impl, arg, value, exc):
    vs, clock = make(impl, "LEASTCONNECTION", start=100.25)
    vs.set(outlier_failures=2)
    fail(vs, "S1")
    before = vs.snapshot()
    clock.advance(1.0)
    with pytest.raises(exc) as raised:
        vs.set(**{"outlier_failures": 1, arg: value})  # a good value beside the bad one: neither applies
    assert type(raised.value) is exc
    assert arg in str(raised.value) and repr(value) in str(raised.value)
    assert vs.snapshot() == before
    clock.advance(-1.0)
    fail(vs, "S2")  # K is still 2: one failure ejects nobody
    assert vs.info("S2")["ejected"] is False
    fail(vs, "S1")  # S1's second in a row: out, for the unchanged 30 s
    assert vs.ejection("S1") == {"until": 130.25, "ejections": 1, "since": 100.25}


@pytest.mark.parametrize("arg, value, exc", BAD_OUTLIER)
def test_bad_outlier_settings_in_the_constructor(impl, arg, value, exc):
    with pytest.raises(exc) as raised:
        impl.VirtualServer("LEASTCONNECTION", clock=impl.ManualClock(0.0), **{arg: value})
    assert arg in str(raised.value) and repr(value) in str(raised.value)


def test_outlier_setting_limits_are_accepted(impl):
    vs, clock = make(impl, "LEASTCONNECTION")
    vs.set(outlier_failures=2**32 - 1, outlier_ejection_time=300, outlier_max_ejection_percent=100)
    vs.set(outlier_failures=0, outlier_ejection_time=0.001, outlier_max_ejection_percent=0)
    vs.set(outlier_failures=1, outlier_ejection_time=300.0, outlier_max_ejection_percent=100)
    fail(vs, "S1")
    assert vs.ejection("S1") == {"until": 300.0, "ejections": 1, "since": 0.0}


def test_huge_k_never_ejects(impl):
    vs, clock = make(impl, "LEASTCONNECTION")
    vs.set(outlier_failures=2**32 - 1)
    fail(vs, "S1", 20)
    assert vs.info("S1")["ejected"] is False and vs.outlier_events == []


# ==== slow start: DOWN -> UP versus OUT_OF_SERVICE -> UP ======================================

def test_down_up_ramps_but_out_of_service_up_does_not(impl):
    """Only DOWN -> UP starts slow start; OUT_OF_SERVICE -> UP brings the service
    straight back to its full share. Why the exclude twin test above uses
    vservers without slow start: its DOWN -> UP would start ramps."""
    vs, clock = make(impl, "ROUNDROBIN", weights=(1, 1, 1))
    vs.set(new_service_request=5)
    clock.set(2.0)
    vs.set_state("S2", "DOWN")
    vs.set_state("S2", "UP")
    vs.set_state("S3", "OUT_OF_SERVICE")
    vs.set_state("S3", "UP")
    assert vs.slow_start("S2") == {"cap": 5, "increments": 0, "since": 2.0, "mode": "manual"}
    assert vs.slow_start("S3") is None
    got = picks(vs, 30)
    # S1 S2 S3 five times (S2 reaches its cap of 5), then S1 S3 alternate: 8 and 7.
    assert (got.count("S1"), got.count("S2"), got.count("S3")) == (13, 5, 12)


def test_a_failure_of_a_service_whose_ejection_ended_is_judged_after_its_return(impl):
    """S1 is ejected until 1010 and fails again at 1015 (a transaction opened before
    its ejection): with ejection on, fail() reads the clock first, so S1 has
    returned when the failure is counted, and one failure (K = 1) ejects it again,
    for 2 x 10 s (its second ejection; no full healthy period since its return)."""
    vs, clock = outlier_vs(impl, n=2, failures=1, ejection_time=10, max_ejection_percent=100)
    vs.begin("S1")
    fail(vs, "S1")
    clock.set(1015.0)
    vs.fail("S1")
    assert vs.outlier_events == [(1000.0, "S1", EJECTED), (1015.0, "S1", RETURNED), (1015.0, "S1", EJECTED)]
    assert vs.ejection("S1") == {"until": 1035.0, "ejections": 2, "since": 1015.0}


# ---- slow start needs a service that can take the surplus ------------------------
# A draining or ejected service takes no new picks, so it cannot take what slow
# start holds back from a new service: for slow start it counts as gone, as a
# DOWN service does (docs/slow-start.md).


def test_a_service_bound_next_to_a_draining_one_gets_no_ramp(impl):
    vs, clock = make(impl, "ROUNDROBIN", weights=(1,), new_service_request=10)
    vs.begin("S1")
    vs.drain("S1")  # S1 stays bound (one open transaction) but takes no new picks
    vs.bind("S2")
    assert vs.slow_start("S2") is None  # nobody else could take its surplus
    assert picks(vs, 30) == ["S2"] * 30  # so its full share at once, no NoServiceAvailable


def test_draining_the_last_normal_service_ends_the_ramps(impl):
    vs, clock = make(impl, "ROUNDROBIN", weights=(1,), new_service_request=10)
    vs.bind("S2")  # ramps: S1 takes the surplus
    assert vs.slow_start("S2")["cap"] == 10
    vs.begin("S1")
    vs.drain("S1")
    assert vs.slow_start("S2") is None
    assert vs.slow_start_exits[-1][1:] == ("S2", "no other service UP")
    assert picks(vs, 30) == ["S2"] * 30


def test_ejecting_the_last_normal_service_ends_the_ramps(impl):
    vs, clock = make(impl, "ROUNDROBIN", weights=(1, 1), start=1000.0, new_service_request=10,
                     outlier_failures=1, outlier_max_ejection_percent=50)
    vs.unbind("S2")
    vs.bind("S2")  # a ramp; S1 is the only normal service
    assert vs.slow_start("S2") is not None
    vs.begin("S1")
    vs.fail("S1")  # 1 of 2 ejected: 100 <= 50 x 2, and S2 stays pickable
    assert vs.outlier_events == [(1000.0, "S1", "ejected")]
    assert vs.slow_start("S2") is None
    assert picks(vs, 30) == ["S2"] * 30
