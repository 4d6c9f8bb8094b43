# Augmenting declarations for _exchange.py (Cython's pure-Python mode; see _backend.pxd).
cimport cython

from leastload.proxy._backend cimport BackendConnection, ClientSide, ExchangeSide, Pool
from leastload.proxy._core cimport ProxyCore, clock
from leastload.proxy._http1 cimport RequestHead
from leastload.proxy._stats cimport BackendCounters


# a request's exchange and its head are made and dropped once a request: each type keeps
# its freed objects for reuse (no allocator call)
@cython.final
@cython.freelist(64)
cdef class Exchange(ExchangeSide):
    cdef public object proxy, began
    cdef public str method, service
    cdef public object payload, key, head
    cdef public bint keep_alive, head_only, http10, by_packets
    cdef public BackendCounters counters
    cdef public list tried
    cdef public bint reused
    cdef public Py_ssize_t retried

    cdef _fill(self, ClientSide client, str method, object payload, bint keep_alive, bint http10, object key,
               object head, bint by_packets)
    @cython.locals(pool=Pool, core=ProxyCore)
    cpdef start(self)
    @cython.locals(client=ClientSide, head=RequestHead)
    cdef _send(self, BackendConnection conn)
    cdef _tried(self, str name)
    # on_outcome(): ExchangeSide's, overridden


@cython.locals(exchange=Exchange)
cpdef Exchange new_exchange(ClientSide client, str method, object payload, bint keep_alive, bint http10,
                            object key, object head, bint by_packets)
