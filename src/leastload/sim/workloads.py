"""Seeded generators of appliance-like traffic: a `Trace` to replay on a vserver.

A Trace is plain numpy data in three parts: the services (names, weights, a
TTFB model), the requests in arrival order (sizes, a TTFB factor, transfer
time, status) and the service events (state changes, bind, unbind) in time
order. `leastload.sim.replay` drives a vserver with it; the benchmarks and the
simulator build theirs here. Everything is vectorized numpy: 10**7 requests
take seconds, and the same seed always gives the same trace.

The TTFB of request r on service s is `ttfb_of(ttfb_base[s], ttfb_slope[s],
arrival[r], ttfb_factor[r])`, that is

    ttfb_base[s] * (1.0 + ttfb_slope[s] * arrival[r]) * ttfb_factor[r]

and the request completes `transfer[r]` seconds after its first byte.
Every trace guarantees that this TTFB stays in (0, 3600] s for every request
on every service (the engine's limit); generated traces keep it under 60 s.

One definition each, here, of what the replay must agree on:

- `ttfb_of` is the only Python spelling of the TTFB formula: Trace.ttfb, the
  trace checks and the per-call replay (leastload.sim.replay) call it. The C
  replay (csrc/ll_replay.c, ttfb_of) writes the same expression in the same
  order, built without FMA contraction, so it computes the same double;
  tests/engine/test_replay.py holds the two to equal bits on random inputs.
- The event kinds (DOWN ... UNBIND, EVENT_KINDS) are defined here and
  nowhere else: leastload.sim.replay imports them. C has no copy to keep in
  step: the C replay never reads an event kind, it stops at the next event's
  time and Python applies the event (replay._Events), so a C enum would be a
  second definition with no reader.
"""
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Iterable, List, NoReturn, Optional, Sequence, Tuple, Type, Union, overload

import numpy as np
import numpy.typing as npt

__all__ = [
    "Trace", "make_trace", "ttfb_of", "PATTERNS", "EVENT_KINDS",
    "DOWN", "UP", "OUT_OF_SERVICE", "BIND", "UNBIND",
    "poisson_arrivals", "bursty_arrivals", "diurnal_arrivals",
    "down_up", "out_of_service", "bind_at", "unbind_at", "flap", "rolling_restart",
]

# Event kinds (the values of Trace.event_kind), defined only here (see above).
# The first three are also the names of the states they set.
DOWN, UP, OUT_OF_SERVICE, BIND, UNBIND = range(5)
EVENT_KINDS = ("DOWN", "UP", "OUT_OF_SERVICE", "BIND", "UNBIND")

MAX_TTFB = 3600.0       # seconds: what finish() accepts; every Trace stays under it
GENERATED_MAX_TTFB = 60.0  # make_trace stays under this, far from the engine's limit
MAX_BYTES = 10**9       # cap on one request's or response's size: keeps 64-bit totals far away
FORMAT_VERSION = 1      # of the .npz written by Trace.save

_F64 = npt.NDArray[np.float64]
_U64 = npt.NDArray[np.uint64]
_Path = Union[str, "os.PathLike[str]"]
_ServiceRef = Union[int, str]  # a service by index or by name
_EventTuple = Tuple[float, Union[int, str], _ServiceRef]  # (time, kind, service) for make_trace(events=...)
_Script = List[Tuple[float, int, _ServiceRef]]  # what the event script helpers return


# all-float arguments fit both signatures (mypy: overlap); the first, the float one, applies
@overload
def ttfb_of(base: float, slope: float, arrival: float, factor: float) -> float: ...  # type: ignore[overload-overlap]
@overload
def ttfb_of(base: Union[float, _F64], slope: Union[float, _F64], arrival: Union[float, _F64],
            factor: Union[float, _F64]) -> _F64: ...
