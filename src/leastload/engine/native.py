"""The C engine behind the shared facade: what `leastload` exports by default.

The core runs the policy (csrc/ll_policy.c: slow start, passive ejection,
draining, the utilization weights); this face only configures it (the
settings as one ll_settings), reads the clock where the reference's policy
does, and shows what the core reports: no ramp is computed and no ejection
kept here. A shared vserver's settings and policy state are the segment's,
C only: every process, in any language, runs the one policy.
"""

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ._engine import Engine, ManualClock, Transaction, monotonic, unlink_shared
from .errors import STATES, DuplicateService, NoServiceAvailable, TransactionEnded, UnknownService, check_choice
from .policy import VirtualServerFacade
from .settings import C_SETTINGS
from ..hashing.rendezvous import KeySettings, check_netmask

IMPLEMENTATION = "c"

_HELD = (None, "no TTFB of its own yet")


def _held(code: int, a: float, b: float) -> Optional[str]:
    """slow_start_guard's reason, worded as the reference words it."""
    if code == 2:
        return f"TTFB {a:.1f}x its peers'"
    if code == 3:
        return f"failures {a:.0%} of its requests, its peers' {b:.0%}"
    return _HELD[code]


class CPolicy(VirtualServerFacade):
    """The facade over the C engine's policy (mixed in before Engine)."""

    __slots__ = ()

    if TYPE_CHECKING:  # the C engine's calls this face makes (_engine.pyx, _binding/policy.pxi)
        def _policy_time(self) -> None: ...
        def _policy_settings(self, v: Dict[str, Any], now: Optional[float]) -> None: ...
        def _policy_settings_now(self) -> Dict[str, Any]: ...
        def _policy_events(self) -> Tuple[List[Tuple[float, str, str]], List[Tuple[float, str, str]]]: ...
        def _slow_start_of(self, name: str) -> Optional[Tuple[int, int, float, bool, int, float, float]]: ...
        def _ejection_of(self, name: str) -> Optional[Dict[str, Any]]: ...
        def _end_ejection_of(self, name: str) -> bool: ...
        def _report_utilization(self, name: str, qps: float, eps: float, utilization: float) -> float: ...
        def _utilization_weights(self) -> Dict[str, Optional[float]]: ...

    def _policy_init(self) -> None:
        pass

    def _c_settings(self) -> Dict[str, Any]:
        """This process's view of every setting ll_settings has."""
        return {"new_service_request": self._rate, "new_service_request_unit": self._unit,
                "new_service_request_increment_interval": self._interval, "slow_start_handover": self._handover,
                "slow_start_guard": self._guard, "weights_from_utilization": self._by_utilization,
                "outlier_failures": self._outlier_k, "outlier_ejection_time": self._ejection_time,
                "outlier_max_ejection_percent": self._max_ejection_percent, "window_seconds": self.window_seconds,
                "startup_rr_factor": self.startup_rr_factor, "rtsp_nat": self.rtsp_nat, "netmask": self._netmask,
                "v6netmasklen": self._key_settings.v6len, "hashlength": self._key_settings.hashlength,
                "hash_seed": self._hash_seed, "peakewma_decay": self._peakewma_decay}

    def _policy_start(self, v: Dict[str, Any], created: bool) -> None:
        if not created:  # the settings as the segment has them now
            self._policy_load(b"")
            return
        if v["window_seconds"] != 14:
            self._set_window(v["window_seconds"])
        settings = {key: v[key] for key in C_SETTINGS}
        self._policy_settings(settings, self.now() if v["weights_from_utilization"] else None)
        self._policy_store(b"")

    def _policy_load(self, record: bytes) -> None:
        """Shared: another process changed the settings; this process's copy follows."""
        c = self._policy_settings_now()
        self._rate, self._unit = c["new_service_request"], c["new_service_request_unit"]
        self._interval = c["new_service_request_increment_interval"]
        self._handover, self._guard = c["slow_start_handover"], c["slow_start_guard"]
        self._by_utilization = c["weights_from_utilization"]
        self._outlier_k, self._ejection_time = c["outlier_failures"], c["outlier_ejection_time"]
        self._max_ejection_percent = c["outlier_max_ejection_percent"]
        self._netmask, self._hash_seed = c["netmask"], c["hash_seed"]
        self._key_settings = KeySettings(check_netmask(self._netmask)[1], c["v6netmasklen"], c["hashlength"])
        self._set_hash_settings(self._key_settings, self._hash_seed)
        self._peakewma_decay = c["peakewma_decay"]
        self.startup_rr_factor, self.rtsp_nat = c["startup_rr_factor"], c["rtsp_nat"]

    def _policy_on(self) -> bool:
        return bool(self._rate or self._outlier_k or self._by_utilization)

    def _policy_set(self, v: Dict[str, Any], rate: int, unit: str, interval: int, outlier_k: int,
                    ejection_time: float, percent: int, netmask: str, key_settings: Any) -> None:
        on = self._policy_on() or bool(rate or outlier_k or v.get("weights_from_utilization"))
        now = self.now() if on else None
        settings = self._c_settings()
        settings.update(v)
        settings.update(new_service_request=rate, new_service_request_unit=unit,
                        new_service_request_increment_interval=interval, outlier_failures=outlier_k,
                        outlier_ejection_time=ejection_time, outlier_max_ejection_percent=percent,
                        netmask=netmask, v6netmasklen=key_settings.v6len, hashlength=key_settings.hashlength)
        self._apply_engine_settings(v, netmask, key_settings)
        settings["window_seconds"] = self.window_seconds
        self._policy_settings({key: settings[key] for key in C_SETTINGS}, now)
        self._rate, self._unit, self._interval = rate, unit, interval
        self._handover = v.get("slow_start_handover", self._handover)
        self._guard = v.get("slow_start_guard", self._guard)
        self._by_utilization = v.get("weights_from_utilization", self._by_utilization)
        self._outlier_k, self._ejection_time, self._max_ejection_percent = outlier_k, ejection_time, percent
        self._policy_store(b"")

    # ---- the lifecycle: the core's calls start, pause and end slow start ---------

    def bind(self, name: str, weight: int = 1) -> None:
        with self.atomic():
            self._policy_time()  # read before anything changes: if it raises, nothing is bound
            super().bind(name, weight)
            self._policy_events()

    def unbind(self, name: str) -> None:
        with self.atomic():
            self._policy_time()
            super().unbind(name)

    def set_state(self, name: str, state: str) -> None:
        with self.atomic():
            self.state(name)  # raises UnknownService / TypeError for a bad name
            check_choice("state", state, STATES)
            self._policy_time()
            super().set_state(name, state)
            self._policy_events()

    def drain(self, name: str) -> None:
        with self.atomic():
            self.weight(name)  # raises UnknownService / TypeError for a bad name
            self._policy_time()
            super().drain(name)  # unbinds at once if nothing is active
            self._policy_events()

    # ---- what the core reports ------------------------------------------------

    @property
    def slow_start_exits(self) -> List[Tuple[float, str, str]]:
        """(time, service, why), in order: what ended each slow start."""
        return self._policy_events()[0]

    @property
    def outlier_events(self) -> List[Tuple[float, str, str]]:
        """(time, service, what): ejections, returns, ejections refused (the newest 1000-2000)."""
        return self._policy_events()[1]

    def slow_start(self, name: str) -> Optional[Dict[str, Any]]:
        """Where `name` stands in slow start: None, or a dict of its ramp."""
        with self.atomic():
            ramp = self._slow_start_of(name)
            if ramp is None:
                return None
            cap, increments, since, manual, held, a, b = ramp
            state: Dict[str, Any] = {"cap": cap, "increments": increments, "since": since,
                                     "mode": "manual" if manual else "automated"}
            if self._guard:  # closed loop: why the last boundary held it back (None: it did not)
                state["held"] = _held(held, a, b)
            return state

    def ejection(self, name: str) -> Optional[Dict[str, Any]]:
        """Where `name` stands in passive ejection: None, or a dict of its ejection."""
        return self._ejection_of(name)

    def end_ejection(self, name: str) -> bool:
        """Ends the passive ejection of `name` now, as its end time would (slow start
        applies as after DOWN -> UP): what a passed active health check does in the
        proxy. True when it was ejected; False, and nothing changes, when it was not."""
        return self._end_ejection_of(name)


class VirtualServer(CPolicy, Engine):
    __doc__ = Engine.__doc__


__all__ = [
    "VirtualServer",
    "ManualClock",
    "Engine",
    "monotonic",
    "NoServiceAvailable",
    "UnknownService",
    "DuplicateService",
    "TransactionEnded",
    "Transaction",
    "unlink_shared",
]
