"""The worst single select() when every second rolls: python tools/worst_select.py [N] [METHOD ...]

N services (default 10^6) bound on the C engine, 200 requests a second
(select, record 1,500 bytes, finish) for 30 virtual seconds; the clock moves
one second between bursts, so the first select() of every burst pays the
second boundary. `python -m leastload bench` reports the same at 10^5 and
10^6 services (10^4 with --quick).
"""
import sys

from leastload.bench import cases
from leastload.engine import native as _native


def main(argv):
    n = int(argv[0]) if argv else 10**6
    methods = argv[1:] or ["LEASTBANDWIDTH", "LEASTPACKETS", "LEASTCONNECTION"]
    for method in methods:
        worst, mean = cases.worst_select(_native, n, method)
        print(f"n={n:,} {method}: worst select {worst * 1e3:.3f} ms, mean {mean * 1e6:.2f} us")


if __name__ == "__main__":
    main(sys.argv[1:])