def ttfb_of(base: Union[float, _F64], slope: Union[float, _F64], arrival: Union[float, _F64],
            factor: Union[float, _F64]) -> Union[float, _F64]:
    """TTFB in seconds of a request arriving at `arrival` with TTFB factor `factor`, on a
    service with `base` and `slope`: floats, or numpy arrays (elementwise, the same bits).

    The one Python definition; csrc/ll_replay.c evaluates the same expression in
    the same order, so the C replay and the per-call replay finish with equal TTFBs.
    """
    return base * (1.0 + slope * arrival) * factor


_SERVICE_FIELDS: Dict[str, Type[np.generic]] = {
    "weights": np.uint8, "initially_bound": np.bool_,
    "ttfb_base": np.float64, "ttfb_slope": np.float64,
}
_REQUEST_FIELDS: Dict[str, Type[np.generic]] = {
    "arrival": np.float64, "ttfb_factor": np.float64, "transfer": np.float64,
    "status": np.uint16, "req_bytes": np.uint64, "resp_bytes": np.uint64,
    "req_packets": np.uint64, "resp_packets": np.uint64,
}
_EVENT_FIELDS: Dict[str, Type[np.generic]] = {
    "event_time": np.float64, "event_kind": np.uint8, "event_service": np.uint32,
}
_ARRAY_FIELDS = {**_SERVICE_FIELDS, **_REQUEST_FIELDS, **_EVENT_FIELDS}


@dataclass(frozen=True, eq=False, repr=False)
class Trace:
    """One replayable workload. Arrays are 1-D, C-contiguous, of the exact dtypes below.

    Events may be ones a service cannot take (a bind of a bound service, a
    state change of an unbound one): the replay skips them. make_trace never
    makes such a script.
    """

    services: Tuple[str, ...]  # names, in bind order
    weights: npt.NDArray[np.uint8]  # uint8, 1..100
    initially_bound: npt.NDArray[np.bool_]  # bool: bound before the first request
    ttfb_base: _F64          # float64 seconds, > 0
    ttfb_slope: _F64         # float64 per second: ttfb grows as base * (1 + slope * t)
    arrival: _F64            # float64 seconds, >= 0, non-decreasing
    ttfb_factor: _F64        # float64, > 0
    transfer: _F64           # float64 seconds after the first byte until completion, >= 0
    status: npt.NDArray[np.uint16]  # uint16 HTTP status, 100..599
    req_bytes: _U64          # uint64
    resp_bytes: _U64         # uint64
    req_packets: _U64        # uint64
    resp_packets: _U64        # uint64
    event_time: _F64         # float64 seconds, >= 0, non-decreasing
    event_kind: npt.NDArray[np.uint8]  # uint8, one of DOWN UP OUT_OF_SERVICE BIND UNBIND
    event_service: npt.NDArray[np.uint32]  # uint32 index into services

    def __post_init__(self) -> None:
        _validate(self)

    def __len__(self) -> int:
        return len(self.arrival)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return self.services == other.services and all(
            getattr(self, f).dtype == getattr(other, f).dtype
            and np.array_equal(getattr(self, f), getattr(other, f))
            for f in _ARRAY_FIELDS)

    __hash__ = None  # type: ignore[assignment]  # mutable arrays inside

    def __repr__(self) -> str:
        return f"<Trace: {self.summary()}>"

    @property
    def n_services(self) -> int:
        return len(self.services)

    @property
    def n_events(self) -> int:
        return len(self.event_time)

    @property
    def duration(self) -> float:
        """Seconds from 0 to the last arrival."""
        return float(self.arrival[-1]) if len(self.arrival) else 0.0

    def ttfb(self, service: int) -> _F64:
        """The TTFB (seconds) each request would have on `service` (index)."""
        return ttfb_of(self.ttfb_base[service], self.ttfb_slope[service], self.arrival, self.ttfb_factor)

    def sealed(self) -> "Trace":
        """This trace with read-only arrays (itself if it is sealed already).

        A replay reads its own copy of a trace, so that arrays changed meanwhile
        cannot reach it; a sealed trace cannot be changed, so a replay takes it as
        it is, without the copy and the checks again (replaying one trace many
        times: seal it once). Making its arrays writeable again (numpy allows it
        on an array that owns its memory) breaks that promise.
        """
        if self.is_sealed():
            return self
        arrays: Dict[str, Any] = {}
        for f in _ARRAY_FIELDS:
            a = np.array(getattr(self, f), copy=True)
            a.flags.writeable = False
            arrays[f] = a
        return replace(self, **arrays)

    def is_sealed(self) -> bool:
        """True when no array of the trace can be written through: each is read-only,
        and so is every array (or bytes) it is a view of."""
        for f in _ARRAY_FIELDS:
            a: object = getattr(self, f)
            while isinstance(a, np.ndarray):
                if a.flags.writeable:
                    return False
                a = a.base
            if a is not None and not isinstance(a, bytes):
                return False  # a view of memory that someone else may write
        return True

    def head(self, n_requests: int) -> "Trace":
        """The first `n_requests` requests, with the events up to the last of them."""
        if not 0 <= n_requests <= len(self):
            raise ValueError(f"n_requests must be in 0..{len(self)}, got {n_requests!r}")
        cut = self.arrival[n_requests - 1] if n_requests else -1.0
        n_ev = int(np.searchsorted(self.event_time, cut, side="right"))
        req = {f: getattr(self, f)[:n_requests].copy() for f in _REQUEST_FIELDS}
        ev = {f: getattr(self, f)[:n_ev].copy() for f in _EVENT_FIELDS}
        return replace(self, **req, **ev)

    def summary(self) -> str:
        """One line for people: sizes, rate, tails, events."""
        n = len(self)
        rate = n / self.duration if self.duration > 0 else float("nan")
        med = float(np.median(self.resp_bytes)) if n else 0.0
        top = int(self.resp_bytes.max()) if n else 0
        return (f"{n} requests over {self.duration:.1f} s ({rate:.0f}/s) to {self.n_services} services, "
                f"response bytes median {med:.0f} max {top}, {self.n_events} events")

    def save(self, path: _Path) -> None:
        """Writes an uncompressed .npz at exactly `path`; Trace.load reads it back identically."""
        arrays = {f: getattr(self, f) for f in _ARRAY_FIELDS}
        with open(path, "wb") as fh:
            np.savez(fh, format_version=np.array(FORMAT_VERSION),
                     services=np.array(self.services, dtype=str), **arrays)

    @classmethod
    def load(cls, path: _Path) -> "Trace":
        with np.load(path, allow_pickle=False) as z:
            missing = {"format_version", "services", *_ARRAY_FIELDS} - set(z.files)
            if missing:
                raise ValueError(f"{path}: not a leastload trace, missing {sorted(missing)}")
            version = int(z["format_version"])
            if version != FORMAT_VERSION:
                raise ValueError(f"{path}: trace format {version}, this leastload reads {FORMAT_VERSION}")
            services = tuple(str(s) for s in z["services"])
            arrays = {f: np.ascontiguousarray(z[f]) for f in _ARRAY_FIELDS}
        return cls(services=services, **arrays)


