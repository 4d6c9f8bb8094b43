"""Simulation on a virtual clock: a steady request rate, events at given times,
requests per service per second out.

    from leastload import VirtualServer, ManualClock
    from leastload.sim.simulate import simulate
    clock = ManualClock(0.0)
    vs = VirtualServer("ROUNDROBIN", clock=clock)
    for name in ("S1", "S2"):
        vs.bind(name)
    sim = simulate(vs, clock, rate=240, duration=4, events=[
        (0, "set", {"new_service_request": 10}), (0, "bind", "S3"),
        (1, "set", {"new_service_request": 20}),
    ])
    sim.at(1)  # {"S1": 110, "S2": 110, "S3": 20}

Requests arrive evenly: request i of second s at s + i / rate. Each one is
`select()`ed, charged `bytes_per_request` / `packets_per_request` with
`record()`, and finished after `request_duration` seconds (0: at once,
before the next request) with the service's TTFB and status 200.
"""

import heapq
import itertools
import math
from dataclasses import dataclass

import numpy as np

from .._errors import NoServiceAvailable


@dataclass(frozen=True)
class Simulation:
    """Requests per service per second. Row i is second `start + i`."""

    services: tuple        # every service that was bound at some point, in first-bind order
    start: int
    counts: np.ndarray     # int64 [seconds, services]
    dropped: np.ndarray    # int64 [seconds]: requests with no service available

    def at(self, second):
        """{service: requests} in that second (every service of the run; 0 if not bound then)."""
        if not self.start <= second < self.start + len(self.counts):
            raise ValueError(f"second must be in {self.start}..{self.start + len(self.counts) - 1}, got {second!r}")
        row = self.counts[second - self.start]
        return {name: int(c) for name, c in zip(self.services, row)}

    def of(self, name):
        """Requests per second of one service, as an array over the seconds."""
        return self.counts[:, self.services.index(name)]

    def table(self):
        """Requests per service per second as text, one row a second."""
        widths = [max(8, len(n) + 2) for n in self.services]
        head = "  t(s)" + "".join(f"{n:>{w}}" for n, w in zip(self.services, widths)) + "  dropped"
        rows = [f"{self.start + i:>6}" + "".join(f"{int(c):>{w}}" for c, w in zip(row, widths))
                + f"{int(self.dropped[i]):>9}" for i, row in enumerate(self.counts)]
        return "\n".join([head, *rows])


def _apply(vs, event):
    action = event[1]
    if callable(action):
        return action(vs)
    args = list(event[2:])
    kwargs = args.pop() if args and isinstance(args[-1], dict) else {}
    return getattr(vs, action)(*args, **kwargs)


