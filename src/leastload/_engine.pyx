# cython: language_level=3, binding=False, embedsignature=True, embedsignature.format=clinic, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The C engine's Python face: names <-> slots, the clock, argument checks, the guard.

binding=False keeps CPython's fast method call (Cython's default binding=True
costs 4-6 ns a call on these machines); embedsignature in the "clinic" format
writes each signature as a __text_signature__, so help() and
inspect.signature() see it without binding=True.
Arguments are checked here, with the messages of leastload._errors, before
the C core is called; every C return code goes through _raise_for().
"""
from libc.errno cimport EINVAL, ENOENT, ENOMEM, EOVERFLOW, ERANGE
from libc.math cimport INFINITY, floor
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uint64_t
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
from cpython.pythread cimport PyThread_get_thread_ident
cimport cython

from ._cengine cimport *

import ipaddress
import threading
from time import monotonic as _time_monotonic

from . import _errors, _hash
from ._methods import NEEDS_KEY as _NEEDS_KEY
from ._errors import METHODS, STATES
from . import _methods

cdef dict _METHOD_INDEX = {m.name: m.value for m in _methods.TABLE}
# the C core's method table must be the registry's: checked once, at import
_methods.check_against_c([ll_method_name(i).decode() for i in range(LL_METHOD_COUNT)],
                         [bool(ll_method_supported(i)) for i in range(LL_METHOD_COUNT)])
cdef dict _STATE_INDEX = {name: i for i, name in enumerate(STATES)}

cdef enum ClockKind:
    CLOCK_KIND_MONOTONIC = 0  # clock=None: time.monotonic() itself
    CLOCK_KIND_MANUAL = 1     # our ManualClock: its value read without a Python call
    CLOCK_KIND_OBJECT = 2     # anything with .now()


# The default clock is time.monotonic itself, called through the function
# object: the same value from the same source as the caller's time.monotonic()
# on every platform (CLOCK_MONOTONIC differs from it on macOS, where it counts
# sleep, and does not exist on Windows).
cdef object _MONOTONIC = _time_monotonic


cdef inline double _monotonic() except? -1.0:
    return <double>_MONOTONIC()


monotonic = _time_monotonic  # the default clock of a VirtualServer


cdef class ManualClock:
    """ManualClock(start=0.0)
--

