# Augmenting declarations for _backend.py (Cython's pure-Python mode), as _http1.pxd is
# for _http1.py: the build compiles the .py with these types; the .py runs as it is where
# there is no compiled module, or under LEASTLOAD_IMPLEMENTATION=python. Every attribute
# the .py sets must be declared here (the suite runs both). Pool is an extension type
# with an instance __dict__, so that a test can still replace a method on an instance.
cimport cython

from leastload.proxy._core cimport ProxyCore, WriteSide, WriteTurn, clock
from leastload.proxy._response cimport ResponseReader
from leastload.proxy._stats cimport Stats


# _take_segments()'s C path: one getsockopt(TCP_INFO) on a socket's descriptor, counted as
# tcpinfo.SegmentCounter.take() counts: tcpi_segs_in and tcpi_segs_out (the 32-bit counters at
# offsets 140 and 136 of struct tcp_info, kernel 4.2 and later), each taken modulo 2^32 since
# the reading in *last, which becomes this one (segs_in << 32 | segs_out). -1 where the kernel
# cannot tell (no TCP_INFO, a closed descriptor, a struct too short): the caller estimates.
cdef extern from *:
    """
    #if defined(__linux__)
    #include <netinet/in.h>
    #include <netinet/tcp.h>
    #include <stdint.h>
    #include <string.h>
    #include <sys/socket.h>
    static long long ll_proxy_segments(int fd, unsigned long long *last) {
        unsigned char info[144];
        socklen_t size = (socklen_t)sizeof info;
        uint32_t segs_out, segs_in, last_in, last_out;
        if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, &size) != 0 || size < sizeof info)
            return -1;
        memcpy(&segs_out, info + 136, sizeof segs_out);
        memcpy(&segs_in, info + 140, sizeof segs_in);
        last_in = (uint32_t)(*last >> 32);
        last_out = (uint32_t)*last;
        *last = ((unsigned long long)segs_in << 32) | segs_out;
        return (long long)(uint32_t)(segs_in - last_in) + (long long)(uint32_t)(segs_out - last_out);
    }
    #else
    static long long ll_proxy_segments(int fd, unsigned long long *last) {
        (void)fd; (void)last;
        return -1;
    }
    #endif
    """
    long long _segments_since "ll_proxy_segments" (int fd, unsigned long long *last) nogil

cdef bint _COMPILED
cdef Py_ssize_t SEGMENTS_READ_EVERY  # read TCP_INFO after every this many responses (when not by packets)


cdef class BackendConnection
cdef class Pool


cdef class ClientSide(WriteSide):
    cdef public object proxy, loop
    cdef public ProxyCore core
    cdef public bint gone, paused
    cdef public double paused_since
    cdef public BackendConnection backend

    cpdef exchange_done(self, bint keep_going)


cdef class ExchangeSide:
    cdef public ClientSide client
    cdef public object t

    cpdef on_outcome(self, str outcome, BackendConnection conn)


@cython.final
cdef class BackendConnection(WriteSide):
    cdef public object loop, dup, ttfb
    cdef public object counter        # the connection's SegmentCounter (connection_made)
    cdef public object t              # the exchange's transaction handle (either engine's)
    cdef public Pool pool
    cdef public ClientSide client
    cdef public ExchangeSide exchange
    cdef public ResponseReader reader
    cdef public double timeout, sent_at, last_data
    cdef public Py_ssize_t sent, received, unread, unrecorded, busy_at
    cdef public bint passed           # some of the answer went to the client
    cdef public bint held, exact
    cdef public int segments_fd
    cdef public unsigned long long segments_read

    cdef _pass_on(self, list out)
    cpdef send(self, ExchangeSide exchange, object payload, double timeout, bint head_only, bint http10,
               bint keep_alive)
    cpdef hold(self)
    cpdef resume(self, double now)
    cpdef abandon(self, bint stalled=*)
    cdef _end(self, str outcome)
    cpdef Py_ssize_t packets(self, bint every, bint reusable) except -1
    @cython.locals(packets=cython.longlong)
    cdef Py_ssize_t _take_segments(self, Py_ssize_t sent, Py_ssize_t received) except -1
    cpdef bint reusable(self) except -1
    cpdef release(self, bint reusable)


cdef class Pool:
    cdef dict __dict__                # for what is not declared here (a test replaces connect())
    cdef public object loop, host, port, limits, budget, on_late_packets
    cdef public bytes added_head
    cdef public WriteTurn turn
    cdef public Py_ssize_t max_idle, opened
    cdef public list idle
    cdef public list busy

    # C only (the exchange's calls): a cpdef method of a type with a __dict__ would look
    # itself up in the instance on every call
    cdef BackendConnection take(self)
    cdef put(self, BackendConnection conn, bint reusable)
    cdef started(self, BackendConnection conn)
    @cython.locals(at=Py_ssize_t, last=BackendConnection)
    cdef ended(self, BackendConnection conn)
