"""The replica study's simulation: R proxy replicas, each with its own engine, against
one engine for all (the study itself, its table and chart: leastload.sim.replicas).

A discrete-event simulation on a virtual clock. K backends (`Model.backends`),
each a FIFO queue in front of `servers` parallel servers with exponential
service times; Poisson arrivals from `clients` clients whose request counts
follow a Zipf law (`client_skew`). An L4 spreader sends each request to one of
R replicas: `random` (a fresh draw a request) or `client-hash` (a hash of the
client: a heavy client loads one replica). Each replica has its own engine
(`mode="replicas"`), the same method and the same backends bound; it picks
with `select()`, the request joins that backend's queue, and the same replica
finishes it when the backend answers (TTFB = the response time, status 200,
the response's bytes and packets recorded). `mode="global"` is the baseline:
every replica calls one engine (what `leastload proxy --workers N` gives with
its shared engine), so the spreader changes nothing.

With `reports=True` each response carries the backend's utilization at that
moment (busy servers / servers, as an ORCA `cpu_utilization`) and its
completions in the last whole second (`rps_fractional`); the replica that
receives it calls `report_utilization()` with `weights_from_utilization` on
(the engine's weights become the backends' capacity estimates, qps /
utilization), or, under CUSTOMLOAD, `report_load()` with the utilization in
percent (threshold 101: a report never makes a backend ineligible).

Scenario `slow-start`: backend `Model.new_backend` is bound to every engine at
`bind_at` with PER_SECOND slow start in manual mode (`new_service_request` =
`ramp_rate`, increment interval 0); its overshoot is the requests it got in
`[bind_at, bind_at + ramp_seconds)` over `ramp_rate x ramp_seconds`, what one
engine allows it: 1 for one engine, about R for R replicas each applying the cap.

Every random stream (arrivals, clients, service times, sizes, the spreader)
is its own child of `numpy.random.SeedSequence(seed)`, so the requests are the
same whatever the method, the mode or R, and the global engine's picks do not
depend on R: with R = 1 the replicas make exactly the global engine's picks.

Cells (`run_cell`) are module-level, take plain data and run on any
`concurrent.futures.Executor` through `leastload.sim.sweep.run_cells`.
"""
from __future__ import annotations

import heapq
import importlib
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..engine.errors import NoServiceAvailable

METHODS = ("LEASTCONNECTION", "ROUNDROBIN", "LEASTRESPONSETIME", "LEASTBANDWIDTH", "CUSTOMLOAD")
MODES = ("replicas", "global")
SPREADERS = ("random", "client-hash")
SCENARIOS = ("steady", "slow-start")
IMPLEMENTATIONS = ("c", "python")
MAX_REPLICAS = 1024
BYTES_PER_PACKET = 1448
REQUEST_BYTES = 400  # recorded when the request is sent; the response's bytes when it comes back, as the proxy does
CUSTOMLOAD_THRESHOLD = 101  # percent: above any utilization, so a report never excludes a backend
COLUMNS = ("scenario", "method", "reports", "mode", "replicas", "spreader", "seed", "backend", "requests", "share",
           "offered", "active_error", "error", "p50", "p99", "overshoot", "dropped", "replica_max_share")


