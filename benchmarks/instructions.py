#!/usr/bin/env python3
"""Instructions per operation of the C engine, counted by valgrind's cachegrind: a CI guard.

Wall-clock benchmarks are too noisy on shared machines to fail a build on a
few per cent; the number of instructions an operation executes is not. Each
case runs a small Python driver under

    valgrind --tool=cachegrind --cache-sim=no

twice, with k and 2k repetitions of the operation after the same setup, so
interpreter start-up, imports and setup cancel out (and so does any first-call
warm-up, which both runs pay): instructions per operation =
(total(2k) - total(k)) / (k * operations per repetition). The count covers
the whole operation as Python calls it: the `for` step, the call into the
extension, the binding and the C core. The empty extension call `_noop(1)`
is there as the floor the others stand on.

    python -m benchmarks.instructions            # measure, print the table
    python -m benchmarks.instructions --check    # ... and fail (exit 1) on a case > 3 % over the baseline
    python -m benchmarks.instructions --update   # measure and rewrite instructions_baseline.json

The baseline records the valgrind and Python versions it was made with; a
different version is reported and the comparison still made (the interpreter's
own instructions are part of every count, so a new Python moves the numbers:
update the baseline with it). Measure from a build made as CI makes it
(`pip install ".[test]"`, scikit-build-core's Release build).

Why a script of our own rather than pytest-codspeed's instrumentation
("simulation") mode: pytest-codspeed only marks where each benchmark starts
and stops; the counting is done by the CodSpeed runner, which runs the suite
under its own build of valgrind (callgrind) and compares results on its
service. Driven by hand (callgrind with --instr-atstart=no and the runner's
environment variable set so the plugin does not fall back to wall time) it
does count, but each benchmark then comes back as an anonymous callgrind dump
to match to its test and to parse, with setup inside the count unless every
test is written in pedantic form, and the whole relies on an undocumented
hand-off between plugin and runner that has already changed between
versions. This script needs valgrind and the standard library only, cancels
start-up and setup by construction, and its baseline is a JSON file in the
repository that a reviewer can read.
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BASELINE = Path(__file__).resolve().with_name("instructions_baseline.json")
THRESHOLD_PCT = 3.0  # --check fails when a case grew by more than this over the baseline

# name -> (what one operation is, repetitions k; the runs make k and 2k)
CASES = {
    "noop": ("_noop(1): the empty extension call (the floor)", 20_000),
    "select_finish_LC_n64": ("finish(select()), LEASTCONNECTION, n=64, random weights and loads", 20_000),
    "select_finish_LC_n16384": ("finish(select()), LEASTCONNECTION, n=16384, random weights and loads", 20_000),
    "select_finish_LB_n64": ("finish(select()), LEASTBANDWIDTH, n=64, random weights and traffic", 20_000),
    "select_finish_LB_n16384": ("finish(select()), LEASTBANDWIDTH, n=16384, random weights and traffic", 20_000),
    "acquire_finish_LC_n64": ("acquire().finish(), LEASTCONNECTION, n=64, random weights and loads", 20_000),
    "select_record_LB_n64": ("record(select(), 1500 B) + finish, LEASTBANDWIDTH, n=64: the window's path", 20_000),
    "second_LB_n16384": ("a second boundary, LEASTBANDWIDTH, n=16384, 20 requests a second: per second", 200),
    # the sampled family's pick is O(1): the same count at 64 and 262,144 services
    "select_finish_P2C_n64": ("finish(select()), P2C, n=64, random weights, one service in 64 loaded", 20_000),
    "select_finish_P2C_n262144": ("finish(select()), P2C, n=262144, random weights, one service in 64 loaded",
                                  20_000),
    "replay_LC_n64": ("replay() of a 64-service trace (C batch path), LEASTCONNECTION: per request", 1),
    "select_key_finish_URLHASH_n64": ("finish(select(key=...)), URLHASH, n=64, random weights, 1,024 URLs in turn",
                                      20_000),
}
REPLAY_REQUESTS = 20_000  # requests in the replay case's trace (one repetition)


# ---- the driver: runs under valgrind ------------------------------------------

def _loaded(impl, method, n, every=1):
    """n services with random weights 1..100 and random loads: 1..8 active transactions
    each (LEASTCONNECTION) or 0..10**6 bytes in the window (LEASTBANDWIDTH), on every
    `every`-th service (the others idle: less setup under valgrind at large n). Seeded,
    and without numpy, whose import would double each run's start-up under valgrind."""
    import random

    rng = random.Random(0)
    vs = impl.VirtualServer(method=method, clock=impl.ManualClock(0.0))
    names = [f"S{i}" for i in range(n)]
    for name in names:
        vs.bind(name, rng.randint(1, 100))
    for name in names[::every]:
        if method == "LEASTBANDWIDTH":
            vs.record(name, rng.randint(0, 10**6), 0)
        else:
            for _ in range(rng.randint(1, 8)):
                vs.begin(name)
    return vs