# ---- validation -----------------------------------------------------------

def _fail(field: str, message: str) -> NoReturn:
    raise ValueError(f"Trace.{field}: {message}")


def _check_array(trace: "Trace", field: str, dtype: Type[np.generic], length: int,
                 length_of: str) -> npt.NDArray[Any]:
    a = getattr(trace, field)
    if not isinstance(a, np.ndarray):
        _fail(field, f"must be a numpy array, got {type(a).__name__}")
    if a.dtype != dtype:
        _fail(field, f"must have dtype {np.dtype(dtype).name}, got {a.dtype.name}")
    if a.ndim != 1:
        _fail(field, f"must be 1-D, got shape {a.shape}")
    if len(a) != length:
        _fail(field, f"must have one entry per {length_of} ({length}), got {len(a)}")
    if not a.flags.c_contiguous:
        _fail(field, "must be C-contiguous (np.ascontiguousarray)")
    return a


def _check_finite(field: str, a: _F64, low: float, low_inclusive: bool = True) -> None:
    if not np.isfinite(a).all():
        _fail(field, "must be finite (no NaN or infinity)")
    bad = (a < low) if low_inclusive else (a <= low)
    if bad.any():
        i = int(np.argmax(bad))
        _fail(field, f"must be {'>=' if low_inclusive else '>'} {low}, got {a[i]!r} at index {i}")


