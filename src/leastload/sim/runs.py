"""What `leastload simulate` runs: a config's vservers under one workload.

A workload is `steady` (requests evenly spread, `rate` a second, through
`simulate()` one call at a time, with per-service sizes and TTFB from the
config), a generated trace (`poisson`, `bursty`, `diurnal`: make_trace) or
a workload file (leastload.sim.workload_file); traces are replayed with
`leastload.sim.replay.replay`, inside C for the C engine. Service events
(bind, unbind, down, up, out_of_service) come from `--event` flags and the
workload file, and are checked against the vserver before anything runs.

A hash method's vserver needs a key per request (leastload.sim.keys): a
workload file's `key` column, else keys generated with a Zipf law
(`KeyOptions`); such runs go one call at a time, as the C batch replay
carries no keys. DOMAINHASH without keys picks as LEASTCONNECTION does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Optional

import numpy as np

from ..cmdline import FileError, UserError
from ..engine.methods import NEEDS_KEY
from ..config import Config, VServer, build_vserver
from . import keys as sim_keys
from . import workload_file
from .workload_file import Event, Workload

STEADY = "steady"
GENERATED = ("poisson", "bursty", "diurnal")
WORKLOADS = (STEADY, *GENERATED)
DEFAULT_TTFB = 0.01
# Run sizes: a steady run makes one Python call per request (a million take a
# few seconds); a generated trace holds every request in memory (about 100 bytes each).
MAX_STEADY_REQUESTS = 10**8
MAX_TRACE_REQUESTS = 2 * 10**7
STATE_OF_ACTION = {"down": "DOWN", "up": "UP", "out_of_service": "OUT_OF_SERVICE"}


@dataclass
class ServiceResult:
    name: str
    requests: int
    share: float          # of the requests the vserver served
    bytes: int
    packets: int
    load: Optional[float]   # N at the end; None when unbound at the end
    score: Optional[float]  # Nw at the end
    state: str
    phase: str


@dataclass
class Run:
    vserver: str
    method: str
    start: int
    services: tuple[str, ...]
    counts: np.ndarray      # int64 [seconds, services]
    dropped: np.ndarray     # int64 [seconds]
    results: list[ServiceResult]
    events: list[Event]
    slow_start_exits: list[tuple[float, str, str]] = field(default_factory=list)
    keys: Optional[sim_keys.KeyStats] = None  # a hash method's run: how its keys spread

    def series(self) -> dict[str, list[int]]:
        return {name: [int(c) for c in self.counts[:, i]] for i, name in enumerate(self.services)}


@dataclass(frozen=True)
class KeyOptions:
    """Generated keys: `distinct` values, Zipf exponent `skew`, `seed`."""

    distinct: int = sim_keys.DEFAULT_DISTINCT
    skew: float = sim_keys.DEFAULT_SKEW
    seed: int = 0


def file_keys(vs_model: VServer, workload: Workload) -> Optional[sim_keys.Keys]:
    """The keys of a workload file for the vserver's method (None: the method takes none,
    or DOMAINHASH without a key column). FileError naming the row at fault."""
    method = vs_model.lb_method
    if method not in sim_keys.HASHED:
        return None
    if not workload.has_keys:
        if method in NEEDS_KEY and len(workload):
            raise FileError(f"{workload.source}: lbMethod {method} of lb vserver {vs_model.name!r} picks by each "
                            "request's key: the workload needs a key column")
        return None
    for i, cell in enumerate(workload.key):
        try:
            key = sim_keys.parse(method, cell)
        except ValueError as exc:
            raise FileError(f"{workload.where[i]}: {exc}") from None
        if key is None and method in NEEDS_KEY:
            raise FileError(f"{workload.where[i]}: key: lbMethod {method} picks by each request's key, "
                            "and this request has none")
    return sim_keys.from_cells(method, workload.key)


def generated_keys(vs_model: VServer, n_requests: int, options: KeyOptions) -> Optional[sim_keys.Keys]:
    if vs_model.lb_method not in sim_keys.HASHED:
        return None
    return sim_keys.generated(vs_model.lb_method, n_requests, options.distinct, options.skew, options.seed)


def _fail(event: Event, message: str) -> Exception:
    if event.where.startswith("--event"):
        return UserError(f"--event: {message}, got {event.where[len('--event '):]}")
    return FileError(f"{event.where}: {message}")


def check_events(config: Config, vs: VServer, events: list[Event], duration: float) -> list[str]:
    """Services bound at some point, in order (bound first, then as events bind them).
    Raises for an event past the end, of an unknown service, or one the service cannot take."""
    bound = [b.service for b in vs.bindings]
    order = list(bound)
    for e in sorted(events, key=lambda e: e.time):
        if not e.time < duration:
            raise _fail(e, f"time must be before the end of the run ({duration:g} s)")
        if e.action == "bind":
            if config.service(e.service) is None:
                raise _fail(e, f"no service named {e.service!r} in the config")
            if e.service in bound:
                raise _fail(e, f"{e.service!r} is already bound to {vs.name!r} then")
            bound.append(e.service)
            if e.service not in order:
                order.append(e.service)
        elif e.service not in bound:
            raise _fail(e, f"{e.service!r} is not bound to {vs.name!r} then")
        elif e.action == "unbind":
            bound.remove(e.service)
    return order


def _weight(config: Config, vs: VServer, name: str) -> int:
    for b in vs.bindings:
        if b.service == name:
            return config.weight_of(vs, b)
    service = config.service(name)
    return service.weight if service is not None and service.weight is not None else 1


def _ttfb(config: Config, name: str) -> Optional[float]:
    service = config.service(name)
    return None if service is None else service.ttfb


def _sizes(config: Config, name: str) -> tuple[int, int]:
    service = config.service(name)
    req = service.request_bytes if service is not None and service.request_bytes is not None \
        else workload_file.DEFAULT_REQUEST_BYTES
    resp = service.response_bytes if service is not None and service.response_bytes is not None \
        else workload_file.DEFAULT_RESPONSE_BYTES
    return req, resp


def _results(vs: Any, services: tuple[str, ...], requests: list[int], nbytes: list[int],
             npackets: list[int]) -> list[ServiceResult]:
    total = sum(requests)
    view = {s.name: s for s in vs.show().services}
    out = []
    for i, name in enumerate(services):
        s = view.get(name)
        out.append(ServiceResult(
            name=name, requests=requests[i], share=requests[i] / total if total else 0.0,
            bytes=nbytes[i], packets=npackets[i],
            load=None if s is None else s.load, score=None if s is None else s.score,
            state="unbound" if s is None else s.state, phase="unbound" if s is None else s.phase))
    return out


def run_steady(config: Config, vs_model: VServer, impl: ModuleType, rate: int, duration: int,
               events: list[Event], on_second: Optional[Callable[[int], None]] = None,
               key_options: KeyOptions = KeyOptions()) -> Run:
    from .steady import simulate

    names = check_events(config, vs_model, events, duration)
    keys = generated_keys(vs_model, rate * duration, key_options)
    clock = impl.ManualClock(0.0)
    vs = build_vserver(config, vs_model, clock, impl)
    ttfb = {n: _ttfb(config, n) or DEFAULT_TTFB for n in names}
    sizes = {n: _sizes(config, n) for n in names}
    nbytes = {n: req + resp for n, (req, resp) in sizes.items()}
    npackets = {n: workload_file.packets(req) + workload_file.packets(resp) for n, (req, resp) in sizes.items()}
    sim_events: list[tuple[Any, ...]] = []
    for e in events:
        if e.action == "bind":
            sim_events.append((e.time, "bind", e.service, {"weight": _weight(config, vs_model, e.service)}))
        elif e.action == "unbind":
            sim_events.append((e.time, "unbind", e.service))
        else:
            sim_events.append((e.time, "set_state", e.service, STATE_OF_ACTION[e.action]))
    # a request stays open for its service's TTFB, then finishes with it
    sim = simulate(vs, clock, rate=rate, duration=duration, events=sim_events, start=0, request_duration=ttfb,
                   ttfb=ttfb, bytes_per_request=nbytes, packets_per_request=npackets, on_second=on_second,
                   keys=keys)
    requests = [int(x) for x in sim.counts.sum(axis=0)]
    results = _results(vs, sim.services, requests, [r * nbytes.get(n, 0) for r, n in zip(requests, sim.services)],
                       [r * npackets.get(n, 0) for r, n in zip(requests, sim.services)])
    return Run(vs_model.name, vs.method, sim.start, sim.services, sim.counts, sim.dropped, results,
               sorted(events, key=lambda e: e.time), list(getattr(vs, "slow_start_exits", [])),
               None if keys is None or sim.picks is None else sim_keys.stats(keys.ids, sim.picks))


def _trace_events(events: list[Event]) -> list[tuple[float, str, str]]:
    return [(e.time, e.action.upper(), e.service) for e in sorted(events, key=lambda e: e.time)]


def generated_trace(config: Config, vs_model: VServer, names: list[str], pattern: str, rate: float,
                    duration: int, events: list[Event], seed: int) -> Any:
    from .workloads import make_trace

    n = int(math.ceil(rate * duration * 1.2)) + 64  # enough arrivals to pass the end; cut there
    trace = make_trace(n_services=len(names), n_requests=n, rate=rate, pattern=pattern, seed=seed,
                       weights=[_weight(config, vs_model, s) for s in names], events=_trace_events(events),
                       names=names)
    trace = trace.head(int(np.searchsorted(trace.arrival, float(duration), side="left")))
    base = trace.ttfb_base.copy()
    for i, name in enumerate(names):
        ttfb = _ttfb(config, name)
        if ttfb is not None:
            base[i] = ttfb
    import dataclasses

    return dataclasses.replace(trace, ttfb_base=base)


def file_trace(config: Config, vs_model: VServer, names: list[str], workload: Workload,
               events: list[Event]) -> Any:
    from .workloads import EVENT_KINDS, Trace

    trace_events = _trace_events(events)
    first: dict[str, str] = {}
    for _, kind, name in trace_events:
        first.setdefault(name, kind)
    index = {name: i for i, name in enumerate(names)}
    req = np.array(workload.request_bytes, dtype=np.uint64)
    resp = np.array(workload.response_bytes, dtype=np.uint64)
    mss = np.uint64(workload_file.MSS)
    per_request_ttfb = workload.ttfb is not None
    return Trace(
        services=tuple(names),
        weights=np.array([_weight(config, vs_model, s) for s in names], dtype=np.uint8),
        initially_bound=np.array([first.get(s) != "BIND" for s in names], dtype=np.bool_),
        ttfb_base=np.array([1.0 if per_request_ttfb else (_ttfb(config, s) or DEFAULT_TTFB) for s in names],
                           dtype=np.float64),
        ttfb_slope=np.zeros(len(names), dtype=np.float64),
        arrival=np.array(workload.time, dtype=np.float64),
        ttfb_factor=np.array(workload.ttfb if workload.ttfb is not None else [1.0] * len(workload),
                             dtype=np.float64),
        transfer=np.array(workload.duration, dtype=np.float64),
        status=np.array(workload.status, dtype=np.uint16),
        req_bytes=req, resp_bytes=resp,
        req_packets=(req + mss - np.uint64(1)) // mss + np.uint64(1),
        resp_packets=(resp + mss - np.uint64(1)) // mss + np.uint64(1),
        event_time=np.array([t for t, _, _ in trace_events], dtype=np.float64),
        event_kind=np.array([EVENT_KINDS.index(k) for _, k, _ in trace_events], dtype=np.uint8),
        event_service=np.array([index[n] for _, _, n in trace_events], dtype=np.uint32))


def run_trace(config: Config, vs_model: VServer, impl: ModuleType, duration: int, events: list[Event],
              pattern: Optional[str], rate: float, seed: int, workload: Optional[Workload],
              key_options: KeyOptions = KeyOptions()) -> Run:
    from .replay import replay

    names = check_events(config, vs_model, events, duration)
    if not names:
        raise UserError(f"lb vserver {vs_model.name!r} has no service bound and no --event binds one")
    if workload is not None:
        trace = file_trace(config, vs_model, names, workload, events)
        keys = file_keys(vs_model, workload)
    else:
        assert pattern is not None
        trace = generated_trace(config, vs_model, names, pattern, rate, duration, events, seed)
        keys = generated_keys(vs_model, len(trace), key_options)
    clock = impl.ManualClock(0.0)
    vs = build_vserver(config, vs_model, clock, impl)
    result = replay(vs, clock, trace, keys)  # with keys: one call at a time
    seconds = np.minimum(np.floor(trace.arrival).astype(np.int64), duration - 1)
    served = result.chosen >= 0
    counts = np.zeros((duration, len(names)), dtype=np.int64)
    np.add.at(counts, (seconds[served], result.chosen[served].astype(np.int64)), 1)
    dropped = np.bincount(seconds[~served], minlength=duration).astype(np.int64)[:duration]
    requests = [int(x) for x in result.selected]
    results = _results(vs, tuple(names), requests, [int(x) for x in result.bytes],
                       [int(x) for x in result.packets])
    return Run(vs_model.name, vs.method, 0, tuple(names), counts, dropped, results,
               sorted(events, key=lambda e: e.time), list(getattr(vs, "slow_start_exits", [])),
               None if keys is None else sim_keys.stats(keys.ids, result.chosen))