def _check_int(arg: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{arg} must be an int in {low}..{high}, got {value!r}")


def _check_positive(arg: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{arg} must be a finite number above 0, got {value!r}")


def _check_choice(arg: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{arg} must be one of {', '.join(choices)}, got {value!r}")


@dataclass(frozen=True)
class Backend:
    """One backend: `servers` parallel servers, exponential service times of mean `mean_service` seconds."""

    name: str
    servers: int
    mean_service: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty str, got {self.name!r}")
        _check_int("servers", self.servers, 1, 10_000)
        _check_positive("mean_service", self.mean_service)

    @property
    def capacity(self) -> float:
        """Requests a second it can serve."""
        return self.servers / self.mean_service


def _default_backends() -> Tuple[Backend, ...]:
    # three alike and one at half their capacity (service twice as long): the split shows
    # whether a method notices a slower backend
    return (Backend("b1", 4, 0.04), Backend("b2", 4, 0.04), Backend("b3", 4, 0.04), Backend("b4", 4, 0.08))


@dataclass(frozen=True)
class Model:
    """What is simulated. The arrival rate is `load` x the backends' total capacity."""

    backends: Tuple[Backend, ...] = field(default_factory=_default_backends)
    load: float = 0.8
    clients: int = 64
    client_skew: float = 1.1
    mean_bytes: int = 16_000       # response sizes: exponential, whatever the backend
    duration: int = 60             # seconds of arrivals (steady)
    warmup: int = 15               # seconds not measured (steady): the utilization weights' 10 s blackout
    new_backend: Backend = Backend("b5", 4, 0.04)
    bind_at: int = 10              # slow-start: when new_backend is bound
    ramp_rate: int = 2             # slow-start: new_service_request, PER_SECOND
    ramp_seconds: int = 10         # slow-start: the seconds measured after bind_at

    def __post_init__(self) -> None:
        if not isinstance(self.backends, tuple) or not self.backends or \
                not all(isinstance(b, Backend) for b in self.backends):
            raise TypeError(f"backends must be a non-empty tuple of Backend, got {self.backends!r}")
        names = [b.name for b in (*self.backends, self.new_backend)]
        if len(set(names)) != len(names):
            raise ValueError(f"backends and new_backend must have distinct names, got {names!r}")
        _check_positive("load", self.load)
        _check_int("clients", self.clients, 1, 10**6)
        if isinstance(self.client_skew, bool) or not isinstance(self.client_skew, (int, float)) or \
                not (math.isfinite(self.client_skew) and self.client_skew >= 0):
            raise ValueError(f"client_skew must be a finite number >= 0, got {self.client_skew!r}")
        _check_int("mean_bytes", self.mean_bytes, 1, 10**12)
        _check_int("duration", self.duration, 1, 86_400)
        _check_int("warmup", self.warmup, 0, self.duration - 1)
        _check_int("bind_at", self.bind_at, 0, 86_400)
        _check_int("ramp_rate", self.ramp_rate, 1, 10**6)
        _check_int("ramp_seconds", self.ramp_seconds, 1, 86_400)

    @property
    def rate(self) -> float:
        """Arrivals a second."""
        return self.load * sum(b.capacity for b in self.backends)

    def window(self, scenario: str) -> Tuple[float, float]:
        """The measured span of a run: after the warm-up (steady), the ramp (slow-start)."""
        if scenario == "steady":
            return float(self.warmup), float(self.duration)
        return float(self.bind_at), float(self.bind_at + self.ramp_seconds)

    def arrivals_end(self, scenario: str) -> float:
        return self.window(scenario)[1]


@dataclass
class Run:
    """One simulation: each request's replica, backend (-1: none available) and response time."""

    backends: Tuple[str, ...]
    arrival: np.ndarray      # float64 [requests]
    client: np.ndarray       # int64 [requests]
    replica: np.ndarray      # int64 [requests]
    picks: np.ndarray        # int64 [requests], an index into backends, -1 dropped
    response: np.ndarray     # float64 [requests], NaN for a dropped one
    work: np.ndarray         # float64 [requests]: service time / the backend's mean_service
    error_sum: List[float]   # per backend: sum over measured picks of |view - true in-flight|
    inflight_sum: List[float]  # per backend: sum over measured picks of the true in-flight count


def _streams(seed: int) -> List[np.random.Generator]:
    # arrivals, clients, service times, sizes, spreader: one stream each, so that
    # changing one thing (R, the spreader) leaves the other draws as they were
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5)]


def _client_hash(client: int) -> int:
    """A fixed 64-bit mix of the client id (splitmix64's finalizer): as an L4 hash, not Python's hash()."""
    z = (client + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31)


def _requests(model: Model, scenario: str, replicas: int, spreader: str,
              seed: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Arrival times, the client and the replica of each, standard exponential service draws, response bytes."""
    arrivals, clients, service, sizes, spread = _streams(seed)
    end = model.arrivals_end(scenario)
    n = int(arrivals.poisson(model.rate * end))
    times = np.sort(arrivals.uniform(0.0, end, n))  # n uniform points: a Poisson process on [0, end)
    weights = 1.0 / np.arange(1, model.clients + 1) ** float(model.client_skew)
    client = clients.choice(model.clients, size=n, p=weights / weights.sum())
    work = service.standard_exponential(n)
    nbytes = np.maximum(1, np.rint(sizes.exponential(model.mean_bytes, n))).astype(np.int64)
    if spreader == "random":
        replica = spread.integers(0, replicas, n)
    else:
        table = np.array([_client_hash(c) % replicas for c in range(model.clients)], dtype=np.int64)
        replica = table[client]
    return times, client.astype(np.int64), replica.astype(np.int64), work, nbytes


def _engine_module(implementation: str) -> Any:
    if implementation == "c":
        return importlib.import_module("leastload.engine.native")
    return importlib.import_module("leastload.engine.reference")


def _check_cell(scenario: str, method: str, reports: bool, mode: str, replicas: int, spreader: str, seed: int,
                model: Model, implementation: str) -> None:
    _check_choice("scenario", scenario, SCENARIOS)
    _check_choice("method", method, METHODS)
    if not isinstance(reports, bool):
        raise TypeError(f"reports must be a bool, got {reports!r}")
    if method == "CUSTOMLOAD" and not reports:
        raise ValueError("reports must be True for method CUSTOMLOAD (the reports are its only load), got False")
    _check_choice("mode", mode, MODES)
    _check_int("replicas", replicas, 1, MAX_REPLICAS)
    _check_choice("spreader", spreader, SPREADERS)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if not isinstance(model, Model):
        raise TypeError(f"model must be a leastload.sim.replicas.Model, got {type(model).__name__}")
    _check_choice("implementation", implementation, IMPLEMENTATIONS)


class _Backends:
    """The backends' queues, and what each would report: its completions and its mean
    utilization (busy servers / servers, averaged over time) in the last whole second."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        k = len(backends)
        self.spec = list(backends)
        self.busy = [0] * k
        self.waiting: List[Deque[int]] = [deque() for _ in backends]
        self.second = 0
        self.done_now, self.done_last = [0] * k, [0] * k
        self.area = [0.0] * k            # integral of busy servers over time, up to changed[b]
        self.changed = [0.0] * k
        self.area_at_second = [0.0] * k  # the integral at the start of the current second
        self.util_last = [0.0] * k

    def _area(self, b: int, t: float) -> float:
        return self.area[b] + self.busy[b] * (t - self.changed[b])

    def roll(self, t: float) -> None:
        """Called with each event's time, before anything changes: a new second moves the
        counts of the one before into the reports."""
        second = int(t)
        if second == self.second:
            return
        for b, spec in enumerate(self.spec):
            # a second skipped without events: the integral was linear since the last change
            before = self.area_at_second[b] if second == self.second + 1 else self._area(b, second - 1)
            now = self._area(b, second)
            self.util_last[b] = (now - before) / spec.servers
            self.area_at_second[b] = now
        self.done_last = self.done_now if second == self.second + 1 else [0] * len(self.spec)
        self.done_now = [0] * len(self.spec)
        self.second = second

    def change(self, b: int, t: float, delta: int) -> None:
        self.area[b] = self._area(b, t)
        self.changed[b] = t
        self.busy[b] += delta


def simulate(scenario: str, method: str, reports: bool, mode: str, replicas: int, spreader: str, seed: int,
             model: Optional[Model] = None, implementation: str = "c") -> Run:
    """One run of the model (see the module's text); every argument checked first."""
    model = Model() if model is None else model
    _check_cell(scenario, method, reports, mode, replicas, spreader, seed, model, implementation)
    engine = _engine_module(implementation)
    clock = engine.ManualClock(0.0)
    specs = list(model.backends) + ([model.new_backend] if scenario == "slow-start" else [])
    names = tuple(b.name for b in specs)
    index = {name: i for i, name in enumerate(names)}
    engines = [_new_engine(engine, clock, method, reports, model) for _ in range(replicas if mode == "replicas" else 1)]
    scale = replicas if mode == "replicas" else 1  # a replica's view of a backend: R x its own in-flight count
    times, client, replica, work, nbytes = _requests(model, scenario, replicas, spreader, seed)
    n = len(times)
    picks = np.full(n, -1, dtype=np.int64)
    response = np.full(n, math.nan)
    own = [[0] * len(specs) for _ in engines]  # each engine's open transactions per backend
    inflight = [0] * len(specs)
    error_sum, inflight_sum = [0.0] * len(specs), [0.0] * len(specs)
    lo, hi = model.window(scenario)
    queues = _Backends(specs)
    pending: List[Tuple[float, int]] = []  # (completion time, request)
    unbound = scenario == "slow-start"

    def start(i: int, b: int, t: float) -> None:
        heapq.heappush(pending, (t + float(work[i]) * specs[b].mean_service, i))

    def complete(t: float, i: int) -> None:
        b = int(picks[i])
        e = int(replica[i]) if mode == "replicas" else 0
        vs, name = engines[e], names[b]
        clock.set(t)
        queues.roll(t)
        response[i] = t - times[i]
        _respond(vs, name, method, reports, queues, b, response[i], int(nbytes[i]))
        own[e][b] -= 1
        inflight[b] -= 1
        queues.done_now[b] += 1
        if queues.waiting[b]:
            start(queues.waiting[b].popleft(), b, t)
        else:
            queues.change(b, t, -1)

    def complete_until(limit: float) -> None:
        while pending and pending[0][0] <= limit:
            complete(*heapq.heappop(pending))

    for i in range(n):
        t = float(times[i])
        if unbound and t >= model.bind_at:
            complete_until(model.bind_at)  # in time order: the clock never goes back
            clock.set(float(model.bind_at))
            for vs in engines:
                vs.bind(model.new_backend.name)
            unbound = False
        complete_until(t)
        clock.set(t)
        queues.roll(t)
        e = int(replica[i]) if mode == "replicas" else 0
        try:
            b = index[engines[e].select()]
        except NoServiceAvailable:
            continue
        if lo <= t < hi:  # how far the picking engine's view is from the backends' truth, before this pick
            view = own[e]
            for k in range(len(specs)):
                error_sum[k] += abs(scale * view[k] - inflight[k])
                inflight_sum[k] += inflight[k]
        picks[i] = b
        engines[e].record(names[b], bytes=REQUEST_BYTES, packets=1)
        own[e][b] += 1
        inflight[b] += 1
        if queues.busy[b] < specs[b].servers:
            queues.change(b, t, +1)
            start(i, b, t)
        else:
            queues.waiting[b].append(i)
    while pending:  # the queues drain after the last arrival
        complete(*heapq.heappop(pending))
    return Run(names, times, client, replica, picks, response, work, error_sum, inflight_sum)


def _new_engine(engine: Any, clock: Any, method: str, reports: bool, model: Model) -> Any:
    by_utilization = reports and method != "CUSTOMLOAD"
    vs = engine.VirtualServer(method, clock=clock, weights_from_utilization=by_utilization)
    for backend in model.backends:
        vs.bind(backend.name)
    # turned on after the first binds (they would ramp against each other); it holds back
    # only the backend bound later, in the slow-start scenario
    vs.set(new_service_request=model.ramp_rate, new_service_request_unit="PER_SECOND",
           new_service_request_increment_interval=0)
    return vs


def _respond(vs: Any, name: str, method: str, reports: bool, queues: _Backends, b: int, seconds: float,
             nbytes: int) -> None:
    """The response of backend b reaches the replica that sent the request."""
    vs.finish(name, ttfb=seconds, status=200)
    vs.record(name, bytes=nbytes, packets=1 + nbytes // BYTES_PER_PACKET)
    if not reports:
        return
    # a gauge over the last whole second, as a CPU utilization is: busy/servers at the
    # moment of one response would jump by 1/servers from one report to the next
    utilization = queues.util_last[b]
    if method == "CUSTOMLOAD":
        vs.report_load(name, {"utilization": (round(100 * utilization), 1, CUSTOMLOAD_THRESHOLD)})
    else:
        vs.report_utilization(name, cpu_utilization=utilization, rps_fractional=float(queues.done_last[b]))


def run_cell(scenario: str, method: str, reports: bool, mode: str, replicas: int, spreader: str, seed: int,
             model: Optional[Model] = None) -> List[Dict[str, Any]]:
    """One cell's rows, one per backend (COLUMNS), C engine. Module-level, plain-data
    arguments: any executor can ship it.

    Per backend: `requests` and `share` (of the measured requests), `offered` (the work
    sent to it in the window over what its servers can do in that time: above 1 its queue
    grows), `active_error` (sum over the measured picks of |the picking engine's view -
    the true in-flight count| over the sum of the true in-flight counts; the view is R x
    the replica's own open transactions, the engine's own count for the global engine).
    Per cell, on each row: `error` (the same over every backend), `p50`, `p99` (seconds,
    the response times of the measured requests), `overshoot` (slow-start: the new
    backend's requests in the ramp over ramp_rate x ramp_seconds; None for steady),
    `dropped` and `replica_max_share` (the busiest replica's share of the requests)."""
    model = Model() if model is None else model
    run = simulate(scenario, method, reports, mode, replicas, spreader, seed, model)
    lo, hi = model.window(scenario)
    measured = (run.arrival >= lo) & (run.arrival < hi)
    served = measured & (run.picks >= 0)
    times = run.response[served]
    p50, p99 = (float(np.percentile(times, q)) for q in (50, 99)) if len(times) else (math.nan, math.nan)
    counts = np.bincount(run.picks[served], minlength=len(run.backends))
    per_replica = np.bincount(run.replica[measured], minlength=replicas)
    error = sum(run.error_sum) / sum(run.inflight_sum) if sum(run.inflight_sum) else 0.0
    overshoot = None
    if scenario == "slow-start":
        overshoot = float(counts[-1]) / (model.ramp_rate * model.ramp_seconds)
    specs = list(model.backends) + ([model.new_backend] if scenario == "slow-start" else [])
    rows = []
    for b, spec in enumerate(specs):
        work = float(run.work[served & (run.picks == b)].sum()) * spec.mean_service
        rows.append({"scenario": scenario, "method": method, "reports": reports, "mode": mode, "replicas": replicas,
                     "spreader": spreader, "seed": seed, "backend": spec.name, "requests": int(counts[b]),
                     "share": float(counts[b]) / max(1, int(counts.sum())),
                     "offered": work / (spec.servers * (hi - lo)),
                     "active_error": run.error_sum[b] / run.inflight_sum[b] if run.inflight_sum[b] else 0.0,
                     "error": error, "p50": p50, "p99": p99, "overshoot": overshoot,
                     "dropped": int((measured & (run.picks < 0)).sum()),
                     "replica_max_share": float(per_replica.max()) / max(1, int(measured.sum()))})
    return rows