def _check_sorted(field: str, a: _F64) -> None:
    if len(a) > 1:
        down = a[1:] < a[:-1]
        if down.any():
            i = int(np.argmax(down)) + 1
            _fail(field, f"must be non-decreasing, but index {i} ({a[i]!r}) < index {i - 1} ({a[i - 1]!r})")


_valid_services: Tuple[str, ...] = ()  # the services tuple validated last: a tuple of str cannot change


def _validate_services(services: object) -> None:
    global _valid_services
    if services is _valid_services:
        return  # a copy of the last trace (Trace.head, a replay's own copy): O(1), not O(services)
    if not isinstance(services, tuple) or not services:
        _fail("services", "must be a non-empty tuple of names")
    for s in services:
        if type(s) is not str or not s:
            _fail("services", f"every name must be a non-empty str, got {s!r}")
    if len(set(services)) != len(services):
        _fail("services", "names must be unique")
    _valid_services = services


def _validate(t: "Trace") -> None:
    _validate_services(t.services)
    n_svc, n_req = len(t.services), len(t.arrival) if isinstance(t.arrival, np.ndarray) else -1
    n_ev = len(t.event_time) if isinstance(t.event_time, np.ndarray) else -1
    for group, length, what in ((_SERVICE_FIELDS, n_svc, "service"),
                                (_REQUEST_FIELDS, n_req, "request"),
                                (_EVENT_FIELDS, n_ev, "event")):
        for field, dtype in group.items():
            _check_array(t, field, dtype, length, what)

    w = t.weights
    if ((w < 1) | (w > 100)).any():
        _fail("weights", f"must be in 1..100, got {int(w[(w < 1) | (w > 100)][0])}")
    _check_finite("ttfb_base", t.ttfb_base, 0.0, low_inclusive=False)
    if not np.isfinite(t.ttfb_slope).all():
        _fail("ttfb_slope", "must be finite (no NaN or infinity)")
    _check_finite("arrival", t.arrival, 0.0)
    _check_sorted("arrival", t.arrival)
    _check_finite("ttfb_factor", t.ttfb_factor, 0.0, low_inclusive=False)
    _check_finite("transfer", t.transfer, 0.0)
    if ((t.status < 100) | (t.status > 599)).any():
        _fail("status", "must be HTTP statuses in 100..599")
    _check_finite("event_time", t.event_time, 0.0)
    _check_sorted("event_time", t.event_time)
    if (t.event_kind >= len(EVENT_KINDS)).any():
        _fail("event_kind", f"must be 0..{len(EVENT_KINDS) - 1} ({', '.join(EVENT_KINDS)})")
    if (t.event_service >= n_svc).any():
        _fail("event_service", f"must index services (0..{n_svc - 1})")
    _check_ttfb_bound(t)


def _ttfb_bound(t: "Trace") -> float:
    """An upper bound of every request's TTFB on every service (0.0 without requests).

    h(x) = max over services of base*(1+slope*x) is convex (a max of lines), so
    between the first and last arrival it lies under the chord through its ends:
    factor times that chord bounds every TTFB, in O(requests) without O(n*m).
    """
    if not len(t.arrival):
        return 0.0
    x0, x1 = float(t.arrival[0]), float(t.arrival[-1])
    h0 = float(ttfb_of(t.ttfb_base, t.ttfb_slope, x0, 1.0).max())
    h1 = float(ttfb_of(t.ttfb_base, t.ttfb_slope, x1, 1.0).max())
    if x1 > x0:
        return float((t.ttfb_factor * (h0 + (h1 - h0) * ((t.arrival - x0) / (x1 - x0)))).max())
    return float(t.ttfb_factor.max()) * max(h0, h1)


