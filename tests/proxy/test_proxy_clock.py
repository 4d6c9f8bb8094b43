"""The proxy's clock (_core.clock): time.monotonic()'s, which the compiled build reads
in C. Deadlines, the sweep and TTFB all use it, so it must be that clock exactly, not a
coarser one (uvloop's loop.time() counts whole milliseconds)."""

import time

from leastload.proxy import _core


def test_the_proxys_clock_is_time_monotonic_read_after_read():
    for _ in range(1000):
        before = _core.clock()
        between = time.monotonic()
        after = _core.clock()
        assert type(before) is float and before <= between <= after, (before, between, after)


def test_the_proxys_clock_moves_finer_than_a_millisecond():
    readings = {_core.clock() for _ in range(1000)}
    # a thousand reads take about a tenth of a millisecond: a clock that counts whole
    # milliseconds (or the kernel's coarse ticks) gives one or two values, a full one ~1000
    assert len(readings) > 100, len(readings)
