"""LiteLLM's Router balancing its deployments with leastload: `Strategy`.

    from litellm import Router
    from leastload.integrations.litellm import Strategy

    router = Router(model_list=[...])
    Strategy("LEASTRESPONSETIME").install(router)

Each `model_name` group of the router is one vserver whose services are the
deployments' `model_info.id`s. Every pick of the router goes through the
engine (deployments in LiteLLM's cooldown excluded), and the call's outcome
ends the pick's transaction: TTFB from the first token of a stream or the
whole answer's time, tokens (prompt + completion) recorded as the window's
bytes, a failure as fail(). A whole answer or a failed attempt ends it in
the call's own task (LiteLLM's deployment hooks); LiteLLM's logging
callbacks, which come later, end the rest (streams at their end, cache hits,
sync calls). A pick whose call ends any other way (cancelled, a stream
dropped before its end) ends without an outcome when LiteLLM lets go of the
call. docs/litellm.md has the rules.
"""

try:
    import litellm
    from litellm.integrations.custom_logger import CustomLogger
    from litellm.types.router import CustomRoutingStrategyBase, RouterRateLimitError
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("leastload.integrations.litellm needs LiteLLM: pip install leastload[litellm]") from exc

import asyncio
import datetime
import hashlib
import math
import re
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, List, Mapping, Optional, Tuple, Type

from .._implementation import VirtualServer
from ..engine.errors import DuplicateService, NoServiceAvailable, UnknownService

__all__ = ["Strategy"]

MAX_TTFB = 3600.0  # the engine takes 0..3600 s
NOT_A_FAILURE = 499  # ends a transaction without a TTFB and without blaming the deployment
STAMP = "leastload_pick"  # the key of the request's metadata that carries the pick to the callbacks
COOLDOWN_CACHE = 0.1  # s: how long a cooldown list read from LiteLLM is used (until a failure)
_COOLDOWN_PREFIX, _COOLDOWN_SUFFIX = "deployment:", ":cooldown"  # the store's keys: deployment:ID:cooldown
_SEGMENT_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_monotonic = time.monotonic  # (a global's lookup, not a module attribute's, on the per-call path)


class _Pick(str):
    """The pick as LiteLLM carries it in the request's metadata: a string (the deployment's id,
    so logging and copying it is harmless) holding the transaction until it ends. When LiteLLM
    drops the last reference to the call (cancelled, a stream left unread) and the transaction
    is still open, it is ended without an outcome. Made as `_Pick(service)`, then given its
    handle and strategy (and its earlier pick, if any): the cheapest way to a str with attributes."""

    handle: Any  # the open transaction; taken (once) by take()
    strategy: "Strategy"
    earlier: Optional["_Pick"] = None  # the pick of this call's attempt before (LiteLLM keeps the metadata)

    def take(self) -> Any:
        """The transaction, to end it; None once taken (dict.pop is one step for other threads)."""
        return self.__dict__.pop("handle", None)

    def tried(self) -> List[str]:
        """The deployments this call went to: this pick's and the earlier attempts' (a retry goes elsewhere)."""
        tried: List[str] = []
        pick: Optional[_Pick] = self
        while pick is not None:
            tried.append(str(pick))
            pick = pick.earlier
        return tried

    def __copy__(self) -> "_Pick":  # LiteLLM copies metadata between attempts and into its logs
        return self

    def __deepcopy__(self, memo: Dict[int, Any]) -> "_Pick":
        return self

    def __reduce__(self) -> Any:  # pickled, it is the plain string
        return (str, (str(self),))

    def __del__(self) -> None:
        handle = self.__dict__.pop("handle", None)
        if handle is not None:
            self.strategy._orphaned(handle)


class _Group:
    """A model_name group: its vserver, its deployments by id, and which of them LiteLLM had in
    its cooldown when last asked (at `cooled_at`, time.monotonic())."""

    __slots__ = ("vserver", "deployments", "ids", "cooled", "cooled_at")

    def __init__(self, vserver: Any) -> None:
        self.vserver = vserver
        self.deployments: Dict[str, Any] = {}
        self.ids: Tuple[str, ...] = ()
        self.cooled: List[str] = []
        self.cooled_at = -math.inf  # ask at the next pick


