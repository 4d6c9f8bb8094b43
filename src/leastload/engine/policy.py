"""The face both engines share: settings, the slow-start policy, show().

`VirtualServer` of each implementation is
`class VirtualServer(VirtualServerFacade, Engine)`: the engine (C or
reference) does the per-request work and enforces slow-start caps on the
select path; this mixin decides the caps, in plain Python, identical for
both, and runs only when the clock reaches its next deadline (an interval
boundary), never per request. See docs/slow-start.md for the rules.
Passive outlier ejection is decided here too (docs/embedding.md): the
engine counts failures in a row on the request path and calls
_on_outlier() when a service reaches the threshold.

Every public method holds the vserver (`self.atomic()`) for its whole run,
so a composite operation is one step for other threads. Control operations
cost O(log n): the engine keeps O(1) aggregates (_totals), and the due
times (ramp boundaries, ejection ends) sit in one heap with lazy deletion.
"""

import functools
import heapq
import inspect
import json
import pickle
import math
import textwrap
from typing import TYPE_CHECKING, Any, Callable, Collection, ContextManager, Dict, List, Optional, Set, Tuple, TypeVar, Union

from .errors import (MAX_EJECTION_TIME, STATES, NoServiceAvailable, bad_type, bad_value, check_choice,
                     check_exclude, check_peakewma_decay, shared_fixed)
from .methods import HASH_METHODS
from ..hashing.rendezvous import (DEFAULT_HASH_SEED, DEFAULT_HASHLENGTH, DEFAULT_NETMASK, DEFAULT_V6NETMASKLEN,
                                  KeySettings, check_netmask)
from .explain import Explanation, explain as explain_last_pick
from .settings import SETTABLE, SETTING, SETTINGS, SHARED_RECORD, WINDOWED, check_rate, check_settings
from .show import ServiceView, VServerView
from .types import Clock, Info, Totals
from .utilization import UPDATE_PERIOD, UtilizationWeights

if TYPE_CHECKING:  # what the facade uses of the engine it is mixed in before (C or reference)
    from ._interface import EngineAPI as _EngineBase
else:
    _EngineBase = object

MAX_INCREMENTS = 200  # the vendor leaves automated slow start after 200 increments
NO_TRAFFIC_INTERVALS = 3  # ... or after three successive intervals without traffic


MAX_OUTLIER_EVENTS = 2000  # outlier_events keeps the newest entries, so it cannot grow without end
SHARED_EVENTS = 200  # a shared vserver's two event lists keep this many (they travel in its segment)

_F = TypeVar("_F", bound=Callable[..., Any])


def _policy_step(method: _F) -> _F:
    """A step that may change the policy's state: in a shared vserver, that state is
    written to the segment at its end (the lock still held), so the next process to
    take the lock runs the policy from it: one policy per vserver, not one per process."""
    @functools.wraps(method)
    def step(self: "VirtualServerFacade", *args: Any, **kwargs: Any) -> Any:
        if self._shared is None:
            return method(self, *args, **kwargs)
        with self.atomic():
            try:
                return method(self, *args, **kwargs)
            finally:
                self._policy_store(self._policy_record())
    return step  # type: ignore[return-value]


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

    def __init__(self, start: Optional[float], interval: int, selected: int) -> None:
        self.start = start              # when it became new (bind, or DOWN -> UP)
        self.increments = 0             # automated: boundaries passed so far
        self.cap = 0                    # requests per second allowed now
        self.next_boundary = math.inf
        if interval:
            assert start is not None  # an automated ramp starts at a time read from the clock
            self.next_boundary = start + interval
        self.selected_mark = selected   # its selection count at the last boundary
        self.quiet = 0                  # successive intervals without traffic
        # while its service cannot be picked (DOWN, OUT_OF_SERVICE, ejected, draining) the
        # ramp's clock stands: the time left to its next boundary, and next_boundary is inf
        self.paused_left: Optional[float] = None
        self.holding = False            # handing over (slow_start_handover="caught_up"): cap at the fair share
        self.failure_mark = 0           # slow_start_guard: its failures at the last boundary
        self.held: Optional[str] = None  # slow_start_guard: why the last boundary held it back (None: it did not)


class _Tick:
    """weights_from_utilization: the next time the reported loads are applied as weights."""

    __slots__ = ("due",)

    def __init__(self, due: float) -> None:
        self.due = due


_Timer = Tuple[float, int, str, Union[_Ramp, _Outlier, _Tick]]


