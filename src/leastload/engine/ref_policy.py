"""The reference's policy: slow start, passive ejection, draining and the
utilization weights in plain Python, over the reference engine (oracle.py).

The C core states the same rules a second time (csrc/ll_slowstart.c,
ll_ejection.c, ll_utilization.c, driven by ll_policy.c); the differential
machine holds the two to the same caps, phases, ejections and events after
every step. The rules: docs/slow-start.md and docs/embedding.md.

Time: a policy call reads the clock once, at its start, when the policy is
on (a slow-start rate, outlier_failures or weights_from_utilization set),
and every rule runs at that time. What falls due (an interval boundary, an
ejection's end, the weights' update) runs at the first call that reads the
clock at or after it, in time order; at the same time the weights' update
comes first, then the services in bind order. Several due items of one
service run one after the other. Manual PERCENT mode also runs at the first
call of the second after the last plan (its cap follows the others' rate).
"""

import math
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .errors import MAX_EJECTION_TIME, STATES, check_choice
from .policy import MAX_OUTLIER_EVENTS, VirtualServerFacade
from .settings import WINDOWED
from .utilization import UPDATE_PERIOD, UtilizationWeights

MAX_INCREMENTS = 200  # the vendor leaves automated slow start after 200 increments
NO_TRAFFIC_INTERVALS = 3  # ... or after three successive intervals without traffic


class _Outlier:
    """Passive-ejection record of one service (kept while it is bound)."""

    __slots__ = ("count", "since", "until", "returned")

    def __init__(self) -> None:
        self.count = 0          # ejections so far, after decay
        self.since: Optional[float] = None     # when the current ejection began
        self.until: Optional[float] = None     # when it ends; None: not ejected
        self.returned: Optional[float] = None  # when the last ejection ended


class _Ramp:
    """Slow start of one service."""

    __slots__ = ("start", "increments", "cap", "next_boundary", "selected_mark", "quiet", "paused_left", "holding",
                 "failure_mark", "held")

    def __init__(self, start: float, interval: int, selected: int) -> None:
        self.start = start              # when it became new (bind, DOWN -> UP, a return)
        self.increments = 0             # automated: boundaries passed so far
        self.cap = 0                    # requests per second allowed now
        self.next_boundary = start + interval if interval else math.inf
        self.selected_mark = selected   # its selection count at the last boundary
        self.quiet = 0                  # successive intervals without traffic
        # while its service cannot be picked (DOWN, OUT_OF_SERVICE, ejected, draining) the
        # ramp's clock stands: the time left to its next boundary, and next_boundary is inf
        self.paused_left: Optional[float] = None
        self.holding = False            # handing over (slow_start_handover="caught_up"): cap at the fair share
        self.failure_mark = 0           # slow_start_guard: its failures at the last boundary
        self.held: Optional[str] = None  # slow_start_guard: why the last boundary held it back (None: it did not)