A virtual clock for tests and simulations: time moves only when told."""

    cdef double _t

    def __init__(self, start=0.0):
        self._t = _errors.check_seconds("start", start)

    def now(self):
        return self._t

    def advance(self, seconds):
        """Moves the clock by `seconds` (negative: backwards)."""
        self._t = _errors.advance_clock(self._t, seconds)

    def set(self, t):
        self._t = _errors.check_seconds("t", t)

    def __repr__(self):
        return f"ManualClock({self._t!r})"


cdef inline uint64_t _count(str arg, object value) except? 0xFFFFFFFFFFFFFFFF:
    if type(value) is not int:
        value = _errors.check_count(arg, value)
    try:
        return <uint64_t>value
    except OverflowError:
        pass
    _errors.check_count(arg, value)  # raises with the shared message
    raise SystemError(f"{arg}={value!r} passed the checks but not the conversion")


cdef inline uint32_t _ttfb_us(object ttfb) except? 0xFFFFFFFF:
    """TTFB seconds -> integer microseconds (0 for None), as _errors.check_ttfb."""
    cdef double t
    if ttfb is None:
        return 0
    if type(ttfb) is float and 0.0 <= <double>ttfb <= 3600.0:
        t = ttfb
        return <uint32_t>floor(t * 1e6 + 0.5)
    return _errors.check_ttfb(ttfb)


cdef inline long _status(object status) except -1:
    if type(status) is int and 100 <= status <= 599:
        return status
    return _errors.check_status(status)  # raises with the shared message


cdef int _raise_for(int64_t rc, str op, object name=None) except -1:
    """Maps a negative C return code to the exception the reference raises."""
    if rc == -ENOENT:
        raise _errors.no_service()
    if rc == -EOVERFLOW and name is not None:
        raise _errors.active_overflow(name)
    if rc == -ERANGE:
        raise _errors.nothing_active(name)
    if rc == -ENOMEM:
        raise MemoryError(f"leastload: out of memory in {op}")
    # -EINVAL and the rest: the checks above the C call should have caught it
    raise SystemError(f"leastload C core: {op} returned {rc} (a binding bug)")


cdef inline int _raise_for_rc(int rc, str op, object name=None) except -1:
    if rc < 0:
        _raise_for(rc, op, name)
    return 0


@cython.final
cdef class _TraceArrays:
    """A trace's arrays as the C side reads them (ll_trace), kept alive while it is
    used: the replay and the floor borrow them through `t`."""
    cdef const double[::1] arrival, factor, transfer, base, slope
    cdef const uint16_t[::1] status
    cdef const uint64_t[::1] req_b, resp_b, req_p, resp_p
    cdef ll_trace t

    def __cinit__(self, trace):
        self.arrival, self.factor, self.transfer = trace.arrival, trace.ttfb_factor, trace.transfer
        self.base, self.slope, self.status = trace.ttfb_base, trace.ttfb_slope, trace.status
        self.req_b, self.resp_b = trace.req_bytes, trace.resp_bytes
        self.req_p, self.resp_p = trace.req_packets, trace.resp_packets
        self.t.n = self.arrival.shape[0]
        if self.t.n == 0:
            return  # nothing to point at: the callers return before C reads it
        self.t.arrival, self.t.ttfb_factor, self.t.transfer = &self.arrival[0], &self.factor[0], &self.transfer[0]
        self.t.status = &self.status[0]
        self.t.req_bytes, self.t.resp_bytes = &self.req_b[0], &self.resp_b[0]
        self.t.req_packets, self.t.resp_packets = &self.req_p[0], &self.resp_p[0]
        self.t.ttfb_base, self.t.ttfb_slope = &self.base[0], &self.slope[0]


cdef class Engine


# the key forms _fast_key_hash reads
cdef enum:
    KEY_URL = 1
    KEY_WHOLE = 2
    KEY_DOMAIN = 3
    KEY_ONE_IP = 4
    KEY_IP_IP = 5
    KEY_IP_PORT = 6
    MAX_HASHLENGTH_BUF = 4096  # _hash.MAX_HASHLENGTH; also more than two addresses and a port

cdef dict _KEY_KINDS = {"URLHASH": KEY_URL, "CALLIDHASH": KEY_WHOLE, "TOKEN": KEY_WHOLE, "DOMAINHASH": KEY_DOMAIN,
                        "SOURCEIPHASH": KEY_ONE_IP, "DESTINATIONIPHASH": KEY_ONE_IP,
                        "SRCIPDESTIPHASH": KEY_IP_IP, "SRCIPSRCPORTHASH": KEY_IP_PORT}
assert MAX_HASHLENGTH_BUF == _hash.MAX_HASHLENGTH
cdef object _IPv4Address = ipaddress.IPv4Address
cdef object _IPv6Address = ipaddress.IPv6Address


# IPv4Address and IPv6Address keep the address as an int in the `_ip` slot
# (__slots__). The key path reads that slot at its offset in the object, as the
# slot's own descriptor does, without an attribute lookup (for IPv4 about a third
# of SOURCEIPHASH's key cost; for IPv6 it replaces `.packed`, a Python-level
# property). The offset is taken from the descriptor and checked on a sample at
# import; when anything differs (another layout, another kind of member), it is
# -1 and the key path asks getattr() or `.packed` as before.
from cpython.ref cimport PyObject

cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    bint PyLong_CheckExact(object o)
    unsigned long long PyLong_AsUnsignedLongLongMask(object o) except? <unsigned long long>-1
    long PyLong_AsLongAndOverflow(object o, int *overflow) except? -1  # SRCIPSRCPORTHASH's port

cdef enum:
    MEMBER_OBJECT_EX = 16  # T_OBJECT_EX (Py_T_OBJECT_EX): a PyObject * slot


cdef Py_ssize_t _slot_offset(object cls, str name, object sample):
    """The offset of `name`'s slot in instances of `cls`, or -1 when it cannot be trusted."""
    import sys, types
    if sys.implementation.name != "cpython":  # the descriptor's layout is CPython's
        return -1
    descr = cls.__dict__.get(name)
    if type(descr) is not types.MemberDescriptorType:
        return -1
    cdef PyMemberDef *member = (<PyMemberDescrObject *><PyObject *>descr).d_member
    if member == NULL or member.type != MEMBER_OBJECT_EX or member.offset <= 0:
        return -1
    if _read_slot(sample, member.offset) is not getattr(sample, name):
        return -1
    return member.offset


cdef inline object _read_slot(object obj, Py_ssize_t offset):
    """The object in the slot at `offset` of obj (None for an empty slot)."""
    cdef PyObject *p = (<PyObject **>((<char *><PyObject *>obj) + offset))[0]
    return None if p == NULL else <object>p


cdef Py_ssize_t _IPV4_IP_OFFSET = _slot_offset(_IPv4Address, "_ip", _IPv4Address("192.0.2.1"))
cdef Py_ssize_t _IPV6_IP_OFFSET = _slot_offset(_IPv6Address, "_ip", _IPv6Address("2001:db8::1"))


cdef inline uint64_t _name_hash(str name) except? 0:
    """A service's fixed hash for the hash methods (the reference's _hash.name_hash)."""
    cdef bytes data = name.encode("utf-8", "surrogatepass")
    return ll_xxh64(<const char *>data, <size_t>len(data), 0)


cdef object _exclude_names(object exclude):
    """select()'s exclude as a sized container of str: a built-in list, tuple, set or
    frozenset is used as it is (iterating it runs no Python code), anything else is
    materialized by _errors.check_exclude, which also raises the shared errors."""
    cdef type t = type(exclude)
    if t is set or t is frozenset or t is list or t is tuple:
        for item in exclude:
            if type(item) is not str:
                return _errors.check_exclude(exclude)  # raises, naming the item
        return exclude
    return _errors.check_exclude(exclude)


@cython.final
cdef class _Hold:
    """`with vs.atomic():` the calls inside are one unit for other threads."""

    cdef Engine _engine

    def __enter__(self):
        self._engine._enter()
        return self._engine

    def __exit__(self, exc_type, exc, tb):
        self._engine._leave()
        return False


