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


cdef inline double _monotonic() except? -1.0:
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

