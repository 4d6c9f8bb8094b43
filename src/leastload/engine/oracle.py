"""The pure-Python reference engine: the oracle the C engine is tested against.

Plain on purpose: docs/semantics.md is the contract and this file follows it
rule by rule, with O(n) scans where the C engine keeps trees. Clarity first.
The pick rules themselves are leastload.engine.rules, shared with explain(); no
policy (slow start, ejection, settings) is imported here: leastload.reference
puts the shared facade over this engine, as leastload.engine.native does over the C one.

Which calls read the clock (and so move the window and may run the slow-start
deadline): select, acquire, record, load, score and info. Arguments are
validated before the clock is read, so bad input changes nothing; a name is
looked up again after the clock is read, as the clock may bind or unbind.

Every public method holds the vserver's re-entrant lock (`@_atomic`): other
threads wait, callbacks from the holding thread re-enter.
"""
import functools
import math
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Literal, Collection, ContextManager, Dict, Optional, Tuple, Type, TypeVar, Union, cast

from .errors import (STATES, active_overflow, advance_clock, bad_type, check_bool, check_cap, check_choice,
                     check_count, check_custom_metrics, check_exclude, check_method, check_name,
                     check_outlier_failures, check_seconds, check_startup_rr_factor, check_status,
                     check_time, check_ttfb, check_weight, duplicate_service, no_service, nothing_active,
                     transaction_ended, unknown_service, window_overflow)
from ..hashing.rendezvous import DEFAULT_HASH_SEED, KeySettings, name_hash
from .peakewma import Estimate
from .methods import IN_SECONDS
from .rules import Seen, key_hash, n_of, pick, uses_startup_rr
from .types import Clock, Info, Snapshot, Totals

__all__ = ["ManualClock", "Engine", "Transaction"]

WINDOW_SECONDS = 14  # the bytes/packets window's default length
MAX_ACTIVE = 2**32 - 1  # active transactions are 32-bit in the C engine
MAX_TOTAL = 2**64 - 1  # window totals are 64-bit

_F = TypeVar("_F", bound=Callable[..., Any])

class ManualClock:
    """A clock that moves only when told to (tests and simulations)."""

    def __init__(self, start: float = 0.0) -> None:
        self._t: float = check_seconds("start", start)

    def now(self) -> float:
        """The clock's time in seconds."""
        return self._t

    def advance(self, seconds: float) -> None:
        """Moves the clock by `seconds`; negative values move it backwards."""
        self._t = advance_clock(self._t, seconds)

    def set(self, t: float) -> None:
        """Sets the clock to `t` seconds (backwards too)."""
        self._t = check_seconds("t", t)

    def __repr__(self) -> str:
        return f"ManualClock({self._t!r})"


class _MonotonicClock:
    now = staticmethod(time.monotonic)