def _weight_of(deployment: Mapping[str, Any]) -> int:
    """The deployment's litellm_params.weight (simple-shuffle's) as a vserver weight 1..100."""
    weight = (deployment.get("litellm_params") or {}).get("weight")
    if isinstance(weight, (int, float)) and not isinstance(weight, bool) and weight >= 1:
        return min(100, int(weight))
    return 1


def _id_of(deployment: Mapping[str, Any]) -> Optional[str]:
    ident = (deployment.get("model_info") or {}).get("id")
    return str(ident) if ident is not None else None


def segment_name(shared: str, group: str) -> str:
    """The shared segment of one group: `shared.group`, with characters a segment name cannot
    hold replaced and a hash of the group's name added when any was (or when it is long)."""
    safe = _SEGMENT_CHARS.sub("_", group)
    name = f"{shared}.{safe}"
    if safe != group or len(name) > 160:
        name = f"{name[:150]}-{hashlib.sha1(group.encode()).hexdigest()[:12]}"
    return name


def _seconds(later: Any, earlier: Any) -> Optional[float]:
    if isinstance(later, datetime.datetime) and isinstance(earlier, datetime.datetime):
        return min(MAX_TTFB, max(0.0, (later - earlier).total_seconds()))
    if isinstance(later, (int, float)) and isinstance(earlier, (int, float)):
        return min(MAX_TTFB, max(0.0, float(later) - float(earlier)))
    return None


def _tokens_of(response: Any) -> int:
    # LiteLLM's responses keep usage among pydantic's extra fields, which getattr reaches only
    # after failing the regular lookup (microseconds): read it there first
    extra = getattr(response, "__pydantic_extra__", None)
    usage = extra.get("usage") if isinstance(extra, dict) else None
    if usage is None:
        usage = getattr(response, "usage", None)
    if usage is None and isinstance(response, dict):
        usage = response.get("usage")
    if usage is None:
        return 0
    total = 0
    for name in ("prompt_tokens", "completion_tokens"):
        value = usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            total += value
    return total


