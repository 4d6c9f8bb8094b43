"""The states and loops that `leastload.bench` and `benchmarks/` measure, in one place.

Each builder returns a vserver in a known state for an implementation module
(`leastload.engine.native` or `leastload.reference`, which export the same names).
Each loop runs k operations with the bound methods held in locals and returns
the elapsed nanoseconds, so the per-call figures carry one `for` step and the
calls themselves, nothing else. numpy (leastload[sim]) is imported only by
the builder that draws random loads.
"""
from itertools import cycle, islice
from time import perf_counter_ns
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple, Union

from ..hashing.rendezvous import example_keys
from ..engine.methods import TABLE

if TYPE_CHECKING:  # numpy only when a builder needs it
    import numpy as np
    import numpy.typing as npt

    from ..sim.workloads import Trace

# Either engine's VirtualServer and ManualClock: the builders serve leastload.engine.native and
# leastload.reference alike (`impl`), whose classes share their signatures but no base.
VServer = Any
Clock = Any  # None where a vserver runs on its default clock (monotonic=True)
Loop = Callable[[VServer, int], int]  # loop(vs, k) -> elapsed ns

# The operation each method is measured with, one call at a time (the
# registry's `pair`): traffic methods pair select() with record(); the others
# with finish(), so that load stays steady however long the loop runs.
PAIR_OF_METHOD = {m.name: m.pair for m in TABLE if m.supported}
METHODS = tuple(PAIR_OF_METHOD)
SHORT = {m.name: m.short for m in TABLE if m.supported}

REQUEST_BYTES, REQUEST_PACKETS = 1_000, 2  # what one record() in a loop adds
TTFB = 0.02  # seconds, what finish() reports under LEASTRESPONSETIME


def names(n: int) -> List[str]:
    return [f"S{i}" for i in range(n)]


def bound(impl: ModuleType, method: str, n: int, *, clock: Optional[Clock] = None,
          weights: Optional[Union[Sequence[int], "npt.NDArray[np.int64]"]] = None, reserve: bool = False,
          monotonic: bool = False) -> Tuple[VServer, Clock]:
    """A vserver with n services bound, no traffic. clock=None: a ManualClock at 0;
    monotonic=True: the vserver's default clock (then the clock returned is None)."""
    if monotonic:
        clock, vs = None, impl.VirtualServer(method=method)
    else:
        clock = impl.ManualClock(0.0) if clock is None else clock
        vs = impl.VirtualServer(method=method, clock=clock)
    if reserve:
        vs.reserve(n)
    bind = vs.bind
    for i, name in enumerate(names(n)):
        bind(name, 1 if weights is None else int(weights[i]))
    return vs, clock