class ReferencePolicy(VirtualServerFacade):
    """The policy in plain Python (mixed in before the reference engine)."""

    __slots__ = ()

    if TYPE_CHECKING:  # what it reads of the reference engine (oracle.Engine), its own engine
        _services: Dict[str, Any]
        _now: float

        def _score(self, s: Any) -> float: ...

    def _policy_init(self) -> None:
        self._ramps: Dict[str, _Ramp] = {}  # the services in slow start
        self._outliers: Dict[str, _Outlier] = {}  # the services ever ejected since bind
        self._tick_due = math.inf  # weights_from_utilization: the next time reports become weights
        self._percent_due = math.inf  # manual PERCENT: the second after the last plan
        self._util = UtilizationWeights()
        self._exit_log: List[Tuple[float, str, str]] = []
        self._outlier_log: List[Tuple[float, str, str]] = []

    @property
    def slow_start_exits(self) -> List[Tuple[float, str, str]]:
        """(time, service, why), in order: what ended each slow start."""
        return self._exit_log

    @property
    def outlier_events(self) -> List[Tuple[float, str, str]]:
        """(time, service, what): ejections, returns, ejections refused (the newest 1000-2000)."""
        return self._outlier_log

    def _policy_start(self, v: Dict[str, Any], created: bool) -> None:
        self._set_outlier_failures(self._outlier_k)
        if v["window_seconds"] != 14:
            self._set_window(v["window_seconds"])
        if self._by_utilization:
            self._start_ticks(self._policy_clock())

    def _policy_on(self) -> bool:
        return bool(self._rate or self._outlier_k or self._by_utilization)

    def _policy_clock(self) -> float:
        """The clock read for the policy: it becomes the engine's time (PEAKEWMA's too),
        as the C core's ll_set_time() makes it."""
        self._now = self.now()
        return self._now

    def _time(self) -> float:
        """A policy call's time: the clock, read once (only while the policy is on)."""
        return self._policy_clock() if self._policy_on() else math.nan

    # ---- settings ---------------------------------------------------------------

    def _policy_set(self, v: Dict[str, Any], rate: int, unit: str, interval: int, outlier_k: int,
                    ejection_time: float, percent: int, netmask: str, key_settings: Any) -> None:
        on = self._policy_on() or bool(rate or outlier_k or v.get("weights_from_utilization"))
        now = self._policy_clock() if on else math.nan
        self._apply_engine_settings(v, netmask, key_settings)
        self._handover = v.get("slow_start_handover", self._handover)
        self._guard = v.get("slow_start_guard", self._guard)
        if v.get("weights_from_utilization", self._by_utilization) != self._by_utilization:
            self._by_utilization = v["weights_from_utilization"]
            self._start_ticks(now)
        was_manual = self._interval == 0
        self._rate, self._unit, self._interval = rate, unit, interval
        if rate == 0:
            self._end_all(now)
        else:
            for name in self._in_ramp():
                ramp = self._ramps[name]
                paused = ramp.paused_left is not None
                due = now + ramp.paused_left if ramp.paused_left is not None else ramp.next_boundary
                if interval == 0:
                    due = math.inf
                elif was_manual:  # manual -> automated: each ramp starts over from now
                    ramp.start, ramp.increments, ramp.cap, ramp.quiet = now, 0, 0, 0
                    due = now + interval
                else:  # a new interval counts from now; a new rate applies from the next boundary
                    due = min(due, now + interval)
                if paused:  # its clock still stands: only the time left changes
                    ramp.paused_left = due - now
                else:
                    ramp.next_boundary = due
                if interval == 0:
                    ramp.cap = self._cap_for(ramp)
                self._set_cap(name, ramp.cap)
        self._outlier_k, self._ejection_time, self._max_ejection_percent = outlier_k, ejection_time, percent
        self._set_outlier_failures(outlier_k)
        if outlier_k == 0:  # ejection off: every ejected service returns now
            for name in self.services:
                record = self._outliers.get(name)
                if record is not None and record.until is not None:
                    self._return(name, record, now)
        self._plan(now)

    # ---- the lifecycle that starts slow start -------------------------------

    def bind(self, name: str, weight: int = 1) -> None:
        with self.atomic():
            now = self._time()  # read before anything changes: if it raises, nothing is bound
            super().bind(name, weight)
            if self._policy_on():
                self._maybe_begin_ramp(name, now)

    def unbind(self, name: str) -> None:
        with self.atomic():
            now = self._time()
            super().unbind(name)
            self._outliers.pop(name, None)
            self._util.forget(name)
            if self._ramps.pop(name, None) is not None:
                self._plan(now)
            elif self._ramps and not self._has_others_up():
                self._end_all(now)  # the last normal service left: nobody takes the surplus

    def set_state(self, name: str, state: str) -> None:
        with self.atomic():
            self.state(name)  # raises UnknownService / TypeError for a bad name
            check_choice("state", state, STATES)
            now = self._time()  # a clock's callback may change the state: DOWN is read after it
            was_down = self.state(name) == "DOWN"
            super().set_state(name, state)
            if was_down and state == "UP":
                self._maybe_begin_ramp(name, now)
            elif not self._has_others_up() and self._ramps:
                self._end_all(now)  # nobody left to take the surplus
            elif state != "UP":
                self._pause_ramp(name, now)
            else:
                self._resume_ramp(name, now)  # OUT_OF_SERVICE -> UP: the ramp goes on where it stood

    def drain(self, name: str) -> None:
        with self.atomic():
            self.weight(name)  # raises UnknownService / TypeError for a bad name
            now = self._time()
            super().drain(name)  # unbinds at once if nothing is active
            if name in self and self._ramps and not self._has_others_up():
                self._end_all(now)  # it was the last normal service: nobody takes the surplus
            elif name in self:
                self._pause_ramp(name, now)

    def slow_start(self, name: str) -> Optional[Dict[str, Any]]:
        """Where `name` stands in slow start: None, or a dict of its ramp."""
        with self.atomic():
            self.weight(name)  # raises UnknownService / TypeError for a bad name
            ramp = self._ramps.get(name)
            if ramp is None:
                return None
            state: Dict[str, Any] = {"cap": ramp.cap, "increments": ramp.increments, "since": ramp.start,
                                     "mode": "manual" if self._interval == 0 else "automated"}
            if self._guard:  # closed loop: why the last boundary held it back (None: it did not)
                state["held"] = ramp.held
            return state

    def _in_ramp(self) -> List[str]:
        """The services in slow start, in bind order."""
        return [name for name in self.services if name in self._ramps] if self._ramps else []

    def _maybe_begin_ramp(self, name: str, now: float) -> None:
        info = self._services[name]
        if self._rate and (info.ejected or info.draining) and info.state == "UP":
            # it cannot be picked: its ramp begins when it can (its ejection's end), once
            self._drop_ramp(name, now)
            return
        if self._rate == 0 or info.state != "UP" or not self._has_others_up(besides=name):
            # slow start off, or nobody else to take the surplus: its full share at once
            self._drop_ramp(name, now)
            return
        ramp = _Ramp(now, self._interval, info.selected)
        if self._guard:
            ramp.failure_mark = info.failures
        self._ramps[name] = ramp
        if self._interval == 0:
            ramp.cap = self._cap_for(ramp)
        self._set_cap(name, ramp.cap)
        self._plan(now)

    def _drop_ramp(self, name: str, now: float) -> None:
        if self._ramps.pop(name, None) is not None:  # a ramp kept from before
            self._set_cap(name, None)
            self._plan(now)

    def _pause_ramp(self, name: str, now: float) -> None:
        """`name` can no longer be picked: its ramp's clock stops."""
        ramp = self._ramps.get(name)
        if ramp is None or ramp.paused_left is not None:
            return
        ramp.paused_left = ramp.next_boundary - now  # inf for a manual ramp
        ramp.next_boundary = math.inf
        self._plan(now)

    def _resume_ramp(self, name: str, now: float) -> None:
        """`name` can be picked again: its ramp's clock runs on from where it stood."""
        ramp = self._ramps.get(name)
        info = self._services[name]
        if ramp is None or ramp.paused_left is None or info.ejected or info.draining:
            return  # not paused, or still not to be picked
        ramp.next_boundary = now + ramp.paused_left
        ramp.paused_left = None
        self._plan(now)

    def _has_others_up(self, besides: Optional[str] = None) -> bool:
        """Can a service other than `besides` take what slow start holds back (UP,
        not draining, not ejected, not in slow start itself)? O(1)."""
        others = self._totals()[3]
        if besides is not None and self._is_open(besides):
            others -= 1
        return others > 0

    # ---- the deadline --------------------------------------------------------------

    def _due(self) -> List[Tuple[float, int, str]]:
        """What is due and when: (time, bind index, name); the weights' update is (t, -1, "")."""
        items = [(self._tick_due, -1, "")] if self._tick_due < math.inf else []
        for i, name in enumerate(self.services):
            record = self._outliers.get(name)
            ramp = self._ramps.get(name)
            if record is not None and record.until is not None:
                items.append((record.until, i, name))
            elif ramp is not None and ramp.next_boundary < math.inf:
                items.append((ramp.next_boundary, i, name))
        return items

    def _plan(self, now: float) -> None:
        """Sets the engine's deadline to the next time the policy must run."""
        self._percent_due = math.inf
        if self._ramps and self._interval == 0 and self._unit == "PERCENT":
            self._percent_due = math.floor(now) + 1  # manual PERCENT follows the others' rate: once a second
        self._set_deadline(min([self._percent_due] + [t for t, _, _ in self._due()]))

    def _on_deadline(self, now: float) -> None:
        """Runs at the first call that sees the clock reach the deadline: what fell
        due, in time order, then manual PERCENT's caps."""
        due = min([self._percent_due] + [t for t, _, _ in self._due()])
        self._set_deadline(due)
        if not now >= due:
            return  # what was due went away meanwhile
        self._set_deadline(math.inf)  # no re-entry while we read the engine
        while True:
            items = [item for item in self._due() if item[0] <= now]
            if not items:
                break
            _, _, name = min(items)
            record = self._outliers.get(name)
            if name == "":
                self._apply_utilization(now)
            elif record is not None and record.until is not None:
                self._return(name, record, now)
            else:
                ramp = self._ramps[name]
                while name in self._ramps and ramp.next_boundary <= now:
                    self._boundary(name, ramp, now)
                if name in self._ramps:
                    self._set_cap(name, ramp.cap)
        if self._interval == 0:  # manual: the caps follow the rate (PERCENT: the others' rate)
            for name in self._in_ramp():
                ramp = self._ramps[name]
                ramp.cap = self._cap_for(ramp)
                self._set_cap(name, ramp.cap)
        self._plan(now)

    # ---- slow start's rules ------------------------------------------------------

    def _boundary(self, name: str, ramp: _Ramp, now: float) -> None:
        """One interval boundary of an automated ramp: the exits, then the increment."""
        selected = self._services[name].selected
        traffic, ramp.selected_mark = selected - ramp.selected_mark, selected
        if ramp.cap > 0:
            ramp.quiet = 0 if traffic else ramp.quiet + 1
        total, up = self._last_second()
        ramp.next_boundary += self._interval
        if ramp.quiet >= NO_TRAFFIC_INTERVALS:
            return self._end(name, "no traffic for three intervals", now)
        if ramp.cap > 0 and 0 < total < ramp.cap:
            return self._end(name, "the request rate is below the new-service rate", now)
        if ramp.holding:
            if self._caught_up(name):
                return self._end(name, "its window caught up with the others'", now)
            ramp.cap = self._fair_cap()
            return None
        if self._guard:
            ramp.held = self._unhealthy(name, ramp, traffic)
            if ramp.held is not None:  # closed loop: one increment back, never below the first
                ramp.increments = max(1, ramp.increments - 1) if ramp.increments else 0
                ramp.cap = self._cap_for(ramp) if ramp.increments else 0
                return None
        ramp.increments += 1
        why = None
        if ramp.increments >= MAX_INCREMENTS:
            why = "incremented 200 times"
        elif self._unit == "PERCENT" and ramp.increments * self._rate >= 100:
            why = "the percentage reached 100"
        else:
            ramp.cap = self._cap_for(ramp)
            if total > 0 and ramp.cap * up >= total:
                why = "the cap reached the fair share"
        if why is None:
            return None
        if self._handover == "caught_up" and self.method in WINDOWED and not self._caught_up(name):
            # the ramp would hand over to a window that still holds less than its peers':
            # the method would send it everything for seconds. Hold at the fair share instead.
            ramp.holding = True
            ramp.cap = self._fair_cap()
            return None
        return self._end(name, why, now)

    def _peers(self, name: str) -> List[Any]:
        """The services that take what slow start holds back, `name` left out, in bind order."""
        return [self._services[n] for n in self.services if n != name and self._is_open(n)]

    def _unhealthy(self, name: str, ramp: _Ramp, traffic: int) -> Optional[str]:
        """slow_start_guard: why `name` should not step up now (None: it may). Its TTFB
        average against the mean of its peers' (past its first step it needs one of
        its own), and its failures per request since the last boundary against its
        peers' since they were bound (and above 1 %). O(n), at a boundary only."""
        me = self._services[name]
        failures, ramp.failure_mark = me.failures - ramp.failure_mark, me.failures
        peers = self._peers(name)
        ttfbs = [p.ttfb_us / 1e6 for p in peers if p.ttfb_known]
        ttfb = me.ttfb_us / 1e6 if me.ttfb_known else None
        if ttfb is None and ttfbs and ramp.increments:  # past its first step: judged on evidence only
            return "no TTFB of its own yet"
        if ttfb is not None and ttfbs and sum(ttfbs) > 0:
            ratio = ttfb / (sum(ttfbs) / len(ttfbs))
            if ratio > self._guard:
                return f"TTFB {ratio:.1f}x its peers'"
        if traffic:
            rate = failures / traffic
            picked = sum(p.selected for p in peers)
            peers_rate = sum(p.failures for p in peers) / picked if picked else 0.0
            if rate > 0.01 and rate > self._guard * peers_rate:
                return f"failures {rate:.0%} of its requests, its peers' {peers_rate:.0%}"
        return None

    def _fair_cap(self) -> int:
        """The cap of a ramp that holds: the others' rate, rounded up (at least 1)."""
        return min(max(1, math.ceil(self._others_rate())), 0xFFFFFFFE)

    def _caught_up(self, name: str) -> bool:
        """Its Nw is at least the mean Nw of its peers. O(n): at the boundaries of a ramp
        that hands over."""
        peers = [self._score(p) for p in self._peers(name)]
        return not peers or self._score(self._services[name]) >= sum(peers) / len(peers)

    def _cap_for(self, ramp: _Ramp) -> int:
        """The cap of a ramp now: the rate (manual) or its increments, cut to the others' rate."""
        steps = 1 if self._interval == 0 else ramp.increments
        others = self._others_rate()
        if self._unit == "PERCENT":
            return min(int(steps * self._rate * others // 100), 0xFFFFFFFE)
        cap = steps * self._rate
        if self._interval and others > 0:
            cap = min(cap, int(others))  # a final increment never gives it more than the others
        return min(cap, 0xFFFFFFFE)

    def _others_rate(self) -> float:
        """Average requests in the last second of the services that take what slow start
        holds back (UP, not draining, not ejected, no cap): the engine's aggregates."""
        _, _, _, others, _, _, last_others = self._totals()
        return last_others / others if others else 0.0

    def _last_second(self) -> Tuple[int, int]:
        """(requests the UP services served in the last second, UP services)."""
        _, up, _, _, _, last_up, _ = self._totals()
        return last_up, up

    def _end(self, name: str, why: str, now: float) -> None:
        del self._ramps[name]
        self._set_cap(name, None)  # the engine's aggregates count it among the others now
        self._exit_log.append((now, name, why))

    def _end_all(self, now: float) -> None:
        for name in self._in_ramp():
            self._end(name, "slow start switched off" if self._rate == 0 else "no other service UP", now)
        self._plan(now)

    # ---- passive outlier ejection ----------------------------------------------

    def _judge_outlier(self, name: str) -> None:
        """The engine saw `outlier_failures` failures in a row on `name` (not ejected,
        not draining): eject it unless the percentage cap or the last-eligible rule says no."""
        now = self._now  # the engine's last reading: ending a transaction read the clock
        bound, _, pickable, _, ejected, _, _ = self._totals()
        if (ejected + 1) * 100 > self._max_ejection_percent * bound:
            return self._log_outlier(now, name, "kept: max ejection percent")
        if pickable - (self.state(name) == "UP") < 1:
            return self._log_outlier(now, name, "kept: last eligible service")
        record = self._outliers.get(name) or _Outlier()
        if record.returned is not None:  # decay: one ejection forgiven per healthy period
            healthy = math.floor((now - record.returned) / self._ejection_time)
            record.count = max(0, record.count - healthy)
        record.count += 1
        record.since = now
        record.until = now + min(self._ejection_time * record.count, MAX_EJECTION_TIME)
        self._outliers[name] = record
        self._set_ejected(name, True)
        self._log_outlier(now, name, "ejected")
        if self._ramps and not self._has_others_up():
            self._end_all(now)  # it was the last normal service: nobody takes the surplus
        else:
            self._pause_ramp(name, now)
        self._plan(now)
        return None

    def end_ejection(self, name: str) -> bool:
        """Ends the passive ejection of `name` now, as its end time would (slow start
        applies as after DOWN -> UP): what a passed active health check does in the
        proxy. True when it was ejected; False, and nothing changes, when it was not."""
        with self.atomic():
            self.weight(name)  # raises UnknownService / TypeError for a bad name
            record = self._outliers.get(name)
            if record is None or record.until is None:
                return False
            now = self._time()
            self._return(name, record, now, "returned early")
            self._plan(now)
            return True

    def _return(self, name: str, record: _Outlier, now: float, what: str = "returned") -> None:
        """An ejection ends: the service comes back as from DOWN to UP (slow start applies)."""
        record.until = None
        record.returned = now
        self._set_ejected(name, False)
        self._log_outlier(now, name, what)
        self._maybe_begin_ramp(name, now)

    def _log_outlier(self, now: float, name: str, what: str) -> None:
        self._outlier_log.append((now, name, what))
        if len(self._outlier_log) > MAX_OUTLIER_EVENTS:
            del self._outlier_log[: MAX_OUTLIER_EVENTS // 2]

    def ejection(self, name: str) -> Optional[Dict[str, Any]]:
        """Where `name` stands in passive ejection: None, or a dict of its ejection."""
        with self.atomic():
            self.weight(name)  # raises UnknownService / TypeError for a bad name
            record = self._outliers.get(name)
            if record is None or record.until is None:
                return None
            return {"until": record.until, "ejections": record.count, "since": record.since}

    # ---- weights from the backends' reported load ------------------------------

    def _report_utilization(self, name: str, qps: float, eps: float, utilization: float) -> float:
        with self.atomic():
            now = self._policy_clock()  # first: a clock's callback may unbind `name`
            self.weight(name)  # raises UnknownService / TypeError for a bad name
            return self._util.report(name, now, qps, eps, utilization)

    def _utilization_weights(self) -> Dict[str, Optional[float]]:
        with self.atomic():
            now = self._policy_clock()
            return {name: self._util.weight(name, now) for name in self.services}

    def _start_ticks(self, now: float) -> None:
        self._tick_due = now + UPDATE_PERIOD if self._by_utilization else math.inf
        self._plan(now)

    def _apply_utilization(self, now: float) -> None:
        """The reports' weights become the engine's (O(n), once a second)."""
        for name, weight in self._util.engine_weights(list(self.services), now).items():
            if self.weight(name) != weight:
                self.set_weight(name, weight)
        self._start_ticks(now)