def _check_ttfb_bound(t: "Trace") -> None:
    """Every request's TTFB on every service stays in (0, MAX_TTFB]."""
    if not len(t.arrival):
        return
    for x in (float(t.arrival[0]), float(t.arrival[-1])):  # a line positive at both ends is positive between
        if (ttfb_of(t.ttfb_base, t.ttfb_slope, x, 1.0) <= 0).any():
            _fail("ttfb_slope", f"makes some service's TTFB reach 0 or below by t = {x}")
    worst = _ttfb_bound(t)
    if worst > MAX_TTFB:
        _fail("ttfb_factor", f"with ttfb_base and ttfb_slope gives TTFBs up to {worst:.1f} s, over {MAX_TTFB:.0f} s")


def _check_event_order(t: "Trace") -> None:
    """Binds only of unbound services; unbinds and state changes only of bound ones.

    make_trace insists on this (a script that breaks it is a mistake); a Trace
    made by hand may break it, and the replay then skips such events.
    """
    if not len(t.event_kind):
        return
    bound = t.initially_bound.copy()
    # a Python loop over events only: traces have few of them
    for i, (kind, svc) in enumerate(zip(t.event_kind.tolist(), t.event_service.tolist())):
        if kind == BIND:
            if bound[svc]:
                raise ValueError(f"events: event {i} binds {t.services[svc]!r}, which is already bound")
            bound[svc] = True
        elif not bound[svc]:
            raise ValueError(f"events: event {i} ({EVENT_KINDS[kind]}) is for {t.services[svc]!r}, which is not bound")
        elif kind == UNBIND:
            bound[svc] = False


# ---- arrivals ---------------------------------------------------------------
# Each returns n non-decreasing arrival times (seconds) with mean rate `rate`.
# The non-homogeneous ones warp a unit-rate Poisson process through the
# inverse of the cumulative intensity, so they are exact Poisson processes.

def poisson_arrivals(n: int, rate: float, rng: np.random.Generator) -> _F64:
    """Steady Poisson arrivals at `rate` per second."""
    return np.cumsum(rng.exponential(1.0 / rate, n))


def bursty_arrivals(n: int, rate: float, rng: np.random.Generator, *, burst_factor: float = 10.0,
                    period: float = 2.0, burst: float = 0.2) -> _F64:
    """On/off traffic: every `period` s a `burst` s long burst at `burst_factor`
    times the quiet rate, with a random phase; the mean rate stays `rate`."""
    if not (burst_factor >= 1 and period > 0 and 0 < burst < period):
        raise ValueError(f"bursty: need burst_factor >= 1 and 0 < burst < period, got "
                         f"burst_factor={burst_factor!r} period={period!r} burst={burst!r}")
    quiet = rate * period / (burst_factor * burst + period - burst)
    loud = burst_factor * quiet
    per_period = loud * burst + quiet * (period - burst)  # expected arrivals in one period
    phase = rng.uniform(0.0, period)
    # unit-rate arrivals, offset so that time 0 is `phase` into a period
    u = np.cumsum(rng.exponential(1.0, n)) + _cumulative_bursty(phase, period, burst, loud, quiet)
    k = np.floor(u / per_period)
    rem = u - k * per_period
    r = np.where(rem < loud * burst, rem / loud, burst + (rem - loud * burst) / quiet)
    t = np.maximum(k * period + r - phase, 0.0)
    return np.maximum.accumulate(t)  # rounding at period edges must not unsort


def _cumulative_bursty(x: float, period: float, burst: float, loud: float, quiet: float) -> float:
    k, r = divmod(x, period)
    return k * (loud * burst + quiet * (period - burst)) + loud * min(r, burst) + quiet * max(r - burst, 0.0)


