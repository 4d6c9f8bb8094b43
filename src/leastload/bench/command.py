"""`python -m leastload bench`: the C engine beside the pure-Python reference, in one run.

Measures, for each size n and method: a whole-trace replay (the C fast path,
and the reference through the per-call driver), the per-call pair
(select()+record() or select()+finish()), select() against the empty call
`_noop(1)`, the all-tied worst case against random loads, the window roll and
the C core's memory per service; then states which of the performance targets
(targets.py) are met, what each measures and why a missed one is missed. Each
figure is the minimum over repeats of a perf_counter_ns loop, with the garbage
collector off. The reference is slow at large n, so it runs fewer
operations (a head of the same trace, a shorter loop): ns per operation stay
comparable.
"""
import argparse
import gc
import importlib.util
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, replace
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

# first: without numpy (the sim extra) this import says what to install
from ..sim.replay import ReplayResult, replay
from ..sim.workloads import Trace, make_trace

import numpy as np
import numpy.typing as npt

from ..engine._engine import _floor_replay
from . import cases, report
from .targets import targets

RATE = 50_000.0  # requests per second in the replayed trace

Results = Dict[str, Any]  # what run() returns: plain data, as the JSON report holds it
_T = TypeVar("_T")


@dataclass(frozen=True)
class Plan:
    sizes: Tuple[int, ...]
    methods: Tuple[str, ...]
    repeats: int           # of each C measurement
    calls: int             # operations per C per-call loop
    requests: int          # requests in the C replay's trace
    c_budget: float        # seconds: C replays repeat until this much was spent
    ref_budget: float      # seconds per reference measurement (one repeat)
    ref_repeats: int
    worst_sizes: Tuple[int, ...] = ()  # n for the worst single select() when every second rolls


QUICK = Plan(sizes=(3, 64, 1024, 16384), methods=("LEASTCONNECTION", "LEASTBANDWIDTH"), repeats=5,
             calls=30_000, requests=100_000, c_budget=0.3, ref_budget=0.04, ref_repeats=2,
             worst_sizes=(10_000,))
FULL = Plan(sizes=(3, 64, 1024, 16384, 262144), methods=("LEASTCONNECTION", "LEASTBANDWIDTH"), repeats=5,
            calls=200_000, requests=1_000_000, c_budget=3.0, ref_budget=0.4, ref_repeats=3,
            worst_sizes=(100_000, 1_000_000))


def _native() -> ModuleType:
    from ..engine import native as _native  # the C engine; its absence must fail loudly, not fall back
    return _native


def _reference() -> ModuleType:
    from ..engine import reference
    return reference


# ---- timing -----------------------------------------------------------------------

def _gc_off(fn: Callable[..., _T], *args: Any) -> _T:
    """fn(*args) with the garbage collector off (as timeit does)."""
    was = gc.isenabled()
    gc.disable()
    try:
        return fn(*args)
    finally:
        if was:
            gc.enable()


def _elapsed(fn: Callable[[], object]) -> int:
    """ns that fn() takes, collector off."""
    def timed() -> int:
        t = time.perf_counter_ns()
        fn()
        return time.perf_counter_ns() - t
    return _gc_off(timed)


def per_op(loop: cases.Loop, vs: cases.VServer, k: int, repeats: int,
           budget: float = math.inf) -> Tuple[float, List[float]]:
    """ns per operation of loop(vs, k): min over `repeats` runs (fewer once `budget` seconds are spent)."""
    runs: List[float] = []
    spent = 0
    for _ in range(repeats):
        ns = _gc_off(loop, vs, k)
        runs.append(ns / k)
        spent += ns
        if spent > budget * 1e9:
            break
    return min(runs), runs


def per_op_side_by_side(pairs: Sequence[Tuple[cases.Loop, cases.VServer]], k: int, repeats: int) -> List[float]:
    """min ns per operation of each (loop, vs), the runs interleaved: a ratio of two
    figures then compares them under the same background load of the machine."""
    runs: List[List[float]] = [[] for _ in pairs]
    for _ in range(repeats):
        for out, (loop, vs) in zip(runs, pairs):
            out.append(_gc_off(loop, vs, k) / k)
    return [min(r) for r in runs]


