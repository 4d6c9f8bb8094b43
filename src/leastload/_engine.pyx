# cython: language_level=3, binding=False, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The C engine's Python face: names <-> slots, the clock, argument checks.

binding=False keeps CPython's fast method call (PERF-NOTES: 4-6 ns a call).
Arguments are checked here, with the messages of leastload._errors, before
the C core is called; every C return code goes through _raise_for().
"""
from libc.errno cimport EINVAL, ENOENT, ENOMEM, EOVERFLOW, ERANGE
from libc.math cimport INFINITY, floor
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from ._cengine cimport *

from . import _errors
from ._errors import METHODS, STATES

cdef dict _METHOD_INDEX = {name: i for i, name in enumerate(METHODS)}
cdef dict _STATE_INDEX = {name: i for i, name in enumerate(STATES)}

cdef enum ClockKind:
    CLOCK_KIND_MONOTONIC = 0  # clock=None: CLOCK_MONOTONIC, as time.monotonic()
    CLOCK_KIND_MANUAL = 1     # our ManualClock: its value read without a Python call
    CLOCK_KIND_OBJECT = 2     # anything with .now()


cdef inline double _monotonic() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


def monotonic():
    """The default clock of a VirtualServer (the same clock as time.monotonic)."""
    return _monotonic()


cdef class ManualClock:
    """A virtual clock for tests and simulations: time moves only when told."""

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


cdef class Engine:
    """One virtual server's engine. See docs/semantics.md for the exact rules."""

    cdef ll_vserver *_vs
    cdef list _names         # slot -> name (None for a hole)
    cdef dict _slots         # name -> slot
    cdef object _clock
    cdef ManualClock _manual
    cdef int _clock_kind
    cdef double _deadline    # slow-start policy: call _on_deadline() at this time
    cdef uint64_t _startup_factor
    cdef bint _rtsp_nat
    cdef bint _in_c_replay   # the GIL is released inside replay: other threads must keep out

    def __cinit__(self, *args, **kwargs):
        self._names = []
        self._slots = {}
        self._deadline = INFINITY
        self._vs = ll_create(LL_LEASTCONNECTION, 0)
        if self._vs == NULL:
            raise MemoryError("leastload: cannot allocate a vserver")

    def __dealloc__(self):
        if self._vs != NULL:
            ll_destroy(self._vs)

    def __init__(self, method="LEASTCONNECTION", clock=None, *, startup_rr_factor=0, rtsp_nat=False):
        cdef int m = _METHOD_INDEX[_errors.check_choice("method", method, METHODS)]
        factor = _errors.check_startup_rr_factor(startup_rr_factor)
        _errors.check_bool("rtsp_nat", rtsp_nat)
        if clock is None:
            self._clock_kind = CLOCK_KIND_MONOTONIC
        elif type(clock) is ManualClock:
            self._clock_kind = CLOCK_KIND_MANUAL
            self._manual = clock
        elif callable(getattr(clock, "now", None)):
            self._clock_kind = CLOCK_KIND_OBJECT
        else:
            raise _errors.bad_type("clock", clock, "None or an object with a now() method")
        self._clock = clock
        cdef ll_vserver *vs = ll_create(<ll_method>m, <int64_t>floor(self._read_clock()))
        if vs == NULL:
            raise MemoryError("leastload: cannot allocate a vserver")
        ll_destroy(self._vs)
        self._vs = vs
        self._names = []
        self._slots = {}
        self._deadline = INFINITY
        self._startup_factor = factor
        self._rtsp_nat = rtsp_nat
        ll_set_startup_rr(vs, factor)

    # ---- time ------------------------------------------------------------

    cdef inline double _read_clock(self) except? -1.0:
        if self._clock_kind == CLOCK_KIND_MANUAL:
            return self._manual._t
        if self._clock_kind == CLOCK_KIND_MONOTONIC:
            return _monotonic()
        return _errors.check_time(self._clock.now())

    cdef int _busy(self) except -1:
        raise RuntimeError("this vserver is replaying a trace in another thread")

    cdef inline int64_t _tick(self) except? -1:
        """Reads the clock; runs the policy if it is due. Returns the second, which
        the caller's C call moves the window to (ll_select/ll_record/ll_advance)."""
        if self._in_c_replay:
            self._busy()
        cdef double now = self._read_clock()
        cdef int64_t sec = <int64_t>now  # floor without a libm call: |now| < 2**53
        if <double>sec > now:
            sec -= 1
        if now >= self._deadline:
            ll_advance(self._vs, sec)  # the policy sees the window at `now`
            self._on_deadline(now)
        return sec

    def now(self):
        """The vserver's clock, read once (the window does not move)."""
        return self._read_clock()

    def _set_deadline(self, double t):
        self._deadline = t

    def _on_deadline(self, now):
        """Called by the first call that sees the clock reach the deadline."""
        self._deadline = INFINITY

    # ---- names ---------------------------------------------------------

    cdef inline uint32_t _slot(self, object name) except? 0xFFFFFFFF:
        if self._in_c_replay:
            self._busy()
        cdef object slot = self._slots.get(name) if type(name) is str else None
        if slot is None:
            _errors.check_name(name)
            raise _errors.unknown_service(name)
        return slot

    def bind(self, name, weight=1):
        """Appends a service to bind order (the round-robin order)."""
        if self._in_c_replay:
            self._busy()
        _errors.check_name(name)
        if name in self._slots:
            raise _errors.duplicate_service(name)
        cdef uint32_t w = _errors.check_weight(weight)
        cdef int64_t slot = ll_bind(self._vs, w)
        if slot < 0:
            _raise_for(slot, "bind")
        assert slot == len(self._names)
        self._names.append(name)
        self._slots[name] = slot

    def unbind(self, name):
        cdef uint32_t slot = self._slot(name)
        _raise_for_rc(ll_unbind(self._vs, slot), "unbind")
        self._names[slot] = None
        del self._slots[name]
        cdef uint32_t bound = ll_bound_count(self._vs)
        if ll_slot_count(self._vs) - bound > max(bound, 32):  # close holes, O(n), rarely
            ll_compact(self._vs)
            self._names = [n for n in self._names if n is not None]
            self._slots = {n: i for i, n in enumerate(self._names)}

    def reserve(self, services):
        """Makes room for `services` services, so binding them allocates nothing."""
        if isinstance(services, bool) or not isinstance(services, int) or not 0 <= services <= (1 << 30):
            raise _errors.bad_value("services", services, "an int in 0..2**30")
        _raise_for_rc(ll_reserve(self._vs, services), "reserve")

    def set_weight(self, name, weight):
        cdef uint32_t slot = self._slot(name)
        _raise_for_rc(ll_set_weight(self._vs, slot, _errors.check_weight(weight)), "set_weight")

    def set_state(self, name, state):
        cdef uint32_t slot = self._slot(name)
        cdef int s = _STATE_INDEX[_errors.check_choice("state", state, STATES)]
        _raise_for_rc(ll_set_state(self._vs, slot, <ll_state>s), "set_state")

    def set_method(self, method):
        """Changes the method; the weighted round restarts and so does startup round robin."""
        if self._in_c_replay:
            self._busy()
        cdef int m = _METHOD_INDEX[_errors.check_choice("method", method, METHODS)]
        _raise_for_rc(ll_set_method(self._vs, <ll_method>m), "set_method")
        ll_set_startup_rr(self._vs, self._startup_factor)

    @property
    def method(self):
        return METHODS[<int>ll_get_method(self._vs)]

    @property
    def services(self):
        """Bound services in bind order (a new list)."""
        return [n for n in self._names if n is not None]

    @property
    def startup_rr_factor(self):
        return self._startup_factor

    @startup_rr_factor.setter
    def startup_rr_factor(self, value):
        """Takes effect at the next set_method(); the running count is left alone."""
        self._startup_factor = _errors.check_startup_rr_factor(value)

    @property
    def startup_rr_left(self):
        return ll_startup_rr_left(self._vs)

    @property
    def rtsp_nat(self):
        return self._rtsp_nat

    @rtsp_nat.setter
    def rtsp_nat(self, value):
        self._rtsp_nat = _errors.check_bool("rtsp_nat", value)

    def _set_cap(self, name, cap):
        """Slow start: at most `cap` selections per second (None: no cap)."""
        cdef uint32_t slot = self._slot(name)
        cdef uint32_t c = LL_NO_CAP if cap is None else _errors.check_cap(cap)
        _raise_for_rc(ll_set_cap(self._vs, slot, c), "_set_cap")

    # ---- the request path ---------------------------------------------

    def select(self):
        """Picks a service, counts one new active transaction on it, returns its name."""
        cdef int64_t sec = self._tick()
        cdef int64_t slot = ll_select(self._vs, sec)
        if slot < 0:
            self._raise_select(slot, sec)
        return self._names[slot]

    cdef int _raise_select(self, int64_t rc, int64_t sec) except -1:
        if rc == -EOVERFLOW:
            rc = ll_peek(self._vs, sec)  # name the service that is full
            raise _errors.active_overflow(self._names[rc])
        return _raise_for(rc, "select")

    def record(self, name, bytes=0, packets=0, control=False):
        """Traffic seen on a service, either direction, now."""
        cdef uint32_t slot = self._slot(name)
        cdef uint64_t b = _count("bytes", bytes)
        cdef uint64_t p = _count("packets", packets)
        if control is not False:
            _errors.check_bool("control", control)
        cdef int64_t sec = self._tick()
        if control and not self._rtsp_nat:
            ll_advance(self._vs, sec)
            return  # control traffic counts only with RTSP NAT on
        cdef int rc = ll_record(self._vs, slot, sec, b, p)
        cdef ll_info info
        if rc == -EOVERFLOW:
            ll_service_info(self._vs, slot, &info)
            if b > 0xFFFFFFFFFFFFFFFF - info.bytes:
                raise _errors.window_overflow("bytes", bytes)
            raise _errors.window_overflow("packets", packets)
        if rc < 0:
            _raise_for(rc, "record", name)

    def begin(self, name):
        """One more active transaction, dispatched without select()."""
        _raise_for_rc(ll_begin(self._vs, self._slot(name)), "begin", name)

    def finish(self, name, ttfb=None, status=200):
        """Ends one active transaction; a status-200 TTFB (seconds) updates the average."""
        cdef uint32_t slot = self._slot(name)
        cdef uint32_t ttfb_us = 0
        cdef double t
        if type(ttfb) is float and 0.0 <= <double>ttfb <= 3600.0:
            t = ttfb
            ttfb_us = <uint32_t>floor(t * 1e6 + 0.5)  # as _errors.check_ttfb does
        elif ttfb is not None:
            ttfb_us = _errors.check_ttfb(ttfb)
        cdef long code
        if type(status) is int and 100 <= status <= 599:
            code = status
        else:
            code = _errors.check_status(status)  # raises with the shared message
        cdef int has_ttfb = ttfb is not None and code == 200
        _raise_for_rc(ll_finish(self._vs, slot, has_ttfb, ttfb_us), "finish", name)

    # ---- reading -------------------------------------------------------

    cdef ll_info _info(self, object name) except *:
        cdef ll_info info
        ll_service_info(self._vs, self._slot(name), &info)
        return info

    cdef ll_info _info_now(self, object name) except *:
        """_info() after the clock is read: N as it stands now."""
        cdef uint32_t slot = self._slot(name)
        ll_advance(self._vs, self._tick())
        cdef ll_info info
        ll_service_info(self._vs, slot, &info)
        return info

    cdef object _load_of(self, ll_info *info):
        if ll_get_method(self._vs) == LL_LEASTRESPONSETIME:
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

    def snapshot(self):
        """The whole state as plain data (the clock is not read)."""
        if self._in_c_replay:
            self._busy()
        cdef ll_info info
        cdef int64_t cursor = ll_cursor(self._vs)
        services = []
        for n in self.services:
            ll_service_info(self._vs, self._slots[n], &info)
            services.append(self._info_dict(n, &info))
        rank = sum(1 for n in self._names[: cursor + 1] if n is not None)
        return {
            "method": self.method,
            "second": ll_current_second(self._vs),
            "cursor": rank,
            "rr_round": ll_rr_round(self._vs),
            "startup_rr_left": ll_startup_rr_left(self._vs),
            "services": services,
        }

    def memory_bytes(self):
        """Bytes the C core has allocated for this vserver."""
        return ll_memory_bytes(self._vs)

    # ---- the batch path ------------------------------------------------

    def _replay(self, trace, result, events):
        """C path of leastload.replay.replay(): same calls, GIL released between
        service events and slow-start deadlines (which run here, in Python)."""
        if self._clock_kind != CLOCK_KIND_MANUAL or events.clock is not self._clock:
            raise ValueError("replay needs the vserver's own ManualClock as clock")
        cdef const double[::1] arrival = trace.arrival, factor = trace.ttfb_factor
        cdef const double[::1] transfer = trace.transfer, base = trace.ttfb_base, slope = trace.ttfb_slope
        cdef const uint16_t[::1] status = trace.status
        cdef const uint64_t[::1] req_b = trace.req_bytes, resp_b = trace.resp_bytes
        cdef const uint64_t[::1] req_p = trace.req_packets, resp_p = trace.resp_packets
        cdef int32_t[::1] chosen = result.chosen
        cdef uint64_t[::1] selected = result.selected, nbytes = result.bytes
        cdef uint64_t[::1] npackets = result.packets, completed = result.completed
        cdef int64_t[::1] slot_of
        cdef int32_t[::1] service_of
        cdef ll_replay r
        memset(&r, 0, sizeof(r))
        r.n = arrival.shape[0]
        if r.n >= 0xFFFFFFFF:
            raise ValueError(f"a replay takes fewer than 2**32 requests, got {r.n}")
        if r.n and not (0 <= arrival[0] and arrival[r.n - 1] < 2.0**52 and trace.transfer.max() < 2.0**52):
            raise ValueError("trace times must be >= 0 and below 2**52 seconds (the clock's range)")
        if r.n == 0:
            while events.next < len(trace.event_time):
                events.apply_next()
            return
        r.arrival, r.ttfb_factor, r.transfer = &arrival[0], &factor[0], &transfer[0]
        r.status = &status[0]
        r.req_bytes, r.resp_bytes, r.req_packets, r.resp_packets = &req_b[0], &resp_b[0], &req_p[0], &resp_p[0]
        r.ttfb_base, r.ttfb_slope = &base[0], &slope[0]
        r.chosen, r.selected, r.bytes = &chosen[0], &selected[0], &nbytes[0]
        r.packets, r.completed = &npackets[0], &completed[0]
        cdef int rc
        cdef double stop
        try:
            while True:
                slot_of, service_of = self._replay_mapping(trace)
                r.slot_of, r.service_of = &slot_of[0], &service_of[0]
                stop = events.time_of_next()
                self._in_c_replay = True
                with nogil:
                    rc = ll_replay_run(self._vs, &r, stop, self._deadline)
                self._in_c_replay = False
                if rc == LL_REPLAY_EVENT:
                    svc = int(trace.event_service[events.next])
                    generation = int(events.gen[svc])
                    events.apply_next()
                    if events.gen[svc] != generation:  # bound or unbound: its open transactions are gone
                        ll_replay_forget(&r, svc)
                elif rc == LL_REPLAY_DEADLINE:
                    self._manual._t = r.now
                    self._on_deadline(r.now)
                    r.hook_done = 1
                elif rc == LL_REPLAY_DONE:
                    if r.now > self._manual._t:
                        self._manual._t = r.now
                    while events.next < len(trace.event_time):
                        events.apply_next()
                    return
                else:
                    self._manual._t = r.now
                    self._raise_replay(rc, &r, trace)
        finally:
            ll_replay_free(&r)

    def _replay_mapping(self, trace):
        """trace service -> slot (-1: unbound) and slot -> trace service."""
        import numpy as np
        slot_of = np.array([self._slots.get(n, -1) for n in trace.services], dtype=np.int64)
        service_of = np.full(max(1, len(self._names)), -1, dtype=np.int32)
        bound = slot_of >= 0
        service_of[slot_of[bound]] = np.flatnonzero(bound)
        if int(bound.sum()) != len(self._slots):
            raise ValueError("every bound service must be a service of the trace")
        return slot_of, service_of

    cdef int _raise_replay(self, int rc, ll_replay *r, trace) except -1:
        if r.err_call == 1 or r.err_call == 2:
            raise _errors.window_overflow("bytes" if r.err_call == 1 else "packets", r.err_value)
        if r.err_call == 3:
            if rc == -EINVAL:
                _errors.check_ttfb(r.cur_ttfb)
            return _raise_for(rc, "replay", trace.services[r.cur.svc])
        if rc == -EOVERFLOW:
            raise _errors.active_overflow(self._names[ll_peek(self._vs, <int64_t>floor(r.now))])
        return _raise_for(rc, "replay")

    def _noop(self, x):
        """Takes an int and returns it: the floor no per-call method can beat (benchmarks)."""
        cdef long v = x
        return v

    def __len__(self):
        return ll_bound_count(self._vs)

    def __contains__(self, name):
        return name in self._slots


cdef inline int _raise_for_rc(int rc, str op, object name=None) except -1:
    if rc < 0:
        _raise_for(rc, op, name)
    return 0