@cython.final
@cython.freelist(64)
cdef class Transaction:
    """One request in flight on `service`, from acquire() to finish() or fail().

    Ends exactly once; as a context manager it ends itself: fail() if an
    exception left the block, else finish() without a TTFB. If its service
    was unbound meanwhile, ending it changes nothing (the service is gone).
    """

    cdef Engine _engine
    cdef readonly str service
    cdef uint64_t _serial    # the bind incarnation it was picked from
    cdef bint _done

    @property
    def done(self):
        """True once finish() or fail() ended it."""
        return self._done

    def record(self, bytes=0, packets=0):
        """Traffic of this transaction, either direction (a no-op once its service is gone)."""
        self._engine._tx_record(self, bytes, packets)

    def finish(self, ttfb=None, status=200):
        """Ends it with a response (as VirtualServer.finish)."""
        self._engine._tx_end(self, ttfb, status, False)

    def fail(self):
        """Ends it without a response: refused, reset or timed out (as VirtualServer.fail)."""
        self._engine._tx_end(self, None, 200, True)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._done:  # finish() without a TTFB, or fail() when an exception escaped
            self._engine._tx_end(self, None, 200, exc_type is not None)
        return False

    def __repr__(self):
        return f"<Transaction on {self.service!r}{' (ended)' if self._done else ''}>"


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
    cdef double _deadline    # slow-start policy: call _on_deadline() at this time
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

    def __cinit__(self, *args, **kwargs):
        self._names = []
        self._serials = []
        self._slots = {}
        self._deadline = INFINITY
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
        if self._vs != NULL:
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
            self._init_locked(m, clock, factor, rtsp_nat)
            self._set_key_form(method)
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
            return 0
        return self._wait_turn(me)

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
        return 0

    cdef inline void _leave(self) noexcept:
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
        if now >= self._deadline:
            ll_advance(self._vs, sec)  # the policy sees the window at `now`
            self._on_deadline(now)
        return sec

    def now(self):
        """The vserver's clock, read once (the window does not move)."""
        self._enter()
        try:
            return self._read_clock()
        finally:
            self._leave()

    def _set_deadline(self, double t):
        self._deadline = t

    def _on_deadline(self, now):
        """Called by the first call that sees the clock reach the deadline."""
        self._deadline = INFINITY

    def _on_outlier(self, name):
        """Called when `name` failed outlier_failures times in a row (the facade decides)."""

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
        self._enter()
        try:
            if name in self._slots:
                raise _errors.duplicate_service(name)
            w = _errors.check_weight(weight)
            slot = ll_bind(self._vs, w)
            if slot < 0:
                _raise_for(slot, "bind")
            if self._key_form is not None and ll_set_name_hash(self._vs, <uint32_t>slot, _name_hash(name)) < 0:
                ll_unbind(self._vs, <uint32_t>slot)  # nothing half-applied
                raise MemoryError("leastload: cannot allocate the services' name hashes")
            assert slot == len(self._names)
            self._next_serial += 1
            self._names.append(name)
            self._serials.append(self._next_serial)
            self._slots[name] = slot
            self._bind_gen += 1
            self._services = None
        finally:
            self._leave()

    def unbind(self, name):
        self._enter()
        try:
            self._unbind_locked(name)
        finally:
            self._leave()

    cdef int _unbind_locked(self, object name) except -1:
        cdef uint32_t slot = self._slot(name)
        _raise_for_rc(ll_unbind(self._vs, slot), "unbind")
        self._names[slot] = None
        self._serials[slot] = 0
        del self._slots[name]
        self._gen += 1
        self._bind_gen += 1
        self._services = None
        cdef uint32_t bound = ll_bound_count(self._vs)
        if ll_slot_count(self._vs) - bound > max(bound, 32):  # close holes, O(n), rarely
            ll_compact(self._vs)
            self._serials = [s for s, n in zip(self._serials, self._names) if n is not None]
            self._names = [n for n in self._names if n is not None]
            self._slots = {n: i for i, n in enumerate(self._names)}
        return 0

    def reserve(self, services):
        """Makes room for `services` services, so binding them allocates nothing."""
        if isinstance(services, bool) or not isinstance(services, int) or not 0 <= services <= (1 << 30):
            raise _errors.bad_value("services", services, "an int in 0..2**30")
        self._enter()
        try:
            _raise_for_rc(ll_reserve(self._vs, services), "reserve")
        finally:
            self._leave()

    def set_weight(self, name, weight):
        self._slot(name)
        cdef uint32_t w = _errors.check_weight(weight)
        self._enter()
        try:
            _raise_for_rc(ll_set_weight(self._vs, self._slot(name), w), "set_weight")
        finally:
            self._leave()

    def set_state(self, name, state):
        self._enter()
        try:
            self._slot(name)
            s = _STATE_INDEX[_errors.check_choice("state", state, STATES)]
            _raise_for_rc(ll_set_state(self._vs, self._slot(name), <ll_state>s), "set_state")
        finally:
            self._leave()

    def set_method(self, method):
        """Changes the method; the weighted round restarts and so does startup round robin."""
        cdef int m = _METHOD_INDEX[_errors.check_method(method)]
        self._enter()
        try:
            self._hash_names(method)  # may raise MemoryError: before anything changes
            _raise_for_rc(ll_set_method(self._vs, <ll_method>m), "set_method")
            ll_set_startup_rr(self._vs, self._startup_factor)
            self._set_key_form(method)
        finally:
            self._leave()

    cdef int _hash_names(self, str method) except -1:
        """Before a hash method is set: every bound service's name hash to the C core,
        which keeps them from then on (a vserver that never hashes has none)."""
        cdef Py_ssize_t slot
        if method in _hash.KEY_FORMS:
            for slot in range(len(self._names)):
                name = self._names[slot]
                if name is not None and ll_set_name_hash(self._vs, <uint32_t>slot, _name_hash(name)) < 0:
                    raise MemoryError("leastload: cannot allocate the services' name hashes")
        return 0

    cdef int _set_key_form(self, str method) except -1:
        self._key_form = _hash.KEY_FORMS.get(method)
        self._method_name = method
        self._key_kind = _KEY_KINDS.get(method, 0)
        self._peak = method == "PEAKEWMA"
        return 0

    def _seed_draws(self, seed):
        """Restarts P2C's draws from `seed` (checked by the facade)."""
        cdef uint64_t s = seed
        self._enter()
        try:
            ll_set_rng_seed(self._vs, s)
        finally:
            self._leave()

    def _set_peak_decay(self, decay_us):
        """PEAKEWMA's decay time in microseconds (checked by the facade)."""
        cdef uint32_t us = decay_us
        self._enter()
        try:
            _raise_for_rc(ll_set_peak_decay(self._vs, us), "peakewma_decay")
        finally:
            self._leave()

    def _set_hash_settings(self, key_settings, seed):
        """The hash methods' settings (checked by the facade)."""
        cdef uint64_t s = seed
        self._enter()
        try:
            self._key_settings = key_settings
            self._hash_seed = s
            self._hashlength = key_settings.hashlength
            self._v4mask = key_settings.v4mask
            self._v6len = key_settings.v6len
        finally:
            self._leave()

    def drain(self, name):
        """No new picks for `name` from now on; it is unbound when its last open
        transaction ends (at once if it has none)."""
        self._enter()
        try:
            slot = self._slot(name)
            _raise_for_rc(ll_set_draining(self._vs, slot), "drain")
            if self._info_of(slot).active == 0:
                self.unbind(name)  # the facade's unbind: slow-start bookkeeping follows
        finally:
            self._leave()

    @property
    def method(self):
        self._enter()
        try:
            return _methods.TABLE[<int>ll_get_method(self._vs)].name
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
        self._enter()
        try:
            return self._startup_factor
        finally:
            self._leave()

    @startup_rr_factor.setter
    def startup_rr_factor(self, value):
        """Takes effect at the next set_method(); the running count is left alone."""
        factor = _errors.check_startup_rr_factor(value)
        self._enter()
        try:
            self._startup_factor = factor
        finally:
            self._leave()

    @property
    def startup_rr_left(self):
        self._enter()
        try:
            return ll_startup_rr_left(self._vs)
        finally:
            self._leave()

    @property
    def rtsp_nat(self):
        self._enter()
        try:
            return self._rtsp_nat
        finally:
            self._leave()

    @rtsp_nat.setter
    def rtsp_nat(self, value):
        flag = _errors.check_bool("rtsp_nat", value)
        self._enter()
        try:
            self._rtsp_nat = flag
        finally:
            self._leave()

    def _set_cap(self, name, cap):
        """Slow start: at most `cap` selections per second (None: no cap)."""
        self._slot(name)
        cdef uint32_t c = LL_NO_CAP if cap is None else _errors.check_cap(cap)
        self._enter()
        try:
            _raise_for_rc(ll_set_cap(self._vs, self._slot(name), c), "_set_cap")
        finally:
            self._leave()

    def _set_ejected(self, name, bint ejected):
        """Passive ejection: no picks while ejected (the facade decides when)."""
        self._enter()
        try:
            _raise_for_rc(ll_set_ejected(self._vs, self._slot(name), ejected), "_set_ejected")
        finally:
            self._leave()

    def _set_outlier_failures(self, k):
        k = _errors.check_outlier_failures(k)
        self._enter()
        try:
            ll_set_outlier_failures(self._vs, k)
            self._outlier_on = k > 0
        finally:
            self._leave()

    def _totals(self):
        """(bound, UP, pickable, open, ejected, last-second selections of the UP
        services, the same of the open services): O(1). Pickable: UP, not draining,
        not ejected; open: pickable without a slow-start cap."""
        cdef ll_totals t
        self._enter()
        try:
            ll_get_totals(self._vs, &t)
        finally:
            self._leave()
        return (t.bound, t.up, t.pickable, t.open, t.ejected, t.last_up, t.last_open)

    def _is_open(self, name):
        """UP, not draining, not ejected, no slow-start cap (see _totals)."""
        cdef ll_info info = self._info(name)
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
            slot = self._pick(names) if self._key_form is None else self._pick_key(names, key)
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

    cdef int64_t _pick_key(self, object names, object key) except -1:
        """select()'s work on a hash method: the key checked and hashed before the clock
        is read, then the rendezvous pick (DOMAINHASH without a domain: _pick)."""
        cdef uint64_t h
        cdef int64_t slot
        if not self._fast_key_hash(key, &h):
            data = self._key_form(key, self._key_settings)  # checks the key; the rules' one place
            if data is None:
                return self._pick(names)
            h = ll_xxh64(<const char *>data, <size_t>len(<bytes>data), self._hash_seed)
        if names is None:
            slot = ll_select_hash(self._vs, self._tick(), h, NULL, 0)
        else:
            slot = self._pick_excluding(names, h, True)
        if slot < 0:
            self._raise_select(slot)
        return slot

    cdef int _fast_key_hash(self, object key, uint64_t *out) except -1:
        """The hash of the common key forms without a Python call (exact str and bytes,
        exact ipaddress objects, tuples of them); the same bytes as _hash.KEY_FORMS.
        Returns 0 for anything else (and for a key to refuse): the general path decides."""
        cdef unsigned char buf[MAX_HASHLENGTH_BUF]
        cdef const char *text
        cdef Py_ssize_t size, n, m
        cdef long p
        cdef int overflow = 0
        cdef int kind = self._key_kind
        if kind <= KEY_DOMAIN:
            if type(key) is str and PyUnicode_IS_ASCII(key):
                text = PyUnicode_AsUTF8AndSize(key, &size)
            elif type(key) is bytes:
                text = PyBytes_AS_STRING(key)
                size = PyBytes_GET_SIZE(key)
            else:
                return 0
            if kind == KEY_WHOLE:
                if size == 0:
                    return 0  # refused there
            elif kind == KEY_URL:
                if size > self._hashlength:
                    size = self._hashlength
            else:
                if size and text[size - 1] == b'.':
                    size -= 1  # the root's dot
                if size == 0:
                    return 0  # no domain: the general path says so
                if size > self._hashlength:
                    size = self._hashlength
                for n in range(size):  # ASCII letters lowered, as bytes.lower()
                    buf[n] = <unsigned char>text[n] + 32 if b'A' <= text[n] <= b'Z' else <unsigned char>text[n]
                text = <const char *>buf
            out[0] = ll_xxh64(text, <size_t>size, self._hash_seed)
            return 1
        if kind == KEY_ONE_IP:
            n = self._address_bytes(key, buf)
        elif type(key) is not tuple or len(<tuple>key) != 2:
            return 0
        elif kind == KEY_IP_IP:
            n = self._address_bytes((<tuple>key)[0], buf)
            if n > 0:
                m = self._address_bytes((<tuple>key)[1], buf + n)
                n = n + m if m > 0 else -1
        else:
            n = self._address_bytes((<tuple>key)[0], buf)
            port = (<tuple>key)[1]
            p = PyLong_AsLongAndOverflow(port, &overflow) if type(port) is int else -1
            if n > 0 and not overflow and 0 <= p <= 65535:
                buf[n] = <unsigned char>(p >> 8)
                buf[n + 1] = <unsigned char>(p & 0xFF)
                n += 2
            else:
                n = -1
        if n <= 0:
            return 0
        out[0] = ll_xxh64(buf, <size_t>n, self._hash_seed)
        return 1

    cdef Py_ssize_t _address_bytes(self, object addr, unsigned char *out) except -2:
        """An exact IPv4Address or IPv6Address as _hash hashes it (a tag byte and the masked
        address; IPv4-mapped IPv6 as IPv4), written to out; its length, or -1: not one."""
        cdef uint32_t v
        cdef uint64_t hi, lo
        cdef const unsigned char *p
        cdef int i
        if type(addr) is _IPv4Address:
            # the stdlib keeps the address as the int int(addr) returns, without int()'s call
            ip = _read_slot(addr, _IPV4_IP_OFFSET) if _IPV4_IP_OFFSET > 0 else getattr(addr, "_ip", None)
            v = (<uint32_t>ip if PyLong_CheckExact(ip) else <uint32_t>int(addr)) & self._v4mask
        elif type(addr) is _IPv6Address:
            ip = _read_slot(addr, _IPV6_IP_OFFSET) if _IPV6_IP_OFFSET > 0 else None
            if PyLong_CheckExact(ip):  # the address's int, in two 64-bit halves
                lo = PyLong_AsUnsignedLongLongMask(ip)
                hi = PyLong_AsUnsignedLongLongMask(ip >> 64)
            else:
                packed = addr.packed
                p = <const unsigned char *>PyBytes_AS_STRING(packed)
                hi = lo = 0
                for i in range(8):
                    hi = hi << 8 | p[i]
                    lo = lo << 8 | p[8 + i]
            if hi == 0 and lo >> 32 == 0xFFFF:  # IPv4-mapped
                v = <uint32_t>lo & self._v4mask
            else:
                # the first v6len bits kept
                hi &= 0 if self._v6len == 0 else ~(<uint64_t>0) << (64 - self._v6len) if self._v6len < 64 else ~(<uint64_t>0)
                lo &= 0 if self._v6len <= 64 else ~(<uint64_t>0) << (128 - self._v6len) if self._v6len < 128 else ~(<uint64_t>0)
                out[0] = 6
                for i in range(8):
                    out[1 + i] = <unsigned char>(hi >> (56 - 8 * i))
                    out[9 + i] = <unsigned char>(lo >> (56 - 8 * i))
                return 17
        else:
            return -1
        out[0] = 4
        out[1] = <unsigned char>(v >> 24)
        out[2] = <unsigned char>(v >> 16)
        out[3] = <unsigned char>(v >> 8)
        out[4] = <unsigned char>v
        return 5

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
            slot = self._pick(names) if self._key_form is None else self._pick_key(names, key)
            self._note_pick(names, key)
            name = self._names[slot]
            serial = self._serials[slot]  # read before any allocation can run a finalizer
            tx = Transaction.__new__(Transaction)
            tx._engine = self
            tx.service = name
            tx._serial = serial
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
                found = self._tx_slot(tx)
                if found < 0:  # the handle's service is gone: nothing to charge
                    return 0
                slot = <uint32_t>found
        if control and not self._rtsp_nat:
            ll_advance(self._vs, sec)
            return 0  # control traffic counts only with RTSP NAT on
        cdef int rc = ll_record(self._vs, slot, sec, b, p)
        if rc == -EOVERFLOW:
            if b > 0xFFFFFFFFFFFFFFFF - self._info_of(slot).bytes:
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
        self._enter()
        try:
            ll_advance(self._vs, self._tick())
            _raise_for_rc(ll_set_window(self._vs, seconds), "set(window_seconds=...)")
        finally:
            self._leave()

    def probe(self, name, rtt):
        """A monitor probe's response time in seconds: LRTM's input (kept under any
        method). The first sets the average, later ones move it an eighth of the way."""
        self._enter()
        try:
            slot = self._slot(name)
            us = _errors.check_ttfb(rtt, "rtt")
            _raise_for_rc(ll_probe(self._vs, slot, us), "probe", name)
        finally:
            self._leave()

    def report_load(self, name, metrics):
        """CUSTOMLOAD's input: {metric: (value, weight, threshold)}; the load is the sum
        of value * weight, and a value at or over its threshold makes the service
        ineligible under CUSTOMLOAD until a report says otherwise."""
        self._enter()
        try:
            slot = self._slot(name)
            load, over = _errors.check_custom_metrics(metrics)
            _raise_for_rc(ll_set_custom_load(self._vs, slot, load, over), "report_load", name)
        finally:
            self._leave()

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
            self._on_outlier(name)
        return 0

    # ---- transaction handles -------------------------------------------

    cdef int _tx_record(self, Transaction tx, object bytes, object packets) except -1:
        cdef uint64_t gen
        cdef int64_t slot
        self._enter()
        try:
            if tx._done:
                raise _errors.transaction_ended(tx.service)
            b = _count("bytes", bytes)
            p = _count("packets", packets)
            gen = self._gen
            slot = self._tx_slot(tx)
            if slot >= 0:
                self._record_locked(tx.service, <uint32_t>slot, gen, b, p, False, bytes, packets, tx)
        finally:
            self._leave()
        return 0

    cdef int64_t _tx_slot(self, Transaction tx) except? -2:
        """The handle's slot, or -1 if its service (that incarnation) is gone."""
        found = self._slots.get(tx.service)
        if found is None or self._serials[found] != tx._serial:
            return -1
        return found

    cdef int _tx_end(self, Transaction tx, object ttfb, object status, bint failed) except -1:
        self._enter()
        try:
            if tx._done:
                raise _errors.transaction_ended(tx.service)
            us = _ttfb_us(ttfb)
            code = _status(status)
            slot = self._tx_slot(tx)
            if slot >= 0 and (self._outlier_on or self._peak):
                self._tick_for_outliers()
                slot = self._tx_slot(tx)  # the clock may have unbound it
            if slot >= 0:
                rc = ll_finish(self._vs, <uint32_t>slot, ttfb is not None and code == 200 and not failed,
                               us, failed or code >= 500)
                if rc < 0:
                    _raise_for(rc, "finish", tx.service)
                tx._done = True
                if rc:
                    self._after_end(tx.service, rc)
            tx._done = True
        finally:
            self._leave()
        return 0

    # ---- reading -------------------------------------------------------

    cdef inline ll_info _info_of(self, uint32_t slot):
        cdef ll_info info
        ll_service_info(self._vs, slot, &info)
        return info

    cdef ll_info _info(self, object name) except *:
        self._enter()
        try:
            return self._info_of(self._slot(name))
        finally:
            self._leave()

    cdef ll_info _info_now(self, object name) except *:
        """_info() after the clock is read: N as it stands now."""
        self._enter()
        try:
            self._slot(name)
            sec = self._tick()
            ll_advance(self._vs, sec)
            slot = self._slot(name)  # the clock may have run Python code
            return self._info_of(slot)
        finally:
            self._leave()

    cdef object _load_of(self, ll_info *info):
        if _methods.TABLE[<int>ll_get_method(self._vs)].unit == "seconds":
            return <double>info.load / 1e6
        return info.load

    cdef object _score_of(self, ll_info *info):
        return float(self._load_of(info)) * 10000.0 / info.weight

    cdef dict _info_dict(self, object name, ll_info *i):
        return {
            "name": name,
            "weight": i.weight,
            "state": STATES[i.state],
            "bytes": i.bytes,
            "packets": i.packets,
            "active": i.active,
            "ttfb": (i.ttfb_us / 1e6) if i.ttfb_known else None,
            "selected": i.selected,
            "sel_this_sec": i.sel_this_sec,
            "sel_last_sec": i.sel_last_sec,
            "cap": None if i.cap == LL_NO_CAP else i.cap,
            "draining": bool(i.draining),
            "ejected": bool(i.ejected),
            "failures": i.failures,
            "consecutive_failures": i.fails_in_row,
            "probe": (i.probe_us / 1e6) if i.probe_known else None,
            "custom_load": i.custom_load,
            "over_threshold": bool(i.custom_over),
            "peak_ewma": (i.peak_us / 1e6) if i.peak_known else None,
            "load": self._load_of(i),
            "score": self._score_of(i),
        }

    def load(self, name):
        """N of the method now: int, or float seconds for LEASTRESPONSETIME."""
        cdef ll_info info = self._info_now(name)
        return self._load_of(&info)

    def score(self, name):
        """Nw = N * 10000 / weight now, as a float for display."""
        cdef ll_info info = self._info_now(name)
        return self._score_of(&info)

    def _selections(self, name):
        """(selected since bind, in this second, in the last second); the clock is not read."""
        cdef ll_info info = self._info(name)
        return info.selected, info.sel_this_sec, info.sel_last_sec

    def weight(self, name):
        return self._info(name).weight

    def state(self, name):
        return STATES[self._info(name).state]

    def active(self, name):
        return self._info(name).active

    def info(self, name):
        """Every counter of one service now, as a dict."""
        cdef ll_info info = self._info_now(name)
        return self._info_dict(name, &info)

    def _last_pick(self):
        """The last charged pick as explain() reads it; None before the first, after a
        method change, or once the service picked is unbound."""
        cdef ll_pick_record r
        self._enter()
        try:
            ll_last_pick(self._vs, &r)
            if r.slot < 0:
                return None
            sampled = _methods.TABLE[<int>ll_get_method(self._vs)].family == "sampled"
            return {"service": self._names[r.slot],
                    "cursor": sum(1 for n in self._names[: r.cursor + 1] if n is not None),
                    "rr_round": r.rr_round, "startup": bool(r.startup),
                    "drawn": tuple(None if d < 0 else self._names[d] for d in (r.drawn[0], r.drawn[1]))
                    if sampled else (),
                    "exclude": tuple(self._last_names or ()), "key": self._last_key}
        finally:
            self._leave()

    def snapshot(self):
        """The whole state as plain data (the clock is not read)."""
        cdef ll_info info
        self._enter()
        try:
            cursor = ll_cursor(self._vs)
            rank = sum(1 for n in self._names[: cursor + 1] if n is not None)
            services = []
            for n in [n for n in self._names if n is not None]:
                found = self._slots.get(n)  # resolved per name: a finalizer may have run
                if found is not None:
                    info = self._info_of(found)
                    services.append(self._info_dict(n, &info))
            return {
                "method": self.method,
                "second": ll_current_second(self._vs),
                "cursor": rank,
                "rr_round": ll_rr_round(self._vs),
                "startup_rr_left": ll_startup_rr_left(self._vs),
                "services": services,
            }
        finally:
            self._leave()

    def _tree_is_wide(self):
        """True while the C tree keeps wide keys rather than packed 64-bit nodes (tests)."""
        self._enter()
        try:
            return bool(ll_tree_is_wide(self._vs))
        finally:
            self._leave()

    def memory_bytes(self):
        """Bytes the C core has allocated for this vserver."""
        self._enter()
        try:
            return ll_memory_bytes(self._vs)
        finally:
            self._leave()

    # ---- the batch path ------------------------------------------------

    def _replay(self, trace, result, events):
        """C path of leastload.sim.replay.replay(): same calls, GIL released between
        service events, slow-start deadlines and flagged finishes (which run
        here, in Python). Holds the vserver for the whole run: other threads'
        calls wait. `trace` must be the replay's own copy (nobody else writes it)."""
        self._enter()
        try:
            self._note_pick(None, None)  # the replay's picks exclude nothing and take no key
            self._replay_locked(trace, result, events)
        finally:
            self._leave()

    def _check_replay(self, clock, trace):
        """What the C replay refuses: leastload.sim.replay calls it before it binds
        anything, and _replay_locked again before C reads the arrays."""
        if self._clock_kind != CLOCK_KIND_MANUAL or clock is not self._clock:
            raise ValueError("replay needs the vserver's own ManualClock as clock")
        if self._key_form is not None and self._method_name in _NEEDS_KEY:
            raise ValueError(f"replay: {self._method_name} picks by each request's key, which a trace does not carry")
        n = len(trace.arrival)
        if n >= 0xFFFFFFFF:
            raise ValueError(f"a replay takes fewer than 2**32 requests, got {n}")
        if n and not (0 <= trace.arrival[0] and trace.arrival[n - 1] < 2.0**52 and trace.transfer.max() < 2.0**52):
            raise ValueError("trace times must be >= 0 and below 2**52 seconds (the clock's range)")

    cdef int _replay_locked(self, trace, result, events) except -1:
        self._check_replay(events.clock, trace)
        cdef _TraceArrays arrays = _TraceArrays(trace)
        cdef int32_t[::1] chosen = result.chosen
        cdef uint64_t[::1] selected = result.selected, nbytes = result.bytes
        cdef uint64_t[::1] npackets = result.packets, completed = result.completed
        cdef const int64_t[::1] slot_of
        cdef const int32_t[::1] service_of
        cdef ll_replay_out out
        cdef ll_replay_state_t state
        if arrays.t.n == 0:
            while events.next < len(trace.event_time):
                events.apply_next()
            return 0
        out.chosen, out.selected, out.bytes = &chosen[0], &selected[0], &nbytes[0]
        out.packets, out.completed = &npackets[0], &completed[0]
        cdef ll_replay *r = ll_replay_create(&arrays.t, &out)
        if r == NULL:
            raise MemoryError("replay: out of memory")
        cdef int rc
        cdef double stop
        try:
            while True:
                slot_of, service_of = self._replay_mapping(trace)
                ll_replay_set_mapping(r, &slot_of[0], &service_of[0])
                stop = events.time_of_next()
                with nogil:
                    rc = ll_replay_run(self._vs, r, stop, self._deadline)
                if rc == LL_REPLAY_EVENT:
                    svc = int(trace.event_service[events.next])
                    generation = int(events.gen[svc])
                    events.apply_next()
                    if events.gen[svc] != generation:  # bound or unbound: its open transactions are gone
                        ll_replay_forget(r, svc)
                elif rc == LL_REPLAY_DEADLINE:
                    self._manual._t = ll_replay_now(r)
                    self._on_deadline(ll_replay_now(r))
                    ll_replay_hook_done(r)
                elif rc == LL_REPLAY_ENDED:
                    self._manual._t = ll_replay_now(r)
                    ll_replay_state(r, &state)
                    self._after_end(trace.services[state.end_svc], state.end_flags)
                elif rc == LL_REPLAY_DONE:
                    if ll_replay_now(r) > self._manual._t:
                        self._manual._t = ll_replay_now(r)
                    while events.next < len(trace.event_time):
                        events.apply_next()
                    return 0
                else:
                    self._manual._t = ll_replay_now(r)
                    ll_replay_state(r, &state)
                    self._raise_replay(rc, &state, trace)
        finally:
            ll_replay_destroy(r)

    def _replay_mapping(self, trace):
        """trace service -> slot (-1: unbound) and slot -> trace service, as read-only arrays.

        Built in O(services) and kept until a bind or unbind (_bind_gen) or a trace
        with other services: a replay on a vserver whose services did not change
        since the last one finds it in O(1), and so does each resume of a run.
        Raises ValueError if a bound service is not a service of the trace.
        """
        services = trace.services
        if self._map_services is not None and self._map_gen == self._bind_gen:
            if services is self._map_services:
                return self._map_slot_of, self._map_service_of
            if services == self._map_services:  # equal names, another tuple: no slot lookups
                self._map_services = services
                return self._map_slot_of, self._map_service_of
        import numpy as np
        slots = self._slots
        slot_of = np.array([slots.get(n, -1) for n in services], dtype=np.int64)
        service_of = np.full(max(1, len(self._names)), -1, dtype=np.int32)
        bound = slot_of >= 0
        service_of[slot_of[bound]] = np.flatnonzero(bound)
        if int(bound.sum()) != len(slots):
            known = set(services)
            strangers = [n for n in self._names if n is not None and n not in known]
            raise ValueError(f"services bound but not in the trace: {strangers[:5]!r}")
        slot_of.flags.writeable = False
        service_of.flags.writeable = False
        self._map_gen, self._map_services = self._bind_gen, services
        self._map_slot_of, self._map_service_of = slot_of, service_of
        return slot_of, service_of

    cdef int _raise_replay(self, int rc, ll_replay_state_t *state, trace) except -1:
        if state.err_call == 1 or state.err_call == 2:
            raise _errors.window_overflow("bytes" if state.err_call == 1 else "packets", state.err_value)
        if state.err_call == 3:
            if rc == -EINVAL:
                _errors.check_ttfb(state.ttfb)
            return _raise_for(rc, "replay", trace.services[state.svc])
        if rc == -EOVERFLOW:
            raise _errors.active_overflow(self._names[ll_full_slot(self._vs)])
        return _raise_for(rc, "replay")

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


