"""Simulation on a virtual clock: a steady request rate, events at given times,
requests per service per second out.

    from leastload import VirtualServer, ManualClock
    from leastload.sim.simulate import simulate  # or leastload.sim.steady
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..engine.errors import NoServiceAvailable
from .keys import KeySequence


@dataclass(frozen=True)
class Simulation:
    """Requests per service per second. Row i is second `start + i`."""

    services: tuple[str, ...]  # every service that was bound at some point, in first-bind order
    start: int
    counts: np.ndarray     # int64 [seconds, services]
    dropped: np.ndarray    # int64 [seconds]: requests with no service available
    picks: Optional[np.ndarray] = None  # with keys: int32 [requests], the service index of each, -1 dropped

    def at(self, second: int) -> dict[str, int]:
        """{service: requests} in that second (every service of the run; 0 if not bound then)."""
        if not self.start <= second < self.start + len(self.counts):
            raise ValueError(f"second must be in {self.start}..{self.start + len(self.counts) - 1}, got {second!r}")
        row = self.counts[second - self.start]
        return {name: int(c) for name, c in zip(self.services, row)}

    def of(self, name: str) -> np.ndarray:
        """Requests per second of one service, as an array over the seconds."""
        return self.counts[:, self.services.index(name)]

    def table(self) -> str:
        """Requests per service per second as text, one row a second."""
        widths = [max(8, len(n) + 2) for n in self.services]
        head = "  t(s)" + "".join(f"{n:>{w}}" for n, w in zip(self.services, widths)) + "  dropped"
        rows = [f"{self.start + i:>6}" + "".join(f"{int(c):>{w}}" for c, w in zip(row, widths))
                + f"{int(self.dropped[i]):>9}" for i, row in enumerate(self.counts)]
        return "\n".join([head, *rows])


def _apply(vs: Any, event: tuple[Any, ...], weights: Mapping[str, int]) -> Any:
    action = event[1]
    if callable(action):
        return action(vs)
    args = list(event[2:])
    kwargs = args.pop() if args and isinstance(args[-1], dict) else {}
    if action == "bind" and "weight" not in kwargs and len(args) == 1 and args[0] in weights:
        kwargs = {**kwargs, "weight": weights[args[0]]}
    return getattr(vs, action)(*args, **kwargs)


def _per_service(arg: str, value: Any, check: Callable[[str, Any], None]) -> Any:
    """A number, or a dict name -> number; every value checked now, before the run changes anything."""
    if isinstance(value, Mapping):
        for name, v in value.items():
            check(f"{arg}[{name!r}]", v)
        return dict(value)
    check(arg, value)
    return value


def _check_seconds(arg: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
        raise ValueError(f"{arg} must be a finite number of seconds >= 0, got {v!r}")


def _check_ttfb(arg: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 3600:
        raise ValueError(f"{arg} must be a number of seconds in 0..3600, got {v!r}")


def _check_count(arg: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{arg} must be an int >= 0, got {v!r}")


def _check_weight(arg: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 100:
        raise ValueError(f"{arg} must be an int in 1..100, got {v!r}")


def _of(value: Any, name: str, default: Any = None) -> Any:
    if isinstance(value, dict):
        return value.get(name, default)
    return value


def simulate(vs: Any, clock: Any, rate: int, duration: int, events: Iterable[tuple[Any, ...]] = (), *,
             start: Optional[int] = None, request_duration: Any = 0.0, bytes_per_request: Any = 1500,
             packets_per_request: Any = 2, ttfb: Any = 0.01, weights: Optional[Mapping[str, int]] = None,
             on_second: Optional[Callable[[int], None]] = None,
             keys: Optional[KeySequence] = None) -> Simulation:
    """Runs `duration` whole seconds of `rate` requests per second through `vs`.

    `clock` must be vs's ManualClock. `events` are `(time, callable)` or
    `(time, method_name, *args[, kwargs_dict])` applied to vs at that time,
    before a request due at the same time; as many as needed.

    Per service, as one value for all or a dict name -> value (a name
    missing from the dict takes the default): `ttfb` (seconds, default
    0.01), `request_duration` (seconds a request stays open, default 0: it
    finishes before the next one), `bytes_per_request` and
    `packets_per_request` (recorded when the request is dispatched; default
    1500 and 2). `weights` (a dict name -> weight) re-weights the services
    bound now and weighs those a "bind" event binds without a weight of its
    own. `on_second(i)` is called after each second (a progress bar).
    `keys`: the request keys of a hash method, request i of second s taking
    `keys[s * rate + i]` (at least rate x duration of them); the result's
    `picks` then says which service took each request.
    Everything is checked before anything changes.
    """
    if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
        raise ValueError(f"rate must be a positive int (requests per second), got {rate!r}")
    if isinstance(duration, bool) or not isinstance(duration, int) or duration <= 0:
        raise ValueError(f"duration must be a positive int (seconds), got {duration!r}")
    request_duration = _per_service("request_duration", request_duration, _check_seconds)
    ttfb = _per_service("ttfb", ttfb, _check_ttfb)
    bytes_per_request = _per_service("bytes_per_request", bytes_per_request, _check_count)
    packets_per_request = _per_service("packets_per_request", packets_per_request, _check_count)
    weights = _per_service("weights", dict(weights or {}), _check_weight)
    if keys is not None and len(keys) < rate * duration:
        raise ValueError(f"keys must give a key to each of the rate x duration = {rate * duration} requests, "
                         f"got {len(keys)}")
    picks = None if keys is None else np.full(rate * duration, -1, dtype=np.int32)
    for name, weight in weights.items():
        if name in vs and vs.weight(name) != weight:
            vs.set_weight(name, weight)
    # the first whole second not before the clock: the clock never goes back
    first = math.ceil(clock.now()) if start is None else int(start)
    events = sorted(events, key=lambda e: e[0])
    seen = {n: None for n in vs.services}
    column: dict[str, int] = {}  # service -> its index in the result (first-seen order, as `seen`)
    rows: list[dict[str, int]] = []
    dropped = np.zeros(duration, dtype=np.int64)
    pending: list[tuple[float, int, str, int]] = []  # (finish time, sequence, name, binding)
    binding: dict[str, int] = {}  # bumped while a service is unbound: its open transactions are gone
    sequence = itertools.count()  # ties in finish time go in request order
    next_event = 0

    def run_due(limit: float) -> None:
        """Finishes and events due at or before `limit`, in time order (events first at ties)."""
        nonlocal next_event
        while True:
            te = events[next_event][0] if next_event < len(events) else math.inf
            tf = pending[0][0] if pending else math.inf
            if te <= limit and te <= tf:
                clock.set(max(float(te), clock.now()))
                _apply(vs, events[next_event], weights)
                next_event += 1
                seen.update((n, None) for n in vs.services)
                for n in seen:
                    if n not in vs:
                        binding[n] = binding.get(n, 0) + 1
            elif tf <= limit:
                done, _, name, bound_as = heapq.heappop(pending)
                if binding.get(name, 0) == bound_as:  # else unbound (and maybe bound again) since
                    _finish(vs, clock, done, name, ttfb)
            else:
                return

    for i in range(duration):
        second = first + i
        count: dict[str, int] = {}
        for j in range(rate):
            t = second + j / rate
            run_due(t)
            clock.set(t)
            try:
                name = vs.select() if keys is None else vs.select(key=keys[i * rate + j])
            except NoServiceAvailable:
                dropped[i] += 1
                continue
            count[name] = count.get(name, 0) + 1
            if picks is not None:
                picks[i * rate + j] = column.setdefault(name, len(column))
            nbytes, npackets = _of(bytes_per_request, name, 1500), _of(packets_per_request, name, 2)
            if nbytes or npackets:
                vs.record(name, bytes=nbytes, packets=npackets)
            open_for = _of(request_duration, name, 0.0)
            if open_for > 0:
                heapq.heappush(pending, (t + open_for, next(sequence), name, binding.get(name, 0)))
            else:
                _finish(vs, clock, t, name, ttfb)
        rows.append(count)
        if on_second is not None:
            on_second(i + 1)
    run_due(math.nextafter(first + duration, -math.inf))  # what falls inside the run's last second
    services = tuple(seen)
    counts = np.array([[row.get(n, 0) for n in services] for row in rows], dtype=np.int64)
    if picks is not None:  # columns in pick order -> the result's service order
        order = np.array([services.index(n) for n in column] + [-1], dtype=np.int32)
        picks = order[picks]
    return Simulation(services, first, counts.reshape(duration, len(services)), dropped, picks)


def _finish(vs: Any, clock: Any, t: float, name: str, ttfb: Any) -> None:
    if name not in vs:
        return  # unbound meanwhile: the transaction is gone
    clock.set(t)
    vs.finish(name, ttfb=_of(ttfb, name, 0.01), status=200)
