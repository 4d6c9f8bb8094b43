"""Threads (the concurrency contract of docs/embedding.md), on both engines.

Every public method is atomic with respect to every other call on the same
vserver: a call from another thread while the vserver is held waits; calls
from the holding thread (clock callbacks) re-enter. replay() holds the
vserver for its whole run. What is checked here:

- a stress run: 8 threads mixing every kind of call on one vserver, each
  keeping its own tally, while replays run on two other vservers that more
  threads call into: no crash, no unexpected exception, counters exact, and
  each replay decides exactly as the same replay run alone;
- each public method waits while another thread holds the vserver
  (`with vs.atomic():`), and changes nothing until it is released;
- re-entrancy: a clock whose now() unbinds most services, a count whose
  __index__ does, from the calling thread;
- reserve() and __init__ from another thread during a replay wait for it.

Every loop is bounded in count and in time; a hang dumps the stacks and
ends the run (faulthandler) instead of blocking CI.
"""
import faulthandler
import random
import sys
import threading
import time
import traceback
from collections import Counter

import pytest

from leastload.sim import workloads
from leastload.engine.errors import DuplicateService, NoServiceAvailable, UnknownService
from leastload.sim.replay import replay

HANG_TIMEOUT = 240  # seconds: a test of this module taking longer is a deadlock


