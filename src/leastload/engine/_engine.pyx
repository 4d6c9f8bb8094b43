# cython: language_level=3, binding=False, embedsignature=True, embedsignature.format=clinic, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The C engine's Python face: the vserver's engine (names <-> slots, the guard, the
request path); its parts are the files under _binding/, included below.

binding=False keeps CPython's fast method call (Cython's default binding=True
costs 4-6 ns a call on these machines); embedsignature in the "clinic" format
writes each signature as a __text_signature__, so help() and
inspect.signature() see it without binding=True.
Arguments are checked here, with the messages of leastload.engine.errors, before
the C core is called; every C return code goes through _raise_for().
"""
from libc.errno cimport EINVAL, ENOENT, ENOMEM, EOVERFLOW, ERANGE
from libc.math cimport INFINITY, floor
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uint64_t
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.pythread cimport PyThread_get_thread_ident
cimport cython

from ._cengine cimport *

import ipaddress
import threading
from time import monotonic as _time_monotonic

from . import errors as _errors, methods as _methods
from ..hashing import rendezvous as _hash
from .methods import NEEDS_KEY as _NEEDS_KEY
from .errors import METHODS, STATES

cdef dict _METHOD_INDEX = {m.name: m.value for m in _methods.TABLE}
cdef tuple _METHOD_NAME = tuple(m.name for m in _methods.TABLE)  # by index: a proxy reads it per request
# the C core's method table must be the registry's: checked once, at import
_methods.check_against_c([ll_method_name(i).decode() for i in range(LL_METHOD_COUNT)],
                         [bool(ll_method_supported(i)) for i in range(LL_METHOD_COUNT)])
cdef dict _STATE_INDEX = {name: i for i, name in enumerate(STATES)}

# The binding's parts, one job each, compiled into this one module (no call crosses
# a module): the clock, argument conversion and the errno mapper, the hash key fast
# path, transaction handles, reading, the batch replay, the test hooks.
cdef class Engine
include "_binding/clock.pxi"
include "_binding/convert.pxi"
include "_binding/keys.pxi"
include "_binding/transaction.pxi"
include "_binding/reading.pxi"
include "_binding/replay.pxi"
include "_binding/hooks.pxi"
include "_binding/shared.pxi"
include "_binding/policy.pxi"


cdef class Engine:
    """One virtual server's engine. See docs/semantics.md for the exact rules.

    Concurrency: every public call holds the vserver (_enter/_leave) from its
    first to its last step. A call from another thread waits; a call from
    the holding thread (a clock, __index__ or __float__ callback, a policy
    hook) re-enters. Slots are resolved from names after the last Python
    code a call runs (or re-resolved when _gen moved), so no slot index
    survives code that could bind or unbind.
    """

    cdef ll_vserver *_vs
    cdef list _names         # slot -> name (None for a hole)
    cdef list _serials       # slot -> bind incarnation (handles check it)
    cdef dict _slots         # name -> slot
    cdef uint64_t _next_serial
    cdef uint64_t _gen       # moves whenever a slot could change meaning
    cdef uint64_t _bind_gen  # moves whenever the bound services change: bind, unbind, re-init
    cdef tuple _services     # the services property's tuple; None: rebuild it
    # the replay's mapping (_replay_mapping), kept while _bind_gen and the trace's services stay
    cdef uint64_t _map_gen
    cdef object _map_services, _map_slot_of, _map_service_of
    cdef object _clock
    cdef ManualClock _manual
    cdef int _clock_kind
    cdef double _deadline    # unused by the C policy (its deadline is the core's); kept for _set_deadline
    cdef bint _policy_on     # a rate, outlier_failures or weights_from_utilization set: control calls read the clock
    cdef list _exit_log      # slow_start_exits: the core's events, named (_binding/policy.pxi)
    cdef list _outlier_log   # outlier_events
    cdef uint64_t _events_read  # the core's events read into the two lists so far
    cdef uint64_t _startup_factor
    cdef bint _rtsp_nat
    cdef bint _outlier_on    # outlier ejection on: finish and fail read the clock
    cdef bint _peak          # PEAKEWMA: finish and fail read the clock (its sample's time)
    cdef object _last_names, _last_key  # the last pick's exclude names and key (explain)
    # hash methods: the method's key form (None: not a hash method), its settings, the seed
    cdef object _key_form
    cdef str _method_name
    cdef object _key_settings
    cdef uint64_t _hash_seed
    cdef int _key_kind       # KEY_*: which key form _fast_key_hash reads
    cdef Py_ssize_t _hashlength
    cdef uint32_t _v4mask
    cdef int _v6len
    cdef _Hold _hold
    # the guard: who holds the vserver, how deeply, and who waits for it
    cdef unsigned long _owner
    cdef int _depth
    cdef int _waiters
    cdef object _cond
    # shared="NAME" (_binding/shared.pxi): the segment, the names' generation this
    # process has read, the lock's place in the global order at this call
    cdef ll_shared *_sh
    cdef ll_shared_header *_hdr
    cdef ll_shared_seen _seen  # names_gen, policy_gen, reclaimed as this process last read them
    cdef uint64_t _seq
    cdef str _shared_name

    def __cinit__(self, *args, **kwargs):
        self._names = []
        self._serials = []
        self._slots = {}
        self._deadline = INFINITY
        self._exit_log = []
        self._outlier_log = []
        self._cond = threading.Condition(threading.Lock())
        self._key_settings = _hash.KeySettings()
        self._hash_seed = _hash.DEFAULT_HASH_SEED
        self._hashlength = self._key_settings.hashlength
        self._v4mask = self._key_settings.v4mask
        self._v6len = self._key_settings.v6len
        cdef _Hold hold = _Hold.__new__(_Hold)
        hold._engine = self
        self._hold = hold
        self._vs = ll_create(LL_LEASTCONNECTION, 0)
        if self._vs == NULL:
            raise MemoryError("leastload: cannot allocate a vserver")
        ll_set_rng_seed(self._vs, self._hash_seed)  # P2C's draws

    def __dealloc__(self):
        cdef ll_shared *sh = self._sh
        if sh != NULL:  # the vserver is the segment's: ends this process's transactions
            self._sh = NULL
            with nogil:
                ll_shared_close(sh)
        elif self._vs != NULL:
            ll_destroy(self._vs)

    def __init__(self, method="LEASTCONNECTION", clock=None, *, startup_rr_factor=0, rtsp_nat=False):
        cdef int m = _METHOD_INDEX[_errors.check_method(method)]
        factor = _errors.check_startup_rr_factor(startup_rr_factor)
        _errors.check_bool("rtsp_nat", rtsp_nat)
        if clock is not None and type(clock) is not ManualClock and not callable(getattr(clock, "now", None)):
            raise _errors.bad_type("clock", clock, "None or an object with a now() method")
        self._enter()
        try:
            if self._depth > 1:
                raise RuntimeError("a vserver cannot be re-initialized from inside one of its own calls")
            if self._sh != NULL:
                raise RuntimeError("a shared vserver cannot be re-initialized")
            self._init_locked(m, clock, factor, rtsp_nat)
            _set_key_form(self, method)
        finally:
            self._leave()

    cdef int _init_locked(self, int m, object clock, uint64_t factor, bint rtsp_nat) except -1:
        # the new clock is read before anything changes: if it raises, the vserver stays as it was
        cdef double now
        if clock is None:
            now = _monotonic()
        elif type(clock) is ManualClock:
            now = (<ManualClock>clock)._t
        else:
            now = _errors.check_time(clock.now())
        cdef ll_vserver *vs = ll_create(<ll_method>m, <int64_t>floor(now))
        if vs == NULL:
            raise MemoryError("leastload: cannot allocate a vserver")
        ll_set_time(vs, now)
        self._clock = clock
        self._clock_kind = (CLOCK_KIND_MONOTONIC if clock is None else
                            CLOCK_KIND_MANUAL if type(clock) is ManualClock else CLOCK_KIND_OBJECT)
        self._manual = clock if type(clock) is ManualClock else None
        ll_destroy(self._vs)
        self._vs = vs
        self._names = []
        self._serials = []
        self._slots = {}
        self._gen += 1
        self._bind_gen += 1
        self._services = None
        self._deadline = INFINITY
        self._events_read = 0
        self._policy_on = False
        self._startup_factor = factor
        self._rtsp_nat = rtsp_nat
        self._outlier_on = False
        ll_set_startup_rr(vs, factor)
        return 0

    # ---- the guard -------------------------------------------------------

    cdef inline int _enter(self) except -1:
        cdef unsigned long me = PyThread_get_thread_ident()
        if self._depth == 0 or self._owner == me:
            self._owner = me
            self._depth += 1
            if self._depth == 1 and self._sh != NULL:
                self._lock_shared()
            return 0
        return self._wait_turn(me)

    cdef inline int _lock_shared(self) except -1:
        """Takes the shared segment's lock for the call this thread now holds the vserver for."""
        cdef ll_vserver *vs = NULL
        cdef int rc = ll_shared_tryenter(self._sh, &self._seen, &self._seq, &vs)
        if rc == 0:  # the common case: nobody else changed names, policy or ledger
            return 0
        return _shared_lock_slow(self, rc, vs)  # held by another process, or news (_binding/shared.pxi)

    cdef int _wait_turn(self, unsigned long me) except -1:
        """Another thread holds the vserver: sleep (GIL released) until it leaves."""
        cond = self._cond
        with cond:
            self._waiters += 1
            try:
                while self._depth != 0:
                    cond.wait()
            finally:
                self._waiters -= 1
            # no Python code between the check above and these two lines
            self._owner = me
            self._depth = 1
        if self._sh != NULL:
            self._lock_shared()
        return 0

    cdef inline void _leave(self) noexcept:
        if self._depth == 1 and self._sh != NULL:
            ll_shared_unlock(self._sh)
        self._leave_unlocked()

    cdef inline void _leave_unlocked(self) noexcept:
        self._depth -= 1
        if self._depth == 0 and self._waiters:
            self._wake()

    cdef void _wake(self) noexcept:
        try:
            with self._cond:
                self._cond.notify()
        except BaseException:  # cannot happen short of a broken interpreter
            pass

    def atomic(self):
        """A context manager that holds the vserver: calls inside it, from this
        thread, form one unit; other threads' calls wait until it exits."""
        return self._hold

    # ---- time ------------------------------------------------------------

    cdef inline double _read_clock(self) except? -1.0:
        if self._clock_kind == CLOCK_KIND_MANUAL:
            return self._manual._t
        if self._clock_kind == CLOCK_KIND_MONOTONIC:
            return _monotonic()
        return _errors.check_time(self._clock.now())

    cdef inline int64_t _tick(self) except? -1:
        """Reads the clock; runs the policy if it is due. Returns the second, which
        the caller's C call moves the window to (ll_select/ll_record/ll_advance).
        Runs Python code for an object clock or a due policy: resolve slots after."""
        cdef double now = self._read_clock()
        cdef int64_t sec = <int64_t>now  # floor without a libm call: |now| < 2**53
        ll_set_time(self._vs, now)  # the time PEAKEWMA reads
        if <double>sec > now:
            sec -= 1
        if now >= ll_policy_deadline(self._vs):
            ll_advance(self._vs, sec)  # the core's policy runs what fell due, at the window of `now`
            self._on_deadline(now)
        return sec

    def now(self):
        """The vserver's clock, read once (the window does not move)."""
        with self._hold:
            return self._read_clock()

    def _set_deadline(self, double t):
        self._deadline = t

    def _on_deadline(self, now):
        """Called by the first call that sees the clock reach the policy's deadline: the
        core runs what fell due (if the caller's advance did not already), and its
        events are read."""
        cdef double t = now
        cdef int64_t sec = <int64_t>floor(t)
        ll_set_time(self._vs, t)
        ll_advance(self._vs, sec)
        _drain_events(self)

    def _on_outlier(self, name):
        """Called after the core judged `name`, which failed outlier_failures times in a
        row (ejected, or kept: see outlier_events); a hook for subclasses."""

    # ---- names ---------------------------------------------------------

    cdef inline uint32_t _slot(self, object name) except? 0xFFFFFFFF:
        """name -> slot, with no Python code run (exact str keys)."""
        cdef object slot = self._slots.get(name) if type(name) is str else None
        if slot is None:
            _errors.check_name(name)
            raise _errors.unknown_service(name)
        return slot

    def bind(self, name, weight=1):
        """Appends a service to bind order (the round-robin order)."""
        cdef uint32_t w
        _errors.check_name(name)
        if self._sh != NULL:
            _errors.check_shared_service_name(name)
        self._enter()
        try:
            if name in self._slots:
                raise _errors.duplicate_service(name)
            w = _errors.check_weight(weight)
            slot = ll_bind(self._vs, w)
            if slot == -ENOSPC:
                raise _errors.shared_full(self._shared_name, ll_shared_header_of(self._sh).capacity)
            if slot < 0:
                _raise_for(slot, "bind")
            if self._key_form is not None and ll_set_name_hash(self._vs, <uint32_t>slot, _name_hash(name)) < 0:
                ll_unbind(self._vs, <uint32_t>slot)  # nothing half-applied
                raise MemoryError("leastload: cannot allocate the services' name hashes")
            assert slot == len(self._names)
            self._next_serial += 1
            if self._sh != NULL:
                self._next_serial = _shared_name_slot(self, <uint32_t>slot, name)
            self._names.append(name)
            self._serials.append(self._next_serial)
            self._slots[name] = slot
            self._bind_gen += 1
            self._services = None
        finally:
            self._leave()

    def unbind(self, name):
        with self._hold:
            self._unbind_locked(name)

    cdef int _unbind_locked(self, object name) except -1:
        cdef uint32_t slot = self._slot(name)
        _drain_events(self)  # named while its slot still is
        _raise_for_rc(ll_unbind(self._vs, slot), "unbind")
        _drain_events(self)  # its leaving may end the others' slow start
        if self._sh != NULL:
            _shared_unname_slot(self, slot)
        self._names[slot] = None
        self._serials[slot] = 0
        del self._slots[name]
        self._gen += 1
        self._bind_gen += 1
        self._services = None
        cdef uint32_t bound = ll_bound_count(self._vs)
        if ll_slot_count(self._vs) - bound > max(bound, 32) and self._sh != NULL:
            _shared_compact(self)  # the names in the segment move with their slots
        elif ll_slot_count(self._vs) - bound > max(bound, 32):  # close holes, O(n), rarely
            ll_compact(self._vs)
            self._serials = [s for s, n in zip(self._serials, self._names) if n is not None]
            self._names = [n for n in self._names if n is not None]
            self._slots = {n: i for i, n in enumerate(self._names)}
        return 0

    def reserve(self, services):
        """Makes room for `services` services, so binding them allocates nothing."""
        if isinstance(services, bool) or not isinstance(services, int) or not 0 <= services <= (1 << 30):
            raise _errors.bad_value("services", services, "an int in 0..2**30")
        with self._hold:
            if self._sh != NULL and services > ll_shared_header_of(self._sh).capacity:
                raise _errors.shared_full(self._shared_name, ll_shared_header_of(self._sh).capacity)
            _raise_for_rc(ll_reserve(self._vs, services), "reserve")

    def set_weight(self, name, weight):
        self._slot(name)
        cdef uint32_t w = _errors.check_weight(weight)
        with self._hold:
            _raise_for_rc(ll_set_weight(self._vs, self._slot(name), w), "set_weight")

    def set_state(self, name, state):
        with self._hold:
            self._slot(name)
            s = _STATE_INDEX[_errors.check_choice("state", state, STATES)]
            _raise_for_rc(ll_set_state(self._vs, self._slot(name), <ll_state>s), "set_state")

    def set_method(self, method):
        """Changes the method; the weighted round restarts and so does startup round robin."""
        cdef int m = _METHOD_INDEX[_errors.check_method(method)]
        if self._sh != NULL:
            raise _errors.shared_fixed("set_method()")
        self._enter()
        try:
            _hash_names(self, method)  # may raise MemoryError: before anything changes
            _raise_for_rc(ll_set_method(self._vs, <ll_method>m), "set_method")
            ll_set_startup_rr(self._vs, self._startup_factor)
            _set_key_form(self, method)
        finally:
            self._leave()

    def _seed_draws(self, seed):
        """Restarts P2C's draws from `seed` (checked by the facade)."""
        cdef uint64_t s = seed
        with self._hold:
            ll_set_rng_seed(self._vs, s)

    def _set_peak_decay(self, decay_us):
        """PEAKEWMA's decay time in microseconds (checked by the facade)."""
        cdef uint32_t us = decay_us
        with self._hold:
            _raise_for_rc(ll_set_peak_decay(self._vs, us), "peakewma_decay")

    def _set_hash_settings(self, key_settings, seed):
        """The hash methods' settings (checked by the facade)."""
        cdef uint64_t s = seed
        with self._hold:
            self._key_settings = key_settings
            self._hash_seed = s
            self._hashlength = key_settings.hashlength
            self._v4mask = key_settings.v4mask
            self._v6len = key_settings.v6len

    def drain(self, name):
        """No new picks for `name` from now on; it is unbound when its last open
        transaction ends (at once if it has none)."""
        self._enter()
        try:
            slot = self._slot(name)
            _raise_for_rc(ll_set_draining(self._vs, slot), "drain")
            if _info_at(self, slot).active == 0:
                self.unbind(name)  # the facade's unbind: slow-start bookkeeping follows
        finally:
            self._leave()

    @property
    def method(self):
        self._enter()
        try:
            return _METHOD_NAME[<int>ll_get_method(self._vs)]
        finally:
            self._leave()

    @property
    def services(self):
        """Bound services in bind order, as a tuple: O(1), the same tuple until a bind or unbind."""
        self._enter()
        try:
            if self._services is None:
                self._services = tuple([n for n in self._names if n is not None])
            return self._services
        finally:
            self._leave()

    @property
    def startup_rr_factor(self):
        with self._hold:
            return self._startup_factor

    @startup_rr_factor.setter
    def startup_rr_factor(self, value):
        """Takes effect at the next set_method(); the running count is left alone."""
        factor = _errors.check_startup_rr_factor(value)
        with self._hold:
            self._startup_factor = factor

    @property
    def startup_rr_left(self):
        with self._hold:
            return ll_startup_rr_left(self._vs)

    @property
    def rtsp_nat(self):
        with self._hold:
            return self._rtsp_nat

    @rtsp_nat.setter
    def rtsp_nat(self, value):
        flag = _errors.check_bool("rtsp_nat", value)
        with self._hold:
            self._rtsp_nat = flag

    def _set_cap(self, name, cap):
        """Slow start: at most `cap` selections per second (None: no cap)."""
        self._slot(name)
        cdef uint32_t c = LL_NO_CAP if cap is None else _errors.check_cap(cap)
        with self._hold:
            _raise_for_rc(ll_set_cap(self._vs, self._slot(name), c), "_set_cap")

    def _set_ejected(self, name, bint ejected):
        """Passive ejection: no picks while ejected (the facade decides when)."""
        with self._hold:
            _raise_for_rc(ll_set_ejected(self._vs, self._slot(name), ejected), "_set_ejected")

    # ---- the policy (the core's: csrc/ll_policy.c; _binding/policy.pxi) ------------

    def _policy_time(self):
        """A control call's time while the policy is on: the clock read once, the core's
        time set (its rules act at it). Runs no policy: what fell due runs at a tick."""
        with self._hold:
            if self._policy_on:
                ll_set_time(self._vs, self._read_clock())

    def _policy_settings(self, dict v, now):
        """Replaces the core's settings with `v` (every one of leastload.engine.settings
        that ll_settings has, checked by the facade) at `now` (None: the core's last time)."""
        cdef ll_settings c
        _settings_in(&c, v)
        with self._hold:
            if now is not None:
                ll_set_time(self._vs, now)
            _raise_for_rc(ll_set_settings(self._vs, &c), "set")
            _note_settings(self, &c)
            _drain_events(self)

    def _policy_settings_now(self):
        """The core's settings as a dict (a shared vserver's: as any process set them)."""
        cdef ll_settings c
        with self._hold:
            ll_get_settings(self._vs, &c)
            _note_settings(self, &c)
            return _settings_out(&c)

    def _policy_events(self):
        """(slow_start_exits, outlier_events), read up to now."""
        with self._hold:
            _drain_events(self)
            return self._exit_log, self._outlier_log

    def _slow_start_of(self, name):
        """(cap, increments, since, manual, held, a, b) of its ramp, or None."""
        cdef ll_ramp_info r
        with self._hold:
            rc = ll_slow_start_info(self._vs, self._slot(name), &r)
            _raise_for_rc(rc, "slow_start")
            if rc == 0:
                return None
            return (r.cap, r.increments, r.start, bool(r.manual), r.held, r.held_a, r.held_b)

    def _ejection_of(self, name):
        cdef ll_ejection_info e
        with self._hold:
            rc = ll_ejection_of(self._vs, self._slot(name), &e)
            _raise_for_rc(rc, "ejection")
            if rc == 0:
                return None
            return {"until": e.until, "ejections": e.ejections, "since": e.since}

    def _end_ejection_of(self, name):
        with self._hold:
            self._slot(name)
            if self._ejection_of(name) is None:
                return False
            self._policy_time()
            rc = ll_end_ejection(self._vs, self._slot(name))
            _raise_for_rc(rc, "end_ejection")
            _drain_events(self)
            return rc == 1

    def _report_utilization(self, name, double qps, double eps, double utilization):
        cdef double weight = 0.0
        with self._hold:
            ll_set_time(self._vs, self._read_clock())  # first: a clock's callback may unbind `name`
            _raise_for_rc(ll_report_utilization(self._vs, self._slot(name), qps, eps, utilization, &weight),
                          "report_utilization")
            return weight

    def _utilization_weights(self):
        cdef double weight
        with self._hold:
            ll_set_time(self._vs, self._read_clock())
            out = {}
            for name in self.services:
                rc = ll_utilization_weight(self._vs, self._slot(name), &weight)
                out[name] = weight if rc == 1 else None
            return out

    def _set_outlier_failures(self, k):
        k = _errors.check_outlier_failures(k)
        with self._hold:
            ll_set_outlier_failures(self._vs, k)
            self._outlier_on = k > 0

    def _totals(self):
        """(bound, UP, pickable, open, ejected, last-second selections of the UP
        services, the same of the open services): O(1). Pickable: UP, not draining,
        not ejected; open: pickable without a slow-start cap."""
        cdef ll_totals t
        with self._hold:
            ll_get_totals(self._vs, &t)
        return (t.bound, t.up, t.pickable, t.open, t.ejected, t.last_up, t.last_open)

    def _is_open(self, name):
        """UP, not draining, not ejected, no slow-start cap (see _totals)."""
        cdef ll_info info = _info_named(self, name)
        return (info.state == LL_UP and not info.draining and not info.ejected
                and info.cap == LL_NO_CAP)

    # ---- the request path ---------------------------------------------

    def select(self, exclude=None, key=None):
        """Picks a service, counts one new active transaction on it, returns its name.
        `exclude`: names skipped for this pick only (unknown names are ignored).
        `key`: the request's value a hash method hashes (ignored by the other methods)."""
        cdef int64_t slot
        names = None if exclude is None else _exclude_names(exclude)
        self._enter()
        try:
            slot = self._pick(names) if self._key_form is None else _pick_key(self, names, key)
            self._note_pick(names, key)
            return self._names[slot]
        finally:
            self._leave()

    cdef inline int _note_pick(self, object names, object key) except -1:
        """The last pick's exclude and key, for explain(): usually None, so usually no store."""
        if self._last_names is not names:
            self._last_names = names
        if self._last_key is not key:
            self._last_key = key
        return 0

    cdef int64_t _pick(self, object names) except -1:
        """select()'s work, the vserver held: reads the clock, then picks (skipping the
        slots of `names`, resolved after the clock read) and charges; returns the slot."""
        cdef int64_t slot
        if names is None:
            slot = ll_select(self._vs, self._tick())
        else:
            slot = self._pick_excluding(names)
        if slot < 0:
            self._raise_select(slot)
        return slot

    cdef int64_t _pick_excluding(self, object names, uint64_t key_hash=0, bint hashed=False) except? -2:
        cdef uint32_t stack_buf[16]
        cdef uint32_t *buf = stack_buf
        cdef size_t n = 0
        sec = self._tick()
        try:
            if len(names) > 16:
                buf = <uint32_t *>PyMem_Malloc(len(names) * sizeof(uint32_t))
                if buf == NULL:
                    raise MemoryError("leastload: out of memory in select(exclude=...)")
            for name in names:  # exact str keys: no Python code runs here
                found = self._slots.get(name)
                if found is not None:
                    buf[n] = <uint32_t>found
                    n += 1
            if hashed:
                return ll_select_hash(self._vs, sec, key_hash, buf, n)
            return ll_select_excluding(self._vs, sec, buf, n)
        finally:
            if buf != stack_buf:
                PyMem_Free(buf)

    cdef int _raise_select(self, int64_t rc) except -1:
        if rc == -EOVERFLOW:
            raise _errors.active_overflow(self._names[ll_full_slot(self._vs)])
        return _raise_for(rc, "select")

    def acquire(self, exclude=None, key=None):
        """Picks like select(exclude, key) and returns the transaction as a handle."""
        cdef Transaction tx
        names = None if exclude is None else _exclude_names(exclude)
        self._enter()
        try:
            slot = self._pick(names) if self._key_form is None else _pick_key(self, names, key)
            self._note_pick(names, key)
            name = self._names[slot]
            serial = self._serials[slot]  # read before any allocation can run a finalizer
            tx = Transaction.__new__(Transaction)
            tx._engine = self
            tx.service = name
            tx._serial = serial
            tx._slot = slot
            return tx
        finally:
            self._leave()

    def record(self, name, bytes=0, packets=0, control=False):
        """Traffic seen on a service, either direction, now."""
        cdef uint64_t gen = self._gen
        self._enter()
        try:
            slot = self._slot(name)
            b = _count("bytes", bytes)
            p = _count("packets", packets)
            if control is not False:
                _errors.check_bool("control", control)
            self._record_locked(name, slot, gen, b, p, control, bytes, packets, None)
        finally:
            self._leave()

    cdef int _record_locked(self, object name, uint32_t slot, uint64_t gen, uint64_t b, uint64_t p,
                            bint control, object bytes, object packets, Transaction tx) except -1:
        cdef int64_t sec = self._tick()
        cdef int64_t found
        if self._gen != gen:  # Python code may have unbound services: resolve again
            ll_advance(self._vs, sec)  # time passed even if the name is gone now
            if tx is None:
                slot = self._slot(name)
            else:
                found = _tx_slot(self, tx)
                if found < 0:  # the handle's service is gone: nothing to charge
                    return 0
                slot = <uint32_t>found
        if control and not self._rtsp_nat:
            ll_advance(self._vs, sec)
            return 0  # control traffic counts only with RTSP NAT on
        cdef int rc = ll_record(self._vs, slot, sec, b, p)
        if rc == -EOVERFLOW:
            if b > 0xFFFFFFFFFFFFFFFF - _info_at(self, slot).bytes:
                raise _errors.window_overflow("bytes", bytes)
            raise _errors.window_overflow("packets", packets)
        if rc < 0:
            _raise_for(rc, "record", name)
        return 0

    @property
    def window_seconds(self):
        """Seconds of traffic LEASTBANDWIDTH and LEASTPACKETS count (default 14)."""
        return ll_window(self._vs)

    def _set_window(self, seconds):
        """A new window length: the traffic of the last min(old, new) seconds stays."""
        with self._hold:
            ll_advance(self._vs, self._tick())
            _raise_for_rc(ll_set_window(self._vs, seconds), "set(window_seconds=...)")

    def probe(self, name, rtt):
        """A monitor probe's response time in seconds: LRTM's input (kept under any
        method). The first sets the average, later ones move it an eighth of the way."""
        with self._hold:
            slot = self._slot(name)
            us = _errors.check_ttfb(rtt, "rtt")
            _raise_for_rc(ll_probe(self._vs, slot, us), "probe", name)

    def report_load(self, name, metrics):
        """CUSTOMLOAD's input: {metric: (value, weight, threshold)}; the load is the sum
        of value * weight, and a value at or over its threshold makes the service
        ineligible under CUSTOMLOAD until a report says otherwise."""
        with self._hold:
            slot = self._slot(name)
            load, over = _errors.check_custom_metrics(metrics)
            _raise_for_rc(ll_set_custom_load(self._vs, slot, load, over), "report_load", name)

    def begin(self, name):
        """One more active transaction, dispatched without select()."""
        self._enter()
        try:
            _raise_for_rc(ll_begin(self._vs, self._slot(name)), "begin", name)
        finally:
            self._leave()

    def finish(self, name, ttfb=None, status=200):
        """Ends one active transaction; a status-200 TTFB (seconds) updates the average.
        A status of 500 or more counts as a failure (outlier detection)."""
        cdef uint64_t gen = self._gen
        self._enter()
        try:
            slot = self._slot(name)
            us = _ttfb_us(ttfb)
            code = _status(status)
            if self._outlier_on or self._peak:
                self._tick_for_outliers()
            if self._gen != gen:
                slot = self._slot(name)
            self._end_locked(name, slot, ttfb is not None and code == 200, us, code >= 500)
        finally:
            self._leave()

    def fail(self, name):
        """Ends one active transaction that got no response (refused, reset, timed out):
        the TTFB average does not move; it counts as a failure."""
        self._enter()
        try:
            self._slot(name)
            if self._outlier_on or self._peak:
                self._tick_for_outliers()
            self._end_locked(name, self._slot(name), False, 0, True)
        finally:
            self._leave()

    cdef int _tick_for_outliers(self) except -1:
        """With ejection on, ending a transaction reads the clock first, as select
        does: an ejection that ended by now returns before a failure is judged.
        So does PEAKEWMA: its sample's time."""
        ll_advance(self._vs, self._tick())
        return 0

    cdef int _end_locked(self, object name, uint32_t slot, bint has_ttfb, uint32_t us, bint failed) except -1:
        cdef int rc = ll_finish(self._vs, slot, has_ttfb, us, failed)
        if rc < 0:
            _raise_for(rc, "finish", name)
        if rc:
            self._after_end(name, rc)
        return 0

    cdef int _after_end(self, object name, int flags) except -1:
        if flags & LL_END_DRAINED:
            self.unbind(name)  # the facade's unbind: slow-start bookkeeping follows
        if flags & LL_END_OUTLIER:
            _drain_events(self)
            self._on_outlier(name)
        return 0

    # ---- reading -------------------------------------------------------

    def load(self, name):
        """N of the method now: int, or float seconds for LEASTRESPONSETIME."""
        cdef ll_info info = _info_now(self, name)
        return _load_of(self, &info)

    def score(self, name):
        """Nw = N * 10000 / weight now, as a float for display."""
        cdef ll_info info = _info_now(self, name)
        return _score_of(self, &info)

    def _selections(self, name):
        """(selected since bind, in this second, in the last second); the clock is not read."""
        cdef ll_info info = _info_named(self, name)
        return info.selected, info.sel_this_sec, info.sel_last_sec

    def weight(self, name):
        return _info_named(self, name).weight

    def state(self, name):
        return STATES[_info_named(self, name).state]

    def active(self, name):
        return _info_named(self, name).active

    def info(self, name):
        """Every counter of one service now, as a dict."""
        cdef ll_info info = _info_now(self, name)
        return _info_dict(self, name, &info)

    def _last_pick(self):
        """The last charged pick as explain() reads it (None: nothing to explain)."""
        return _last_pick_of(self)

    def snapshot(self):
        """The whole state as plain data (the clock is not read)."""
        return _snapshot_of(self)

    def _tree_is_wide(self):
        """True while the C tree keeps wide keys rather than packed 64-bit nodes (tests)."""
        with self._hold:
            return bool(ll_tree_is_wide(self._vs))

    def memory_bytes(self):
        """Bytes the C core has allocated for this vserver."""
        with self._hold:
            return ll_memory_bytes(self._vs)

    # ---- the batch path (_binding/replay.pxi) ------------------------------

    def _replay(self, trace, result, events):
        """C path of leastload.sim.replay.replay() (see _replay_run)."""
        _replay_run(self, trace, result, events)

    def _check_replay(self, clock, trace):
        """What the C replay refuses (leastload.sim.replay asks before it binds anything)."""
        _replay_check(self, clock, trace)

    def _replay_mapping(self, trace):
        """trace service -> slot and slot -> trace service, as read-only arrays."""
        return _replay_map(self, trace)

    # ---- shared="NAME" (_binding/shared.pxi) ---------------------------------

    def _open_shared(self, name, capacity, record):
        """Moves the vserver into the shared segment `name` (the facade checks the
        arguments and compares the settings record returned: None when created here)."""
        if self._depth:
            raise RuntimeError("a vserver cannot become shared inside one of its own calls")
        return _shared_open(self, name, capacity, record)

    def _close_shared(self):
        """Leaves the shared segment; the vserver is an empty private one after it."""
        if self._depth:
            raise RuntimeError("a vserver cannot leave its segment inside one of its own calls")
        if self._sh != NULL:
            _shared_close(self)

    def _policy_load(self, record):
        """Shared: another process changed the settings (the facade reads them)."""

    def _policy_store(self, record):
        """Shared: this process changed the settings; the others read them at their next
        lock (`record` is unused: the core holds the settings and the policy's state)."""
        if self._sh != NULL:
            with self._hold:
                _shared_settings_changed(self)

    def _reload_policy(self):
        if self._sh != NULL:
            _shared_reload_policy(self)

    def _deadline_at(self):
        return self._deadline

    def _shared_sequence(self):
        """The place of this process's latest call in the order of all calls on the
        shared vserver (0: not shared). Reads no lock: call it from the same thread."""
        return self._seq

    def _shared_stats(self):
        """The segment's figures: name, capacity, sequence, processes (pids),
        reclaimed (transactions of dead processes ended), repairs, lock (the kind of
        lock the segment's builds take: "robust", "owner" or "windows"). None: not shared."""
        return None if self._sh == NULL else _shared_stats(self)

    def _noop(self, x):
        """Takes an int and returns it: the floor no per-call method can beat (benchmarks)."""
        cdef long v = x
        return v

    def __len__(self):
        self._enter()
        try:
            return ll_bound_count(self._vs)
        finally:
            self._leave()

    def __contains__(self, name):
        self._enter()
        try:
            return name in self._slots
        finally:
            self._leave()
