# The clock: time.monotonic() by default, a ManualClock for tests and simulations.
# Included by _engine.pyx (one extension module: no call crosses a module).

cdef enum ClockKind:
    CLOCK_KIND_MONOTONIC = 0  # clock=None: time.monotonic() itself
    CLOCK_KIND_MANUAL = 1     # our ManualClock: its value read without a Python call
    CLOCK_KIND_OBJECT = 2     # anything with .now()


# The default clock is time.monotonic itself, called through the function
# object: the same value from the same source as the caller's time.monotonic()
# on every platform (CLOCK_MONOTONIC differs from it on macOS, where it counts
# sleep, and does not exist on Windows).
cdef object _MONOTONIC = _time_monotonic

# On Linux time.monotonic() is clock_gettime(CLOCK_MONOTONIC) made into nanoseconds and
# divided by 1e9: read here the same way, the same double without a Python call (4 reads
# a proxied request). Elsewhere (-1) the function object is called.
cdef extern from *:
    """
    #if defined(__linux__)
    #include <time.h>
    static int ll_linux_monotonic(double *out) {
        struct timespec ts;
        if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
            return -1;
        *out = (double)((long long)ts.tv_sec * 1000000000LL + (long long)ts.tv_nsec) / 1e9;
        return 0;
    }
    #else
    static int ll_linux_monotonic(double *out) { (void)out; return -1; }
    #endif
    """
    int ll_linux_monotonic(double *out) nogil


cdef inline double _monotonic() except? -1.0:
    cdef double now
    if ll_linux_monotonic(&now) == 0:
        return now
    return <double>_MONOTONIC()


monotonic = _time_monotonic  # the default clock of a VirtualServer


cdef class ManualClock:
    """ManualClock(start=0.0)
--

A virtual clock for tests and simulations: time moves only when told."""

    cdef double _t

    def __init__(self, start=0.0):
        self._t = _errors.check_seconds("start", start)

    def now(self):
        return self._t

    def advance(self, seconds):
        """Moves the clock by `seconds` (negative: backwards)."""
        self._t = _errors.advance_clock(self._t, seconds)

    def set(self, t):
        self._t = _errors.check_seconds("t", t)

    def __repr__(self):
        return f"ManualClock({self._t!r})"