@pytest.fixture(autouse=True)
def _no_hang():
    faulthandler.dump_traceback_later(HANG_TIMEOUT, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def fast_switching():
    """Forces the interpreter to switch threads as often as it can."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def _is_c(impl):
    return impl.__name__ == "leastload.engine.native"


# ---- (a) the stress run ---------------------------------------------------------------

STABLE = [f"S{i}" for i in range(12)]  # never unbound, never drained: their counters are checked
CHURN = [f"C{i}" for i in range(6)]    # bound, unbound, drained by every thread
METHODS = ("LEASTCONNECTION", "ROUNDROBIN", "LEASTBANDWIDTH")
CLOCK_LIMIT = 10.0  # the clock stays under this: all traffic stays in the 14-second window
THREADS = 8


class Tally:
    """What one thread did to the stable services (and how often each op ran)."""

    def __init__(self):
        self.selected = Counter()   # picks (select or acquire) that returned the service
        self.opened = Counter()     # transactions opened: picks and begin()
        self.ended = Counter()      # finish / fail, by name or by handle
        self.failures = Counter()   # fail(), finish with status >= 500
        self.bytes = Counter()
        self.packets = Counter()
        self.ops = Counter()
        self.expected = Counter()   # expected exceptions, by (op, type)


class Worker:
    """One stress thread: random calls on `vs`, every outcome accounted for."""

    def __init__(self, vs, clock, seed, max_ops, deadline, errors):
        self.vs, self.clock = vs, clock
        self.rng = random.Random(seed)
        self.max_ops, self.deadline, self.errors = max_ops, deadline, errors
        self.t = Tally()
        self.by_name = []   # stable names with a transaction this thread opened by name
        self.handles = []   # open transaction handles of this thread
        ops = [(self.select, 6), (self.select_excluding, 6), (self.acquire, 6), (self.with_acquire, 3),
               (self.end_handle, 8), (self.begin, 2), (self.end_by_name, 8), (self.record, 4),
               (self.bind_churn, 2), (self.unbind_churn, 1), (self.drain_churn, 2), (self.set_weight, 1),
               (self.set_state, 1), (self.set_method, 0.2), (self.read, 3), (self.advance, 1)]
        self.ops = [f for f, _ in ops]
        self.weights = [w for _, w in ops]

    def run(self):
        try:
            for _ in range(self.max_ops):
                if time.monotonic() > self.deadline:
                    break
                op = self.rng.choices(self.ops, self.weights)[0]
                self.t.ops[op.__name__] += 1
                try:
                    op()
                except NoServiceAvailable:  # everything eligible is excluded, OUT_OF_SERVICE or capped
                    if op not in (self.select, self.select_excluding, self.acquire, self.with_acquire):
                        raise
                    self.t.expected[op.__name__, "NoServiceAvailable"] += 1
        except BaseException:  # noqa: BLE001 - reported by the main thread
            self.errors.append(f"{threading.current_thread().name}: {traceback.format_exc()}")

    # -- picks --

    def _picked(self, name):
        assert isinstance(name, str), name
        if name in STABLE:
            self.t.selected[name] += 1
            self.t.opened[name] += 1
            return True
        assert name in CHURN, name
        return False

    def select(self):
        name = self.vs.select()
        if self._picked(name):
            self.by_name.append(name)
        # a churn service picked by name stays open on purpose: ending it by name
        # would race other threads' unbind + bind of the same name

    def select_excluding(self):
        excluded = set(CHURN) | set(self.rng.sample(STABLE, self.rng.randint(0, 3)))
        name = self.vs.select(exclude=excluded)
        assert name not in excluded, (name, excluded)
        self._picked(name)
        self.by_name.append(name)

    def acquire(self):
        excluded = set(self.rng.sample(STABLE + CHURN, self.rng.randint(0, 2)))
        t = self.vs.acquire(exclude=excluded if excluded else None)
        assert t.service not in excluded and not t.done, (t.service, excluded)
        self._picked(t.service)
        self.handles.append(t)

    def with_acquire(self):
        with self.vs.acquire() as t:
            stable = self._picked(t.service)
            b = self.rng.randint(0, 5000)
            t.record(bytes=b, packets=1)
            if stable:
                self.t.bytes[t.service] += b
                self.t.packets[t.service] += 1
        assert t.done
        if stable:
            self.t.ended[t.service] += 1

    def end_handle(self):
        if not self.handles:
            return
        t = self.handles.pop(self.rng.randrange(len(self.handles)))
        stable = t.service in STABLE
        if self.rng.random() < 0.3:
            b = self.rng.randint(0, 5000)
            t.record(bytes=b, packets=2)  # a no-op if a churn service was unbound meanwhile
            if stable:
                self.t.bytes[t.service] += b
                self.t.packets[t.service] += 2
        r = self.rng.random()
        if r < 0.2:
            t.fail()
            failed = True
        else:
            status = 503 if r < 0.3 else 200
            t.finish(ttfb=self.rng.uniform(0.001, 0.2), status=status)
            failed = status >= 500
        assert t.done
        if stable:
            self.t.ended[t.service] += 1
            self.t.failures[t.service] += failed

    # -- by name, stable services only --

    def begin(self):
        name = self.rng.choice(STABLE)
        self.vs.begin(name)
        self.t.opened[name] += 1
        self.by_name.append(name)

    def end_by_name(self):
        if not self.by_name:
            return
        name = self.by_name.pop(self.rng.randrange(len(self.by_name)))
        r = self.rng.random()
        if r < 0.2:
            self.vs.fail(name)
            failed = True
        else:
            status = 500 if r < 0.3 else 200
            self.vs.finish(name, self.rng.uniform(0.001, 0.2), status)
            failed = status >= 500
        self.t.ended[name] += 1
        self.t.failures[name] += failed

    def record(self):
        name = self.rng.choice(STABLE)
        b, p = self.rng.randint(0, 10_000), self.rng.randint(0, 9)
        self.vs.record(name, bytes=b, packets=p)
        self.t.bytes[name] += b
        self.t.packets[name] += p

    # -- the churn services --

    def _expect(self, op, exc_type, call, *args):
        try:
            call(*args)
        except exc_type:
            self.t.expected[op, exc_type.__name__] += 1

    def bind_churn(self):
        self._expect("bind", DuplicateService, self.vs.bind, self.rng.choice(CHURN), self.rng.randint(1, 5))

    def unbind_churn(self):
        self._expect("unbind", UnknownService, self.vs.unbind, self.rng.choice(CHURN))

    def drain_churn(self):
        self._expect("drain", UnknownService, self.vs.drain, self.rng.choice(CHURN))

    # -- settings and reads --

    def set_weight(self):
        self.vs.set_weight(self.rng.choice(STABLE), self.rng.randint(1, 100))

    def set_state(self):
        # S0 stays UP, so a select that excludes nothing of the stable ones always finds one
        name = self.rng.choice(STABLE[1:])
        self.vs.set_state(name, self.rng.choice(("UP", "UP", "OUT_OF_SERVICE", "DOWN")))

    def set_method(self):
        self.vs.set_method(self.rng.choice(METHODS))

    def read(self):
        vs, name = self.vs, self.rng.choice(STABLE + CHURN)
        what = self.rng.randrange(8)
        try:
            if what == 0:
                info = vs.info(name)
                assert info["name"] == name and info["active"] >= 0
            elif what == 1:
                vs.load(name), vs.score(name), vs.weight(name), vs.state(name), vs.active(name)
            elif what == 2:
                snap = vs.snapshot()
                assert len({s["name"] for s in snap["services"]}) == len(snap["services"])
            elif what == 3:
                str(vs.show())
            elif what == 4:
                names = vs.services
                assert set(STABLE) <= set(names), names
            elif what == 5:
                vs.ejection(name), vs.slow_start(name)
            elif what == 6:
                assert name in vs or name in CHURN
                assert len(vs) >= len(STABLE)
            else:
                info = vs.info(name)
                assert info["draining"] in (True, False) and info["ejected"] is False
        except UnknownService:
            if name not in CHURN:
                raise
            self.t.expected["read", "UnknownService"] += 1

    def advance(self):
        if self.clock.now() < CLOCK_LIMIT - 0.5:
            self.clock.advance(0.01)


def _stress_vserver(impl):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer("LEASTCONNECTION", clock=clock)
    for name in STABLE + CHURN[:3]:
        vs.bind(name, 1 + int(name[1:]) % 4)
    return vs, clock


def _check_counters(vs, workers):
    total = Tally()
    for w in workers:
        for field in ("selected", "opened", "ended", "failures", "bytes", "packets"):
            getattr(total, field).update(getattr(w.t, field))
    for name in STABLE:
        info = vs.info(name)
        got = {k: info[k] for k in ("selected", "active", "bytes", "packets", "failures")}
        want = {"selected": total.selected[name], "active": total.opened[name] - total.ended[name],
                "bytes": total.bytes[name], "packets": total.packets[name], "failures": total.failures[name]}
        assert got == want, name
        assert not info["draining"] and not info["ejected"]
    return total


def _end_everything(vs, workers):
    """The main thread ends what the workers left open; the stable services end idle."""
    for w in workers:
        for t in w.handles:
            t.finish()  # no error even where a churn service went away meanwhile
            assert t.done
        for name in w.by_name:
            vs.finish(name)
    for name in STABLE:
        assert vs.active(name) == 0, name


def _run_workers(vs, clock, *, seed, max_ops, seconds, also=()):
    """THREADS workers on vs (plus the `also` threads), all started together."""
    errors = []
    deadline = time.monotonic() + seconds
    workers = [Worker(vs, clock, seed * 100 + i, max_ops, deadline, errors) for i in range(THREADS)]
    threads = [threading.Thread(target=w.run, name=f"worker-{i}") for i, w in enumerate(workers)]
    threads += list(also)
    for th in threads:
        th.start()
    for th in threads:
        th.join(seconds + 120)
        assert not th.is_alive(), f"{th.name} still running: a deadlock?"
    assert not errors, "\n".join(errors[:3])
    return workers


REPLAY_EVENTS = (
    *workloads.down_up(1, 0.5, 1.5),
    *workloads.out_of_service(2, 0.8, 2.0),
    *workloads.bind_at(5, 1.0),
    *workloads.unbind_at(3, 1.2),
    *workloads.bind_at(3, 1.8),
    *workloads.flap(7, 0.2, 0.3, 8),
)


def _replay_trace(seed, n_requests):
    return workloads.make_trace(n_services=16, n_requests=n_requests, rate=40_000.0, seed=seed,
                                weights="random", degrading=1, events=REPLAY_EVENTS)


def _replay_alone(impl, trace, method):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer(method, clock=clock)
    res = replay(vs, clock, trace)
    return res, vs.snapshot(), clock.now()


class ReplayThread(threading.Thread):
    """Runs replay(); with hold=True inside `with vs.atomic():`, setting `holding` first."""

    def __init__(self, vs, clock, trace, *, hold):
        super().__init__(name=f"replay-hold={hold}")
        self.vs, self.clock, self.trace, self.hold = vs, clock, trace, hold
        self.holding = threading.Event()
        self.result = self.error = None

    def run(self):
        try:
            if self.hold:
                with self.vs.atomic():
                    self.holding.set()
                    self.result = replay(self.vs, self.clock, self.trace)
                    self.state = (self.vs.snapshot(), self.clock.now())
            else:
                self.holding.set()
                self.result = replay(self.vs, self.clock, self.trace)
        except BaseException as exc:  # noqa: BLE001
            self.error = exc
            self.holding.set()


def _readers_of(vs, stop, errors, seed, max_ops=200_000):
    """Calls that read (a tick at most: the same tick the replay makes) during a replay:
    they must wait for it, and cannot change its decisions."""
    rng = random.Random(seed)

    def read():
        try:
            for _ in range(max_ops):
                if stop.is_set():
                    return
                name = f"S{rng.randrange(16)}"
                try:
                    what = rng.randrange(5)
                    if what == 0:
                        vs.info(name)
                    elif what == 1:
                        vs.snapshot()
                    elif what == 2:
                        vs.load(name), vs.active(name), vs.weight(name)
                    elif what == 3:
                        vs.services, len(vs), name in vs
                    else:
                        vs.score(name)
                except UnknownService:
                    pass  # not bound yet, or unbound by the trace
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    return threading.Thread(target=read, name=f"reader-{seed}")


def _mutators_of(vs, after, errors, seed, n_ops=300):
    """Calls that change vs, all made once `after` is set (the replay holds vs by then):
    each waits for the replay to end, so none can change its decisions."""
    rng = random.Random(seed)

    def mutate():
        try:
            assert after.wait(60)
            for i in range(n_ops):
                name = f"S{rng.randrange(16)}"
                try:
                    what = rng.randrange(6)
                    if what == 0:
                        vs.finish(vs.select())
                    elif what == 1:
                        with vs.acquire(exclude={name}) as t:
                            t.record(bytes=10)
                    elif what == 2:
                        vs.set_state(name, rng.choice(("UP", "DOWN")))
                    elif what == 3:
                        vs.bind(f"X{seed}-{i}")
                    elif what == 4:
                        vs.record(name, bytes=100)
                    else:
                        vs.drain(f"X{seed}-{i - 1}")
                except (UnknownService, NoServiceAvailable):
                    pass
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    return threading.Thread(target=mutate, name=f"mutator-{seed}")


def test_stress_with_concurrent_replays(c_impl, fast_switching):
    """8 threads hammer vserver B; meanwhile replays run on A1 (inside atomic(), with
    threads that change A1 waiting on it) and A2 (with reader threads racing it)."""
    trace = _replay_trace(11, 500_000)
    method = "LEASTCONNECTION"
    alone = _replay_alone(c_impl, trace, method)
    assert (alone[0].chosen >= 0).sum() > 400_000

    a_errors = []
    clock1, clock2 = c_impl.ManualClock(0.0), c_impl.ManualClock(0.0)
    a1 = c_impl.VirtualServer(method, clock=clock1)
    a2 = c_impl.VirtualServer(method, clock=clock2)
    r1 = ReplayThread(a1, clock1, trace, hold=True)
    r2 = ReplayThread(a2, clock2, trace, hold=False)
    stop_readers = threading.Event()
    mutators = [_mutators_of(a1, r1.holding, a_errors, seed) for seed in (1, 2)]
    readers = [_readers_of(a2, stop_readers, a_errors, seed) for seed in (3, 4)]

    b, b_clock = _stress_vserver(c_impl)

    def replays_then_stop():  # the readers stop once A2's replay is over
        r2.join()
        stop_readers.set()

    stopper = threading.Thread(target=replays_then_stop, name="stopper")
    workers = _run_workers(b, b_clock, seed=1, max_ops=40_000, seconds=10,
                           also=(r1, r2, *mutators, *readers, stopper))

    assert r1.error is None and r2.error is None, (r1.error, r2.error)
    assert not a_errors, a_errors
    assert r1.result.equals(alone[0]), "A1's replay decided otherwise than alone"
    assert r1.state == alone[1:], "A1's state at the end of its replay differs from a replay alone"
    assert r2.result.equals(alone[0]), "A2's replay decided otherwise than alone (readers raced it)"

    total = _check_counters(b, workers)
    ops = Counter()
    for w in workers:
        ops.update(w.t.ops)
    assert sum(ops.values()) >= 500, ops  # the threads really ran
    assert sum(total.selected.values()) > 50 and sum(total.ended.values()) > 50
    _end_everything(b, workers)


def test_stress_counters_exact(impl, fast_switching):
    """The 8-thread run alone, on each engine: the counters of the stable services are exact."""
    vs, clock = _stress_vserver(impl)
    workers = _run_workers(vs, clock, seed=2, max_ops=20_000, seconds=6)
    total = _check_counters(vs, workers)
    assert sum(total.selected.values()) > 100
    _end_everything(vs, workers)
    # the churn services: whatever is bound is readable, and draining ones end once idle
    for name in CHURN:
        if name in vs:
            vs.unbind(name)
    assert sorted(vs.services, key=lambda n: int(n[1:])) == STABLE


# ---- (b) every public method waits while another thread holds the vserver ------------

def _setup(impl):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer("LEASTCONNECTION", clock=clock)
    for name in ("S1", "S2", "S3"):
        vs.bind(name)
    vs.begin("S2")
    vs.begin("S2")
    handle = vs.acquire(exclude={"S2", "S3"})
    assert handle.service == "S1"
    return vs, clock, handle


def _with_acquire(vs):
    with vs.acquire() as t:
        t.record(bytes=1)


def _atomic_select(vs):
    with vs.atomic():
        vs.select()


def _set_attr(vs, attr, value):
    setattr(vs, attr, value)


CALLS = {
    "select": lambda vs, t: vs.select(),
    "select(exclude)": lambda vs, t: vs.select(exclude={"S1"}),
    "acquire": lambda vs, t: vs.acquire(),
    "acquire(exclude)": lambda vs, t: vs.acquire(exclude=["S1", "S3"]),
    "with acquire": lambda vs, t: _with_acquire(vs),
    "record": lambda vs, t: vs.record("S1", bytes=10, packets=1),
    "begin": lambda vs, t: vs.begin("S1"),
    "finish": lambda vs, t: vs.finish("S2", 0.01),
    "finish(500)": lambda vs, t: vs.finish("S2", None, 500),
    "fail": lambda vs, t: vs.fail("S2"),
    "drain": lambda vs, t: vs.drain("S3"),
    "drain(busy)": lambda vs, t: vs.drain("S2"),
    "bind": lambda vs, t: vs.bind("S9", 3),
    "unbind": lambda vs, t: vs.unbind("S3"),
    "set_weight": lambda vs, t: vs.set_weight("S1", 5),
    "set_state": lambda vs, t: vs.set_state("S1", "OUT_OF_SERVICE"),
    "set_method": lambda vs, t: vs.set_method("ROUNDROBIN"),
    "set": lambda vs, t: vs.set(new_service_request=5),
    "set(outlier)": lambda vs, t: vs.set(outlier_failures=3, outlier_ejection_time=10),
    "startup_rr_factor=": lambda vs, t: _set_attr(vs, "startup_rr_factor", 4),
    "rtsp_nat=": lambda vs, t: _set_attr(vs, "rtsp_nat", True),
    "load": lambda vs, t: vs.load("S1"),
    "score": lambda vs, t: vs.score("S1"),
    "info": lambda vs, t: vs.info("S1"),
    "weight": lambda vs, t: vs.weight("S1"),
    "state": lambda vs, t: vs.state("S1"),
    "active": lambda vs, t: vs.active("S2"),
    "snapshot": lambda vs, t: vs.snapshot(),
    "show": lambda vs, t: vs.show(),
    "str": lambda vs, t: str(vs.show()),
    "services": lambda vs, t: vs.services,
    "len": lambda vs, t: len(vs),
    "in": lambda vs, t: "S1" in vs,
    "ejection": lambda vs, t: vs.ejection("S1"),
    "slow_start": lambda vs, t: vs.slow_start("S1"),
    "reserve": lambda vs, t: vs.reserve(1000),
    "__init__": None,  # needs the engine's ManualClock: made in the test
    "atomic": lambda vs, t: _atomic_select(vs),
    "t.record": lambda vs, t: t.record(bytes=7, packets=1),
    "t.finish": lambda vs, t: t.finish(ttfb=0.01),
    "t.fail": lambda vs, t: t.fail(),
}
C_ONLY = {"reserve"}


@pytest.mark.parametrize("call", list(CALLS))
def test_every_call_waits_while_another_thread_holds_the_vserver(impl, call):
    if call in C_ONLY and not _is_c(impl):
        pytest.skip("C engine only")
    vs, clock, handle = _setup(impl)
    fn = CALLS[call]
    if call == "__init__":
        fn = lambda vs, t: vs.__init__("ROUNDROBIN", clock=impl.ManualClock(0.0))  # noqa: E731
    holding, release = threading.Event(), threading.Event()
    seen = {}

    def holder():
        with vs.atomic():
            seen["before"] = vs.snapshot()
            holding.set()
            release.wait(30)
            seen["after"] = vs.snapshot()  # what the holder saw until it let go

    done, errors = threading.Event(), []

    def caller():
        try:
            fn(vs, handle)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            done.set()

    h = threading.Thread(target=holder, name="holder")
    h.start()
    assert holding.wait(10)
    c = threading.Thread(target=caller, name=f"caller {call}")
    c.start()
    returned_early = done.wait(0.15)
    release.set()
    h.join(10)
    assert not h.is_alive()
    assert c.join(10) is None and done.is_set(), f"{call} never returned after the vserver was released"
    assert not returned_early, f"{call} returned while another thread held the vserver"
    assert not errors, errors
    assert seen["before"] == seen["after"], f"{call} changed the vserver while another thread held it"
    # and it took effect once released
    if call == "bind":
        assert "S9" in vs
    elif call == "unbind":
        assert "S3" not in vs
    elif call == "finish":
        assert vs.active("S2") == 1
    elif call == "t.finish":
        assert handle.done and vs.active("S1") == 0


def test_atomic_hold_blocks_a_second_atomic_until_released(impl):
    """atomic() itself: the second holder gets in only once the first lets go."""
    vs, _, _ = _setup(impl)
    order = []
    first_in, release = threading.Event(), threading.Event()

    def first():
        with vs.atomic():
            first_in.set()
            release.wait(10)
            order.append("first out")

    def second():
        assert first_in.wait(10)
        with vs.atomic():
            order.append("second in")
            vs.select()

    t1, t2 = threading.Thread(target=first), threading.Thread(target=second)
    t1.start(), t2.start()
    time.sleep(0.1)
    assert order == []
    release.set()
    t1.join(10), t2.join(10)
    assert order == ["first out", "second in"]


# ---- (c) re-entrancy from callbacks of the calling thread -------------------------

class UnbindingClock:
    """now() unbinds S0..S89 of the vserver the first time after it is armed."""

    def __init__(self):
        self.vs, self.armed, self.t = None, False, 5.0

    def now(self):
        if self.armed:
            self.armed = False
            for i in range(90):
                self.vs.unbind(f"S{i}")
        return self.t


def _hundred(impl, clock):
    vs = impl.VirtualServer("LEASTCONNECTION", clock=clock)
    for i in range(100):
        vs.bind(f"S{i}")
    if isinstance(clock, UnbindingClock):
        clock.vs = vs
    return vs


def _left_alone(vs, charged=None):
    assert vs.services == tuple(f"S{i}" for i in range(90, 100))
    for name in vs.services:
        if name != charged:
            info = vs.info(name)
            assert (info["bytes"], info["active"], info["selected"]) == (0, 0, 0), name


def test_clock_unbinding_inside_record(impl):
    clock = UnbindingClock()
    vs = _hundred(impl, clock)
    clock.armed = True
    vs.record("S95", bytes=1000, packets=3)
    info = vs.info("S95")
    assert (info["bytes"], info["packets"]) == (1000, 3)
    _left_alone(vs, "S95")


def test_clock_unbinding_inside_select_finish_and_acquire(impl):
    clock = UnbindingClock()
    vs = _hundred(impl, clock)
    for i in range(90, 100):
        if i != 97:
            vs.begin(f"S{i}")  # S97 is the only idle one left after the unbinds
    clock.armed = True
    assert vs.select() == "S97"
    assert vs.info("S97")["selected"] == 1

    clock2 = UnbindingClock()
    vs2 = _hundred(impl, clock2)
    vs2.begin("S93")
    clock2.armed = True
    vs2.finish("S93", 0.05, 503)  # finish reads the clock (outlier ejection): the name is resolved after
    info = vs2.info("S93")
    assert (info["active"], info["failures"]) == (0, 1)
    _left_alone(vs2, "S93")

    clock3 = UnbindingClock()
    vs3 = _hundred(impl, clock3)
    clock3.armed = True
    t = vs3.acquire(exclude={"S90", "S91", "S0"})
    assert t.service == "S92"
    t.record(bytes=5)
    t.finish()
    assert vs3.info("S92")["bytes"] == 5 and vs3.active("S92") == 0


def test_clock_reentering_with_reads_and_a_select(impl):
    """A clock that reads and even selects on the same vserver, from the holding thread."""
    calls = []

    class ReadingClock:
        vs = None
        depth = 0

        def now(self):
            if self.vs is not None and self.depth == 0:
                self.depth += 1
                try:
                    calls.append((self.vs.snapshot()["method"], len(self.vs), self.vs.weight("S1")))
                    calls.append(self.vs.select())
                finally:
                    self.depth -= 1
            return 1.0

    clock = ReadingClock()
    vs = impl.VirtualServer("ROUNDROBIN", clock=clock)
    vs.bind("S1")
    vs.bind("S2")
    clock.vs = vs
    assert vs.select() == "S2"  # the clock's select took S1 first
    assert calls == [("ROUNDROBIN", 2, 1), "S1"]


class UnbindingCount:
    """An int-like whose __index__ unbinds S0..S89: arguments are converted before
    the vserver is held, and names resolved after."""

    def __init__(self, vs, value):
        self.vs, self.value = vs, value

    def __index__(self):
        for i in range(90):
            if f"S{i}" in self.vs:
                self.vs.unbind(f"S{i}")
        return self.value


def test_index_unbinding_inside_record(impl):
    vs = _hundred(impl, impl.ManualClock(5.0))
    vs.record("S95", bytes=UnbindingCount(vs, 1000))
    assert vs.info("S95")["bytes"] == 1000
    _left_alone(vs, "S95")


def test_index_unbinding_the_named_service(impl):
    vs = _hundred(impl, impl.ManualClock(5.0))
    with pytest.raises(UnknownService):
        vs.record("S5", bytes=UnbindingCount(vs, 1000))
    _left_alone(vs)


# ---- (d) reserve() and __init__ from another thread during a replay ----------------

@pytest.mark.parametrize("call", ["reserve", "__init__", "select", "bind"])
def test_calls_during_a_replay_wait_for_it(c_impl, call, fast_switching):
    trace = _replay_trace(21, 400_000)
    method = "LEASTBANDWIDTH"
    alone_res, alone_state, alone_end = _replay_alone(c_impl, trace, method)

    clock = c_impl.ManualClock(0.0)
    vs = c_impl.VirtualServer(method, clock=clock)
    r = ReplayThread(vs, clock, trace, hold=False)
    seen = {}

    def other():
        # the trace's first event is at 0.2 s: the clock past 0 means the replay runs
        t0 = time.monotonic()
        while clock.now() == 0.0 and time.monotonic() - t0 < 60:
            time.sleep(0)
        seen["replay alive"] = r.is_alive()
        if call == "reserve":
            vs.reserve(100_000)
        elif call == "__init__":
            vs.__init__("ROUNDROBIN", clock=clock)
        elif call == "select":
            seen["picked"] = vs.select()
        else:
            vs.bind("late")
        seen["clock after"] = clock.now()

    o = threading.Thread(target=other)
    r.start(), o.start()
    r.join(120), o.join(120)
    assert not r.is_alive() and not o.is_alive()
    assert r.error is None, r.error
    if not seen.get("replay alive"):
        pytest.skip("the replay ended before the other thread's call: nothing was raced")
    assert r.result.equals(alone_res)
    # the call ran after the replay's last clock step: it waited for the whole run
    assert seen["clock after"] == alone_end
    if call == "__init__":
        assert vs.services == () and vs.method == "ROUNDROBIN"
    elif call == "reserve":
        assert vs.snapshot() == alone_state
    elif call == "bind":
        assert vs.services[-1] == "late"
