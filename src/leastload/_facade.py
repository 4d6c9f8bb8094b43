"""The face both engines share: settings, the slow-start policy, show().

`VirtualServer` of each implementation is
`class VirtualServer(VirtualServerFacade, Engine)`: the engine (C or
reference) does the per-request work and enforces slow-start caps on the
select path; this mixin decides the caps, in plain Python, identical for
both, and runs only when the clock reaches its next deadline (an interval
boundary), never per request. See docs/slow-start.md for the rules.
"""

import math

from . import _errors
from ._show import ServiceView, VServerView

UNITS = ("PER_SECOND", "PERCENT")
MAX_INCREMENTS = 200  # the vendor leaves automated slow start after 200 increments
NO_TRAFFIC_INTERVALS = 3  # ... or after three successive intervals without traffic


class _Ramp:
    """Slow start of one service."""

    __slots__ = ("start", "increments", "cap", "next_boundary", "selected_mark", "quiet")

    def __init__(self, start, interval, selected):
        self.start = start              # when it became new (bind, or DOWN -> UP)
        self.increments = 0             # automated: boundaries passed so far
        self.cap = 0                    # requests per second allowed now
        self.next_boundary = start + interval if interval else math.inf
        self.selected_mark = selected   # its selection count at the last boundary
        self.quiet = 0                  # successive intervals without traffic


def _check_settings(rate, unit, interval):
    if isinstance(rate, bool) or not isinstance(rate, int):
        raise _errors.bad_type("new_service_request", rate, "an int")
    _errors.check_choice("new_service_request_unit", unit, UNITS)
    limit = 100 if unit == "PERCENT" else 0xFFFFFFFE
    if not 0 <= rate <= limit:
        raise _errors.bad_value("new_service_request", rate, f"an int in 0..{limit} ({unit})")
    if isinstance(interval, bool) or not isinstance(interval, int):
        raise _errors.bad_type("new_service_request_increment_interval", interval, "an int (seconds)")
    if not 0 <= interval <= 86400:
        raise _errors.bad_value("new_service_request_increment_interval", interval, "an int in 0..86400 (seconds)")
    return int(rate), unit, int(interval)