class VirtualServerFacade(_EngineBase):
    """Settings, slow start and show() over an engine class (mixed in before it)."""

    __slots__ = ()

    def __init__(self, method: str = "LEASTCONNECTION", clock: Optional[Clock] = None, *,
                 new_service_request: int = 0, new_service_request_unit: str = "PER_SECOND",
                 new_service_request_increment_interval: int = 0, startup_rr_factor: int = 0,
                 rtsp_nat: bool = False, outlier_failures: int = 0, outlier_ejection_time: float = 30,
                 outlier_max_ejection_percent: int = 50, window_seconds: int = 14, name: str = "vserver",
                 netmask: object = DEFAULT_NETMASK, v6netmasklen: int = DEFAULT_V6NETMASKLEN,
                 hashlength: int = DEFAULT_HASHLENGTH, hash_seed: int = DEFAULT_HASH_SEED,
                 slow_start_handover: str = "vendor", slow_start_guard: float = 0.0,
                 weights_from_utilization: bool = False, peakewma_decay: float = 10.0, shared: Optional[str] = None,
                 shared_capacity: int = 1024) -> None:
        given = locals()  # the keywords above are the table's settings (test_settings_table holds them to it)
        v = check_settings({s.name: given[s.name] for s in SETTINGS})  # everything checked first
        check_rate(v["new_service_request"], v["new_service_request_unit"])
        super().__init__(v["method"], clock, startup_rr_factor=v["startup_rr_factor"], rtsp_nat=v["rtsp_nat"])
        # the policy's state (a shared vserver's opener reads the segment's into it)
        self._ramps: Dict[str, _Ramp] = {}  # for the services in slow start
        self._outliers: Dict[str, _Outlier] = {}  # for the services ever ejected since bind
        self._draining: Set[str] = set()  # drained services still bound (they end unbound)
        self._timers: List[_Timer] = []  # heap of (time, seq, name, _Ramp or _Outlier); stale entries skipped
        self._timer_seq = 0
        # (time, service, why), in order: what ended each slow start
        self.slow_start_exits: List[Tuple[float, str, str]] = []
        # (time, service, what): ejections, returns, ejections refused
        self.outlier_events: List[Tuple[float, str, str]] = []
        self._util = UtilizationWeights()  # weights_from_utilization: each service's reports
        self._weights_tick: Optional[_Tick] = None  # ... and the next time they become weights
        self._shared: Optional[str] = v["shared"]
        self._shared_capacity: int = v["shared_capacity"]
        created = self._shared is None or self._share(v)
        self._netmask: str = v["netmask"]
        self._key_settings = KeySettings(check_netmask(v["netmask"])[1], v["v6netmasklen"], v["hashlength"])
        self._hash_seed: int = v["hash_seed"]
        self._set_hash_settings(self._key_settings, self._hash_seed)
        if created:  # an opener of a shared vserver leaves its draws where they are
            self._seed_draws(self._hash_seed)  # hash_seed also seeds P2C's draws
        self._peakewma_decay: float = v["peakewma_decay"]
        if created:  # an opener leaves the shared engine's as they are now (set() may have changed them)
            self._set_peak_decay(check_peakewma_decay(self._peakewma_decay))
        self.name: str = v["name"]  #: the vserver's name, shown by show()
        self._rate: int = v["new_service_request"]
        self._unit: str = v["new_service_request_unit"]
        self._interval: int = v["new_service_request_increment_interval"]
        self._handover: str = v["slow_start_handover"]
        self._guard: float = v["slow_start_guard"]
        self._by_utilization: bool = v["weights_from_utilization"]
        self._outlier_k: int = v["outlier_failures"]
        self._ejection_time: float = v["outlier_ejection_time"]
        self._max_ejection_percent: int = v["outlier_max_ejection_percent"]
        with self.atomic():  # a shared vserver's other processes see no step of this in between
            self._set_outlier_failures(self._outlier_k)
            if v["window_seconds"] != 14 and created:
                self._set_window(v["window_seconds"])
            if not created:  # the settings and policy state as the segment has them now
                self._reload_policy()
            elif self._by_utilization:
                self._start_ticks(self.now())

    def _share(self, v: Dict[str, Any]) -> bool:
        """Puts the vserver in the shared segment v["shared"]: True when this process
        created it, False when it attached to one made with the same settings."""
        ours = {key: v[key] for key in SHARED_RECORD}
        theirs = self._open_shared(v["shared"], v["shared_capacity"], json.dumps(ours).encode())
        if theirs is None:
            return True
        made = json.loads(theirs)
        for key in SHARED_RECORD:
            if made.get(key) != ours[key]:
                self._close_shared()  # not left holding a place in the segment
                raise ValueError(f"shared vserver {v['shared']!r} exists with {key}={made.get(key)!r};"
                                 f" this one asks for {key}={ours[key]!r}")
        return False

    # ---- settings (their docs: the table, _settings.SETTINGS) ---------------

    @property
    def new_service_request(self) -> int:
        self._fresh()
        return self._rate

    @property
    def new_service_request_unit(self) -> str:
        self._fresh()
        return self._unit

    @property
    def new_service_request_increment_interval(self) -> int:
        self._fresh()
        return self._interval

    @property
    def outlier_failures(self) -> int:
        self._fresh()
        return self._outlier_k

    @property
    def outlier_ejection_time(self) -> float:
        self._fresh()
        return self._ejection_time

    @property
    def outlier_max_ejection_percent(self) -> int:
        self._fresh()
        return self._max_ejection_percent

    @property
    def netmask(self) -> str:
        self._fresh()
        return self._netmask

    @property
    def v6netmasklen(self) -> int:
        self._fresh()
        return self._key_settings.v6len

    @property
    def hashlength(self) -> int:
        self._fresh()
        return self._key_settings.hashlength

    @property
    def hash_seed(self) -> int:
        self._fresh()
        return self._hash_seed

    @property
    def peakewma_decay(self) -> float:
        self._fresh()
        return self._peakewma_decay

    @property
    def slow_start_handover(self) -> str:
        self._fresh()
        return self._handover

    @property
    def slow_start_guard(self) -> float:
        self._fresh()
        return self._guard

    @property
    def weights_from_utilization(self) -> bool:
        self._fresh()
        return self._by_utilization

    @property
    def shared(self) -> Optional[str]:
        return self._shared

    @property
    def shared_capacity(self) -> int:
        return self._shared_capacity

    @_policy_step
    def set(self, **settings: Any) -> None:
        """Changes settings of a running vserver, like `set lb vserver`.

        Accepts every setting of the settings table but name (leastload.engine.settings,
        the table in docs/api.md). Everything is checked before anything changes.
        """
        for key in settings:
            if key not in SETTABLE:
                raise TypeError(f"set() got an unknown setting {key!r}")
        v = check_settings(settings)
        if self._shared is not None and v.get("method", self.method) != self.method:
            raise shared_fixed("set(method=...)")  # each process keeps its method's key form
        rate = v.get("new_service_request", self._rate)
        unit = v.get("new_service_request_unit", self._unit)
        interval = v.get("new_service_request_increment_interval", self._interval)
        check_rate(rate, unit)
        outlier_k = v.get("outlier_failures", self._outlier_k)
        ejection_time = v.get("outlier_ejection_time", self._ejection_time)
        percent = v.get("outlier_max_ejection_percent", self._max_ejection_percent)
        netmask = v.get("netmask", self._netmask)
        key_settings = KeySettings(check_netmask(netmask)[1], v.get("v6netmasklen", self._key_settings.v6len),
                                   v.get("hashlength", self._key_settings.hashlength))
        with self.atomic():
            now = self.now() if (self._ramps or self._outliers) else None
            self._netmask, self._key_settings = netmask, key_settings
            self._hash_seed = v.get("hash_seed", self._hash_seed)
            self._set_hash_settings(self._key_settings, self._hash_seed)
            if "hash_seed" in v:  # given: P2C's draws start over from it
                self._seed_draws(self._hash_seed)
            if "slow_start_handover" in v:  # a ramp holding already holds on until it caught up
                self._handover = v["slow_start_handover"]
            if "slow_start_guard" in v:  # judged from the next boundary on
                self._guard = v["slow_start_guard"]
            if "weights_from_utilization" in v and v["weights_from_utilization"] != self._by_utilization:
                self._by_utilization = v["weights_from_utilization"]
                self._start_ticks(now if now is not None else self.now())
            if "peakewma_decay" in v:
                self._peakewma_decay = v["peakewma_decay"]
                self._set_peak_decay(check_peakewma_decay(self._peakewma_decay))
            self._apply_settings(v, rate, unit, interval, now)
            self._outlier_k, self._ejection_time, self._max_ejection_percent = outlier_k, ejection_time, percent
            self._set_outlier_failures(outlier_k)
            if outlier_k == 0:  # ejection off: every ejected service returns now
                for name, record in list(self._outliers.items()):
                    if record.until is not None:
                        assert now is not None  # read above: there are ejection records
                        self._return(name, record, now)
            self._plan()

    def _apply_settings(self, settings: Dict[str, Any], rate: int, unit: str, interval: int,
                        now: Optional[float]) -> None:
        if "window_seconds" in settings:  # first: the one change that can fail (out of memory)
            self._set_window(settings["window_seconds"])
        if "startup_rr_factor" in settings:
            self.startup_rr_factor = settings["startup_rr_factor"]
        if "method" in settings:
            self.set_method(settings["method"])
        if "rtsp_nat" in settings:
            self.rtsp_nat = settings["rtsp_nat"]
        was_manual = self._interval == 0
        self._rate, self._unit, self._interval = rate, unit, interval
        if rate == 0:
            self._end_all(now)
        elif self._ramps:
            self._timers = [t for t in self._timers if isinstance(t[3], _Outlier)]
            heapq.heapify(self._timers)
            for name, ramp in self._ramps.items():
                assert now is not None  # read above: there are ramps
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
                    self._schedule(ramp.next_boundary, name, ramp)
                if interval == 0:
                    ramp.cap = self._cap_for(ramp)
                self._set_cap(name, ramp.cap)

    # ---- a shared vserver's policy state ----------------------------------------

    def _fresh(self) -> None:
        """Shared: what another process changed is read (taking the lock reads it)."""
        if self._shared is not None:
            with self.atomic():
                pass

    def _policy_record(self) -> bytes:
        """The policy's whole state (the segment is the user's own, mode 0600)."""
        del self.slow_start_exits[:-SHARED_EVENTS]
        del self.outlier_events[:-SHARED_EVENTS]
        settings = {"netmask": self._netmask, "v6netmasklen": self._key_settings.v6len,
                    "hashlength": self._key_settings.hashlength, "hash_seed": self._hash_seed,
                    "slow_start_handover": self._handover, "peakewma_decay": self._peakewma_decay,
                    "slow_start_guard": self._guard, "weights_from_utilization": self._by_utilization,
                    "new_service_request": self._rate, "new_service_request_unit": self._unit,
                    "new_service_request_increment_interval": self._interval, "outlier_failures": self._outlier_k,
                    "outlier_ejection_time": self._ejection_time,
                    "outlier_max_ejection_percent": self._max_ejection_percent,
                    "startup_rr_factor": self.startup_rr_factor, "rtsp_nat": self.rtsp_nat}
        return pickle.dumps((self._ramps, self._outliers, self._draining, self._timers, self._timer_seq,
                             self.slow_start_exits, self.outlier_events, self._deadline_at(), settings,
                             self._util, self._weights_tick), protocol=pickle.HIGHEST_PROTOCOL)

    def _policy_load(self, record: bytes) -> None:
        if not record:
            return
        (self._ramps, self._outliers, self._draining, self._timers, self._timer_seq, self.slow_start_exits,
         self.outlier_events, deadline, settings, self._util, self._weights_tick) = pickle.loads(record)
        self._set_deadline(deadline)
        # the settings set() changed in another process (what the engine keeps is shared already)
        self._netmask, self._hash_seed = settings["netmask"], settings["hash_seed"]
        self._key_settings = KeySettings(check_netmask(self._netmask)[1], settings["v6netmasklen"],
                                         settings["hashlength"])
        self._set_hash_settings(self._key_settings, self._hash_seed)
        self._handover, self._peakewma_decay = settings["slow_start_handover"], settings["peakewma_decay"]
        self._guard = settings["slow_start_guard"]
        self._by_utilization = settings["weights_from_utilization"]
        self._rate, self._unit = settings["new_service_request"], settings["new_service_request_unit"]
        self._interval = settings["new_service_request_increment_interval"]
        self._ejection_time = settings["outlier_ejection_time"]
        self._max_ejection_percent = settings["outlier_max_ejection_percent"]
        self._outlier_k = settings["outlier_failures"]
        self._set_outlier_failures(self._outlier_k)  # the engine's is this already: this process's flag
        self.startup_rr_factor, self.rtsp_nat = settings["startup_rr_factor"], settings["rtsp_nat"]

    # ---- the lifecycle that starts slow start -------------------------------

    @_policy_step
    def bind(self, name: str, weight: int = 1) -> None:
        with self.atomic():
            # the clock is read before anything changes: if it raises, nothing is bound
            now = self.now() if self._rate else None
            super().bind(name, weight)
            self._draining.discard(name)
            self._maybe_begin_ramp(name, now)

    @_policy_step
    def unbind(self, name: str) -> None:
        with self.atomic():
            now = self.now() if self._ramps else None
            super().unbind(name)
            self._outliers.pop(name, None)  # its heap entry goes stale
            self._util.forget(name)
            self._draining.discard(name)
            if self._ramps.pop(name, None) is not None:
                self._plan()
            elif self._ramps and not self._has_others_up():
                self._end_all(now)  # the last normal service left: nobody takes the surplus

    @_policy_step
    def set_state(self, name: str, state: str) -> None:
        with self.atomic():
            was_down = self.state(name) == "DOWN"
            check_choice("state", state, STATES)
            now = self.now() if (self._rate or self._ramps) else None
            super().set_state(name, state)
            if was_down and state == "UP":
                self._maybe_begin_ramp(name, now)
            elif not self._has_others_up() and self._ramps:
                self._end_all(now)  # nobody left to take the surplus
            elif state != "UP":
                self._pause_ramp(name, now)
            else:
                self._resume_ramp(name, now)  # OUT_OF_SERVICE -> UP: the ramp goes on where it stood

    @_policy_step
    def drain(self, name: str) -> None:
        with self.atomic():
            now = self.now() if self._ramps else None
            super().drain(name)  # unbinds at once if nothing is active
            if name in self:
                self._draining.add(name)
            if name in self and self._ramps and not self._has_others_up():
                self._end_all(now)  # it was the last normal service: nobody takes the surplus
            elif name in self:
                self._pause_ramp(name, now)

    def select_many(self, k: int, exclude: Optional[Collection[str]] = None, key: object = None) -> List[str]:
        """k distinct services in the method's order, each charged one transaction
        (for hedged requests): the first is what select() picks, the next what it
        picks with the first excluded too, and so on, as one step for other
        threads. Fewer than k when fewer are eligible; NoServiceAvailable when none.
        `key`: the request's key for the hash methods (their next-best services for it)."""
        if isinstance(k, bool) or not isinstance(k, int):
            raise bad_type("k", k, "an int >= 1")
        if k < 1:
            raise bad_value("k", k, "an int >= 1")
        skip = check_exclude(exclude)
        picks: List[str] = []
        with self.atomic():
            for _ in range(k):
                try:
                    picks.append(self.select(exclude=skip + picks, key=key))
                except NoServiceAvailable:
                    if not picks:
                        raise
                    break
        return picks

    def explain(self) -> Explanation:
        """Why the last pick (select, acquire, select_many) went where it did: every
        bound service's N, key and eligibility (and why not), the tie set, the
        cursor, the draws or the key. Picks pay nothing for it; LookupError when
        there is no pick to explain. Exact when called right after the pick (inside
        atomic() if other threads pick too): see Explanation.reproduced."""
        return explain_last_pick(self)

    def slow_start(self, name: str) -> Optional[Dict[str, Any]]:
        """Where `name` stands in slow start: None, or a dict of its ramp."""
        with self.atomic():
            self.weight(name)  # raises UnknownService / TypeError for a bad name
            ramp = self._ramps.get(name)
            if ramp is None:
                return None
            state = {"cap": ramp.cap, "increments": ramp.increments, "since": ramp.start,
                     "mode": "manual" if self._interval == 0 else "automated"}
            if self._guard:  # closed loop: why the last boundary held it back (None: it did not)
                state["held"] = ramp.held
            return state

    def _maybe_begin_ramp(self, name: str, now: Optional[float]) -> None:
        if self._rate and (self._is_ejected(name) or name in self._draining) and self.state(name) == "UP":
            # it cannot be picked: its ramp begins when it can (its ejection's end), once
            if self._ramps.pop(name, None) is not None:
                self._set_cap(name, None)
                self._plan()
            return
        if self._rate == 0 or self.state(name) != "UP" or not self._has_others_up(besides=name):
            # slow start off, or nobody else to take the surplus: its full share at once
            if self._ramps.pop(name, None) is not None:  # a ramp kept from before it went DOWN
                self._set_cap(name, None)
                self._plan()
            return
        ramp = _Ramp(now, self._interval, self._selections(name)[0])
        if self._guard:
            ramp.failure_mark = self.info(name)["failures"]
        self._ramps[name] = ramp
        if self._interval == 0:
            ramp.cap = self._cap_for(ramp)
        self._set_cap(name, ramp.cap)
        self._schedule(ramp.next_boundary, name, ramp)
        self._plan(now)

    def _is_ejected(self, name: str) -> bool:
        record = self._outliers.get(name)
        return record is not None and record.until is not None

    def _pause_ramp(self, name: str, now: Optional[float]) -> None:
        """`name` can no longer be picked: its ramp's clock stops (its timer goes stale)."""
        ramp = self._ramps.get(name)
        if ramp is None or ramp.paused_left is not None:
            return
        assert now is not None  # read by every caller while there are ramps
        ramp.paused_left = ramp.next_boundary - now  # inf for a manual ramp
        ramp.next_boundary = math.inf
        self._plan(now)

    def _resume_ramp(self, name: str, now: Optional[float]) -> None:
        """`name` can be picked again: its ramp's clock runs on from where it stood."""
        ramp = self._ramps.get(name)
        if ramp is None or ramp.paused_left is None or self._is_ejected(name) or name in self._draining:
            return  # not paused, or still not to be picked
        assert now is not None
        ramp.next_boundary = now + ramp.paused_left
        ramp.paused_left = None
        self._schedule(ramp.next_boundary, name, ramp)
        self._plan(now)

    def _has_others_up(self, besides: Optional[str] = None) -> bool:
        """Can a service other than `besides` take what slow start holds back (UP,
        not draining, not ejected, not in slow start itself)? O(1)."""
        others = self._totals()[3]
        if besides is not None and self._is_open(besides):
            others -= 1
        return others > 0

    # ---- the policy ----------------------------------------------------------

    def _schedule(self, t: float, name: str, token: Union[_Ramp, _Outlier, _Tick]) -> None:
        if t < math.inf:
            self._timer_seq += 1
            heapq.heappush(self._timers, (t, self._timer_seq, name, token))

    def _is_stale(self, entry: _Timer) -> bool:
        t, _, name, token = entry
        if isinstance(token, _Tick):
            return token is not self._weights_tick or token.due != t
        if isinstance(token, _Outlier):
            return self._outliers.get(name) is not token or token.until != t
        return self._ramps.get(name) is not token or token.next_boundary != t

    @_policy_step
    def _on_deadline(self, now: float) -> None:
        """Runs at the first call that sees the clock reach the next due time:
        ejections that end and ramp boundaries, in time order."""
        self._set_deadline(math.inf)  # no re-entry while we read the engine
        timers = self._timers
        while timers and timers[0][0] <= now:
            entry = heapq.heappop(timers)
            if self._is_stale(entry):
                continue
            _, _, name, token = entry
            if isinstance(token, _Tick):
                self._apply_utilization(now)
                continue
            if isinstance(token, _Outlier):
                self._return(name, token, now)
                continue
            while name in self._ramps and token.next_boundary <= now:
                self._boundary(name, token, now)
            if self._ramps.get(name) is token:
                self._set_cap(name, token.cap)
                self._schedule(token.next_boundary, name, token)
        if self._interval == 0:  # manual PERCENT follows the others' rate, once a second
            for name, ramp in self._ramps.items():
                ramp.cap = self._cap_for(ramp)
                self._set_cap(name, ramp.cap)
        self._plan(now)

    def _boundary(self, name: str, ramp: _Ramp, now: float) -> Optional[str]:
        """One interval boundary of an automated ramp: the exits, then the increment."""
        selected = self._selections(name)[0]
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

    def _unhealthy(self, name: str, ramp: _Ramp, traffic: int) -> Optional[str]:
        """slow_start_guard: why `name` should not step up now (None: it may). Its TTFB
        average against the mean of its peers' (the services that take what slow start
        holds back; past its first step it needs one of its own), and its failures per
        request since the last boundary against its peers' since they were bound (and
        above 1 %). O(n), at a boundary only."""
        info = self.info(name)
        failures, ramp.failure_mark = info["failures"] - ramp.failure_mark, info["failures"]
        peers = [self.info(n) for n in self.services if n != name and self._is_open(n)]
        ttfbs = [p["ttfb"] for p in peers if p["ttfb"] is not None]
        if info["ttfb"] is None and ttfbs and ramp.increments:  # past its first step: judged on evidence only
            return "no TTFB of its own yet"
        if info["ttfb"] is not None and ttfbs and sum(ttfbs) > 0:
            ratio = info["ttfb"] / (sum(ttfbs) / len(ttfbs))
            if ratio > self._guard:
                return f"TTFB {ratio:.1f}x its peers'"
        if traffic:
            rate = failures / traffic
            picked = sum(p["selected"] for p in peers)
            peers_rate = sum(p["failures"] for p in peers) / picked if picked else 0.0
            if rate > 0.01 and rate > self._guard * peers_rate:
                return f"failures {rate:.0%} of its requests, its peers' {peers_rate:.0%}"
        return None

    def _fair_cap(self) -> int:
        """The cap of a ramp that holds: the others' rate, rounded up (at least 1)."""
        return min(max(1, math.ceil(self._others_rate())), 0xFFFFFFFE)

    def _caught_up(self, name: str) -> bool:
        """Its Nw is at least the mean Nw of the services that take what slow start holds
        back. O(n): read only at the boundaries of a ramp that hands over."""
        peers = [self.score(n) for n in self.services if n != name and self._is_open(n)]
        return not peers or self.score(name) >= sum(peers) / len(peers)

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

    def _stats(self) -> List[int]:
        """[requests in the last second, UP services, the same two for the services
        that take what slow start holds back (UP, not draining, not ejected, no
        cap)]: the engine's aggregates, O(1)."""
        _, up, _, others, _, last_up, last_others = self._totals()
        return [last_up, up, last_others, others]

    def _others_rate(self) -> float:
        """Average requests in the last second of the UP services not in slow start."""
        stats = self._stats()
        return stats[2] / stats[3] if stats[3] else 0

    def _last_second(self) -> Tuple[int, int]:
        """(requests the vserver served in the last second, UP services)."""
        stats = self._stats()
        return stats[0], stats[1]

    def _plan(self, now: Optional[float] = None) -> None:
        """Sets the engine's deadline to the next time the policy must run."""
        timers = self._timers
        while timers and self._is_stale(timers[0]):
            heapq.heappop(timers)
        deadline = timers[0][0] if timers else math.inf
        if self._ramps and self._interval == 0 and self._unit == "PERCENT":
            # manual PERCENT follows the others' rate: once a second
            deadline = min(deadline, math.floor(self.now() if now is None else now) + 1)
        self._set_deadline(deadline)

    def _end(self, name: str, why: str, now: Optional[float] = None) -> str:
        del self._ramps[name]
        self._set_cap(name, None)  # the engine's aggregates count it among the others now
        self.slow_start_exits.append((self.now() if now is None else now, name, why))
        return why

    def _end_all(self, now: Optional[float] = None) -> None:
        for name in list(self._ramps):
            self._end(name, "slow start switched off" if self._rate == 0 else "no other service UP", now)
        self._plan(now)

    # ---- passive outlier ejection ----------------------------------------------

    @_policy_step
    def _on_outlier(self, name: str) -> None:
        """The engine saw `outlier_failures` failures in a row on `name` (not ejected,
        not draining): eject it unless the percentage cap or the last-eligible rule says no."""
        now = self.now()
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
        self._schedule(record.until, name, record)
        if self._ramps and not self._has_others_up():
            self._end_all(now)  # it was the last normal service: nobody takes the surplus
        else:
            self._pause_ramp(name, now)
        self._plan(now)
        return None

    @_policy_step
    def end_ejection(self, name: str) -> bool:
        """Ends the passive ejection of `name` now, as its end time would (slow start
        applies as after DOWN -> UP): what a passed active health check does in the
        proxy. True when it was ejected; False, and nothing changes, when it was not."""
        with self.atomic():
            self.weight(name)  # raises UnknownService / TypeError for a bad name
            record = self._outliers.get(name)
            if record is None or record.until is None:
                return False
            now = self.now()
            self._return(name, record, now, "returned early")
            self._plan(now)
            return True

    def _return(self, name: str, record: _Outlier, now: float, what: str = "returned") -> None:
        """An ejection ends: the service comes back as from DOWN to UP (slow start applies)."""
        record.until = None  # its heap entry goes stale
        record.returned = now
        self._set_ejected(name, False)
        self._log_outlier(now, name, what)
        self._maybe_begin_ramp(name, now)

    def _log_outlier(self, now: float, name: str, what: str) -> None:
        self.outlier_events.append((now, name, what))
        if len(self.outlier_events) > MAX_OUTLIER_EVENTS:
            del self.outlier_events[: MAX_OUTLIER_EVENTS // 2]

    def ejection(self, name: str) -> Optional[Dict[str, Any]]:
        """Where `name` stands in passive ejection: None, or a dict of its ejection."""
        with self.atomic():
            self.weight(name)  # raises UnknownService / TypeError for a bad name
            record = self._outliers.get(name)
            if record is None or record.until is None:
                return None
            return {"until": record.until, "ejections": record.count, "since": record.since}

    # ---- weights from the backends' reported load ------------------------------

    @_policy_step
    def report_utilization(self, name: str, *, cpu_utilization: float = 0.0, application_utilization: float = 0.0,
                           rps_fractional: float = 0.0, eps: float = 0.0) -> float:
        """A load report of `name` (what ORCA's `endpoint-load-metrics` carries): its
        queries and errors per second and its utilization. Returns the weight it gives
        by gRPC's formula (0.0: none; see leastload.engine.utilization). With
        weights_from_utilization on, the weights become the engine's once a second."""
        values = {"cpu_utilization": cpu_utilization, "application_utilization": application_utilization,
                  "rps_fractional": rps_fractional, "eps": eps}
        for arg, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad_type(arg, value, "a number >= 0")
            if not (math.isfinite(value) and value >= 0):
                raise bad_value(arg, value, "a finite number >= 0")
        with self.atomic():
            self.weight(name)  # raises UnknownService / TypeError for a bad name
            utilization = application_utilization if application_utilization > 0 else cpu_utilization
            return self._util.report(name, self.now(), float(rps_fractional), float(eps), float(utilization))

    def utilization_weights(self) -> Dict[str, Optional[float]]:
        """Each bound service's weight from its reports now (None: no report, in its 10 s
        blackout, or its last report over 3 minutes old)."""
        with self.atomic():
            now = self.now()
            return {name: self._util.weight(name, now) for name in self.services}

    def _start_ticks(self, now: float) -> None:
        self._weights_tick = None
        if self._by_utilization:
            self._weights_tick = _Tick(now + UPDATE_PERIOD)
            self._schedule(self._weights_tick.due, "", self._weights_tick)
        self._plan(now)

    def _apply_utilization(self, now: float) -> None:
        """The reports' weights become the engine's (O(n), once a second)."""
        names = list(self.services)
        for name, weight in self._util.engine_weights(names, now).items():
            if self.weight(name) != weight:
                self.set_weight(name, weight)
        self._start_ticks(now)

    # ---- show ------------------------------------------------------------

    def show(self) -> VServerView:
        """The vserver as data; str() of it reads like `show lb vserver`."""
        with self.atomic():
            return self._show()

    def _phase(self, name: str, info: Info) -> str:
        if info["draining"]:
            return "draining"
        if info["ejected"]:
            return f"ejected until {self._outliers[name].until:g}"
        ramp = self._ramps.get(name)
        if ramp is None:
            return "normal"
        if self._interval == 0:
            return "slow start (manual)"
        held = f", held back: {ramp.held}" if ramp.held else ""
        return f"slow start ({ramp.increments} increments{held})"

    def _show(self) -> VServerView:
        services = []
        for name in self.services:
            info = self.info(name)
            ramp = self._ramps.get(name)
            services.append(ServiceView(
                name=name, state=info["state"], weight=info["weight"], load=info["load"],
                score=info["score"], active=info["active"],
                cap=None if ramp is None else ramp.cap,
                phase=self._phase(name, info)))
        return VServerView(
            name=self.name, method=self.method,
            new_service_request=self._rate, new_service_request_unit=self._unit,
            new_service_request_increment_interval=self._interval,
            startup_rr_factor=self.startup_rr_factor, startup_rr_left=self.startup_rr_left,
            services=tuple(services),
            hashing=(", ".join(f"{s.name} {getattr(self, s.name)}" for s in SETTINGS if s.methods == HASH_METHODS)
                     if self.method in HASH_METHODS else None),
            peakewma_decay=self._peakewma_decay if self.method in SETTING["peakewma_decay"].methods else None,
            slow_start_handover=self._handover if self._handover != "vendor" and self.method in WINDOWED else None)


for _setting in SETTINGS:  # the properties' docs, and set()'s list of names, from the table
    _prop = VirtualServerFacade.__dict__.get(_setting.name)
    if isinstance(_prop, property):
        _prop.__doc__ = _setting.doc
VirtualServerFacade.set.__doc__ = (inspect.cleandoc(VirtualServerFacade.set.__doc__ or "") + "\n\nSettings: "
                                   + textwrap.fill(", ".join(SETTABLE) + ".", 72) + "\n")
