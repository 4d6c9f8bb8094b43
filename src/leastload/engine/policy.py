"""The face both engines share: settings, show(), select_many(), explain().

`VirtualServer` of each implementation is `class VirtualServer(Policy, Engine)`
where Policy is a subclass of VirtualServerFacade: the C engine's
(leastload.engine.native: the core runs slow start, ejection and the
utilization weights; its face only configures, converts and shows) or the
reference's (leastload.engine.ref_policy: the same rules in plain Python).
This module holds no slow-start or ejection rule: it checks settings, keeps
the ones the engines do not, and shows what each policy reports.

Every public method holds the vserver (`self.atomic()`) for its whole run,
so a composite operation is one step for other threads.
"""

import inspect
import json
import textwrap
from typing import TYPE_CHECKING, Any, Collection, Dict, List, Optional

from .errors import NoServiceAvailable, bad_type, bad_value, check_exclude, check_peakewma_decay, shared_fixed
from ..hashing.rendezvous import (DEFAULT_HASH_SEED, DEFAULT_HASHLENGTH, DEFAULT_NETMASK, DEFAULT_V6NETMASKLEN,
                                  KeySettings, check_netmask)
from .explain import Explanation, explain as explain_last_pick
from .settings import SETTABLE, SETTINGS, SHARED_RECORD, check_rate, check_settings
from .show import VServerView, vserver_view
from .types import Clock

if TYPE_CHECKING:  # what the facade uses of the engine it is mixed in before (C or reference)
    from ._interface import EngineAPI as _EngineBase
else:
    _EngineBase = object

MAX_OUTLIER_EVENTS = 2000  # outlier_events keeps the newest entries, so it cannot grow without end


class VirtualServerFacade(_EngineBase):
    """Settings, show() and the composite calls over an engine class (mixed in before it);
    the policy is the subclass's (_policy_* hooks)."""

    __slots__ = ()

    # ---- the policy's hooks: ref_policy.ReferencePolicy, native.CPolicy -------------

    def _policy_init(self) -> None:
        """The policy's own state, empty (before the engine is shared or configured)."""
        raise NotImplementedError

    def _policy_start(self, v: Dict[str, Any], created: bool) -> None:
        """The constructor's settings `v` take effect (`created`: not an opener of a shared vserver)."""
        raise NotImplementedError

    def _policy_set(self, v: Dict[str, Any], rate: int, unit: str, interval: int, outlier_k: int,
                    ejection_time: float, percent: int, netmask: str, key_settings: KeySettings) -> None:
        """set()'s checked settings `v` (and each slow-start and ejection value after it) take effect."""
        raise NotImplementedError

    def slow_start(self, name: str) -> Optional[Dict[str, Any]]:
        """Where `name` stands in slow start: None, or a dict of its ramp."""
        raise NotImplementedError

    def ejection(self, name: str) -> Optional[Dict[str, Any]]:
        """Where `name` stands in passive ejection: None, or a dict of its ejection."""
        raise NotImplementedError

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
        self._policy_init()  # the policy's own state, empty
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
            self._policy_start(v, created)

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
            self._policy_set(v, rate, unit, interval, outlier_k, ejection_time, percent, netmask, key_settings)

    def _apply_engine_settings(self, v: Dict[str, Any], netmask: str, key_settings: KeySettings) -> None:
        """The settings the engines keep, not the policy: window, startup round robin,
        method, RTSP NAT, hashing, PEAKEWMA's decay (`v`: the checked ones given)."""
        if "window_seconds" in v:  # first: the one change that can fail (out of memory)
            self._set_window(v["window_seconds"])
        self._netmask, self._key_settings = netmask, key_settings
        self._hash_seed = v.get("hash_seed", self._hash_seed)
        self._set_hash_settings(self._key_settings, self._hash_seed)
        if "hash_seed" in v:  # given: P2C's draws start over from it
            self._seed_draws(self._hash_seed)
        if "peakewma_decay" in v:
            self._peakewma_decay = v["peakewma_decay"]
            self._set_peak_decay(check_peakewma_decay(self._peakewma_decay))
        if "startup_rr_factor" in v:
            self.startup_rr_factor = v["startup_rr_factor"]
        if "method" in v:
            self.set_method(v["method"])
        if "rtsp_nat" in v:
            self.rtsp_nat = v["rtsp_nat"]

    def _fresh(self) -> None:
        """Shared: what another process changed is read (taking the lock reads it)."""
        if self._shared is not None:
            with self.atomic():
                pass

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

    # ---- show ------------------------------------------------------------

    def show(self) -> VServerView:
        """The vserver as data; str() of it reads like `show lb vserver`."""
        with self.atomic():
            return vserver_view(self)

    def report_utilization(self, name: str, *, cpu_utilization: float = 0.0, application_utilization: float = 0.0,
                           rps_fractional: float = 0.0, eps: float = 0.0) -> float:
        """A load report of `name` (what ORCA's `endpoint-load-metrics` carries): its
        queries and errors per second and its utilization. Returns the weight it gives
        by gRPC's formula (0.0: none; see leastload.engine.utilization). With
        weights_from_utilization on, the weights become the engine's once a second."""
        self._check_report({"cpu_utilization": cpu_utilization, "application_utilization": application_utilization,
                            "rps_fractional": rps_fractional, "eps": eps})
        utilization = application_utilization if application_utilization > 0 else cpu_utilization
        return self._report_utilization(name, float(rps_fractional), float(eps), float(utilization))

    def utilization_weights(self) -> Dict[str, Optional[float]]:
        """Each bound service's weight from its reports now (None: no report, in its 10 s
        blackout, or its last report over 3 minutes old)."""
        return self._utilization_weights()

    if TYPE_CHECKING:  # the policy's (the C engine's calls, or ReferencePolicy's): not stubs here,
        # which the mixin order would put before the C engine's own methods
        def _report_utilization(self, name: str, qps: float, eps: float, utilization: float) -> float: ...
        def _utilization_weights(self) -> Dict[str, Optional[float]]: ...

    @staticmethod
    def _check_report(values: Dict[str, Any]) -> None:
        """report_utilization()'s numbers: each finite and >= 0."""
        for arg, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad_type(arg, value, "a number >= 0")
            if not (value == value and abs(value) != float("inf") and value >= 0):
                raise bad_value(arg, value, "a finite number >= 0")


for _setting in SETTINGS:  # the properties' docs, and set()'s list of names, from the table
    _prop = VirtualServerFacade.__dict__.get(_setting.name)
    if isinstance(_prop, property):
        _prop.__doc__ = _setting.doc
VirtualServerFacade.set.__doc__ = (inspect.cleandoc(VirtualServerFacade.set.__doc__ or "") + "\n\nSettings: "
                                   + textwrap.fill(", ".join(SETTABLE) + ".", 72) + "\n")