def _driver(case, k):
    """Builds the case's state, then runs its operation k times; returns operations per repetition."""
    from leastload.engine import native as impl

    if case == "noop":
        noop = _loaded(impl, "LEASTCONNECTION", 1)._noop
        for _ in range(k):
            noop(1)
        return 1
    m = re.fullmatch(r"(select_finish|acquire_finish)_(LC|LB|P2C)_n(\d+)", case)
    if m:
        kind, method, n = m.group(1), m.group(2), int(m.group(3))
        vs = _loaded(impl, {"LC": "LEASTCONNECTION", "LB": "LEASTBANDWIDTH", "P2C": "P2C"}[method], n,
                     every=64 if method == "P2C" else 1)
        if kind == "select_finish":
            select, finish = vs.select, vs.finish
            for _ in range(k):
                finish(select())
        else:
            acquire = vs.acquire
            for _ in range(k):
                acquire().finish()
        return 1
    m = re.fullmatch(r"select_key_finish_([A-Z]+)_n(\d+)", case)
    if m:
        # a hash method scores every service: its scan, weighted (random weights), and the key's path
        from leastload.hashing.rendezvous import example_keys

        method, n = m.group(1), int(m.group(2))
        vs = _loaded(impl, method, n)
        keys = example_keys(method, 1024)
        select, finish = vs.select, vs.finish
        for i in range(k):
            finish(select(key=keys[i & 1023]))
        return 1
    if case == "select_record_LB_n64":
        vs = _loaded(impl, "LEASTBANDWIDTH", 64)
        select, record, finish = vs.select, vs.record, vs.finish
        for _ in range(k):
            name = select()
            record(name, 1500, 2)
            finish(name)
        return 1
    if case == "second_LB_n16384":
        # each repetition: one clock second with 20 requests; the first select pays the boundary,
        # which must cost what the live services cost, not what all 16,384 cost
        clock = impl.ManualClock(0.0)
        vs = impl.VirtualServer(method="LEASTBANDWIDTH", clock=clock)
        for i in range(16384):
            vs.bind(f"S{i}")
        select, record, finish, advance = vs.select, vs.record, vs.finish, clock.advance
        for _ in range(k):
            advance(1.0)
            for _ in range(20):
                name = select()
                record(name, 1500, 2)
                finish(name)
        return 1
    if case == "replay_LC_n64":
        from leastload.sim.replay import replay
        from leastload.sim.workloads import make_trace

        trace = make_trace(64, REPLAY_REQUESTS, rate=50_000.0, seed=0, degrading=1)
        # the same setup for k = 1 and 2: two vservers with the trace's services bound, k of them replayed
        runs = []
        for _ in range(2):
            clock = impl.ManualClock(0.0)
            vs = impl.VirtualServer(method="LEASTCONNECTION", clock=clock)
            for s, name in enumerate(trace.services):
                if trace.initially_bound[s]:
                    vs.bind(name, int(trace.weights[s]))
            runs.append((vs, clock))
        for vs, clock in runs[:k]:
            res = replay(vs, clock, trace)
            assert int(res.completed.sum()) == len(trace)
        return len(trace)
    raise SystemExit(f"unknown case: {case}")


# ---- measuring ----------------------------------------------------------------

def valgrind_version():
    try:
        out = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"valgrind is needed (e.g. `apt-get install -y valgrind`): {exc}") from None
    return out.strip()


def python_version():
    return platform.python_version()


def _total_instructions(case, k, workdir):
    """Instructions of one driver run (the whole process), and the driver's operations per repetition."""
    out = Path(workdir) / f"{case}.{k}.cg"
    # str hashes (hence dict and set probing) the same every run; no BLAS threads, whose
    # spin-waiting numpy's import would otherwise add to the count (millions, never the same)
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    env.pop("PYTHONDEVMODE", None)
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
           sys.executable, str(Path(__file__).resolve()), "--driver", case, str(k)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    if p.returncode != 0:
        raise RuntimeError(f"{case} (k={k}) failed under valgrind (exit {p.returncode}):\n{p.stderr[-3000:]}")
    m = re.search(r"^summary:\s+(\d+)", out.read_text(), re.M)
    if not m:
        raise RuntimeError(f"no summary line in cachegrind's output for {case} (k={k})")
    return int(m.group(1)), int(p.stdout.strip().splitlines()[-1])