def _floor_replay(trace, method, chosen):
    """The floor of the batch path (benchmarks): replays `trace` with a bare C loop
    (a packed tournament tree, N per service, the completion queue) and writes the
    choice of each request into `chosen` (int32, one per request). For
    LEASTCONNECTION and LEASTBANDWIDTH on a trace whose services are all bound from
    the start, with no events. Returns False when a key grows too wide for the
    packed tree (the floor does not apply to that trace)."""
    cdef int m = _METHOD_INDEX[_errors.check_method(method)]
    if m != LL_LEASTCONNECTION and m != LL_LEASTBANDWIDTH:
        raise ValueError(f"the floor replays LEASTCONNECTION and LEASTBANDWIDTH, got {method!r}")
    if len(trace.event_time) or not trace.initially_bound.all():
        raise ValueError("the floor replays traces whose services are all bound from the start, without events")
    cdef _TraceArrays arrays = _TraceArrays(trace)
    cdef const uint8_t[::1] weights = trace.weights
    cdef int32_t[::1] out = chosen
    if out.shape[0] != <Py_ssize_t>arrays.t.n:
        raise ValueError(f"chosen must hold one entry per request ({arrays.t.n}), got {out.shape[0]}")
    if arrays.t.n == 0:
        return True
    cdef int rc
    cdef uint32_t n_services = <uint32_t>weights.shape[0]
    with nogil:
        rc = ll_floor_replay(&arrays.t, <ll_method>m, &weights[0], n_services, &out[0])
    if rc == -EOVERFLOW:
        return False
    if rc == -ENOMEM:
        raise MemoryError("floor replay: out of memory")
    if rc < 0:
        raise ValueError(f"floor replay refused the trace (error {rc})")
    return True


def _hash64(const unsigned char[::1] data not None, uint64_t seed):
    """XXH64 of `data` with `seed`, from the C core (checked against the published vectors)."""
    cdef size_t n = <size_t>data.shape[0]
    return ll_xxh64(&data[0] if n else NULL, n, seed)


def _hash_force_path(int path):
    """Tests: the build of the hash pick's packed scan to use (0 the processor's best,
    1 SSE2, 2 AVX2, 3 AVX-512); False when this processor or build has not that one."""
    cdef int rc = ll_hash_force_path(path)
    if rc == -EINVAL:
        raise ValueError(f"path must be 0..3, got {path}")
    return rc == 0


def _neg_log2(uint64_t x):
    """The hash methods' fixed-point -log2 from the C core (tests compare it with the reference's)."""
    return ll_neg_log2(x)