class Strategy(CustomRoutingStrategyBase):  # type: ignore[misc]  # LiteLLM's classes are untyped here
    """A LiteLLM custom routing strategy whose picks are leastload's.

    method: the vserver's method (LEASTCONNECTION, LEASTRESPONSETIME,
    LEASTBANDWIDTH: least tokens over the window, ...). shared: a name; each
    group's vserver then lives in the engine's shared segment "NAME.GROUP", one
    count for every process of a LiteLLM proxy. clock: the vservers' clock.
    engine: the VirtualServer class (default leastload.VirtualServer; the
    reference's, leastload.reference.VirtualServer, cannot be shared).
    settings: VirtualServer settings (outlier_failures, new_service_request,
    ...). Slow start applies to deployments the router gains after install().
    """

    def __init__(self, method: str = "LEASTCONNECTION", *, shared: Optional[str] = None,
                 clock: Any = None, engine: Optional[Type[Any]] = None, **settings: Any) -> None:
        self.engine: Any = engine or VirtualServer
        self.method = method
        self.shared = shared
        self.clock = clock
        self.settings = dict(settings)
        if shared is not None and (not isinstance(shared, str) or not 1 <= len(shared) <= 100
                                   or _SEGMENT_CHARS.search(shared)):
            raise ValueError(f"shared must be 1 to 100 of the characters A-Z a-z 0-9 . _ -, got {shared!r}")
        # every other argument checked now, by a private vserver made with them
        self.engine(method, clock, **{k: v for k, v in settings.items() if k != "shared_capacity"})
        self.groups: Dict[str, _Group] = {}
        self.router: Any = None
        self._registry: Any = None
        self._cooldown_store: Any = None
        self._version: object = None
        self._lock = threading.Lock()
        self._orphans: Deque[Any] = deque()  # transactions of dropped calls, to end
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.outcomes = OUTCOMES

    # ---- installing ------------------------------------------------------------------

    def install(self, router: Any) -> None:
        """Makes this strategy the router's: its groups bound, its picks and outcomes ours."""
        if self.router is not None and self.router is not router:
            raise ValueError("this Strategy is installed on another router already; make one per router")
        self.router = router
        registry, health = getattr(router, "registry", None), getattr(router, "health", None)
        self._registry = registry() if registry is not None else None
        self._cooldown_store = health().cooldowns.cooldown_store if health is not None else None
        self._refresh()
        register = getattr(router, "register_plugin", None)
        if register is not None:
            register(self)
        else:  # LiteLLM before the plugin entry point
            router.set_custom_routing_strategy(self)
        # one callback object for every Strategy: LiteLLM keeps one logger of a class
        if self.outcomes not in litellm.callbacks:
            litellm.callbacks.append(self.outcomes)

    def vserver(self, model_name: str) -> Any:
        """The vserver of one model_name group (KeyError for a group the router does not have)."""
        self._refresh_if_changed()
        return self.groups[model_name].vserver

    def _deployments(self) -> List[Any]:
        registry = self._registry
        return list(registry.all() if registry is not None else self.router.model_list)

    def _router_version(self) -> object:
        registry = self._registry
        if registry is not None:
            return registry.version
        return tuple(_id_of(d) for d in self.router.model_list)

    def _refresh_if_changed(self) -> None:
        if self._router_version() != self._version:
            self._refresh()

    def _refresh(self) -> None:
        """Binds the deployments the router gained (slow start applies to them) and drains
        those it lost; a new group gets a vserver with its deployments at full share."""
        with self._lock:
            version = self._router_version()
            by_group: Dict[str, Dict[str, Any]] = {}
            for deployment in self._deployments():
                ident = _id_of(deployment)
                if ident is not None:
                    by_group.setdefault(str(deployment.get("model_name")), {})[ident] = deployment
            for name, deployments in by_group.items():
                group = self.groups.get(name)
                if group is None:
                    group = self.groups[name] = _Group(self._make_vserver(name, deployments))
                vs = group.vserver
                for ident, deployment in deployments.items():
                    if ident not in vs:
                        try:
                            vs.bind(ident, _weight_of(deployment))
                        except DuplicateService:  # another process of a shared vserver bound it
                            pass
                group.deployments, group.ids, group.cooled_at = deployments, tuple(deployments), -math.inf
            for name, group in self.groups.items():
                gone = [ident for ident in group.vserver.services
                        if ident not in by_group.get(name, {}) and not group.vserver.info(ident)["draining"]]
                for ident in gone:
                    try:
                        group.vserver.drain(ident)
                    except UnknownService:  # unbound meanwhile (a shared vserver's other process)
                        pass
                if name not in by_group:
                    group.deployments, group.ids, group.cooled_at = {}, (), -math.inf
            self._version = version

    def _make_vserver(self, group: str, deployments: Mapping[str, Any]) -> Any:
        settings = dict(self.settings)
        slow_start = {k: settings.pop(k) for k in list(settings) if k.startswith("new_service_request")}
        if self.shared is not None:
            settings["shared"] = segment_name(self.shared, group)
        vs = self.engine(self.method, self.clock, name=_SEGMENT_CHARS.sub("_", group)[:100] or "vserver",
                           **settings)
        with vs.atomic():  # shared=: the first process to find it empty binds, for all
            if len(vs) == 0:
                for ident, deployment in deployments.items():
                    vs.bind(ident, _weight_of(deployment))
                if slow_start:
                    vs.set(**slow_start)
        return vs

    # ---- picks -----------------------------------------------------------------------------

    async def async_get_available_deployment(
            self, model: str, messages: Optional[List[Dict[str, str]]] = None, input: Any = None,
            specific_deployment: Optional[bool] = False,
            request_kwargs: Optional[Dict[str, Any]] = None) -> Any:
        self._loop = asyncio.get_running_loop()  # where a dropped call's transaction is ended
        return self._pick(model, request_kwargs)

    def get_available_deployment(
            self, model: str, messages: Optional[List[Dict[str, str]]] = None, input: Any = None,
            specific_deployment: Optional[bool] = False,
            request_kwargs: Optional[Dict[str, Any]] = None) -> Any:
        return self._pick(model, request_kwargs)

    def _pick(self, model: str, request: Optional[Dict[str, Any]]) -> Any:
        if self._orphans:
            self.reap()
        registry = self._registry
        if (registry.version if registry is not None else self._router_version()) != self._version:
            self._refresh()
        group = self.groups.get(model)
        if group is None or not group.ids:
            raise ValueError(f"the router has no deployment of model group {model!r} "
                             f"(groups: {sorted(n for n, g in self.groups.items() if g.ids)})")
        metadata = before = None
        if request is not None:
            metadata = request.get("metadata")
            if not isinstance(metadata, dict):
                metadata = request["metadata"] = {}
            before = metadata.get(STAMP)
            if before is not None and (not isinstance(before, _Pick) or before.strategy is not self):
                before = None
        now = _monotonic()  # LiteLLM's cooldown list, as of COOLDOWN_CACHE s ago at most
        if now - group.cooled_at > COOLDOWN_CACHE:
            group.cooled, group.cooled_at = self._ask_cooldowns(group.ids), now
        cooled = group.cooled
        vs = group.vserver
        try:
            if before is not None:  # a retry of this call (LiteLLM keeps its metadata): elsewhere, if it can
                try:
                    handle = vs.acquire(exclude=list(cooled) + before.tried())
                except NoServiceAvailable:
                    handle = vs.acquire(exclude=cooled)
            else:
                handle = vs.acquire(exclude=cooled) if cooled else vs.acquire()
        except NoServiceAvailable:
            raise RouterRateLimitError(model=model, cooldown_time=0.0, enable_pre_call_checks=False,
                                       cooldown_list=list(cooled), model_ids=group.ids) from None
        service = handle.service
        if metadata is None:  # nothing carries it to the callbacks: counted, ended at once
            self._end(handle, None)
        else:
            pick = metadata[STAMP] = _Pick(service)
            pick.handle, pick.strategy = handle, self
            if before is not None:
                pick.earlier = before
        return group.deployments[service]

    def _forget_cooldowns(self) -> None:
        """After any failure of a call: a deployment LiteLLM cools down then is excluded from the
        next pick on. (Asking LiteLLM costs microseconds, tens with Redis behind it: its answer is
        otherwise kept COOLDOWN_CACHE seconds.)"""
        for group in self.groups.values():
            group.cooled_at = -math.inf

    def _ask_cooldowns(self, ids: Tuple[str, ...]) -> List[str]:
        """The ids of `ids` in LiteLLM's cooldown."""
        store = self._cooldown_store
        if store is None:
            return []
        if store.has_redis:
            return [ident for ident, _ in store.active_sync(ids)]
        now = time.time()  # the store's timestamps are the wall clock's
        cooled = []
        for key, value in store.snapshot().items():  # in memory: deployment:ID:cooldown -> value
            ident = key[len(_COOLDOWN_PREFIX):-len(_COOLDOWN_SUFFIX)]
            if ident in ids and value.get("timestamp", 0.0) + value.get("cooldown_time", 0.0) > now:
                cooled.append(ident)
        return cooled

    # ---- ends ------------------------------------------------------------------------------

    def _end(self, handle: Any, outcome: Any, ttfb: Optional[float] = None, tokens: int = 0) -> None:
        """Ends a pick's transaction (taken from its pick: once): outcome "ok" (a response: TTFB,
        tokens), "failed" (passive ejection counts it), None (no outcome: cancelled, timed out,
        a client error)."""
        try:
            if tokens:
                handle.record(bytes=tokens)
            if outcome == "ok":
                handle.finish(ttfb=ttfb, status=200)
            elif outcome == "failed":
                handle.fail()
            else:
                handle.finish(status=NOT_A_FAILURE)
        except UnknownService:  # unbound meanwhile (a shared vserver's other process drained it)
            pass

    def _orphaned(self, handle: Any) -> None:
        """From a finalizer, which may run inside any call (the engine's too): queue it only."""
        self._orphans.append(handle)
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self.reap)
            except RuntimeError:  # the loop is closed: the next pick reaps it
                pass

    def reap(self) -> None:
        """Ends, without an outcome, the transactions of calls LiteLLM dropped unfinished."""
        while self._orphans:
            try:
                handle = self._orphans.popleft()
            except IndexError:  # another thread took the last one
                return
            self._end(handle, None)

    def open_transactions(self) -> Dict[str, int]:
        """Open transactions per group (all processes', for a shared vserver)."""
        self.reap()
        return {name: sum(g.vserver.info(s)["active"] for s in g.vserver.services)
                for name, g in self.groups.items()}