def calls_for(loop: cases.Loop, vs: cases.VServer, budget: float, most: int) -> int:
    """How many operations of loop fit in `budget` seconds (1..most), from a 3-operation probe."""
    probe = _gc_off(loop, vs, 3) / 3
    return max(1, min(most, int(budget * 1e9 / max(probe, 1.0))))


# ---- one measurement each -------------------------------------------------------------

def call_floor(plan: Plan) -> Dict[str, float]:
    """The empty loop and the empty call: what no per-call figure can go under."""
    vs, _ = cases.bound(_native(), "LEASTCONNECTION", 3)
    empty, noop = per_op_side_by_side([(cases.loop_empty, vs), (cases.loop_noop, vs)], plan.calls, plan.repeats)
    return {"empty_loop_ns": empty, "noop_ns": noop}


def memory(n: int) -> Dict[str, float]:
    c = _native()
    plain, _ = cases.bound(c, "LEASTCONNECTION", n)
    reserved, _ = cases.bound(c, "LEASTCONNECTION", n, reserve=True)
    return {"bytes_per_service": plain.memory_bytes() / n,
            "bytes_per_service_reserved": reserved.memory_bytes() / n}


def per_call(impl: ModuleType, method: str, n: int, plan: Plan, reference: bool) -> Tuple[float, int]:
    """ns of the method's pair, on the random-load case."""
    vs, _ = cases.loaded(impl, method, n)
    loop = cases.pair_loop(method)
    if reference:
        k = calls_for(loop, vs, plan.ref_budget, plan.calls)
        ns, _ = per_op(loop, vs, k, plan.ref_repeats)
    else:
        k = plan.calls
        ns, _ = per_op(loop, vs, k, plan.repeats)
    return ns, k


def select_alone(n: int, plan: Plan) -> List[float]:
    """select() alone (LEASTCONNECTION: each call moves the chosen key, so the tree works),
    beside the empty loop and the empty call _noop(1) measured at the same time."""
    vs, _ = cases.loaded(_native(), "LEASTCONNECTION", n)
    return per_op_side_by_side([(cases.loop_select, vs), (cases.loop_noop, vs), (cases.loop_empty, vs)],
                               plan.calls, plan.repeats)


def ties(n: int, plan: Plan) -> List[float]:
    """select()+finish() with every service tied against random loads (LEASTCONNECTION)."""
    c = _native()
    tied, _ = cases.tied(c, n)
    rand, _ = cases.loaded(c, "LEASTCONNECTION", n)
    return per_op_side_by_side([(cases.loop_select_finish, tied), (cases.loop_select_finish, rand)],
                               plan.calls, plan.repeats)


def roll(n: int, plan: Plan) -> float:
    """ns of one window roll that expires traffic of all n services.

    Timed as clock.set() + the select() that rolls, less the same two calls
    within one second (no roll), so small n are not buried under call costs.
    """
    c = _native()
    vs, clock, t = cases.window_primed(c, n)
    rolls: List[int] = []
    calls: List[int] = []
    for _ in range(max(plan.repeats, 20 if n <= 1024 else 3)):
        set_clock, select = clock.set, vs.select
        rolls.append(_elapsed(lambda: (set_clock(t), select())))
        calls.append(_elapsed(lambda: (set_clock(t + 0.5), select())))
        vs, clock, t = cases.window_primed(c, n, vs, clock)
    return max(0.0, min(rolls) - min(calls))


def replay_ns(impl: ModuleType, method: str, trace: Trace, repeats: int,
              budget: float) -> Tuple[float, npt.NDArray[np.int32]]:
    """ns per request of replay(), binding left out of the timing; min over repeats.
    Also returns the choices of the last run (trace service per request)."""
    runs: List[float] = []
    spent = 0
    results: List[ReplayResult] = []
    for _ in range(repeats):
        vs, clock = cases.bound(impl, method, 0)
        cases.prebind(vs, trace)
        ns = _elapsed(lambda: results.append(replay(vs, clock, trace)))
        runs.append(ns / len(trace))
        spent += ns
        if spent > budget * 1e9:
            break
    return min(runs), results[-1].chosen


