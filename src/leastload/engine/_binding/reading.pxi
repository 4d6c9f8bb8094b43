# Reading the state: one service's counters as a dict, the last pick (explain()),
# the whole snapshot. Included by _engine.pyx; the Engine methods are their faces.

cdef inline ll_info _info_at(Engine self, uint32_t slot):
    cdef ll_info info
    ll_service_info(self._vs, slot, &info)
    return info

cdef ll_info _info_named(Engine self, object name) except *:
    self._enter()
    try:
        return _info_at(self, self._slot(name))
    finally:
        self._leave()

cdef ll_info _info_now(Engine self, object name) except *:
    """_info_named() after the clock is read: N as it stands now."""
    self._enter()
    try:
        self._slot(name)
        sec = self._tick()
        ll_advance(self._vs, sec)
        slot = self._slot(name)  # the clock may have run Python code
        return _info_at(self, slot)
    finally:
        self._leave()


cdef object _load_of(Engine self, ll_info *info):
    if _methods.TABLE[<int>ll_get_method(self._vs)].unit == "seconds":
        return <double>info.load / 1e6
    return info.load

cdef object _score_of(Engine self, ll_info *info):
    return float(_load_of(self, info)) * 10000.0 / info.weight

cdef dict _info_dict(Engine self, object name, ll_info *i):
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
        "load": _load_of(self, i),
        "score": _score_of(self, i),
    }


cdef object _last_pick_of(Engine self):
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


cdef dict _snapshot_of(Engine self):
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
                info = _info_at(self, found)
                services.append(_info_dict(self, n, &info))
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