def _stamp_of(kwargs: Mapping[str, Any]) -> Optional[_Pick]:
    params = kwargs.get("litellm_params") or {}
    for bucket in (params.get("metadata"), params.get("litellm_metadata"), kwargs.get("metadata")):
        if isinstance(bucket, dict):  # (not Mapping: an ABC's isinstance costs microseconds here)
            pick = bucket.get(STAMP)
            if isinstance(pick, _Pick):
                return pick
    return None


def _deployment_id(kwargs: Mapping[str, Any]) -> Optional[str]:
    params = kwargs.get("litellm_params") or {}
    info = params.get("model_info") or kwargs.get("model_info") or {}  # a logging event's, a deployment call's
    ident = info.get("id") if isinstance(info, dict) else None
    return str(ident) if ident is not None else kwargs.get("model_id")


def _answer_time(request: Mapping[str, Any], metadata: Any) -> Optional[float]:
    """Seconds from this attempt's request going out to its whole answer, in the call's task:
    the last of the call's timing windows that LiteLLM notes in its metadata (start, end) when
    there, else from the attempt's start on LiteLLM's logging object to now."""
    windows = metadata.get("llm_api_timing_windows") if isinstance(metadata, dict) else None
    if isinstance(windows, tuple) and windows:
        window = windows[-1]
        if isinstance(window, tuple) and len(window) == 2:
            return _seconds(window[1], window[0])
    sent = _attempt_start(request)
    return _seconds(datetime.datetime.now(), sent) if sent is not None else None  # its naive local time


