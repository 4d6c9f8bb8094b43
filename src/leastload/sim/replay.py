"""Replaying a request trace (leastload.sim.workloads.Trace) through a vserver.

Two drivers make the same calls in the same order with the same values:

- `replay_per_call` drives any VirtualServer (C or reference) one public
  call at a time: it is the definition.
- the C engine's batch path (`Engine._replay`, csrc/ll_replay.c) makes
  those calls inside C with the GIL released, stopping only for service
  events and the slow-start policy, which run here in Python.

`replay()` takes the batch path when it can: not with request keys (the C
batch carries none), which the hash methods pick by. What the calls are:

1. Services of the trace that are bound initially and not yet bound on the
   vserver are bound, in trace order, with the trace's weights.
2. Events (state changes, bind, unbind), completions and arrivals are
   taken in time order; at equal times events first, then completions
   (by request index), then the arrival.
3. An arrival at t: clock set to t; `select()`, or `select(key=keys[k])`
   when keys are given (a NoServiceAvailable drops the request: chosen -1); `record(chosen, bytes=req_bytes, packets=req_packets)`.
   Its TTFB is `workloads.ttfb_of(ttfb_base[s], ttfb_slope[s], t, ttfb_factor[k])`
   and it completes at `t + ttfb + transfer[k]`.
4. A completion at t: clock set to t; `record(s, bytes=resp_bytes,
   packets=resp_packets)`, then `finish(s, ttfb=ttfb, status=status[k])`.
   If its service was unbound (or unbound and bound again) since the
   request was dispatched, the transaction is gone and nothing is called.
5. An event on a service that cannot take it (a state change or unbind
   of an unbound service, a bind of a bound one) is skipped.
"""

import dataclasses
import heapq
import math
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Protocol, Tuple

import numpy as np
import numpy.typing as npt

from ..engine.errors import NoServiceAvailable
from .keys import KeySequence
from .workloads import BIND, DOWN, EVENT_KINDS, OUT_OF_SERVICE, UNBIND, UP, Trace, ttfb_of

# Either engine's VirtualServer (leastload.engine.native or leastload.reference): replay drives both.
_VServer = Any


class _SettableClock(Protocol):
    """The vserver's ManualClock (either engine's): replay sets it to each event's time."""

    def now(self) -> float: ...
    def set(self, t: float) -> None: ...

_STATE_OF_EVENT = {kind: EVENT_KINDS[kind] for kind in (DOWN, UP, OUT_OF_SERVICE)}  # the state it sets


@dataclass
class ReplayResult:
    """What a replay did: per request, and per trace service."""

    chosen: npt.NDArray[np.int32]     # int32 [requests]: trace service index, -1 = dropped
    selected: npt.NDArray[np.uint64]   # uint64 [services]: requests sent to each service
    bytes: npt.NDArray[np.uint64]      # uint64 [services]: request + response bytes recorded
    packets: npt.NDArray[np.uint64]    # uint64 [services]
    completed: npt.NDArray[np.uint64]  # uint64 [services]: transactions finished

    @classmethod
    def empty(cls, trace: Trace) -> "ReplayResult":
        n = len(trace.services)
        z: Callable[[], npt.NDArray[np.uint64]] = lambda: np.zeros(n, dtype=np.uint64)  # noqa: E731
        return cls(np.full(len(trace), -1, dtype=np.int32), z(), z(), z(), z())

    def equals(self, other: "ReplayResult") -> bool:
        return all(
            np.array_equal(getattr(self, f), getattr(other, f))
            for f in ("chosen", "selected", "bytes", "packets", "completed")
        )


class _Events:
    """The trace's service events, applied through the public API."""

    def __init__(self, vs: _VServer, clock: _SettableClock, trace: Trace) -> None:
        self.vs, self.clock, self.trace = vs, clock, trace
        self.gen = np.zeros(len(trace.services), dtype=np.uint32)  # bind generation
        self.next = 0

    def time_of_next(self) -> float:
        t = self.trace.event_time
        return float(t[self.next]) if self.next < len(t) else math.inf

    def apply_next(self) -> None:
        i, tr, vs = self.next, self.trace, self.vs
        self.next += 1
        self.clock.set(float(tr.event_time[i]))
        kind, s = int(tr.event_kind[i]), int(tr.event_service[i])
        name = tr.services[s]
        if kind in _STATE_OF_EVENT:
            if name in vs:
                vs.set_state(name, _STATE_OF_EVENT[kind])
        elif kind == BIND:
            if name not in vs:
                vs.bind(name, weight=int(tr.weights[s]))
                self.gen[s] += 1
        elif kind == UNBIND:
            if name in vs:
                vs.unbind(name)
                self.gen[s] += 1
        else:
            raise ValueError(f"event_kind[{i}] must be 0..{len(EVENT_KINDS) - 1}, got {kind}")


