# A vserver in shared memory (csrc/ll_shared.c): opening the segment, the lock every
# call of the vserver takes (_enter/_leave), and this process's copy of the names,
# rebuilt whenever another process changed them. Included by _engine.pyx.

from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.errno cimport EBUSY, ENOSPC, EUSERS, EPROTO
import os as _os

SHARED_PREFIX = "leastload."  # the segment of shared="NAME" is /dev/shm/leastload.NAME


cdef bytes _segment_name(str name):
    return ("/" + SHARED_PREFIX + name).encode()


def unlink_shared(name):
    """Removes the shared vserver `name`'s segment: processes that have it open keep
    using it; the next one to name it creates a new one. True when there was one."""
    _errors.check_shared_name(name)
    cdef int rc = ll_shared_unlink(_segment_name(name))
    if rc == -ENOENT:
        return False
    if rc < 0:
        raise OSError(-rc, f"cannot remove the shared vserver {name!r}: {_os.strerror(-rc)}")
    return True


DEF LOCK_SPINS = 200  # tries, a CPU pause apart (about 2-4 us), before sleeping with the GIL let go


cdef int _shared_lock_slow(Engine self, int rc, ll_vserver *vs) except -1:
    """The lock when ll_shared_tryenter() did not take it, or took it with news to read
    (rc 1); on an exception the vserver is left, not held."""
    try:
        _shared_lock_taken(self, rc, vs)
    except BaseException:
        self._leave_unlocked()
        raise
    return 0


cdef int _shared_lock_taken(Engine self, int rc, ll_vserver *vs) except -1:
    if rc == -EBUSY:  # another process holds it: briefly spin, then sleep in the kernel
        rc = ll_shared_lock_spinning(self._sh, &vs, LOCK_SPINS)
    if rc == -EBUSY:
        with nogil:
            rc = ll_shared_lock(self._sh, &vs)
    if rc < 0:
        raise OSError(-rc, f"leastload: cannot take the shared vserver's lock: {_os.strerror(-rc)}")
    self._vs = vs
    cdef ll_shared_header *h = self._hdr
    self._seq = h.seq
    if h.names_gen != self._seen.names_gen or h.policy_gen != self._seen.policy_gen \
            or h.reclaimed != self._seen.reclaimed:
        try:
            if h.names_gen != self._seen.names_gen:
                _shared_sync_names(self)
            if h.policy_gen != self._seen.policy_gen:  # another process changed the settings
                self._seen.policy_gen = h.policy_gen
                self._policy_load(b"")
            if h.reclaimed != self._seen.reclaimed:  # a dead process's transactions ended
                self._seen.reclaimed = h.reclaimed
                _unbind_drained(self)
        except BaseException:
            ll_shared_unlock(self._sh)
            raise
    return 0


cdef int _unbind_drained(Engine self) except -1:
    """Draining services the reclaim left idle are unbound, as their last finish would
    have done (through the facade's unbind: its bookkeeping follows)."""
    cdef ll_info info
    for name in [n for n in self._names if n is not None]:
        found = self._slots.get(name)
        if found is not None:
            info = _info_at(self, found)
            if info.draining and info.active == 0:
                self.unbind(name)
    return 0


cdef int _shared_settings_changed(Engine self) except -1:
    """Under the lock: this process changed the settings (the core's already): the
    others re-read them at their next lock."""
    ll_shared_settings_changed(self._sh)
    self._seen.policy_gen = ll_shared_header_of(self._sh).policy_gen
    return 0


cdef int _shared_sync_names(Engine self) except -1:
    """Another process bound, unbound or compacted: the names as the segment has them."""
    cdef const ll_shared_label *labels = ll_shared_labels(self._sh)
    cdef uint32_t n = ll_slot_count(self._vs), i
    names = []
    serials = []
    slots = {}
    for i in range(n):
        if labels[i].serial:
            name = PyUnicode_DecodeUTF8(labels[i].name, labels[i].len, "surrogatepass")
            names.append(name)
            serials.append(labels[i].serial)
            slots[name] = i
        else:
            names.append(None)
            serials.append(0)
    self._names = names
    self._serials = serials
    self._slots = slots
    self._gen += 1
    self._bind_gen += 1
    self._services = None
    self._seen.names_gen = ll_shared_header_of(self._sh).names_gen
    return 0


