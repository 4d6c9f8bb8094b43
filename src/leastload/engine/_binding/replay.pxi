# The batch path: a whole trace replayed in C (csrc/ll_replay.c) with the vserver held,
# stopping for service events, slow-start deadlines and flagged finishes, which run here.
# Included by _engine.pyx; Engine._replay, _check_replay and _replay_mapping are their faces.

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


cdef int _replay_run(Engine self, trace, result, events) except -1:
    """C path of leastload.sim.replay.replay(): same calls, GIL released between
    service events, slow-start deadlines and flagged finishes (which run
    here, in Python). Holds the vserver for the whole run: other threads'
    calls wait. `trace` must be the replay's own copy (nobody else writes it)."""
    self._enter()
    try:
        self._note_pick(None, None)  # the replay's picks exclude nothing and take no key
        _replay_locked(self, trace, result, events)
    finally:
        self._leave()
    return 0


cdef int _replay_check(Engine self, clock, trace) except -1:
    """What the C replay refuses: leastload.sim.replay calls it before it binds
    anything, and _replay_locked again before C reads the arrays."""
    if self._sh != NULL:  # its picks would bypass the ledger of the processes' transactions
        raise ValueError("replay runs on a private vserver; this one is shared (shared=...)")
    if self._clock_kind != CLOCK_KIND_MANUAL or clock is not self._clock:
        raise ValueError("replay needs the vserver's own ManualClock as clock")
    if self._key_form is not None and self._method_name in _NEEDS_KEY:
        raise ValueError(f"replay: {self._method_name} picks by each request's key, which a trace does not carry")
    n = len(trace.arrival)
    if n >= 0xFFFFFFFF:
        raise ValueError(f"a replay takes fewer than 2**32 requests, got {n}")
    if n and not (0 <= trace.arrival[0] and trace.arrival[n - 1] < 2.0**52 and trace.transfer.max() < 2.0**52):
        raise ValueError("trace times must be >= 0 and below 2**52 seconds (the clock's range)")
    return 0


cdef int _replay_locked(Engine self, trace, result, events) except -1:
    _replay_check(self, events.clock, trace)
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
    cdef double stop, deadline
    try:
        while True:
            slot_of, service_of = _replay_map(self, trace)
            ll_replay_set_mapping(r, &slot_of[0], &service_of[0])
            stop = events.time_of_next()
            deadline = ll_policy_deadline(self._vs)  # the core's policy: stop to read its events
            with nogil:
                rc = ll_replay_run(self._vs, r, stop, deadline)
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
                _replay_raise(self, rc, &state, trace)
    finally:
        ll_replay_destroy(r)


cdef tuple _replay_map(Engine self, trace):
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


cdef int _replay_raise(Engine self, int rc, ll_replay_state_t *state, trace) except -1:
    if state.err_call == 1 or state.err_call == 2:
        raise _errors.window_overflow("bytes" if state.err_call == 1 else "packets", state.err_value)
    if state.err_call == 3:
        if rc == -EINVAL:
            _errors.check_ttfb(state.ttfb)
        return _raise_for(rc, "replay", trace.services[state.svc])
    if rc == -EOVERFLOW:
        raise _errors.active_overflow(self._names[ll_full_slot(self._vs)])
    return _raise_for(rc, "replay")
