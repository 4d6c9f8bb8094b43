"""The worst single select() when every second rolls: python tools/worst_select.py [N] [METHOD ...]

N services (default 10^6) bound on the C engine, a few hundred requests a
second (select, record 1,500 bytes, finish) for 30 virtual seconds; the clock
moves one second between bursts, so the first select() of every burst pays
the second boundary. Prints the worst and the mean select() per method.
"""
import random
import sys
import time

from leastload._native import ManualClock, VirtualServer


def worst_select(n, method, seconds=30, per_second=200):
    clock = ManualClock(0.0)
    vs = VirtualServer(method, clock=clock)
    vs.reserve(n)
    for i in range(n):
        vs.bind(f"s{i}")
    worst = total = 0.0
    for _ in range(seconds):
        for _ in range(per_second):
            t0 = time.perf_counter()
            name = vs.select()
            dt = time.perf_counter() - t0
            worst, total = max(worst, dt), total + dt
            vs.record(name, bytes=1500, packets=2)
            vs.finish(name, ttfb=random.choice((0.001, 0.002)))
        clock.advance(1.0)
    return worst, total / (seconds * per_second)


def main(argv):
    n = int(argv[0]) if argv else 10**6
    methods = argv[1:] or ["LEASTBANDWIDTH", "LEASTPACKETS", "LEASTCONNECTION"]
    for method in methods:
        worst, mean = worst_select(n, method)
        print(f"n={n:,} {method}: worst select {worst * 1e3:.3f} ms, mean {mean * 1e6:.2f} us")


if __name__ == "__main__":
    main(sys.argv[1:])
