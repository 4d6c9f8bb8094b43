# Augmenting declarations for _client.py (Cython's pure-Python mode; see _backend.pxd).
cimport cython

from leastload.proxy._backend cimport BackendConnection, ClientSide
from leastload.proxy._core cimport ProxyCore, clock
from leastload.proxy._http1 cimport RequestReader, RequestHead, encode_request
from leastload.proxy._exchange cimport Exchange, new_exchange

cdef dict _METHOD_NAMES
cdef int WAIT_HEAD, WAIT_BODY, WAIT_IDLE, WAIT_NONE, WAIT_LINGER
cdef double FIRST_BYTES_GRACE


@cython.final
cdef class ClientConnection(ClientSide):
    cdef public object _addresses
    cdef public RequestReader reader
    cdef public bytes peer
    cdef public tuple peername, sockname
    cdef public object client
    cdef public double accepted_at
    cdef public bint busy, closing, reading, half_closed, in_pump
    cdef public double deadline
    cdef public int wait
    cdef public Py_ssize_t backlog, linger_left

    cdef _stop_reading(self)
    cdef _start_reading(self)
    @cython.locals(reader=RequestReader, head=RequestHead)
    cdef _pump(self)
    @cython.locals(reader=RequestReader, head=RequestHead, core=ProxyCore)
    cdef _dispatch(self)
    # exchange_done(): ClientSide's, overridden
    cdef _request_done(self, bint keep_going)
    cdef _close(self, bint linger, Py_ssize_t bound)
