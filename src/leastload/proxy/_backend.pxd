# Augmenting declarations for _backend.py (Cython's pure-Python mode), as _http1.pxd is
# for _http1.py: the build compiles the .py with these types; the .py runs as it is where
# there is no compiled module, or under LEASTLOAD_IMPLEMENTATION=python. Every attribute
# the .py sets must be declared here (the suite runs both). Pool is an extension type
# with an instance __dict__, so that a test can still replace a method on an instance.
cimport cython

from leastload.proxy._http1 cimport ResponseReader
from leastload.proxy._stats cimport Stats


# clock()'s C path: time.monotonic() on Linux is clock_gettime(CLOCK_MONOTONIC) made into
# nanoseconds and divided by 1e9; read the same way here (-1.0 elsewhere, or on an error:
# clock() then calls time.monotonic()).
cdef extern from *:
    """
    #if defined(__linux__)
    #include <time.h>
    static double ll_proxy_clock(void) {
        struct timespec ts;
        if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
            return -1.0;
        return (double)((long long)ts.tv_sec * 1000000000LL + (long long)ts.tv_nsec) / 1e9;
    }
    #else
    static double ll_proxy_clock(void) { return -1.0; }
    #endif
    """
    double _linux_monotonic "ll_proxy_clock" () nogil

# write_now()'s C path: one send() of a bytes object on a socket's descriptor, without
# blocking and without SIGPIPE: the bytes sent, 0 when the socket takes nothing now
# (EAGAIN), -1 on an error or where there is no MSG_NOSIGNAL (the transport then writes).
cdef extern from *:
    """
    #if defined(__linux__)
    #include <errno.h>
    #include <sys/socket.h>
    static Py_ssize_t ll_proxy_send(int fd, const char *buf, Py_ssize_t size) {
        ssize_t sent;
        do {
            sent = send(fd, buf, (size_t)size, MSG_NOSIGNAL | MSG_DONTWAIT);
        } while (sent < 0 && errno == EINTR);
        if (sent >= 0)
            return (Py_ssize_t)sent;
        return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
    }
    #else
    static Py_ssize_t ll_proxy_send(int fd, const char *buf, Py_ssize_t size) {
        (void)fd; (void)buf; (void)size;
        return -1;
    }
    #endif
    """
    Py_ssize_t _send_now "ll_proxy_send" (int fd, const char *buf, Py_ssize_t size) nogil

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
cpdef int write_now(object transport, int fd, object data) except -2
@cython.locals(sent=Py_ssize_t, size=Py_ssize_t)
cdef int _write_open(object transport, int fd, object data) except -2
@cython.locals(now=double)
cpdef double clock() except? -1.0


cdef class BackendConnection
cdef class Pool


@cython.final
cdef class WriteTurn:
    cdef public object loop
    cdef public list waiting, spare
    cdef public bint scheduled
    cdef public Py_ssize_t direct

    cdef bint holds(self)
    cdef add(self, WriteSide side)
    @cython.locals(held=list, side=WriteSide)
    cpdef flush(self)


cdef class WriteSide:
    cdef public object transport, waiting
    cdef public int fd
    cdef public WriteTurn turn
    cdef public bint always_held

    @cython.locals(listed=bint, turn=WriteTurn)
    cpdef write(self, object data)
    @cython.locals(waiting=object)
    cpdef send_waiting(self)
    cpdef on_sent(self)
    cpdef close_when_written(self)


cdef class ProxyCore:
    cdef public object vserver, access_log, forwarding
    cdef public Stats stats
    cdef public dict pools
    cdef public double timeout, header_timeout, client_timeout
    cdef public object method
    cdef public bint keyed, by_packets
    cdef public WriteTurn turn

    cpdef use_method(self, str method)


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
    cdef public object loop, counter, dup, t, ttfb
    cdef public Pool pool
    cdef public ClientSide client
    cdef public ExchangeSide exchange
    cdef public ResponseReader reader
    cdef public double timeout, sent_at, last_data
    cdef public Py_ssize_t sent, received, unread, unrecorded, busy_at
    cdef public bint passed, held, exact
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