def diurnal_arrivals(n: int, rate: float, rng: np.random.Generator, *, period: Optional[float] = None,
                     depth: float = 0.8) -> _F64:
    """A day compressed into `period` seconds (default: the whole trace): the rate
    ramps from rate*(1-depth) at t=0 to rate*(1+depth) at period/2 and back."""
    if not 0 <= depth < 1:
        raise ValueError(f"diurnal: depth must be in [0, 1), got {depth!r}")
    if period is None:
        period = max(n, 1) / rate
    if not period > 0:
        raise ValueError(f"diurnal: period must be > 0, got {period!r}")
    u = np.cumsum(rng.exponential(1.0, n))
    if n == 0:
        return u
    w = 2 * np.pi / period

    def cumulative(t: Any) -> Any:  # t a float or an array; integral of rate * (1 - depth * cos(w t))
        return rate * (t - depth * np.sin(w * t) / w)

    horizon = 1.2 * u[-1] / rate + period
    while cumulative(horizon) < u[-1]:
        horizon *= 2
    # cumulative() is strictly increasing (depth < 1): invert it on a fine grid
    grid = np.linspace(0.0, horizon, int(min(1 << 20, max(1 << 16, 4096 * horizon / period))))
    t = np.interp(u, cumulative(grid), grid)
    return np.maximum.accumulate(t)


PATTERNS: Dict[str, Callable[..., _F64]] = {
    "poisson": poisson_arrivals, "bursty": bursty_arrivals, "diurnal": diurnal_arrivals,
}


# ---- event scripts ------------------------------------------------------------
# Each returns a list of (time, kind, service) for make_trace(events=...);
# a service is an index or a name.

def down_up(service: _ServiceRef, down_at: float, up_at: float) -> _Script:
    """The service goes DOWN at `down_at` and comes back UP at `up_at`."""
    return [(down_at, DOWN, service), (up_at, UP, service)]


def out_of_service(service: _ServiceRef, at: float, back_at: Optional[float] = None) -> _Script:
    """OUT_OF_SERVICE at `at`, UP again at `back_at` if given."""
    ev: _Script = [(at, OUT_OF_SERVICE, service)]
    return ev if back_at is None else ev + [(back_at, UP, service)]


def bind_at(service: _ServiceRef, at: float) -> _Script:
    """A late bind: the service is unbound until `at` (make_trace leaves it out of initially_bound)."""
    return [(at, BIND, service)]


def unbind_at(service: _ServiceRef, at: float) -> _Script:
    return [(at, UNBIND, service)]


def flap(service: _ServiceRef, start: float, period: float, count: int) -> _Script:
    """`count` DOWN/UP cycles of `period` seconds each, from `start`."""
    ev: _Script = []
    for i in range(count):
        ev += down_up(service, start + i * period, start + (i + 0.5) * period)
    return ev


def rolling_restart(services: Iterable[_ServiceRef], start: float, downtime: float, gap: float) -> _Script:
    """Each service in turn DOWN for `downtime` s, the next one `gap` s later."""
    ev: _Script = []
    for i, s in enumerate(services):
        ev += down_up(s, start + i * gap, start + i * gap + downtime)
    return ev


# ---- the builder --------------------------------------------------------------

