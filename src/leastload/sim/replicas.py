"""The replica study: R proxy replicas, each with its own engine, against one engine for all.

    python -m leastload.sim.replicas --out docs/images/replicas.png   # docs/replicas.md

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

import argparse
import heapq
import importlib
import math
import sys
from collections import deque
from dataclasses import dataclass, field, replace
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
    return importlib.import_module("leastload.reference")


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



# ---- the study: cells on any executor, a summary, a chart -----------------------------------

STUDY_METHODS = (("LEASTCONNECTION", False), ("LEASTCONNECTION", True), ("ROUNDROBIN", False), ("ROUNDROBIN", True),
                 ("LEASTRESPONSETIME", False), ("LEASTRESPONSETIME", True), ("LEASTBANDWIDTH", False),
                 ("LEASTBANDWIDTH", True), ("CUSTOMLOAD", True))
STUDY_REPLICAS = (2, 4, 8, 16)
STUDY_SEEDS = 5
STUDY_MODEL = Model(duration=120, warmup=40)

Cell = Tuple[str, str, bool, str, int, str, int, Model]


def cells(variants: Sequence[Tuple[str, bool]] = STUDY_METHODS, replicas: Sequence[int] = STUDY_REPLICAS,
          spreaders: Sequence[str] = SPREADERS, seeds: Sequence[int] = tuple(range(STUDY_SEEDS)),
          model: Model = STUDY_MODEL) -> List[Cell]:
    """The study's cells: per scenario, (method, reports) variant and seed, the global
    engine once and then R replicas for each R and spreader. R = 1 is left to the global
    engine: one replica makes its picks exactly (tests/sim/test_replicas.py)."""
    if not variants or not replicas or not spreaders or not seeds:
        raise ValueError("variants, replicas, spreaders and seeds must each be non-empty, got "
                         f"{len(variants)}, {len(replicas)}, {len(spreaders)}, {len(seeds)} items")
    out: List[Cell] = []
    for scenario in SCENARIOS:
        for method, reports in variants:
            for seed in seeds:
                out.append((scenario, method, reports, "global", 1, "random", seed, model))
                out.extend((scenario, method, reports, "replicas", r, s, seed, model)
                           for r in replicas for s in spreaders)
    for cell in out:  # every argument checked before anything runs
        _check_cell(*cell, "c")
    return out


def study(cell_list: Optional[Sequence[Cell]] = None, *, executor: Any = None,
          on_done: Optional[Any] = None) -> Any:
    """The rows of every cell (default: `cells()`) as a `leastload.sim.sweep.Table` with
    COLUMNS, in cell order, run through `leastload.sim.sweep.run_cells`: a local process
    pool when executor is None, else any concurrent.futures.Executor (Dask's
    `Client.get_executor()` too). `on_done(n)`: called as the n-th cell finishes."""
    from .sweep import Table, run_cells

    todo = cells() if cell_list is None else list(cell_list)
    rows: List[Dict[str, Any]] = []
    for cell_rows in run_cells(run_cell, todo, executor, on_done):
        rows.extend(cell_rows)
    return Table(rows, COLUMNS)


@dataclass(frozen=True)
class Line:
    """One line of the summary: a (method, reports, R, spreader) over the seeds, means."""

    method: str
    reports: bool
    replicas: Optional[int]  # None: the global engine
    spreader: str
    seeds: int
    slow_share: float        # the slowest backend's share of the requests (steady)
    error: float
    p50: float
    p99: float
    offered: float           # the highest backend's offered utilization
    overshoot: float


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def summary(rows: Sequence[Dict[str, Any]], model: Model = STUDY_MODEL) -> List[Line]:
    """The rows averaged over the seeds, in the order of their first cell."""
    slow = min(model.backends, key=lambda b: b.capacity).name
    groups: Dict[Tuple[str, bool, Optional[int], str], Dict[str, List[float]]] = {}
    for r in rows:
        key = (r["method"], r["reports"], None if r["mode"] == "global" else r["replicas"],
               "" if r["mode"] == "global" else r["spreader"])
        g = groups.setdefault(key, {})
        if r["scenario"] == "slow-start":
            if r["backend"] == model.new_backend.name:
                g.setdefault("overshoot", []).append(r["overshoot"])
            continue
        g.setdefault("offered:" + str(r["seed"]), []).append(r["offered"])
        if r["backend"] == slow:  # one row a cell and seed: the cell-wide numbers once
            for name in ("share", "error", "p50", "p99"):
                g.setdefault(name, []).append(r[name])
    lines = []
    for (method, reports, replicas, spreader), g in groups.items():
        offered = [max(v) for k, v in g.items() if k.startswith("offered:")]
        lines.append(Line(method, reports, replicas, spreader, len(g.get("share", g.get("overshoot", []))),
                          _mean(g.get("share", [])), _mean(g.get("error", [])), _mean(g.get("p50", [])),
                          _mean(g.get("p99", [])), _mean(offered), _mean(g.get("overshoot", []))))
    return lines


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds < 1:
        return f"{1000 * seconds:.0f} ms"
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def summary_text(lines: Sequence[Line], model: Model = STUDY_MODEL) -> str:
    """The summary as a Markdown table (what docs/replicas.md shows)."""
    slow = min(model.backends, key=lambda b: b.capacity).name
    head = ("method", "reports", "R", "spreader", f"{slow} share %", "active error", "p50", "p99",
            "max offered", "slow-start overshoot")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * 4 + "---:|" * 6]
    for x in lines:
        cells_ = (x.method, "yes" if x.reports else "no", "global" if x.replicas is None else str(x.replicas),
                  x.spreader or "-", f"{100 * x.slow_share:.1f}", f"{x.error:.2f}", _duration(x.p50), _duration(x.p99),
                  f"{x.offered:.2f}", f"{x.overshoot:.2f}")
        out.append("| " + " | ".join(cells_) + " |")
    return "\n".join(out)


def _axis_points(lines: Sequence[Line], method: str, reports: bool, spreader: str) -> List[Line]:
    """The global engine (at R = 1) and then R replicas with this spreader, by R."""
    mine = [x for x in lines if (x.method, x.reports) == (method, reports)]
    first = [x for x in mine if x.replicas is None]
    return first + sorted((x for x in mine if x.replicas is not None and x.spreader == spreader),
                          key=lambda x: x.replicas or 1)


def figure(lines: Sequence[Line], model: Model = STUDY_MODEL, spreader: str = "random") -> Any:
    """A 2 x 2 matplotlib Figure against R (R = 1: the global engine), one line per method
    and reports (dashed: with backend-reported load)."""
    from .plot import require_matplotlib

    require_matplotlib()
    from matplotlib.figure import Figure

    slow = min(model.backends, key=lambda b: b.capacity).name
    panels = (("p99", "p99 response time (s, log)"), ("error", "active-transaction error"),
              ("overshoot", "slow-start overshoot (x one engine)"), ("slow_share", f"share of the slow backend {slow}"))
    fig = Figure(figsize=(10, 7.6), dpi=80, layout="constrained")
    axes = fig.subplots(2, 2).ravel()
    colours = {m: f"C{i}" for i, m in enumerate(METHODS)}
    for ax, (attr, title) in zip(axes, panels):
        for method, reports in dict.fromkeys((x.method, x.reports) for x in lines):
            points = _axis_points(lines, method, reports, spreader)
            xs = [1 if x.replicas is None else x.replicas for x in points]
            ax.plot(xs, [getattr(x, attr) for x in points], marker="o", markersize=3, linewidth=1.4,
                    color=colours[method], linestyle="--" if reports else "-",
                    label=method + (" + reports" if reports else ""))
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 4, 8, 16], labels=["1 (global)", "2", "4", "8", "16"])
        if attr == "p99":
            ax.set_yscale("log")
        if attr == "overshoot":  # R: what R replicas each allowing ramp_rate a second give
            ax.set_yscale("log", base=2)
            ax.set_yticks([1, 2, 4, 8, 16], labels=["1", "2", "4", "8", "16"])
            ax.plot([1, 2, 4, 8, 16], [1, 2, 4, 8, 16], color="0.5", linestyle=":", linewidth=1, label="_R")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(f"replicas R ({spreader} spreader)")
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8)
    return fig


def save_figure(lines: Sequence[Line], path: str, model: Model = STUDY_MODEL) -> None:
    """The figure as a PNG at `path`, written whole or not at all."""
    from ..cli.args import write_file

    fig = figure(lines, model)
    write_file(path, lambda fh: fig.savefig(fh, format="png"))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m leastload.sim.replicas",
                                description="The replica study (docs/replicas.md): prints its table as Markdown.")
    p.add_argument("--seeds", type=int, default=STUDY_SEEDS, help=f"seeds 0..N-1 (default {STUDY_SEEDS})")
    p.add_argument("--duration", type=int, default=STUDY_MODEL.duration,
                   help=f"seconds of arrivals in the steady scenario (default {STUDY_MODEL.duration})")
    p.add_argument("--warmup", type=int, default=STUDY_MODEL.warmup,
                   help=f"seconds not measured (default {STUDY_MODEL.warmup})")
    p.add_argument("--replicas", default=",".join(map(str, STUDY_REPLICAS)), metavar="R,R,...",
                   help="replica counts besides the global engine (default 2,4,8,16)")
    p.add_argument("--out", metavar="PNG", help="the chart (needs matplotlib: the plot extra)")
    p.add_argument("--csv", metavar="FILE", help="every row (COLUMNS) as CSV")
    p.add_argument("--scheduler", metavar="ADDRESS", help="run the cells on a Dask scheduler (tcp://host:port)")
    return p


def _replica_list(text: str) -> List[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--replicas must be ints 1..{MAX_REPLICAS} separated by commas, got {text!r}") from None
    if not values or any(not 1 <= v <= MAX_REPLICAS for v in values):
        raise ValueError(f"--replicas must be ints 1..{MAX_REPLICAS} separated by commas, got {text!r}")
    return values


def _csv(table: Any) -> str:
    import csv
    import io

    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in table:
        w.writerow(["" if r[c] is None else r[c] for c in COLUMNS])
    return out.getvalue()


def main(argv: Optional[Sequence[str]] = None) -> int:
    from ..cli.args import MissingExtra, UserError, write_file
    from .progress import Progress
    from .sweep_file import executor_for

    args = _parser().parse_args(argv)
    try:
        if args.out is not None:
            from .plot import require_matplotlib

            require_matplotlib()  # before the study's minutes, not after
        model = replace(STUDY_MODEL, duration=args.duration, warmup=args.warmup)
        if args.seeds < 1:
            raise ValueError(f"--seeds must be an int >= 1, got {args.seeds}")
        todo = cells(replicas=_replica_list(args.replicas), seeds=tuple(range(args.seeds)), model=model)
        executor, client = executor_for(args.scheduler)
    except (ValueError, TypeError, UserError, MissingExtra) as exc:
        print(f"python -m leastload.sim.replicas: {exc}", file=sys.stderr)
        return 2
    progress = Progress(len(todo), "replica study")
    try:
        table = study(todo, executor=executor, on_done=progress.update)
    finally:
        progress.close()
        if client is not None:
            client.close()
    lines = summary(table.rows, model)
    print(summary_text(lines, model))
    if args.csv is not None:
        data = _csv(table).encode()

        def write(fh: Any) -> None:
            fh.write(data)
        write_file(args.csv, write)
    if args.out is not None:
        save_figure(lines, args.out, model)
    return 0




if __name__ == "__main__":
    sys.exit(main())