def loaded(impl: ModuleType, method: str, n: int, *, seed: int = 0, clock: Optional[Clock] = None,
           monotonic: bool = False) -> Tuple[VServer, Clock]:
    """The random-load case: random weights and loads, so keys are rarely tied.

    Traffic methods get random window totals; the others 1..8 active
    transactions each (with a random TTFB per service; LRTM a random probe,
    CUSTOMLOAD a random reported load too).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    vs, clock = bound(impl, method, n, clock=clock, weights=rng.integers(1, 101, n), monotonic=monotonic)
    all_names = names(n)
    if method == "LEASTBANDWIDTH":
        for name, b in zip(all_names, rng.integers(0, 10**6, n).tolist()):
            vs.record(name, b, 0)
    elif method == "LEASTPACKETS":
        for name, p in zip(all_names, rng.integers(0, 10**4, n).tolist()):
            vs.record(name, 0, p)
    else:
        begin, finish = vs.begin, vs.finish
        ttfbs = rng.uniform(0.001, 0.5, n).tolist()
        for name, a, ttfb in zip(all_names, rng.integers(1, 9, n).tolist(), ttfbs):
            for _ in range(a + 1):
                begin(name)
            finish(name, ttfb)  # sets the TTFB, leaves a active
        if method == "LRTM":
            for name, rtt in zip(all_names, rng.uniform(0.001, 0.5, n).tolist()):
                vs.probe(name, rtt)
        elif method == "CUSTOMLOAD":
            for name, cpu in zip(all_names, rng.integers(0, 80, n).tolist()):
                vs.report_load(name, {"cpu": (cpu, 1, 100)})
    return vs, clock


def tied(impl: ModuleType, n: int) -> Tuple[VServer, Clock]:
    """The all-tied worst case: LEASTCONNECTION, equal weights, every service idle."""
    return bound(impl, "LEASTCONNECTION", n)


def window_primed(impl: ModuleType, n: int, vs: Optional[VServer] = None,
                  clock: Clock = None) -> Tuple[VServer, Clock, float]:
    """LEASTBANDWIDTH with traffic on every service in the bucket that leaves at the next second.

    Returns (vs, clock, t): setting the clock to t and calling select() makes one
    window roll that expires traffic of all n services. Pass vs and clock back in
    to prime the same vserver again (cheaper than binding anew).
    """
    if vs is None:
        vs, clock = bound(impl, "LEASTBANDWIDTH", n)
    t0 = float(int(clock.now()) + 20)  # past the whole window: it starts empty
    clock.set(t0)
    record = vs.record
    for name in names(n):
        record(name, REQUEST_BYTES, REQUEST_PACKETS)
    clock.set(t0 + 13)
    vs.finish(vs.select())  # the window is at t0 + 13; the bucket of t0 leaves next
    return vs, clock, t0 + 14


# ---- loops: k operations, elapsed ns --------------------------------------------

def loop_empty(vs: VServer, k: int) -> int:
    t = perf_counter_ns()
    for _ in range(k):
        pass
    return perf_counter_ns() - t


def loop_noop(vs: VServer, k: int) -> int:
    noop = vs._noop
    t = perf_counter_ns()
    for _ in range(k):
        noop(1)
    return perf_counter_ns() - t


def loop_select(vs: VServer, k: int) -> int:
    select = vs.select
    t = perf_counter_ns()
    for _ in range(k):
        select()
    return perf_counter_ns() - t


def loop_select_record(vs: VServer, k: int) -> int:
    select, record = vs.select, vs.record
    t = perf_counter_ns()
    for _ in range(k):
        record(select(), REQUEST_BYTES, REQUEST_PACKETS)
    return perf_counter_ns() - t


def loop_select_finish(vs: VServer, k: int) -> int:
    select, finish = vs.select, vs.finish
    t = perf_counter_ns()
    for _ in range(k):
        finish(select())
    return perf_counter_ns() - t


def loop_select_finish_ttfb(vs: VServer, k: int) -> int:
    select, finish = vs.select, vs.finish
    t = perf_counter_ns()
    for _ in range(k):
        finish(select(), TTFB)
    return perf_counter_ns() - t


N_KEYS = 1024  # the hash methods' pair cycles through this many request keys


def loop_select_key_finish(keys: Sequence[object]) -> Loop:
    """The hash methods' loop: select(key=...)+finish() over a cycle of request keys."""
    def loop(vs: VServer, k: int) -> int:
        select, finish = vs.select, vs.finish
        t = perf_counter_ns()
        for key in islice(cycle(keys), k):
            finish(select(key=key))
        return perf_counter_ns() - t
    return loop


def pair_loop(method: str) -> Loop:
    """The per-call loop a method is measured with (PAIR_OF_METHOD)."""
    if PAIR_OF_METHOD[method] == "select(key)+finish":
        return loop_select_key_finish(example_keys(method, N_KEYS))
    if PAIR_OF_METHOD[method] == "select+record":
        return loop_select_record
    return loop_select_finish_ttfb if method == "LEASTRESPONSETIME" else loop_select_finish


def pair_step(vs: VServer, method: str) -> Callable[[], None]:
    """One operation of pair_loop(method) as a no-argument callable (pytest-benchmark)."""
    select, record, finish = vs.select, vs.record, vs.finish
    if PAIR_OF_METHOD[method] == "select(key)+finish":
        next_key = cycle(example_keys(method, N_KEYS)).__next__
        return lambda: finish(select(key=next_key()))
    if PAIR_OF_METHOD[method] == "select+record":
        return lambda: record(select(), REQUEST_BYTES, REQUEST_PACKETS)
    if method in ("LEASTRESPONSETIME", "PEAKEWMA"):  # the methods a TTFB moves
        return lambda: finish(select(), TTFB)
    return lambda: finish(select())


def prebind(vs: VServer, trace: "Trace") -> None:
    """Binds the trace's initial services as replay() would, so a timed replay leaves binding out."""
    for s, name in enumerate(trace.services):
        if trace.initially_bound[s]:
            vs.bind(name, int(trace.weights[s]))


def worst_select(impl: ModuleType, n: int, method: str, seconds: int = 30,
                 per_second: int = 200) -> Tuple[float, float]:
    """(worst, mean) select() in seconds when every second rolls: n services bound, then for
    `seconds` virtual seconds `per_second` requests (select, record 1,500 bytes, finish); the
    clock moves one second between bursts, so each burst's first select() pays the boundary."""
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer(method, clock=clock)
    if hasattr(vs, "reserve"):
        vs.reserve(n)
    for name in names(n):
        vs.bind(name)
    select, record, finish = vs.select, vs.record, vs.finish
    worst = total = 0
    for sec in range(seconds):
        for i in range(per_second):
            t0 = perf_counter_ns()
            name = select()
            dt = perf_counter_ns() - t0
            worst, total = max(worst, dt), total + dt
            record(name, bytes=1500, packets=2)
            finish(name, ttfb=0.001 + 0.001 * ((sec + i) % 2))
        clock.advance(1.0)
    return worst / 1e9, total / 1e9 / (seconds * per_second)
