# Transaction handles (acquire()'s return value) and the `with vs.atomic():` holder, with
# the handle's calls into its vserver. Included by _engine.pyx.

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
    cdef Py_ssize_t _slot    # where that incarnation was; checked against _serial before use
    cdef bint _done

    @property
    def done(self):
        """True once finish() or fail() ended it."""
        return self._done

    def record(self, bytes=0, packets=0):
        """Traffic of this transaction, either direction (a no-op once its service is gone)."""
        _tx_record(self._engine, self, bytes, packets)

    def finish(self, ttfb=None, status=200):
        """Ends it with a response (as VirtualServer.finish)."""
        _tx_end(self._engine, self, ttfb, status, False)

    def fail(self):
        """Ends it without a response: refused, reset or timed out (as VirtualServer.fail)."""
        _tx_end(self._engine, self, None, 200, True)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._done:  # finish() without a TTFB, or fail() when an exception escaped
            _tx_end(self._engine, self, None, 200, exc_type is not None)
        return False

    def __repr__(self):
        return f"<Transaction on {self.service!r}{' (ended)' if self._done else ''}>"

# ---- the handle's calls, the vserver held ----------------------------------

cdef int _tx_record(Engine self, Transaction tx, object bytes, object packets) except -1:
    cdef uint64_t gen
    cdef int64_t slot
    self._enter()
    try:
        if tx._done:
            raise _errors.transaction_ended(tx.service)
        b = _count("bytes", bytes)
        p = _count("packets", packets)
        gen = self._gen
        slot = _tx_slot(self, tx)
        if slot >= 0:
            self._record_locked(tx.service, <uint32_t>slot, gen, b, p, False, bytes, packets, tx)
    finally:
        self._leave()
    return 0

cdef int64_t _tx_slot(Engine self, Transaction tx) except? -2:
    """The handle's slot, or -1 if its service (that incarnation) is gone."""
    cdef list serials = self._serials
    cdef Py_ssize_t slot = tx._slot
    # where it was picked, unless a compaction moved it: serials are never reused, so the
    # same serial there is the same incarnation (one list read instead of a name lookup)
    if 0 <= slot < len(serials) and <uint64_t>serials[slot] == tx._serial:
        return slot
    found = self._slots.get(tx.service)
    if found is None or self._serials[found] != tx._serial:
        return -1
    tx._slot = found
    return found

cdef int _tx_end(Engine self, Transaction tx, object ttfb, object status, bint failed) except -1:
    self._enter()
    try:
        if tx._done:
            raise _errors.transaction_ended(tx.service)
        us = _ttfb_us(ttfb)
        code = _status(status)
        slot = _tx_slot(self, tx)
        if slot >= 0 and (self._outlier_on or self._peak):
            self._tick_for_outliers()
            slot = _tx_slot(self, tx)  # the clock may have unbound it
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

