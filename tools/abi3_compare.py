"""One measurement round of the installed leastload, for the abi3 comparison (journal/performance-2026.md).

Prints one JSON line: select() (+ finish()) ns per call with the default
clock and with a ManualClock, and replay() ns per request. Run it in two
venvs (say a version-specific build and an abi3 build) in turn, a few
rounds each, and compare the minimums. Needs the sim extra (numpy).
"""
import json
import time
import timeit

import leastload.engine._engine as engine
from leastload.engine.native import ManualClock, VirtualServer
from leastload.sim.replay import replay
from leastload.sim.workloads import make_trace

SERVICES = 64


def bound(method, clock):
    vs = VirtualServer(method, clock=clock)
    for i in range(SERVICES):
        vs.bind(f"s{i}")
    return vs


def per_call(fn, number, repeat=7):
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e9


def main():
    out = {"module": engine.__file__.rsplit("/", 1)[-1]}
    for label, clock in (("default_clock", None), ("manual_clock", ManualClock(0.0))):
        vs = bound("LEASTCONNECTION", clock)
        out[f"select_finish_{label}_ns"] = per_call(lambda vs=vs: vs.finish(vs.select()), 100_000)
    out["select_roundrobin_manual_clock_ns"] = per_call(bound("ROUNDROBIN", ManualClock(0.0)).select, 200_000)
    trace = make_trace(n_services=SERVICES, n_requests=200_000, rate=20_000.0, seed=1)
    best = float("inf")
    for _ in range(5):
        clock = ManualClock(0.0)
        vs = VirtualServer("LEASTRESPONSETIME", clock=clock)
        started = time.perf_counter()
        replay(vs, clock, trace)
        best = min(best, time.perf_counter() - started)
    out["replay_ns_per_request"] = best / len(trace) * 1e9
    print(json.dumps(out))


if __name__ == "__main__":
    main()