def _floor_run(method: str, trace: Trace) -> Tuple[Callable[[], Optional[float]], npt.NDArray[np.int32]]:
    """One timed floor run (ns per request, or None when a key does not pack), and
    the array it writes its choices to."""
    out = np.empty(len(trace), dtype=np.int32)

    def run() -> Optional[float]:
        fits: List[bool] = []
        ns = _elapsed(lambda: fits.append(_floor_replay(trace, method, out)))
        return ns / len(trace) if fits[0] else None
    return run, out


def _same_choices(method: str, trace: Trace, floor: npt.NDArray[np.int32], chosen: npt.NDArray[np.int32]) -> None:
    if not np.array_equal(floor, chosen):
        k = int(np.flatnonzero(floor != chosen)[0])
        raise RuntimeError(f"the floor's choices differ from the replay's ({method}, {len(trace.services)} services, "
                           f"first at request {k}: {int(floor[k])} vs {int(chosen[k])}): a bug in one of them")


def replay_and_floor(method: str, trace: Trace, repeats: int,
                     budget: float) -> Tuple[float, Optional[float], npt.NDArray[np.int32]]:
    """The C replay and its floor timed in turns (replay, floor, replay, ...), each
    the minimum over its runs, so that both meet the same moments of a shared,
    noisy machine and their ratio is not one side's bad moment. At least
    `repeats` pairs, more while the two together spent less than `budget`
    seconds (at most 4 * repeats pairs). Returns (replay ns, floor ns or None,
    the replay's choices)."""
    c = _native()
    floor, floor_chosen = _floor_run(method, trace)
    replays: List[float] = []
    floors: List[float] = []
    results: List[ReplayResult] = []
    spent = 0
    fits = True
    for i in range(4 * repeats):
        vs, clock = cases.bound(c, method, 0)
        cases.prebind(vs, trace)
        ns = _elapsed(lambda: results.append(replay(vs, clock, trace)))
        replays.append(ns / len(trace))
        spent += ns
        if fits:
            f = floor()
            fits = f is not None
            if f is not None:
                floors.append(f)
                spent += int(f * len(trace))
        if i + 1 >= repeats and spent > budget * 1e9:
            break
    chosen = results[-1].chosen
    if not fits:
        return min(replays), None, chosen
    _same_choices(method, trace, floor_chosen, chosen)
    return min(replays), min(floors), chosen


def _hammer(name: str, stop: Any, out: Any) -> None:
    """A second process: select+finish on the shared vserver `name` until `stop`; puts its ops/s."""
    c = _native()
    vs = c.VirtualServer("LEASTCONNECTION", clock=c.ManualClock(0.0), shared=name)
    ops, t0 = 0, time.perf_counter()
    while not stop.is_set():
        cases.loop_select_finish(vs, 10_000)
        ops += 10_000
    out.put(ops / (time.perf_counter() - t0))


def shared_per_call(plan: Plan, n: int = 64) -> Dict[str, float]:
    """select+finish on a private vserver and on a shared one (VirtualServer(shared=...)), both
    LEASTCONNECTION at n, in turns; then the shared one again while a second process runs the
    same loop on it: ns per call here, and each process's calls per second."""
    import multiprocessing

    c = _native()
    name = f"bench-{os.getpid()}"
    c.unlink_shared(name)
    try:
        private, _ = cases.bound(c, "LEASTCONNECTION", n)
        shared = c.VirtualServer("LEASTCONNECTION", clock=c.ManualClock(0.0), shared=name)
        for service in cases.names(n):
            shared.bind(service)
        loop = cases.loop_select_finish
        private_ns, shared_ns = per_op_side_by_side([(loop, private), (loop, shared)], plan.calls, plan.repeats)
        fork = multiprocessing.get_context("fork")
        stop, out = fork.Event(), fork.Queue()
        other = fork.Process(target=_hammer, args=(name, stop, out), daemon=True)
        other.start()
        try:
            time.sleep(0.2)
            contended_ns, _ = per_op(loop, shared, plan.calls, plan.repeats)
        finally:
            stop.set()
        other_rate = out.get(timeout=60)
        other.join(30)
        return {"n": n, "private_ns": private_ns, "shared_ns": shared_ns, "shared_over_private": shared_ns / private_ns,
                "contended_ns": contended_ns, "contended_per_s": 1e9 / contended_ns, "other_per_s": other_rate}
    finally:
        c.unlink_shared(name)


