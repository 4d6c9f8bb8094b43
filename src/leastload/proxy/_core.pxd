# Augmenting declarations for _core.py (Cython's pure-Python mode; see _backend.pxd).
cimport cython

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

cdef bint _COMPILED
cdef Py_ssize_t QUIET_TURN_PIECES  # a turn that held fewer pieces was quiet
cdef Py_ssize_t WRITES_AT_ONCE_AFTER_QUIET  # then this many writes to backends go out at once
cpdef int write_now(object transport, int fd, object data) except -2
@cython.locals(sent=Py_ssize_t, size=Py_ssize_t)
cdef int _write_open(object transport, int fd, object data) except -2
@cython.locals(now=double)
cpdef double clock() except? -1.0



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
    cdef public int fd                # its socket's descriptor for write_now(); -1: through the transport only
    cdef public WriteTurn turn
    cdef public bint always_held      # held in every turn, quiet or busy (a client's answers); else turn.holds()

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
