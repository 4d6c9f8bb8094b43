# Augmenting declarations for _stats.py (Cython's pure-Python mode; see _backend.pxd): the
# counters an exchange adds to on every request, as C integers.
cimport cython

cdef tuple _BOUNDS
cdef Py_ssize_t _N_BOUNDS


@cython.final
cdef class BackendCounters:
    cdef public long long requests, retries, failures, stale, bytes_in, bytes_out, packets
    cdef public list by_class, ttfb_buckets
    cdef public double ttfb_sum

    @cython.locals(i=Py_ssize_t, bounds=tuple, bound=double)
    cpdef add_ttfb(self, double seconds)


@cython.final
cdef class Stats:
    cdef public dict backends
    cdef public object answered_by_proxy
    cdef public long long no_service, linger_resets, tunnels, tunnels_open, tunnel_timeouts

    cpdef BackendCounters of(self, str name)
