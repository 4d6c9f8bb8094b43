# Hooks for the tests and the benchmarks: the floor of the batch path, the C hash
# function, the hash pick's builds, the fixed-point -log2. Included by _engine.pyx.

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
