# cython: annotation_typing=False
"""What the proxy counts (per backend, and its own answers) and the time it shows: small
types with no I/O, below every part that counts (_exchange, _metrics) or shows (_proxy)."""

import collections
import datetime
import time
from typing import Counter, Dict, Iterable


# upper bounds (seconds) of the time-to-first-byte histogram's buckets (Prometheus' defaults)
TTFB_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BOUNDS, _N_BOUNDS = TTFB_BUCKETS, len(TTFB_BUCKETS)  # typed in _stats.pxd


class BackendCounters:
    """What the proxy saw for one backend."""

    __slots__ = ("requests", "retries", "failures", "stale", "by_class", "bytes_in", "bytes_out", "packets",
                 "ttfb_buckets", "ttfb_sum")

    def __init__(self) -> None:
        self.requests = 0   # attempts sent to it (a retry elsewhere counts there)
        self.retries = 0    # requests that failed here and went on to another backend
        self.failures = 0   # refused, reset, timed out, garbled, or a 5xx answer
        self.stale = 0      # pooled connections found closed, the request resent on a new one
        self.by_class = [0] * 6  # answers by status class: [1] 1xx ... [5] 5xx
        self.bytes_in = 0   # request bytes written to it
        self.bytes_out = 0  # response bytes read from it
        self.packets = 0    # TCP segments both ways on its connections (TCP_INFO), as the engine was told
        # first response bytes by time: [i] counts TTFBs <= TTFB_BUCKETS[i] and above the one
        # before; the last slot those above every bound (not cumulative: the exporter sums)
        self.ttfb_buckets = [0] * (len(TTFB_BUCKETS) + 1)
        self.ttfb_sum = 0.0

    def add_ttfb(self, seconds: float) -> None:
        self.ttfb_sum += seconds
        # bisect_left, from the bottom: most answers fall in the first buckets (a C loop compiled,
        # each bound read as a C double: comparing the tuple's floats with `seconds` as objects
        # would make a float object of `seconds` at every step)
        i, bounds = 0, _BOUNDS
        while i < _N_BOUNDS:
            bound = bounds[i]
            if not bound < seconds:  # (as bisect_left compares)
                break
            i += 1
        self.ttfb_buckets[i] += 1

    def as_dict(self) -> Dict[str, int]:
        counts = {"requests": self.requests, "retries": self.retries, "failures": self.failures,
                  "stale": self.stale}
        counts.update({f"{k}xx": self.by_class[k] for k in range(1, 6)})
        return counts


class Stats:
    """Counters per backend, and the answers the proxy wrote itself (502/503/504)."""

    def __init__(self, names: Iterable[str]) -> None:
        self.backends = {name: BackendCounters() for name in names}
        self.answered_by_proxy: "Counter[int]" = collections.Counter()
        self.no_service = 0  # requests answered 503 because the engine had no backend to pick
        self.linger_resets = 0  # lingering closes reset: the client sent past the byte bound
        self.tunnels = 0         # upgrades a backend accepted (101): tunnels opened (_tunnel.py)
        self.tunnels_open = 0    # of which still open
        self.tunnel_timeouts = 0  # tunnels ended by tunnel_timeout (no byte either way)

    def of(self, name: str) -> BackendCounters:
        counters = self.backends.get(name)
        if counters is None:
            counters = self.backends[name] = BackendCounters()
        return counters


def wall_time(when: float) -> str:
    """A time of the engine's monotonic clock as wall-clock ISO 8601 (local time, with its offset)."""
    wall = when + time.time() - time.monotonic()
    return datetime.datetime.fromtimestamp(wall, datetime.timezone.utc).astimezone().isoformat(timespec="milliseconds")