def every_method(plan: Plan, n: int = 64) -> List[Dict[str, Any]]:
    """Each method's per-call pair at n (C engine, the random-load case), and its
    ratio to LEASTCONNECTION's measured in the same run."""
    rows = {m: per_call(_native(), m, n, plan, reference=False)[0] for m in cases.METHODS}
    return [{"method": m, "pair": cases.PAIR_OF_METHOD[m], "n": n, "ns": ns,
             "over_lc": ns / rows["LEASTCONNECTION"]} for m, ns in rows.items()]


# ---- the run --------------------------------------------------------------------

def run(plan: Plan, progress: Optional[Callable[[str], None]] = None) -> Results:
    """Every measurement of `plan`; returns the results as plain data."""
    c, ref = _native(), _reference()
    step: Callable[[str], None] = progress or (lambda label: None)
    step("floor")
    results: Results = {"meta": _meta(plan), "floor": call_floor(plan), "rows": []}
    for n in plan.sizes:
        row: Dict[str, Any] = {"n": n}
        step(f"n={n}: memory")
        row.update(memory(n))
        step(f"n={n}: select")
        row["select_ns"], row["noop_ns"], row["empty_loop_ns"] = select_alone(n, plan)
        row["select_over_noop"] = row["select_ns"] / row["noop_ns"]
        net_noop = max(row["noop_ns"] - row["empty_loop_ns"], 1e-9)
        row["select_over_noop_net"] = (row["select_ns"] - row["empty_loop_ns"]) / net_noop
        step(f"n={n}: ties")
        row["tied_ns"], row["random_ns"] = ties(n, plan)
        row["tied_over_random"] = row["tied_ns"] / row["random_ns"]
        step(f"n={n}: window roll")
        row["roll_ns"] = roll(n, plan)
        row["roll_ns_per_service"] = row["roll_ns"] / n
        step(f"n={n}: trace")
        # sealed, as a trace replayed again and again should be: each replay takes it as it
        # is (an unsealed one is copied and checked again first, about 50-80 ns a request here)
        trace = make_trace(n, plan.requests, rate=RATE, seed=0, degrading=1).sealed()
        row["methods"] = {}
        for method in plan.methods:
            m: Dict[str, Any] = {"pair": cases.PAIR_OF_METHOD[method]}
            step(f"n={n}: {method} per call (C)")
            m["percall_ns_c"], m["percall_calls_c"] = per_call(c, method, n, plan, reference=False)
            step(f"n={n}: {method} per call (reference)")
            m["percall_ns_ref"], m["percall_calls_ref"] = per_call(ref, method, n, plan, reference=True)
            m["percall_speedup"] = m["percall_ns_ref"] / m["percall_ns_c"]
            step(f"n={n}: {method} replay (C) and its floor (bare C loop), in turns")
            m["replay_ns_c"], m["floor_ns"], chosen = replay_and_floor(method, trace, plan.repeats,
                                                                        2 * plan.c_budget)
            m["replay_requests_c"] = len(trace)
            m["replay_over_floor"] = m["floor_ns"] and m["replay_ns_c"] / m["floor_ns"]
            # a replayed request makes about 4 calls: size the reference's head of the trace by that
            k = max(5, min(len(trace), int(plan.ref_budget * 1e9 / (4 * m["percall_ns_ref"]))))
            step(f"n={n}: {method} replay (reference, {k} requests)")
            m["replay_ns_ref"], _ = replay_ns(ref, method, trace.head(k), plan.ref_repeats, plan.ref_budget)
            m["replay_requests_ref"] = k
            m["replay_speedup"] = m["replay_ns_ref"] / m["replay_ns_c"]
            row["methods"][method] = m
        results["rows"].append(row)
    step("a shared vserver's per-call pair at n=64, alone and with a second process")
    results["shared_n64"] = shared_per_call(plan)
    step("every method's per-call pair at n=64")
    results["methods_n64"] = every_method(plan)
    step("P2C's and PEAKEWMA's per-call pair by n")
    results["p2c_by_n"] = [{"n": n, "ns": per_call(c, "P2C", n, plan, reference=False)[0]} for n in plan.sizes]
    results["peakewma_by_n"] = [{"n": n, "ns": per_call(c, "PEAKEWMA", n, plan, reference=False)[0]}
                                for n in plan.sizes]
    results["worst_select"] = []
    for n in plan.worst_sizes:
        for method in plan.methods:
            step(f"n={n}: worst select, {method}")
            worst, mean = cases.worst_select(c, n, method)
            results["worst_select"].append({"n": n, "method": method, "worst_ms": worst * 1e3,
                                            "mean_us": mean * 1e6})
    results["targets"] = targets(results)
    return results