def make_trace(n_services: int = 64, n_requests: int = 100_000, rate: float = 10_000.0, pattern: str = "poisson",
               seed: int = 0, *, pattern_options: Optional[Dict[str, Any]] = None,
               weights: Union[None, str, Sequence[int], npt.NDArray[np.integer[Any]]] = None,
               slow_fraction: float = 0.1, slow_factor: float = 8.0,
               degrading: Union[int, Sequence[int], npt.NDArray[np.integer[Any]]] = 0,
               degrade_factor: float = 10.0, error_rate: float = 0.05, events: Iterable[_EventTuple] = (),
               mss: int = 1460, names: Optional[Iterable[str]] = None) -> Trace:
    """A seeded appliance-like trace.

    n_services, n_requests, rate (mean requests per second), pattern ("poisson",
    "bursty", "diurnal"; `pattern_options` go to its function), seed.
    weights: None (all 1), "random" (1..100) or one int per service.
    slow_fraction of the services have `slow_factor` times the TTFB; `degrading`
    services (a count, or indices) degrade linearly to `degrade_factor` times
    their TTFB by the last arrival. error_rate: share of 404/500/503 responses.
    events: (time, kind, service) tuples, e.g. from down_up(); a service whose
    first event is BIND starts unbound. mss: bytes per packet.
    """
    n_services = _int_arg("n_services", n_services, 1)
    n_requests = _int_arg("n_requests", n_requests, 0)
    mss = _int_arg("mss", mss, 1)
    if not (np.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be a positive number of requests per second, got {rate!r}")
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {pattern!r}")
    for arg, v in (("slow_fraction", slow_fraction), ("error_rate", error_rate)):
        if not 0 <= v <= 1:
            raise ValueError(f"{arg} must be in [0, 1], got {v!r}")
    if not (slow_factor >= 1 and degrade_factor >= 1):
        raise ValueError(f"slow_factor and degrade_factor must be >= 1, got {slow_factor!r}, {degrade_factor!r}")
    names = tuple(f"S{i}" for i in range(n_services)) if names is None else tuple(names)
    if len(names) != n_services:
        raise ValueError(f"names: need {n_services}, got {len(names)}")

    # independent streams, so changing one part (e.g. the pattern) leaves the others as they were
    r_arr, r_svc, r_size, r_time, r_status = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5))
    arrival = PATTERNS[pattern](n_requests, float(rate), r_arr, **(pattern_options or {}))
    horizon = float(arrival[-1]) if n_requests else 0.0

    w = _weights(weights, n_services, r_svc)
    base = np.clip(_lognormal(r_svc, 0.02, 0.4, n_services), 0.002, 0.25)
    order = r_svc.permutation(n_services)  # the first ones are slow, the last ones may degrade
    base[order[:round(slow_fraction * n_services)]] *= slow_factor
    slope = np.zeros(n_services)
    if horizon > 0:
        slope[_degrading(degrading, order)] = (degrade_factor - 1.0) / horizon

    req_bytes = _heavy_sizes(r_size, n_requests, median=350, sigma=0.6, tail=0.01, xm=20_000, alpha=1.3)
    resp_bytes = _heavy_sizes(r_size, n_requests, median=6_000, sigma=1.3, tail=0.05, xm=200_000, alpha=1.2)
    factor = np.clip(_lognormal(r_time, 1.0, 0.3, n_requests), 0.05, 4.0)
    transfer = resp_bytes / np.clip(_lognormal(r_time, 2e6, 1.0, n_requests), 1e4, 1e9)  # client bytes/s
    np.minimum(transfer, 300.0, out=transfer)
    status = _statuses(r_status, n_requests, error_rate)

    ev_time, ev_kind, ev_svc = _events(events, names)
    bound = np.ones(n_services, dtype=bool)
    first: Dict[int, int] = {}
    for k, s in zip(ev_kind.tolist(), ev_svc.tolist()):
        first.setdefault(s, k)
    bound[[s for s, k in first.items() if k == BIND]] = False

    trace = Trace(
        services=names, weights=w, initially_bound=bound, ttfb_base=base, ttfb_slope=slope,
        arrival=arrival, ttfb_factor=factor, transfer=transfer, status=status,
        req_bytes=req_bytes, resp_bytes=resp_bytes,
        req_packets=_packets(req_bytes, mss), resp_packets=_packets(resp_bytes, mss),
        event_time=ev_time, event_kind=ev_kind, event_service=ev_svc)
    _check_event_order(trace)
    worst = _ttfb_bound(trace)
    if worst > GENERATED_MAX_TTFB:
        raise ValueError(f"slow_factor and degrade_factor give TTFBs up to {worst:.0f} s "
                         f"(over {GENERATED_MAX_TTFB:.0f} s): lower them")
    return trace


