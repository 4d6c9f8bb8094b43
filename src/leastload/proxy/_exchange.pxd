# Augmenting declarations for _exchange.py (Cython's pure-Python mode; see _backend.pxd).
cimport cython

from leastload.proxy._backend cimport BackendConnection, ClientSide, ExchangeSide, Pool, ProxyCore
from leastload.proxy._stats cimport BackendCounters


@cython.final
cdef class Request:
    cdef public str method
    cdef public object payload, key, head
    cdef public bint keep_alive, head_only, http10, by_packets


@cython.final
cdef class Exchange(ExchangeSide):
    cdef public object proxy, began
    cdef public BackendCounters counters
    cdef public Request request
    cdef public list tried
    cdef public bint reused
    cdef public Py_ssize_t retried

    @cython.locals(pool=Pool, core=ProxyCore)
    cpdef start(self)
    @cython.locals(client=ClientSide)
    cdef _send(self, BackendConnection conn)
    # on_outcome(): ExchangeSide's, overridden