def _meta(plan: Plan) -> Dict[str, Any]:
    return {
        "plan": asdict(plan),
        "statistic": "minimum over repeats, ns per operation (per request for replays), gc off",
        "trace": f"make_trace(n, {plan.requests}, rate={RATE:.0f}, seed=0, degrading=1).sealed(): Poisson arrivals, "
                 "heavy-tailed sizes; the reference replays its first requests",
        "python": sys.version.split()[0],
        "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPUs",
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


# ---- command line ---------------------------------------------------------------------

def _progress(total: int) -> Tuple[Callable[[str], None], Callable[[], None]]:
    """A step(label) callable: a tqdm bar on stderr if tqdm is installed, else plain lines."""
    try:
        from tqdm import tqdm
    except ImportError:
        count = [0]

        def print_step(label: str) -> None:
            count[0] += 1
            print(f"bench [{count[0]}/{total}] {label}", file=sys.stderr, flush=True)
        return print_step, lambda: None
    bar = tqdm(total=total, file=sys.stderr, unit="step", leave=False, disable=None)  # None: off unless a terminal
    started = [False]

    def step(label: str) -> None:
        if started[0]:
            bar.update(1)
        started[0] = True
        bar.set_description_str(label)
    return step, bar.close


def _steps(plan: Plan) -> int:
    return 4 + len(plan.sizes) * (5 + 5 * len(plan.methods)) + len(plan.worst_sizes) * len(plan.methods)


def _method_arg(text: str) -> str:
    full = {v: k for k, v in cases.SHORT.items()}.get(text.upper(), text.upper())
    if full not in cases.METHODS:
        raise argparse.ArgumentTypeError(
            f"unknown method {text!r}: one of {', '.join(cases.METHODS)} (or {', '.join(cases.SHORT.values())})")
    return full


def _size_arg(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 1 << 22:
        raise argparse.ArgumentTypeError(f"a size must be an int in 1..{1 << 22}, got {text!r}")
    return n


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m leastload bench",
        description="Measure the C engine beside the pure-Python reference and check the performance targets.")
    p.add_argument("--quick", action="store_true",
                   help="small sizes and short loops (well under a minute); default: the full run (a few minutes)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    p.add_argument("--png", metavar="PATH", help="also plot ns/op against n (log axes) to PATH (needs matplotlib)")
    p.add_argument("--methods", nargs="+", type=_method_arg, metavar="METHOD",
                   help="methods to replay and call (default: LEASTCONNECTION LEASTBANDWIDTH; short names work)")
    p.add_argument("--sizes", nargs="+", type=_size_arg, metavar="N", help="numbers of services")
    p.add_argument("--strict", action="store_true", help="exit with status 1 when a measured target is missed")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.png and importlib.util.find_spec("matplotlib") is None:
        p.exit(2, "leastload bench: --png: needs matplotlib, which is not installed "
                  "(pip install 'leastload[plot]')\n")
    plan = QUICK if args.quick else FULL
    if args.methods:
        plan = replace(plan, methods=tuple(dict.fromkeys(args.methods)))
    if args.sizes:
        plan = replace(plan, sizes=tuple(sorted(set(args.sizes))))
    step, done = _progress(_steps(plan))
    try:
        results = run(plan, step)
    finally:
        done()
    print(report.text(results))
    if args.json:
        report.write_json(results, args.json)
        print(f"JSON written to {args.json}")
    if args.png:
        report.plot(results, args.png)
        print(f"plot written to {args.png}")
    missed = [t for t in results["targets"] if t["met"] is False]
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