def _attempt_start(request: Mapping[str, Any]) -> Any:
    """When this attempt's request went out, as LiteLLM's logging object of the call has it."""
    logging_obj = request.get("litellm_logging_obj")
    details = getattr(logging_obj, "model_call_details", None)
    if not isinstance(details, dict):
        return None
    return details.get("current_attempt_api_call_start_time") or details.get("api_call_start_time")


class _Outcomes(CustomLogger):  # type: ignore[misc]  # LiteLLM's classes are untyped here
    """The hooks and callbacks of LiteLLM that end the picks' transactions (of any Strategy: each
    pick carries its own). A call's answer or failure ends its pick in the call's own task, from
    the deployment hooks LiteLLM runs as the deployment answers; the logging callbacks, which
    LiteLLM runs later from its logging worker, end what those did not see (streams, cache hits,
    sync calls, a failure before the deployment was called) and find the others ended."""

    def _pick(self, kwargs: Mapping[str, Any]) -> Optional[_Pick]:
        """The call's pick that this attempt's outcome ends: the stamp is the latest attempt's,
        and an earlier attempt's outcome may come after it."""
        params = kwargs.get("litellm_params")  # where a logging callback's kwargs carry it
        metadata = params.get("metadata") if type(params) is dict else None
        pick = metadata.get(STAMP) if type(metadata) is dict else None
        if type(pick) is not _Pick:
            pick = _stamp_of(kwargs)
        if pick is None or (pick.earlier is None and "handle" not in pick.__dict__):
            return None  # the usual case of a callback after a deployment hook ended it: said cheaply
        ident = _deployment_id(kwargs)
        while pick is not None and ((ident is not None and pick != ident) or "handle" not in pick.__dict__):
            pick = pick.earlier
        return pick

    def _success(self, kwargs: Mapping[str, Any], response: Any, start_time: Any, end_time: Any) -> None:
        # the usual case, a call whose deployment hook ended its only pick: two dict lookups and return
        params = kwargs.get("litellm_params")
        metadata = params.get("metadata") if type(params) is dict else None
        pick = metadata.get(STAMP) if type(metadata) is dict else None
        if type(pick) is _Pick:
            state = pick.__dict__
            if "handle" not in state and "earlier" not in state:
                return
        pick = self._pick(kwargs)
        handle = pick.take() if pick is not None else None
        if pick is None or handle is None:
            return
        if kwargs.get("cache_hit"):
            pick.strategy._end(handle, None)
            return
        sent = kwargs.get("current_attempt_api_call_start_time") or kwargs.get("api_call_start_time") or start_time
        first = kwargs.get("completion_start_time") or end_time
        pick.strategy._end(handle, "ok", _seconds(first, sent), _tokens_of(response))

    def _answered(self, request: Mapping[str, Any], response: Any) -> None:
        """A whole (not streamed) answer, in the call's task: its time and tokens end the pick.
        The usual case (the pick in the call's metadata, made for the deployment that answered;
        LiteLLM's timing window of the call; usage among the response's pydantic extras) is
        written out here, the general one left to the helpers: this runs once a call, on caches
        that LiteLLM's own work keeps cold, where each step costs microseconds."""
        metadata = request.get("metadata")
        pick = metadata.get(STAMP) if type(metadata) is dict else None
        info = request.get("model_info")
        handle = None
        if type(pick) is _Pick and type(info) is dict and pick == info.get("id"):
            handle = pick.__dict__.pop("handle", None)  # take()
        if handle is None:  # another attempt's pick, or found elsewhere
            pick = self._pick(request)
            handle = pick.take() if pick is not None else None
            if pick is None or handle is None:
                return
        # (None or another shape raises below, and the helpers take the general case)
        windows: Any = metadata.get("llm_api_timing_windows") if type(metadata) is dict else None
        ttfb: Optional[float]
        try:  # kept to 0..MAX_TTFB by comparisons (cheaper than min() and max() here; NaN gives 0)
            window = windows[-1]
            took: Any = window[1] - window[0]
            ttfb = took if took <= MAX_TTFB else MAX_TTFB
            if not took >= 0.0:
                ttfb = 0.0
        except (TypeError, IndexError, KeyError):
            ttfb = _answer_time(request, None)
        extra = getattr(response, "__pydantic_extra__", None)
        usage: Any = extra.get("usage") if type(extra) is dict else None
        try:
            tokens = usage.prompt_tokens + usage.completion_tokens
        except (AttributeError, TypeError):
            tokens = _tokens_of(response)
        if type(tokens) is not int or tokens < 0:
            tokens = _tokens_of(response)
        try:
            if tokens:
                handle.record(bytes=tokens)
            handle.finish(ttfb, 200)
        except UnknownService:  # unbound meanwhile (a shared vserver's other process drained it)
            pass

    def _failure(self, kwargs: Mapping[str, Any], exc: Any = None) -> None:
        pick = self._pick(kwargs)
        handle = pick.take() if pick is not None else None
        if pick is None or handle is None:
            return
        strategy = pick.strategy
        strategy._forget_cooldowns()  # LiteLLM may have cooled the deployment down: ask again
        if exc is None:
            exc = kwargs.get("exception")
        status = getattr(exc, "status_code", None)
        if isinstance(exc, (litellm.Timeout, asyncio.CancelledError, asyncio.TimeoutError)):
            strategy._end(handle, None)  # timed out or cancelled: no TTFB, no blame
        elif isinstance(status, int) and 400 <= status < 500 and status != 408:
            strategy._end(handle, None)  # the deployment answered: the request's fault
        else:
            strategy._end(handle, "failed")

    async def async_post_call_success_deployment_hook(self, request_data: Any, response: Any, call_type: Any) -> Any:
        if not request_data.get("stream"):  # a stream's pick ends at its end (the logging callbacks)
            self._answered(request_data, response)
        return None  # the response unchanged

    async def async_post_call_failure_deployment_hook(self, request_data: Any, exception: Any, call_type: Any,
                                                      fallback_depth: Any = None) -> None:
        self._failure(request_data, exception)

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._success(kwargs, response_obj, start_time, end_time)

    async def async_log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._failure(kwargs)

    def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._success(kwargs, response_obj, start_time, end_time)

    def log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._failure(kwargs)


OUTCOMES = _Outcomes()