def _atomic(method: _F) -> _F:
    """Runs `method` holding the vserver (re-entrant for the holding thread)."""
    @functools.wraps(method)
    def held(self: "Engine", *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._depth += 1
            try:
                return method(self, *args, **kwargs)
            finally:
                self._depth -= 1
    return cast(_F, held)


class Transaction:
    """One request in flight on `service`, from acquire() to finish() or fail()."""

    __slots__ = ("_vs", "service", "_seq", "_done")

    def __init__(self, vs: "Engine", service: str, seq: int) -> None:
        self._vs = vs
        self.service = service
        self._seq = seq  # the bind incarnation it was picked from
        self._done = False

    @property
    def done(self) -> bool:
        """True once finish() or fail() ended it."""
        return self._done

    def record(self, bytes: int = 0, packets: int = 0) -> None:
        """Traffic of this transaction, either direction (a no-op once its service is gone)."""
        self._vs._tx_record(self, bytes, packets)

    def finish(self, ttfb: Optional[float] = None, status: int = 200) -> None:
        """Ends it with a response (as VirtualServer.finish)."""
        self._vs._tx_end(self, ttfb, status, False)

    def fail(self) -> None:
        """Ends it without a response: refused, reset or timed out (as VirtualServer.fail)."""
        self._vs._tx_end(self, None, 200, True)

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        if not self._done:
            if exc_type is None:
                self.finish()
            else:
                self.fail()
        return False

    def __repr__(self) -> str:
        return f"<Transaction on {self.service!r}{' (ended)' if self._done else ''}>"


class _Service:
    __slots__ = ("name", "seq", "weight", "state", "bytes", "packets", "active", "ttfb_us",
                 "ttfb_known", "cap", "sel_this_sec", "sel_last_sec", "selected",
                 "draining", "ejected", "failures", "fails_in_row", "probe_us", "probe_known",
                 "custom_load", "custom_over", "name_hash", "peak")

    def __init__(self, name: str, seq: int, weight: int) -> None:
        self.name = name
        self.seq = seq  # bind order is ascending seq; seqs are never reused (a bind's incarnation)
        self.weight = weight
        self.state = "UP"
        self.bytes: Dict[int, int] = {}  # absolute second -> bytes recorded in it (the last 14 seconds only)
        self.packets: Dict[int, int] = {}  # absolute second -> packets recorded in it
        self.active = 0
        self.ttfb_us = 0
        self.ttfb_known = False
        self.cap: Optional[int] = None  # slow-start cap on selections per second; None: no cap
        self.sel_this_sec = 0
        self.sel_last_sec = 0
        self.selected = 0
        self.draining = False  # no new picks; unbound when nothing is active
        self.ejected = False  # passive outlier ejection (the facade decides)
        self.failures = 0  # failed transactions since bind
        self.fails_in_row = 0
        self.probe_us = 0  # smoothed monitor response time (LRTM), microseconds
        self.probe_known = False
        self.custom_load = 0  # CUSTOMLOAD: the load its metrics give
        self.custom_over = False  # CUSTOMLOAD: a metric at or over its threshold
        self.name_hash = name_hash(name)  # hash methods: the service's side of the score
        self.peak = Estimate()  # PEAKEWMA: its latency estimate



if TYPE_CHECKING:  # mypy holds this engine to the interface the C engine's stub declares too
    from ._interface import EngineAPI as _Interface
else:
    _Interface = object


class Engine(_Interface):
    """One virtual server: bound services, the method, the window, the tie cursor."""

    _lock: "threading.RLock"
    _depth: int

    def __init__(self, method: str = "LEASTCONNECTION", clock: Optional[Clock] = None, *,
                 startup_rr_factor: int = 0, rtsp_nat: bool = False) -> None:
        if "_lock" not in self.__dict__:
            self._lock = threading.RLock()
            self._depth = 0
        with self._lock:
            if self._depth:
                raise RuntimeError("a vserver cannot be re-initialized from inside one of its own calls")
            self._depth += 1
            try:
                self._init(method, clock, startup_rr_factor, rtsp_nat)
            finally:
                self._depth -= 1

    def _init(self, method: str, clock: Optional[Clock], startup_rr_factor: int, rtsp_nat: bool) -> None:
        check_method(method)
        factor = check_startup_rr_factor(startup_rr_factor)
        check_bool("rtsp_nat", rtsp_nat)
        if clock is None:
            clock = cast(Clock, _MonotonicClock())
        elif not callable(getattr(clock, "now", None)):
            raise bad_type("clock", clock, "an object with a now() method")
        self._now = check_time(clock.now())  # the clock's last reading (PEAKEWMA's time)
        self._second = math.floor(self._now)
        self._clock = clock
        self._method = method
        self._startup_rr_factor = factor
        self._startup_rr_left = factor
        self._rtsp_nat = rtsp_nat
        self._services: Dict[str, _Service] = {}  # name -> _Service; dict order is bind order
        self._names: Optional[Tuple[str, ...]] = ()  # the services property's tuple; None: rebuild it
        self._next_seq = 0
        self._cursor = -1  # seq of the service selected last; -1: before the first
        # the last charged pick, for explain(): (its seq, the cursor, round and startup
        # flag it was made from, the seqs drawn, the exclude names, the key); None: none
        self._last: Optional[Tuple[int, int, int, bool, Tuple[Optional[int], ...], Tuple[str, ...], object]] = None
        self._rr_round = 1
        self._deadline: float = math.inf
        self._outlier_k = 0  # consecutive failures that call _on_outlier; 0: off
        self._key_settings = KeySettings()  # hash methods: netmask, v6netmasklen, hashlength
        self._hash_seed = DEFAULT_HASH_SEED
        self._rng = self._hash_seed  # P2C's draws: splitmix64's state
        self._window = WINDOW_SECONDS  # seconds of traffic LEASTBANDWIDTH/LEASTPACKETS count
        self._peak_decay_us = 10_000_000  # PEAKEWMA: the estimate's decay time, microseconds

    def atomic(self) -> ContextManager[object]:
        """A context manager holding the vserver: other threads' calls wait until it exits."""
        return self._lock

    # -- time -------------------------------------------------------------

    def _tick(self) -> float:
        """Reads the clock, moves the window forward to its second, runs the deadline."""
        now = check_time(self._clock.now())
        self._now = now
        sec = math.floor(now)
        if sec > self._second:  # earlier seconds: no time passed
            for s in self._services.values():
                for buckets in (s.bytes, s.packets):
                    for old in [k for k in buckets if k <= sec - self._window]:
                        del buckets[old]
                s.sel_last_sec = s.sel_this_sec if sec == self._second + 1 else 0
                s.sel_this_sec = 0
            self._second = sec
        if now >= self._deadline:
            self._on_deadline(now)
        return now

    @property
    def window_seconds(self) -> int:
        """Seconds of traffic LEASTBANDWIDTH and LEASTPACKETS count (default 14)."""
        return self._window

    @_atomic
    def _set_window(self, seconds: int) -> None:
        """A new window length: the traffic of the last min(old, new) seconds stays."""
        self._tick()
        for s in self._services.values():
            for buckets in (s.bytes, s.packets):
                for old in [k for k in buckets if k <= self._second - seconds]:
                    del buckets[old]
        self._window = seconds

    @_atomic
    def now(self) -> float:
        """The vserver's clock, read once (the window does not move)."""
        return check_time(self._clock.now())

    def _set_deadline(self, t: float) -> None:
        self._deadline = float(t)

    def _on_deadline(self, now: float) -> None:
        """Slow-start hook, called by _tick once the deadline is reached."""
        self._deadline = math.inf

    def _judge_outlier(self, name: str) -> None:
        """Called when `name` failed outlier_failures times in a row: the policy ejects it or not."""

    def _on_outlier(self, name: str) -> None:
        """Called after the policy judged `name`, an outlier (a hook for subclasses)."""

    # -- configuration ------------------------------------------------------

    def _get(self, name: str) -> _Service:
        check_name(name)
        try:
            return self._services[name]
        except KeyError:
            raise unknown_service(name) from None

    @_atomic
    def bind(self, name: str, weight: int = 1) -> None:
        """Appends a service to bind order (the round-robin order); `weight` is an int 1..100."""
        check_name(name)
        if name in self._services:
            raise duplicate_service(name)
        weight = check_weight(weight)
        self._services[name] = _Service(name, self._next_seq, weight)
        self._next_seq += 1
        self._names = None

    @_atomic
    def unbind(self, name: str) -> None:
        """Removes a service and all its counters; the round-robin cursor keeps its place."""
        self._get(name)
        del self._services[name]  # the cursor keeps its seq, i.e. its place in bind order
        self._names = None

    @_atomic
    def set_weight(self, name: str, weight: int) -> None:
        """Changes a service's weight (an int 1..100); its counters stay."""
        self._get(name)
        weight = check_weight(weight)
        self._get(name).weight = weight

    @_atomic
    def set_state(self, name: str, state: str) -> None:
        """"UP", "DOWN" or "OUT_OF_SERVICE"; only UP services are picked."""
        self._get(name)
        state = check_choice("state", state, STATES)
        self._get(name).state = state

    @_atomic
    def drain(self, name: str) -> None:
        """No new picks for `name` from now on; it is unbound when its last open
        transaction ends (at once if it has none)."""
        s = self._get(name)
        s.draining = True
        if s.active == 0:
            self.unbind(name)  # the facade's unbind: slow-start bookkeeping follows

    @_atomic
    def set_method(self, method: str) -> None:
        """Switches the method; the round-robin round and startup round robin start over."""
        self._method = check_method(method)
        self._last = None  # no pick under this method yet
        self._rr_round = 1
        self._startup_rr_left = self._startup_rr_factor

    @property
    @_atomic
    def method(self) -> str:
        """The selection method, one of ROUNDROBIN, LEASTCONNECTION, LEASTRESPONSETIME,
        LEASTBANDWIDTH, LEASTPACKETS."""
        return self._method

    @property
    @_atomic
    def services(self) -> Tuple[str, ...]:
        """Bound services in bind order, as a tuple: O(1), the same tuple until a bind or unbind."""
        if self._names is None:
            self._names = tuple(self._services)
        return self._names

    @property
    @_atomic
    def startup_rr_factor(self) -> int:
        """Selections made by plain round robin after the method is set (0: none)."""
        return self._startup_rr_factor

    @startup_rr_factor.setter
    @_atomic
    def startup_rr_factor(self, value: int) -> None:
        # Takes effect at the next set_method(); the running count is left alone.
        self._startup_rr_factor = check_startup_rr_factor(value)

    @property
    @_atomic
    def startup_rr_left(self) -> int:
        """Startup round-robin selections still to make."""
        return self._startup_rr_left

    @property
    @_atomic
    def rtsp_nat(self) -> bool:
        """Whether record(control=True) traffic counts (the RTSP NAT option)."""
        return self._rtsp_nat

    @rtsp_nat.setter
    @_atomic
    def rtsp_nat(self, value: bool) -> None:
        self._rtsp_nat = check_bool("rtsp_nat", value)

    @_atomic
    def _set_cap(self, name: str, cap: Optional[int]) -> None:
        self._get(name)
        cap = None if cap is None else check_cap(cap)
        self._get(name).cap = cap

    @_atomic
    def _set_ejected(self, name: str, ejected: bool) -> None:
        s = self._get(name)
        s.ejected = bool(ejected)
        if ejected:
            s.fails_in_row = 0  # after its return it needs a fresh run of failures

    @_atomic
    def _set_outlier_failures(self, k: int) -> None:
        self._outlier_k = check_outlier_failures(k)

    @_atomic
    def _totals(self) -> Totals:
        """(bound, UP, pickable, open, ejected, last-second selections of the UP
        services, the same of the open services). Pickable: UP, not draining, not
        ejected; open: pickable without a slow-start cap."""
        up = [s for s in self._services.values() if s.state == "UP"]
        pickable = [s for s in up if not s.draining and not s.ejected]
        open_ = [s for s in pickable if s.cap is None]
        return (len(self._services), len(up), len(pickable), len(open_),
                sum(1 for s in self._services.values() if s.ejected),
                sum(s.sel_last_sec for s in up), sum(s.sel_last_sec for s in open_))

    @_atomic
    def _is_open(self, name: str) -> bool:
        s = self._get(name)
        return s.state == "UP" and not s.draining and not s.ejected and s.cap is None

    # -- selection ------------------------------------------------------------

    def _seen(self, s: _Service) -> Seen:
        """The service as the pick rules (leastload.engine.rules) see it: plain data."""
        return Seen(s.name, s.weight, s.state, s.draining, s.ejected, s.cap, s.sel_this_sec, s.custom_over,
                    s.active, s.ttfb_us, s.probe_us, sum(s.bytes.values()), sum(s.packets.values()),
                    s.custom_load, s.peak.at(self._now, self._peak_decay_us), s.name_hash)

    def _n(self, s: _Service) -> int:
        """N of the method, an exact int (LEASTRESPONSETIME, LRTM: microseconds)."""
        return n_of(self._method, self._seen(s))

    @_atomic
    def _set_hash_settings(self, key_settings: KeySettings, seed: int) -> None:
        """The hash methods' settings (checked by the facade)."""
        self._key_settings = key_settings
        self._hash_seed = seed

    @_atomic
    def _set_peak_decay(self, decay_us: int) -> None:
        """PEAKEWMA's decay time in microseconds (checked by the facade)."""
        self._peak_decay_us = decay_us

    def _open_shared(self, name: str, capacity: int, record: bytes) -> Optional[bytes]:
        """shared=: the reference keeps its state in its own process."""
        raise ValueError(f"shared={name!r}: only the C engine shares a vserver between processes;"
                         " the reference keeps its state in one")

    def _close_shared(self) -> None:
        """Never shared: nothing to leave."""

    def _policy_store(self, record: bytes) -> None:
        """Never shared: the policy's state stays in this process."""

    def _deadline_at(self) -> float:
        return self._deadline

    def _reload_policy(self) -> None:
        """Never shared: nothing to read again."""

    @_atomic
    def _seed_draws(self, seed: int) -> None:
        """Restarts P2C's draws from `seed` (checked by the facade)."""
        self._rng = seed

    @_atomic
    def select(self, exclude: Optional[Collection[str]] = None, key: object = None) -> str:
        """Picks a service, counts one new active transaction on it, returns its name.
        `exclude`: names skipped for this pick only (unknown names are ignored).
        Raises NoServiceAvailable when no service is UP and eligible."""
        names = check_exclude(exclude)
        key_h = key_hash(self._method, key, self._key_settings, self._hash_seed)  # validates the key
        self._tick()
        bound = list(self._services.values())
        cursor = sum(1 for s in bound if s.seq <= self._cursor)  # the cursor as a count in bind order
        startup = uses_startup_rr(self._method, self._startup_rr_left)
        made = pick(self._method, [self._seen(s) for s in bound], set(names), cursor, self._rr_round,
                    startup, key_h, self._rng)
        if made.chosen is None:
            raise no_service()
        chosen = bound[made.chosen]
        drawn = tuple(None if d is None else bound[d].seq for d in made.drawn)
        if chosen.active == MAX_ACTIVE:
            raise active_overflow(chosen.name)
        if startup:
            self._startup_rr_left -= 1
        self._last = (chosen.seq, self._cursor, self._rr_round, startup, drawn, tuple(names), key)
        self._rr_round = made.rr_round
        self._rng = made.rng  # P2C's draws are spent only by a pick that is charged
        self._cursor = chosen.seq
        chosen.active += 1
        chosen.selected += 1
        chosen.sel_this_sec += 1
        return chosen.name

    @_atomic
    def acquire(self, exclude: Optional[Collection[str]] = None, key: object = None) -> Transaction:
        """Picks like select(exclude, key) and returns the transaction as a handle."""
        name = self.select(exclude, key)
        return Transaction(self, name, self._services[name].seq)

    # -- counters -------------------------------------------------------------

    @_atomic
    def record(self, name: str, bytes: int = 0, packets: int = 0, control: bool = False) -> None:
        """Traffic seen on a service, either direction, now (bytes and packets: ints >= 0)."""
        self._get(name)
        nbytes = check_count("bytes", bytes)
        npackets = check_count("packets", packets)
        check_bool("control", control)
        self._tick()  # the window moves first: the overflow check sees the moved window
        s = self._get(name)  # again: the clock may have unbound it
        if control and not self._rtsp_nat:
            return
        self._add_traffic(s, nbytes, npackets, bytes, packets)

    def _add_traffic(self, s: _Service, nbytes: int, npackets: int, bytes: object, packets: object) -> None:
        if sum(s.bytes.values()) + nbytes > MAX_TOTAL:
            raise window_overflow("bytes", bytes)
        if sum(s.packets.values()) + npackets > MAX_TOTAL:
            raise window_overflow("packets", packets)
        # Traffic goes into the current second; after the clock went back that is
        # still self._second, as no time passed.
        s.bytes[self._second] = s.bytes.get(self._second, 0) + nbytes
        s.packets[self._second] = s.packets.get(self._second, 0) + npackets

    @_atomic
    def probe(self, name: str, rtt: float) -> None:
        """A monitor probe's response time in seconds: LRTM's input (kept under any
        method). The first sets the average, later ones move it an eighth of the way."""
        s = self._get(name)
        us = check_ttfb(rtt, "rtt")
        s.probe_us = (7 * s.probe_us + us + 4) // 8 if s.probe_known else us
        s.probe_known = True

    @_atomic
    def report_load(self, name: str, metrics: Dict[str, Tuple[int, int, int]]) -> None:
        """CUSTOMLOAD's input: {metric: (value, weight, threshold)}; the load is the sum
        of value * weight, and a value at or over its threshold makes the service
        ineligible under CUSTOMLOAD until a report says otherwise."""
        s = self._get(name)
        s.custom_load, s.custom_over = check_custom_metrics(metrics)

    @_atomic
    def begin(self, name: str) -> None:
        """One more active transaction, dispatched without select()."""
        s = self._get(name)
        if s.active == MAX_ACTIVE:
            raise active_overflow(name)
        s.active += 1

    @_atomic
    def finish(self, name: str, ttfb: Optional[float] = None, status: int = 200) -> None:
        """Ends one active transaction; a status-200 TTFB (seconds) updates the average.
        A status of 500 or more counts as a failure."""
        self._get(name)
        ttfb_us = None if ttfb is None else check_ttfb(ttfb)
        status = check_status(status)
        if self._ticks_on_end():
            self._tick()
        s = self._get(name)  # again: a conversion or the clock may have unbound it
        self._after_end(name, self._end_transaction(s, ttfb_us if status == 200 else None, status >= 500))

    @_atomic
    def fail(self, name: str) -> None:
        """Ends one active transaction that got no response (refused, reset, timed out);
        counts a failure."""
        self._get(name)
        if self._ticks_on_end():
            self._tick()
        self._after_end(name, self._end_transaction(self._get(name), None, True))

    def _ticks_on_end(self) -> bool:
        """Whether ending a transaction reads the clock first, as select does: with
        ejection on (an ejection that ended by now returns before a failure is
        judged), and under PEAKEWMA (its sample's time)."""
        return bool(self._outlier_k) or self._method == "PEAKEWMA"

    def _end_transaction(self, s: _Service, ttfb_us: Optional[int], failed: bool) -> Tuple[bool, bool]:
        """Ends one transaction of s; returns (drained, outlier): what to act on."""
        if s.active == 0:
            raise nothing_active(s.name)
        s.active -= 1
        if ttfb_us is not None:
            s.ttfb_us = (7 * s.ttfb_us + ttfb_us + 4) // 8 if s.ttfb_known else ttfb_us
            s.ttfb_known = True
            if self._method == "PEAKEWMA":
                s.peak.observe(ttfb_us, self._now, self._peak_decay_us)
        if failed:
            s.failures += 1
            s.fails_in_row += 1
        else:
            s.fails_in_row = 0
        outlier = 0 < self._outlier_k <= s.fails_in_row and not s.ejected and not s.draining
        return s.draining and s.active == 0, outlier

    def _after_end(self, name: str, flags: Tuple[bool, bool]) -> None:
        drained, outlier = flags
        if drained:
            self.unbind(name)  # the facade's unbind: slow-start bookkeeping follows
        if outlier:
            self._judge_outlier(name)
            self._on_outlier(name)

    # -- transaction handles -----------------------------------------------------

    def _tx_service(self, tx: Transaction) -> Optional[_Service]:
        """The handle's service, or None if that incarnation is gone."""
        s = self._services.get(tx.service)
        return s if s is not None and s.seq == tx._seq else None

    @_atomic
    def _tx_record(self, tx: Transaction, bytes: int, packets: int) -> None:
        if tx._done:
            raise transaction_ended(tx.service)
        nbytes = check_count("bytes", bytes)
        npackets = check_count("packets", packets)
        if self._tx_service(tx) is None:
            return  # its service is gone: nothing to charge
        self._tick()
        s = self._tx_service(tx)  # again: the clock may have unbound it
        if s is not None:
            self._add_traffic(s, nbytes, npackets, bytes, packets)

    @_atomic
    def _tx_end(self, tx: Transaction, ttfb: Optional[float], status: int, failed: bool) -> None:
        if tx._done:
            raise transaction_ended(tx.service)
        ttfb_us = None if ttfb is None else check_ttfb(ttfb)
        status = check_status(status)
        s = self._tx_service(tx)
        if s is not None and self._ticks_on_end():
            self._tick()
            s = self._tx_service(tx)
        if s is None:
            tx._done = True  # its service is gone: nothing to end
            return
        flags = self._end_transaction(s, ttfb_us if status == 200 and not failed else None, failed or status >= 500)
        tx._done = True
        self._after_end(tx.service, flags)

    # -- reading ----------------------------------------------------------------

    def _load(self, s: _Service) -> Union[int, float]:
        n = self._n(s)
        return float(n) / 1e6 if self._method in IN_SECONDS else n

    def _score(self, s: _Service) -> float:
        return float(self._load(s)) * 10000.0 / s.weight

    def _get_now(self, name: str) -> _Service:
        """The service after the clock is read (looked up before and after)."""
        self._get(name)
        self._tick()
        return self._get(name)

    @_atomic
    def load(self, name: str) -> Union[int, float]:
        """N of the method now: int, or float seconds for LEASTRESPONSETIME."""
        return self._load(self._get_now(name))

    @_atomic
    def score(self, name: str) -> float:
        """Nw = N * 10000 / weight now, as a float for display (picks compare integer keys)."""
        return self._score(self._get_now(name))

    @_atomic
    def weight(self, name: str) -> int:
        """The service's weight."""
        return self._get(name).weight

    @_atomic
    def state(self, name: str) -> str:
        """The service's state: "UP", "DOWN" or "OUT_OF_SERVICE"."""
        return self._get(name).state

    @_atomic
    def active(self, name: str) -> int:
        """The service's active (open) transactions."""
        return self._get(name).active

    @_atomic
    def _selections(self, name: str) -> Tuple[int, int, int]:
        """(selected since bind, in this second, in the last second); the clock is not read."""
        s = self._get(name)
        return s.selected, s.sel_this_sec, s.sel_last_sec

    @_atomic
    def __len__(self) -> int:
        return len(self._services)

    @_atomic
    def __contains__(self, name: object) -> bool:
        return name in self._services

    def _info(self, s: _Service) -> Info:
        return {
            "name": s.name,
            "weight": s.weight,
            "state": s.state,
            "bytes": sum(s.bytes.values()),
            "packets": sum(s.packets.values()),
            "active": s.active,
            "ttfb": s.ttfb_us / 1e6 if s.ttfb_known else None,
            "selected": s.selected,
            "sel_this_sec": s.sel_this_sec,
            "sel_last_sec": s.sel_last_sec,
            "cap": s.cap,
            "draining": s.draining,
            "ejected": s.ejected,
            "failures": s.failures,
            "consecutive_failures": s.fails_in_row,
            "probe": s.probe_us / 1e6 if s.probe_known else None,
            "custom_load": s.custom_load,
            "over_threshold": s.custom_over,
            "peak_ewma": s.peak.seconds(self._now, self._peak_decay_us),
            "load": self._load(s),
            "score": self._score(s),
        }

    @_atomic
    def info(self, name: str) -> Info:
        """Every counter of one service now, as a dict."""
        return self._info(self._get_now(name))

    @_atomic
    def _last_pick(self) -> Optional[Dict[str, Any]]:
        """The last charged pick as explain() reads it; None before the first, after
        a method change, or once the service picked is unbound."""
        if self._last is None:
            return None
        seq, cursor, rr_round, startup, drawn, names, key = self._last
        by_seq = {s.seq: s.name for s in self._services.values()}
        if seq not in by_seq:
            return None
        return {"service": by_seq[seq],
                "cursor": sum(1 for s in self._services.values() if s.seq <= cursor),
                "rr_round": rr_round, "startup": startup,
                "drawn": tuple(None if d is None else by_seq.get(d) for d in drawn),
                "exclude": names, "key": key}

    @_atomic
    def snapshot(self) -> Snapshot:
        """The whole state as plain data, without reading the clock."""
        return {
            "method": self._method,
            "second": self._second,
            "cursor": sum(1 for s in self._services.values() if s.seq <= self._cursor),
            "rr_round": self._rr_round,
            "startup_rr_left": self._startup_rr_left,
            "services": [self._info(s) for s in self._services.values()],
        }