def _own_copy(trace: Trace) -> Trace:
    """The replay's own copy of the trace, validated anew: arrays the caller
    changes after this (from another thread, say) cannot reach the replay.
    A sealed trace (Trace.sealed()) cannot be changed: it is its own copy."""
    if trace.is_sealed():
        return trace
    arrays = {f.name: np.array(getattr(trace, f.name), copy=True)
              for f in dataclasses.fields(trace) if isinstance(getattr(trace, f.name), np.ndarray)}
    return dataclasses.replace(trace, services=tuple(trace.services), **arrays)


def _check_before_binding(vs: _VServer, clock: _SettableClock, trace: Trace) -> None:
    """Everything a replay can refuse, checked before it binds anything."""
    known = set(trace.services)
    strangers = [n for n in vs.services if n not in known]
    if strangers:
        raise ValueError(f"services bound but not in the trace: {strangers[:5]!r}")


def _bind_initial(vs: _VServer, trace: Trace) -> None:
    for s, name in enumerate(trace.services):
        if trace.initially_bound[s] and name not in vs:
            vs.bind(name, weight=int(trace.weights[s]))


def _check_keys(trace: Trace, keys: Optional[KeySequence]) -> None:
    if keys is not None and len(keys) != len(trace):
        raise ValueError(f"keys must give one key per request of the trace ({len(trace)}), got {len(keys)}")


def replay_per_call(vs: _VServer, clock: _SettableClock, trace: Trace,
                    keys: Optional[KeySequence] = None) -> ReplayResult:
    """Replays `trace` through `vs` one public call at a time; `clock` is vs's ManualClock.
    `keys`: the request keys of a hash method, one per request (keys[k] for request k)."""
    _check_keys(trace, keys)
    trace = _own_copy(trace)
    _check_before_binding(vs, clock, trace)
    _bind_initial(vs, trace)
    res = ReplayResult.empty(trace)
    events = _Events(vs, clock, trace)
    index = {name: s for s, name in enumerate(trace.services)}
    pending: List[Tuple[float, int, int, int, float]] = []  # (time, request, service, generation, ttfb)

    def complete_until(limit: float) -> None:
        while True:
            te, tc = events.time_of_next(), (pending[0][0] if pending else math.inf)
            if te <= tc and te <= limit and te < math.inf:
                events.apply_next()
            elif pending and tc <= limit:
                tc, k, s, gen, ttfb = heapq.heappop(pending)
                clock.set(tc)
                if gen != events.gen[s]:
                    continue  # unbound (and maybe bound again) since dispatch: the transaction is gone
                name = trace.services[s]
                vs.record(name, bytes=int(trace.resp_bytes[k]), packets=int(trace.resp_packets[k]))
                res.bytes[s] += trace.resp_bytes[k]
                res.packets[s] += trace.resp_packets[k]
                vs.finish(name, ttfb=ttfb, status=int(trace.status[k]))
                res.completed[s] += 1
            else:
                return

    arrival, base, slope = trace.arrival, trace.ttfb_base, trace.ttfb_slope
    for k in range(len(trace)):
        t = float(arrival[k])
        complete_until(t)
        clock.set(t)
        try:
            name = vs.select() if keys is None else vs.select(key=keys[k])
        except NoServiceAvailable:
            continue
        s = index[name]
        res.chosen[k] = s
        res.selected[s] += 1
        vs.record(name, bytes=int(trace.req_bytes[k]), packets=int(trace.req_packets[k]))
        res.bytes[s] += trace.req_bytes[k]
        res.packets[s] += trace.req_packets[k]
        ttfb = ttfb_of(float(base[s]), float(slope[s]), t, float(trace.ttfb_factor[k]))
        heapq.heappush(pending, (t + ttfb + float(trace.transfer[k]), k, s, events.gen[s], ttfb))
    complete_until(math.inf)
    return res


def replay(vs: _VServer, clock: _SettableClock, trace: Trace,
           keys: Optional[KeySequence] = None) -> ReplayResult:
    """Replays `trace` through `vs`: inside C when vs is the C engine, else per call
    (and always per call with `keys`, one per request, for a hash method).

    The C path holds the vserver for the whole run: other threads' calls on it
    wait until the replay ends. It reads its own copy of the trace. Its setup
    does no per-service Python work when the vserver's services did not change
    since its last replay of a trace with the same services: the engine keeps
    the name -> slot mapping (and checks against it) until a bind or unbind."""
    if keys is not None or not hasattr(vs, "_replay"):
        return replay_per_call(vs, clock, trace, keys)
    trace = _own_copy(trace)
    with vs.atomic():
        slot_of, _ = vs._replay_mapping(trace)  # refuses bound services not in the trace
        vs._check_replay(clock, trace)  # the C path's own limits: its clock, 2**32 requests, 2**52 s
        if len(vs) < len(trace.services):  # else every service of the trace is bound already
            for s in np.flatnonzero(trace.initially_bound & (slot_of < 0)).tolist():
                vs.bind(trace.services[s], weight=int(trace.weights[s]))  # in trace order, as per call
        res = ReplayResult.empty(trace)
        vs._replay(trace, res, _Events(vs, clock, trace))
    return res