class VirtualServerFacade:
    """Settings, slow start and show() over an engine class (mixed in before it)."""

    __slots__ = ()

    def __init__(self, method="LEASTCONNECTION", clock=None, *, new_service_request=0,
                 new_service_request_unit="PER_SECOND", new_service_request_increment_interval=0,
                 startup_rr_factor=0, rtsp_nat=False, name="vserver"):
        settings = _check_settings(new_service_request, new_service_request_unit,
                                   new_service_request_increment_interval)
        super().__init__(method, clock, startup_rr_factor=startup_rr_factor, rtsp_nat=rtsp_nat)
        if type(name) is not str:
            raise _errors.bad_type("name", name, "a str")
        self.name = name
        self._rate, self._unit, self._interval = settings
        self._ramps = {}  # name -> _Ramp, for the services in slow start
        self.slow_start_exits = []  # (time, service, why), in order: what ended each slow start
        self._hook_stats = None  # _stats() while the policy hook runs

    # ---- settings --------------------------------------------------------

    @property
    def new_service_request(self):
        return self._rate

    @property
    def new_service_request_unit(self):
        return self._unit

    @property
    def new_service_request_increment_interval(self):
        return self._interval

    def set(self, **settings):
        """Changes settings of a running vserver, like `set lb vserver`.

        Accepts method, new_service_request, new_service_request_unit,
        new_service_request_increment_interval, startup_rr_factor and rtsp_nat.
        Everything is checked before anything changes.
        """
        known = {"method", "new_service_request", "new_service_request_unit",
                 "new_service_request_increment_interval", "startup_rr_factor", "rtsp_nat"}
        for key in settings:
            if key not in known:
                raise TypeError(f"set() got an unknown setting {key!r}")
        rate, unit, interval = _check_settings(
            settings.get("new_service_request", self._rate),
            settings.get("new_service_request_unit", self._unit),
            settings.get("new_service_request_increment_interval", self._interval))
        if "method" in settings:
            _errors.check_choice("method", settings["method"], _errors.METHODS)
        if "startup_rr_factor" in settings:
            _errors.check_startup_rr_factor(settings["startup_rr_factor"])
        if "rtsp_nat" in settings:
            _errors.check_bool("rtsp_nat", settings["rtsp_nat"])
        # all checked: apply
        if "startup_rr_factor" in settings:
            self.startup_rr_factor = settings["startup_rr_factor"]
        if "method" in settings:
            self.set_method(settings["method"])
        if "rtsp_nat" in settings:
            self.rtsp_nat = settings["rtsp_nat"]
        was_manual = self._interval == 0
        self._rate, self._unit, self._interval = rate, unit, interval
        if rate == 0:
            self._end_all()
        elif self._ramps:
            now = self.now()
            for ramp in self._ramps.values():
                if interval == 0:
                    ramp.next_boundary = math.inf
                elif was_manual:  # manual -> automated: each ramp starts over from now
                    ramp.start, ramp.increments, ramp.cap, ramp.quiet = now, 0, 0, 0
                    ramp.next_boundary = now + interval
                else:  # a new interval counts from now; a new rate applies from the next boundary
                    ramp.next_boundary = min(ramp.next_boundary, now + interval)
            self._apply_caps(now)

    # ---- the lifecycle that starts slow start -------------------------------

    def bind(self, name, weight=1):
        super().bind(name, weight)
        self._maybe_begin_ramp(name)

    def unbind(self, name):
        super().unbind(name)
        if self._ramps.pop(name, None) is not None:
            self._plan()
        elif self._ramps and not self._has_others_up():
            self._end_all()  # the last normal service left: nobody takes the surplus

    def set_state(self, name, state):
        was_down = self.state(name) == "DOWN"
        super().set_state(name, state)
        if was_down and state == "UP":
            self._maybe_begin_ramp(name)
        elif not self._has_others_up() and self._ramps:
            self._end_all()  # nobody left to take the surplus

    def slow_start(self, name):
        """Where `name` stands in slow start: None, or a dict of its ramp."""
        self.weight(name)  # raises UnknownService / TypeError for a bad name
        ramp = self._ramps.get(name)
        if ramp is None:
            return None
        return {"cap": ramp.cap, "increments": ramp.increments, "since": ramp.start,
                "mode": "manual" if self._interval == 0 else "automated"}

    def _maybe_begin_ramp(self, name):
        if self._rate == 0 or self.state(name) != "UP" or not self._has_others_up(besides=name):
            # slow start off, or nobody else to take the surplus: its full share at once
            if self._ramps.pop(name, None) is not None:  # a ramp kept from before it went DOWN
                self._set_cap(name, None)
                self._plan()
            return
        now = self.now()
        self._ramps[name] = _Ramp(now, self._interval, self._selections(name)[0])
        self._apply_caps(now)

    def _has_others_up(self, besides=None):
        return any(n != besides and n not in self._ramps and self.state(n) == "UP" for n in self.services)

    # ---- the policy ----------------------------------------------------------

    def _on_deadline(self, now):
        """Runs at the first call that sees the clock reach the next boundary."""
        self._set_deadline(math.inf)  # no re-entry while we read the engine
        # No request is served while the hook runs, so the last second's counts
        # are read once (O(n)), not once per ramp.
        self._hook_stats = self._stats()
        try:
            if self._interval:
                for name in list(self._ramps):
                    ramp = self._ramps[name]
                    while name in self._ramps and ramp.next_boundary <= now:
                        self._boundary(name, ramp)
            self._apply_caps(now)
        finally:
            self._hook_stats = None

    def _boundary(self, name, ramp):
        """One interval boundary of an automated ramp: the exits, then the increment."""
        selected = self._selections(name)[0]
        traffic, ramp.selected_mark = selected - ramp.selected_mark, selected
        if ramp.cap > 0:
            ramp.quiet = 0 if traffic else ramp.quiet + 1
        total, up = self._last_second()
        ramp.next_boundary += self._interval
        if ramp.quiet >= NO_TRAFFIC_INTERVALS:
            return self._end(name, "no traffic for three intervals")
        if ramp.cap > 0 and 0 < total < ramp.cap:
            return self._end(name, "the request rate is below the new-service rate")
        ramp.increments += 1
        if ramp.increments >= MAX_INCREMENTS:
            return self._end(name, "incremented 200 times")
        if self._unit == "PERCENT" and ramp.increments * self._rate >= 100:
            return self._end(name, "the percentage reached 100")
        ramp.cap = self._cap_for(ramp)
        if total > 0 and ramp.cap * up >= total:
            return self._end(name, "the cap reached the fair share")
        return None

    def _cap_for(self, ramp):
        """The cap of a ramp now: the rate (manual) or its increments, cut to the others' rate."""
        steps = 1 if self._interval == 0 else ramp.increments
        others = self._others_rate()
        if self._unit == "PERCENT":
            return min(int(steps * self._rate * others // 100), 0xFFFFFFFE)
        cap = steps * self._rate
        if self._interval and others > 0:
            cap = min(cap, int(others))  # a final increment never gives it more than the others
        return min(cap, 0xFFFFFFFE)

    def _stats(self):
        """[requests in the last second, UP services, the same two for the UP
        services not in slow start]: one pass, or the hook's copy while it runs."""
        if self._hook_stats is not None:
            return self._hook_stats
        stats = [0, 0, 0, 0]
        for n in self.services:
            if self.state(n) == "UP":
                last = self._selections(n)[2]
                stats[0] += last
                stats[1] += 1
                if n not in self._ramps:
                    stats[2] += last
                    stats[3] += 1
        return stats

    def _others_rate(self):
        """Average requests in the last second of the UP services not in slow start."""
        stats = self._stats()
        return stats[2] / stats[3] if stats[3] else 0

    def _last_second(self):
        """(requests the vserver served in the last second, UP services)."""
        stats = self._stats()
        return stats[0], stats[1]

    def _apply_caps(self, now):
        for name, ramp in self._ramps.items():
            if self._interval == 0:
                ramp.cap = self._cap_for(ramp)
            self._set_cap(name, ramp.cap)
        self._plan()

    def _plan(self):
        """Sets the engine's deadline to the next time the policy must run."""
        if not self._ramps:
            self._set_deadline(math.inf)
        elif self._interval == 0:
            # manual PERCENT follows the others' rate: once a second
            self._set_deadline(math.floor(self.now()) + 1 if self._unit == "PERCENT" else math.inf)
        else:
            self._set_deadline(min(r.next_boundary for r in self._ramps.values()))

    def _end(self, name, why):
        del self._ramps[name]
        if self._hook_stats is not None and self.state(name) == "UP":
            self._hook_stats[2] += self._selections(name)[2]  # it joins the others
            self._hook_stats[3] += 1
        self._set_cap(name, None)
        self.slow_start_exits.append((self.now(), name, why))
        return why

    def _end_all(self):
        for name in list(self._ramps):
            self._end(name, "slow start switched off" if self._rate == 0 else "no other service UP")
        self._plan()

    # ---- show ------------------------------------------------------------

    def show(self):
        """The vserver as data; str() of it reads like `show lb vserver`."""
        services = []
        for name in self.services:
            info = self.info(name)
            ramp = self._ramps.get(name)
            services.append(ServiceView(
                name=name, state=info["state"], weight=info["weight"], load=info["load"],
                score=info["score"], active=info["active"],
                cap=None if ramp is None else ramp.cap,
                phase="normal" if ramp is None else
                ("slow start (manual)" if self._interval == 0 else f"slow start ({ramp.increments} increments)")))
        return VServerView(
            name=self.name, method=self.method,
            new_service_request=self._rate, new_service_request_unit=self._unit,
            new_service_request_increment_interval=self._interval,
            startup_rr_factor=self.startup_rr_factor, startup_rr_left=self.startup_rr_left,
            services=tuple(services))
