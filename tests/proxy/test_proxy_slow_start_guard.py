"""Closed-loop slow start through `leastload proxy` (--slow-start-guard): a new backend
much slower than its peers stays at its first step; a healthy one completes its ramp.
Real proxy and backend processes on 127.0.0.1 (the harness of the shared-workers tests:
8 clients, the new backend bound through the admin port under load); every wait bounded."""
import sys

import pytest

from test_proxy_shared_workers import backends, per_second, samples, slow_start_run  # noqa: F401 (backends: a fixture)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_REUSEPORT workers, /proc")

# A factor wide enough for sub-millisecond TTFBs on a busy machine (a healthy backend's can be
# twice its peers' for a moment), narrow enough for one answering in 200 ms among ones that answer at once
GUARD = ("--new-service-request-increment-interval", "1", "--slow-start-guard", "10")


def test_a_slow_new_backend_stays_at_its_first_step(tmp_path, backends):  # noqa: F811
    answered, served, text = slow_start_run(tmp_path, backends, *GUARD, new_delay=0.2, seconds=5,
                                            metrics_at_end=True)
    assert served > 300, served
    # 10 a second (its first step), held there once it has TTFBs of its own. Counted as the backend
    # answers (200 ms after each pick), so a wall-clock second can hold a few of the next one's; and
    # the second after the first step can hold two of the engine's seconds' worth (up to 20)
    counts = per_second(answered)
    held = counts[2:]
    assert max(counts[1:]) <= 24 and sum(held) <= 10 * len(held) + 4, counts
    assert samples(text, "leastload_service_slow_start_held", service="new") == [1.0]
    assert samples(text, "leastload_service_slow_start_cap", service="new") == [10.0]


def test_a_healthy_new_backend_completes_its_ramp(tmp_path, backends):  # noqa: F811
    answered, served = slow_start_run(tmp_path, backends, *GUARD, seconds=6)
    assert served > 300, served
    counts = per_second(answered)
    # it steps up, 10, 20, 30 ... a second (a held one never passes 11 after its first step; a
    # moment's hold on a busy machine would cost it a step, not the climb)
    assert max(counts[2:]) >= 25, counts