cdef uint64_t _shared_name_slot(Engine self, uint32_t slot, object name) except 0:
    """Under the lock: the segment's name of a slot just bound; returns its serial."""
    cdef bytes data = (<str>name).encode("utf-8", "surrogatepass")
    cdef int rc = ll_shared_set_name(self._sh, slot, data, len(data))
    if rc < 0:
        raise SystemError(f"leastload C core: naming a shared slot returned {rc} (a binding bug)")
    self._seen.names_gen = ll_shared_header_of(self._sh).names_gen
    return ll_shared_labels(self._sh)[slot].serial


cdef int _shared_unname_slot(Engine self, uint32_t slot) except -1:
    ll_shared_set_name(self._sh, slot, NULL, 0)
    self._seen.names_gen = ll_shared_header_of(self._sh).names_gen
    return 0


cdef int _shared_compact(Engine self) except -1:
    ll_shared_compact(self._sh)
    return _shared_sync_names(self)


cdef object _shared_open(Engine self, str name, uint32_t capacity, bytes record):
    """Puts the vserver in the segment `name` (created, or attached). Returns None
    when it was created here, else the creator's settings record to compare."""
    if self._sh != NULL:
        raise RuntimeError("this vserver is shared already")
    if len(record) > LL_SHARED_SETTINGS_BYTES:
        raise SystemError("leastload: the settings record outgrew its place in the segment (a binding bug)")
    cdef bytes segment = _segment_name(name)
    cdef ll_shared *sh = NULL
    cdef ll_method m = ll_get_method(self._vs)
    cdef int64_t sec = ll_current_second(self._vs)
    cdef const char *seg = segment
    cdef const char *rec = record
    cdef uint32_t rec_len = <uint32_t>len(record)
    cdef int rc
    with nogil:
        rc = ll_shared_open(seg, m, sec, capacity, rec, rec_len, &sh)
    if rc == -EUSERS:
        raise OSError(-rc, f"shared vserver {name!r}: {LL_SHARED_MAX_PROCS} processes have it open already")
    if rc == -EPROTO:
        raise OSError(-rc, f"shared vserver {name!r}: its segment was made by another build of leastload;"
                           f" remove it with leastload.unlink_shared({name!r})")
    if rc < 0:
        raise OSError(-rc, f"cannot open the shared vserver {name!r}: {_os.strerror(-rc)}")
    cdef ll_vserver *private = self._vs
    self._sh = sh
    self._hdr = ll_shared_header_of(sh)
    self._seen.names_gen = <uint64_t>-1  # the first lock reads the names
    self._seen.policy_gen = 0  # ... and the policy's state, once there is one
    self._shared_name = name
    self._enter()  # now takes the segment's lock, which puts the shared vserver in _vs
    try:
        ll_destroy(private)
        if rc == 1:  # created: the constructor's state, as a private vserver would start
            ll_set_startup_rr(self._vs, self._startup_factor)
            return None
        h = ll_shared_header_of(sh)
        return bytes(h.settings[:h.settings_len])
    finally:
        self._leave()


cdef dict _shared_stats(Engine self):
    cdef ll_shared_header *h
    cdef uint32_t r
    self._enter()
    try:
        h = ll_shared_header_of(self._sh)
        pids = [h.procs[r].pid for r in range(LL_SHARED_MAX_PROCS) if h.procs[r].pid]
        lock = {LL_SHARED_LOCK_ROBUST: "robust", LL_SHARED_LOCK_OWNER: "owner",
                LL_SHARED_LOCK_WINDOWS: "windows"}.get(h.lock_kind, h.lock_kind)
        return {"name": self._shared_name, "capacity": h.capacity, "sequence": h.seq, "processes": pids,
                "reclaimed": h.reclaimed, "repairs": h.repairs, "lock": lock}
    finally:
        self._leave()


cdef int _shared_close(Engine self) except -1:
    """Leaves the segment (this process's open transactions end) and goes on as an
    empty private vserver: what a refused opener is left with."""
    cdef ll_shared *sh = self._sh
    cdef ll_vserver *vs = ll_create(LL_LEASTCONNECTION, 0)
    if vs == NULL:
        raise MemoryError("leastload: cannot allocate a vserver")
    self._sh = NULL
    self._vs = vs
    with nogil:
        ll_shared_close(sh)
    self._names = []
    self._serials = []
    self._slots = {}
    self._gen += 1
    self._bind_gen += 1
    self._services = None
    return 0


cdef int _shared_reload_policy(Engine self) except -1:
    """The settings as the segment has them, read again (an opener, at the end of its
    constructor)."""
    self._enter()
    try:
        self._seen.policy_gen = ll_shared_header_of(self._sh).policy_gen
        self._policy_load(b"")
    finally:
        self._leave()
    return 0