def simulate(vs, clock, rate, duration, events=(), *, start=None, request_duration=0.0,
             bytes_per_request=1500, packets_per_request=2, ttfb=0.01):
    """Runs `duration` whole seconds of `rate` requests per second through `vs`.

    `clock` must be vs's ManualClock. `events` are `(time, callable)` or
    `(time, method_name, *args[, kwargs_dict])` applied to vs at that time,
    before a request due at the same time. `ttfb` is seconds, or a dict
    name -> seconds.
    """
    if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
        raise ValueError(f"rate must be a positive int (requests per second), got {rate!r}")
    if isinstance(duration, bool) or not isinstance(duration, int) or duration <= 0:
        raise ValueError(f"duration must be a positive int (seconds), got {duration!r}")
    if not (isinstance(request_duration, (int, float)) and 0 <= request_duration < math.inf):
        raise ValueError(f"request_duration must be a finite number of seconds >= 0, got {request_duration!r}")
    # the first whole second not before the clock: the clock never goes back
    first = math.ceil(clock.now()) if start is None else int(start)
    events = sorted(events, key=lambda e: e[0])
    seen = {n: None for n in vs.services}
    rows, dropped = [], np.zeros(duration, dtype=np.int64)
    pending = []  # (finish time, sequence, name)
    sequence = itertools.count()  # ties in finish time go in request order
    next_event = 0

    def run_due(limit):
        """Finishes and events due at or before `limit`, in time order (events first at ties)."""
        nonlocal next_event
        while True:
            te = events[next_event][0] if next_event < len(events) else math.inf
            tf = pending[0][0] if pending else math.inf
            if te <= limit and te <= tf:
                clock.set(max(float(te), clock.now()))
                _apply(vs, events[next_event])
                next_event += 1
                seen.update((n, None) for n in vs.services)
            elif tf <= limit:
                done, _, name = heapq.heappop(pending)
                _finish(vs, clock, done, name, ttfb)
            else:
                return

    for i in range(duration):
        second = first + i
        count = {}
        for j in range(rate):
            t = second + j / rate
            run_due(t)
            clock.set(t)
            try:
                name = vs.select()
            except NoServiceAvailable:
                dropped[i] += 1
                continue
            count[name] = count.get(name, 0) + 1
            if bytes_per_request or packets_per_request:
                vs.record(name, bytes=bytes_per_request, packets=packets_per_request)
            if request_duration > 0:
                heapq.heappush(pending, (t + request_duration, next(sequence), name))
            else:
                _finish(vs, clock, t, name, ttfb)
        rows.append(count)
    run_due(math.nextafter(first + duration, -math.inf))  # what falls inside the run's last second
    services = tuple(seen)
    counts = np.array([[row.get(n, 0) for n in services] for row in rows], dtype=np.int64)
    return Simulation(services, first, counts.reshape(duration, len(services)), dropped)


def _finish(vs, clock, t, name, ttfb):
    if name not in vs:
        return  # unbound meanwhile: the transaction is gone
    clock.set(t)
    vs.finish(name, ttfb=ttfb.get(name, 0.01) if isinstance(ttfb, dict) else ttfb, status=200)


def main(argv=None):
    """`python -m leastload simulate`: a steady rate through a fresh vserver, printed per second."""
    import argparse

    from .._errors import METHODS

    p = argparse.ArgumentParser(prog="python -m leastload simulate", description=main.__doc__)
    p.add_argument("--method", choices=METHODS, default="ROUNDROBIN")
    p.add_argument("--services", type=int, default=4, help="services S1..Sn bound at t = 0 (default 4)")
    p.add_argument("--rate", type=int, default=100, help="requests per second (default 100)")
    p.add_argument("--duration", type=int, default=60, help="seconds (default 60)")
    p.add_argument("--new", metavar="T", type=float, default=None,
                   help="bind one more service, 'new', at time T (it starts slow if slow start is on)")
    p.add_argument("--slow-start", nargs=3, metavar=("RATE", "UNIT", "INTERVAL"), default=None,
                   help="new_service_request, its unit (PER_SECOND or PERCENT) and the increment interval")
    p.add_argument("--every", type=int, default=1, help="print every Nth second (default 1)")
    p.add_argument("--implementation", choices=("c", "python"), default="c")
    args = p.parse_args(argv)
    if args.implementation == "python":
        from .. import reference as impl
    else:
        from .. import _native as impl
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer(args.method, clock=clock)
    for i in range(1, args.services + 1):
        vs.bind(f"S{i}")
    if args.slow_start:
        rate, unit, interval = args.slow_start
        vs.set(new_service_request=int(rate), new_service_request_unit=unit,
               new_service_request_increment_interval=int(interval))
    events = [] if args.new is None else [(args.new, "bind", "new")]
    sim = simulate(vs, clock, rate=args.rate, duration=args.duration, events=events)
    lines = sim.table().splitlines()
    print("\n".join([lines[0], *lines[1::max(1, args.every)]]))
    if getattr(vs, "slow_start_exits", None):
        for t, name, why in vs.slow_start_exits:
            print(f"t={t:g}: {name} left slow start: {why}")
    return 0
