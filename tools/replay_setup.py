"""What replay() costs around its C run: a 16-request trace replayed again and again
on one C vserver whose services do not change, at several numbers of services.

    python tools/replay_setup.py [--sizes 3,1024,16384] [--repeats 200]

Per replay() call, in us (time.perf_counter_ns, garbage collector off; min and
median over the repeats): "unchanged" replays on a vserver left as the last
replay left it; "rebound" first unbinds and binds one service again (outside
the timing), so the replay must rebuild its name -> slot mapping. The 16
requests themselves take about 1 us in C: the rest is the setup (the trace's
own copy, validated anew, the mapping, the binding of missing services, the
result arrays).
"""
import argparse
import gc
import os
import statistics
import time

os.environ.setdefault("LEASTLOAD_IMPLEMENTATION", "c")

import leastload.engine.native as c  # noqa: E402
from leastload.sim.replay import replay  # noqa: E402
from leastload.sim.workloads import make_trace  # noqa: E402


def per_replay_us(n, repeats, rebind):
    trace = make_trace(n, 16, rate=1000.0, seed=0)
    clock = c.ManualClock(0.0)
    vs = c.VirtualServer("LEASTCONNECTION", clock=clock)
    replay(vs, clock, trace)  # binds every service once
    runs = []
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            if rebind:
                vs.unbind("S0")
                vs.bind("S0")
            t = time.perf_counter_ns()
            replay(vs, clock, trace)
            runs.append((time.perf_counter_ns() - t) / 1e3)
    finally:
        if was:
            gc.enable()
    return min(runs), statistics.median(runs)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="3,1024,16384", help="numbers of services, comma-separated")
    p.add_argument("--repeats", type=int, default=200)
    args = p.parse_args()
    print(f"{'services':>9} {'unchanged min':>14} {'median':>8} {'rebound min':>12} {'median':>8}   (us per replay)")
    for n in (int(s) for s in args.sizes.split(",")):
        same = per_replay_us(n, args.repeats, rebind=False)
        rebound = per_replay_us(n, args.repeats, rebind=True)
        print(f"{n:>9} {same[0]:>14.1f} {same[1]:>8.1f} {rebound[0]:>12.1f} {rebound[1]:>8.1f}")


if __name__ == "__main__":
    main()