def measure(names, jobs):
    """{case: instructions per operation}, the runs spread over `jobs` processes."""
    with tempfile.TemporaryDirectory(prefix="ll-instructions-") as workdir:
        runs = [(c, k) for c in names for k in (CASES[c][1], 2 * CASES[c][1])]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            totals = dict(zip(runs, pool.map(lambda r: _total_instructions(*r, workdir), runs)))
    per_op = {}
    for c in names:
        k = CASES[c][1]
        (once, ops), (twice, _) = totals[(c, k)], totals[(c, 2 * k)]
        per_op[c] = round((twice - once) / (k * ops), 1)
    return per_op


# ---- baseline, table ----------------------------------------------------------

def load_baseline():
    if not BASELINE.exists():
        return None
    return json.loads(BASELINE.read_text())


def write_baseline(per_op, valgrind, python):
    data = {
        "about": "instructions per operation, valgrind --tool=cachegrind; benchmarks/instructions.py --update rewrites it",
        "valgrind": valgrind,
        "python": python,
        "machine": platform.machine(),
        "cases": {c: {"instructions_per_op": per_op[c], "operation": CASES[c][0]} for c in per_op},
    }
    BASELINE.write_text(json.dumps(data, indent=2) + "\n")


def table(per_op, baseline):
    """Rows (case, baseline, now, change %) and the list of failures."""
    base_cases = (baseline or {}).get("cases", {})
    rows, failures = [], []
    for c, now in per_op.items():
        b = base_cases.get(c, {}).get("instructions_per_op")
        if b is None:
            rows.append((c, "-", f"{now:,.1f}", "not in baseline"))
            failures.append(f"{c}: not in the baseline (run --update)")
            continue
        change = 100.0 * (now - b) / b
        rows.append((c, f"{b:,.1f}", f"{now:,.1f}", f"{change:+.2f} %"))
        if change > THRESHOLD_PCT:
            failures.append(f"{c}: {b:,.1f} -> {now:,.1f} instructions per op ({change:+.2f} % > {THRESHOLD_PCT} %)")
    for c in base_cases:
        if c not in per_op:
            rows.append((c, f"{base_cases[c]['instructions_per_op']:,.1f}", "-", "no longer measured"))
    head = ("case", "baseline", "now", "change")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(4)]
    lines = ["  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w) for i, (v, w) in enumerate(zip(r, widths)))
             for r in [head] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines), failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help=f"exit 1 when a case grew by more than {THRESHOLD_PCT} %% over the baseline")
    mode.add_argument("--update", action="store_true", help="rewrite the baseline with this run's numbers")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="valgrind runs at a time")
    ap.add_argument("--driver", nargs=2, metavar=("CASE", "K"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.driver:
        print(_driver(args.driver[0], int(args.driver[1])))
        return 0

    valgrind, python = valgrind_version(), python_version()
    baseline = load_baseline()
    if args.check and baseline is None:
        print(f"no baseline at {BASELINE.name}: run with --update first", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    try:
        per_op = measure(list(CASES), max(1, args.jobs))
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    elapsed = time.monotonic() - t0

    if args.update:
        write_baseline(per_op, valgrind, python)
    text, failures = table(per_op, None if args.update else baseline)
    print(f"instructions per operation ({valgrind}, Python {python}; {elapsed:.0f} s)")
    print(text)
    if args.update:
        print(f"baseline written: {BASELINE}")
        return 0
    if baseline is not None:
        for what, now in (("valgrind", valgrind), ("python", python)):
            if baseline.get(what) != now:
                print(f"note: the baseline was made with {what} {baseline.get(what)}, this run uses {now}; "
                      f"compared anyway", file=sys.stderr)
    if args.check:
        if failures:
            print(f"\nFAIL: more instructions than the baseline allows (+{THRESHOLD_PCT} %):", file=sys.stderr)
            for f in failures:
                print(f"  {f}", file=sys.stderr)
            print("If the change is intended, run `python -m benchmarks.instructions --update` and commit "
                  "the baseline with it.", file=sys.stderr)
            return 1
        print(f"\nOK: no case more than {THRESHOLD_PCT} % over the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
