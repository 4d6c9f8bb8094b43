"""The proxy's per-backend counters (_stats): the TTFB histogram's buckets. Runs on the path
the suite chose (the .py by default; the compiled module under LEASTLOAD_IMPLEMENTATION=c)."""
import bisect

import pytest

pytest.importorskip("httptools", reason="the proxy needs httptools (pip install leastload[proxy])")

from leastload.proxy import _stats  # noqa: E402 (after the check)


@pytest.mark.parametrize("seconds", [0.0, 0.001, 0.005, 0.0050001, 0.3, 1.0, 9.99, 10.0, 10.0001, 3600.0])
def test_a_ttfb_goes_to_the_first_bucket_whose_bound_is_not_below_it(seconds):
    counters = _stats.BackendCounters()
    counters.add_ttfb(seconds)
    expected = [0] * (len(_stats.TTFB_BUCKETS) + 1)
    expected[bisect.bisect_left(_stats.TTFB_BUCKETS, seconds)] = 1  # <= its bound, above the one before
    assert counters.ttfb_buckets == expected
    assert counters.ttfb_sum == seconds
