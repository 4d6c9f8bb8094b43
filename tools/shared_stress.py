"""Many processes on one shared vserver, for as long as asked: the long run behind the
shared segment's tests (tests/engine/test_shared.py runs seconds of the same in CI).

Usage:
    python tools/shared_stress.py [--runs N] [--processes P] [--rounds R] [--start spawn|fork]
                                  [--mix tight|mixed] [--clock] [--seconds S]

Each run: this process creates a LEASTBANDWIDTH vserver in shared memory (a fresh name)
with services S0..S7 and keeps its handle; P processes started by `--start` open it by
name (each with its own ManualClock(0.0) when --clock is given) and run R rounds each.
  tight: s = vs.select(); vs.record(s, bytes=7); vs.finish(s)   (three calls a round)
  mixed: the tight round, and now and then an acquire() ended by fail(), a bind, an
         unbind, a drain, a set_state or a set_weight of a random service, and a
         close-and-open-again of the handle (each process ends what it has open first)
A run fails when a process does not exit 0 (a signal shows as a negative code) or when,
after every process has left, a service still counts an open transaction. Runs go on
until N runs or S seconds, whichever comes first; the summary prints calls made and runs
failed. Exit status 1 if any run failed.

The issue scenario, 200 times:   python tools/shared_stress.py --runs 200
A long mixed run:                python tools/shared_stress.py --runs 100000 --mix mixed \\
                                     --rounds 200000 --seconds 3600
"""
import argparse
import gc
import multiprocessing
import os
import random
import sys
import time
import uuid

import leastload

SERVICES = [f"S{i}" for i in range(8)]
CALLS_PER_ROUND = 3


def _tight(vs, rounds, rng):
    for _ in range(rounds):
        s = vs.select()
        vs.record(s, bytes=7)
        vs.finish(s)
    return vs, rounds * CALLS_PER_ROUND


def _mixed(vs, rounds, rng, reopen):
    calls = 0
    for i in range(rounds):
        try:
            s = vs.select()
            vs.record(s, bytes=7)
            vs.finish(s)
            calls += 3
        except (leastload.NoServiceAvailable, leastload.UnknownService, ValueError):
            calls += 1  # another process unbound it, or took every service down
        r = rng.random()
        name = rng.choice(SERVICES)
        try:
            if r < 0.02:
                with vs.acquire() as tx:
                    tx.fail()
            elif r < 0.03:
                vs.bind(name, weight=rng.randrange(1, 5))
            elif r < 0.04:
                vs.unbind(name)
            elif r < 0.045:
                vs.drain(name)
            elif r < 0.06:
                vs.set_state(name, rng.choice(("UP", "UP", "DOWN", "OUT_OF_SERVICE")))
            elif r < 0.065:
                vs.set_weight(name, rng.randrange(1, 5))
            elif r < 0.067:
                vs = reopen(vs)
            calls += 1
        except (leastload.NoServiceAvailable, leastload.UnknownService, leastload.DuplicateService,
                leastload.TransactionEnded, ValueError):
            # ValueError: a tight round's finish(name) of a service that another process
            # unbound and bound again meanwhile ended this acquire's transaction instead
            # (by name, a transaction is any of the service's)
            calls += 1
    return vs, calls


def _process(name, rounds, mix, use_clock, seed, calls_out):
    kw = {"clock": leastload.ManualClock(0.0)} if use_clock else {}

    def reopen(vs):
        del vs
        gc.collect()
        return leastload.VirtualServer("LEASTBANDWIDTH", shared=name, **kw)

    vs = leastload.VirtualServer("LEASTBANDWIDTH", shared=name, **kw)
    rng = random.Random(seed)
    if mix == "tight":
        vs, calls = _tight(vs, rounds, rng)
    else:
        vs, calls = _mixed(vs, rounds, rng, reopen)
    with calls_out.get_lock():
        calls_out.value += calls


def one_run(ctx, processes, rounds, mix, use_clock, seed, calls_out):
    name = "stress-" + uuid.uuid4().hex[:12]
    vs = leastload.VirtualServer("LEASTBANDWIDTH", shared=name)
    try:
        for s in SERVICES:
            vs.bind(s)
        procs = [ctx.Process(target=_process, args=(name, rounds, mix, use_clock, seed + i, calls_out))
                 for i in range(processes)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        codes = [p.exitcode for p in procs]
        open_left = {s: vs.active(s) for s in vs.services if vs.active(s)}
        return codes, open_left
    finally:
        del vs
        leastload.unlink_shared(name)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=20_000)
    ap.add_argument("--start", choices=("spawn", "fork", "forkserver"), default="spawn")
    ap.add_argument("--mix", choices=("tight", "mixed"), default="tight")
    ap.add_argument("--clock", action="store_true", help="each process with its own ManualClock(0.0)")
    ap.add_argument("--seconds", type=float, default=float("inf"), help="stop starting runs after this long")
    args = ap.parse_args(argv)
    ctx = multiprocessing.get_context(args.start)
    calls = ctx.Value("Q", 0)
    failed = 0
    started = time.monotonic()
    run = 0
    while run < args.runs and time.monotonic() - started < args.seconds:
        codes, open_left = one_run(ctx, args.processes, args.rounds, args.mix, args.clock, run * 1000, calls)
        if any(codes) or open_left:
            failed += 1
            print(f"run {run}: exit codes {codes}, open transactions left {open_left}", flush=True)
        run += 1
    took = time.monotonic() - started
    print(f"{run} runs ({args.start}, {args.processes} processes, {args.rounds} rounds each, {args.mix}),"
          f" {calls.value} calls in {took:.0f} s ({calls.value / took:,.0f} a second): {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
