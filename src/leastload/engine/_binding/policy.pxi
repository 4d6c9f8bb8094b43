# The policy's face on the C engine (csrc/ll_policy.c runs slow start, ejection and the
# utilization weights): the settings into and out of ll_settings, the core's events
# into the facade's lists (names for slots), a ramp or an ejection as a dict.
# Included by _engine.pyx; the facade (leastload.engine.native) calls these.

cdef tuple _EXIT_WHY = (None, "slow start switched off", "no other service UP", "no traffic for three intervals",
                        "the request rate is below the new-service rate", "its window caught up with the others'",
                        "incremented 200 times", "the percentage reached 100", "the cap reached the fair share")
cdef dict _OUTLIER_WHAT = {16: "ejected", 17: "returned", 18: "returned early", 19: "kept: max ejection percent",
                           20: "kept: last eligible service"}
cdef tuple _UNITS = ("PER_SECOND", "PERCENT")
cdef tuple _HANDOVERS = ("vendor", "caught_up")
DEF MAX_OUTLIER_EVENTS = 2000  # outlier_events keeps the newest (as the reference's list)


cdef object _event_name(Engine self, uint64_t i, uint32_t slot):
    """The name of event i's service: this process's names (private: read before any
    unbind); shared: the name the segment gave it at the unlock after it (or the
    label now, for an event of the span under way)."""
    cdef const ll_shared_label *label
    if self._sh == NULL:
        return self._names[slot] if slot < len(self._names) else None
    if i < ll_shared_header_of(self._sh).events_named:
        label = &ll_shared_event_names(self._sh)[i % LL_EVENTS]
    elif slot < ll_shared_header_of(self._sh).capacity:
        label = &ll_shared_labels(self._sh)[slot]
    else:
        return None
    return PyUnicode_DecodeUTF8(label.name, label.len, "surrogatepass") if label.len else None


cdef int _drain_events(Engine self) except -1:
    """The core's new events into slow_start_exits and outlier_events, named now (before
    any unbind or compaction moves their slots). In a shared vserver they include the
    other processes' (the ring keeps the newest LL_EVENTS)."""
    cdef uint64_t n = ll_event_count(self._vs), i
    cdef ll_event e
    if n == self._events_read:
        return 0
    i = self._events_read if n - self._events_read <= LL_EVENTS else n - LL_EVENTS
    while i < n:
        if ll_event_at(self._vs, i, &e) == 0:
            name = _event_name(self, i, e.slot)
            if e.what < 16:
                self._exit_log.append((e.time, name, _EXIT_WHY[e.what]))
            else:
                self._outlier_log.append((e.time, name, _OUTLIER_WHAT[e.what]))
        i += 1
    self._events_read = n
    if len(self._outlier_log) > MAX_OUTLIER_EVENTS:
        del self._outlier_log[: MAX_OUTLIER_EVENTS // 2]
    return 0


cdef int _settings_in(ll_settings *c, dict v) except -1:
    c.new_service_request = v["new_service_request"]
    c.new_service_request_unit = _UNITS.index(v["new_service_request_unit"])
    c.new_service_request_increment_interval = v["new_service_request_increment_interval"]
    c.slow_start_handover = _HANDOVERS.index(v["slow_start_handover"])
    c.slow_start_guard = v["slow_start_guard"]
    c.weights_from_utilization = v["weights_from_utilization"]
    c.outlier_failures = v["outlier_failures"]
    c.outlier_ejection_time = v["outlier_ejection_time"]
    c.outlier_max_ejection_percent = v["outlier_max_ejection_percent"]
    c.window_seconds = v["window_seconds"]
    c.startup_rr_factor = v["startup_rr_factor"]
    c.rtsp_nat = v["rtsp_nat"]
    c.netmask = _hash.check_netmask(v["netmask"])[1]
    c.v6netmasklen = v["v6netmasklen"]
    c.hashlength = v["hashlength"]
    c.hash_seed = v["hash_seed"]
    c.peakewma_decay = v["peakewma_decay"]
    return 0


cdef dict _settings_out(const ll_settings *c):
    return {
        "new_service_request": c.new_service_request,
        "new_service_request_unit": _UNITS[c.new_service_request_unit],
        "new_service_request_increment_interval": c.new_service_request_increment_interval,
        "slow_start_handover": _HANDOVERS[c.slow_start_handover],
        "slow_start_guard": c.slow_start_guard,
        "weights_from_utilization": bool(c.weights_from_utilization),
        "outlier_failures": c.outlier_failures,
        "outlier_ejection_time": c.outlier_ejection_time,
        "outlier_max_ejection_percent": c.outlier_max_ejection_percent,
        "window_seconds": c.window_seconds,
        "startup_rr_factor": c.startup_rr_factor,
        "rtsp_nat": bool(c.rtsp_nat),
        "netmask": str(ipaddress.IPv4Address(c.netmask)),
        "v6netmasklen": c.v6netmasklen,
        "hashlength": c.hashlength,
        "hash_seed": c.hash_seed,
        "peakewma_decay": c.peakewma_decay,
    }


cdef int _note_settings(Engine self, const ll_settings *c) except -1:
    """What the binding keeps of the settings: whether the policy is on, ejection's flag."""
    self._policy_on = c.new_service_request != 0 or c.outlier_failures != 0 or c.weights_from_utilization != 0
    self._outlier_on = c.outlier_failures > 0
    return 0