def _int_arg(arg: str, v: object, low: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
        raise ValueError(f"{arg} must be an int >= {low}, got {v!r}")
    return int(v)


def _weights(weights: Union[None, str, Sequence[int], npt.NDArray[np.integer[Any]]], n: int,
             rng: np.random.Generator) -> npt.NDArray[np.uint8]:
    if weights is None:
        return np.ones(n, dtype=np.uint8)
    if isinstance(weights, str) and weights == "random":
        return rng.integers(1, 101, n).astype(np.uint8)
    w = np.asarray(weights)
    if w.shape != (n,) or not np.issubdtype(w.dtype, np.integer) or ((w < 1) | (w > 100)).any():
        raise ValueError(f"weights must be None, 'random' or {n} ints in 1..100")
    return w.astype(np.uint8)


def _degrading(degrading: Union[int, Sequence[int], npt.NDArray[np.integer[Any]]],
               order: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Indices of the degrading services: a count taken from the end of `order`
    (fast services first, so a degraded TTFB stays far under the limit), or indices."""
    n = len(order)
    if isinstance(degrading, (int, np.integer)) and not isinstance(degrading, bool):
        if not 0 <= degrading <= n:
            raise ValueError(f"degrading must be a count in 0..{n} or service indices, got {degrading!r}")
        return order[n - int(degrading):]
    idx = np.asarray(degrading, dtype=np.int64)
    if idx.ndim != 1 or ((idx < 0) | (idx >= n)).any():
        raise ValueError(f"degrading indices must be in 0..{n - 1}, got {degrading!r}")
    return idx


def _lognormal(rng: np.random.Generator, median: float, sigma: float, n: int) -> _F64:
    """rng.lognormal, about 30 % faster (in-place exp of the ziggurat's normals)."""
    z = rng.standard_normal(n)
    z *= sigma
    z += np.log(median)
    return np.exp(z, out=z)


def _heavy_sizes(rng: np.random.Generator, n: int, *, median: float, sigma: float, tail: float, xm: float,
                 alpha: float) -> _U64:
    """Lognormal body with a `tail` share of Pareto(alpha, xm) sizes, capped at MAX_BYTES."""
    size = _lognormal(rng, median, sigma, n)
    in_tail = rng.random(n) < tail
    size[in_tail] = xm * (1.0 + rng.pareto(alpha, int(in_tail.sum())))
    np.clip(size, 1.0, MAX_BYTES, out=size)
    return np.ceil(size, out=size).astype(np.uint64)


def _packets(nbytes: _U64, mss: int) -> _U64:
    """Segments of `mss` bytes plus one for the handshake-ish overhead."""
    packets: _U64 = (nbytes + np.uint64(mss - 1)) // np.uint64(mss) + np.uint64(1)
    return packets


def _statuses(rng: np.random.Generator, n: int, error_rate: float) -> npt.NDArray[np.uint16]:
    """Mostly 200; errors split 404 : 500 : 503 as 3 : 1 : 1."""
    u = rng.random(n)
    cuts = np.array([1 - error_rate, 1 - 0.4 * error_rate, 1 - 0.2 * error_rate])
    return np.array([200, 404, 500, 503], dtype=np.uint16)[np.searchsorted(cuts, u, side="right")]


def _events(events: Iterable[_EventTuple], names: Tuple[str, ...]
            ) -> Tuple[_F64, npt.NDArray[np.uint8], npt.NDArray[np.uint32]]:
    index = {name: i for i, name in enumerate(names)}
    times: List[float] = []
    kinds: List[int] = []
    svcs: List[int] = []
    for i, ev in enumerate(events):
        try:
            t, kind, svc = ev
        except (TypeError, ValueError):
            raise ValueError(f"events[{i}] must be (time, kind, service), got {ev!r}") from None
        if isinstance(kind, str):
            if kind not in EVENT_KINDS:
                raise ValueError(f"events[{i}]: kind must be one of {', '.join(EVENT_KINDS)}, got {kind!r}")
            kind = EVENT_KINDS.index(kind)
        if isinstance(svc, str):
            if svc not in index:
                raise ValueError(f"events[{i}]: unknown service {svc!r}")
            svc = index[svc]
        if not (0 <= svc < len(names)) or kind not in range(len(EVENT_KINDS)):
            raise ValueError(f"events[{i}]: bad kind or service in {ev!r}")
        times.append(float(t))
        kinds.append(int(kind))
        svcs.append(int(svc))
    order = np.argsort(np.array(times), kind="stable")  # same-time events keep their given order
    return (np.array(times, dtype=np.float64)[order], np.array(kinds, dtype=np.uint8)[order],
            np.array(svcs, dtype=np.uint32)[order])
