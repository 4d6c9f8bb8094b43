"""Closed-loop slow start through `leastload proxy` (--slow-start-guard): a new backend
much slower than its peers stays at its first step; a healthy one completes its ramp.
Real proxy and backend processes on 127.0.0.1 (the harness of the shared-workers tests:
8 clients, the new backend bound through the admin port under load); every wait bounded."""
import sys

import pytest

from test_proxy_shared_workers import backends, samples, slow_start_run  # noqa: F401 (backends: a fixture)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_REUSEPORT workers, /proc")

GUARD = ("--new-service-request-increment-interval", "1", "--slow-start-guard", "2")


def test_a_slow_new_backend_stays_at_its_first_step(tmp_path, backends):  # noqa: F811
    per_second, served, text = slow_start_run(tmp_path, backends, *GUARD, new_delay=0.05, seconds=5,
                                              metrics_at_end=True)
    assert served > 300, served
    # 10 a second (its first step), held there once it has TTFBs of its own. The caps count the
    # engine's seconds, and the ramp steps at its own times: the wall-clock second after the first
    # step holds two of the engine's seconds' worth (up to 20), later ones one (up to 11).
    assert max(per_second[1:]) <= 20 and max(per_second[2:]) <= 11, per_second
    assert samples(text, "leastload_service_slow_start_held", service="new") == [1.0]
    assert samples(text, "leastload_service_slow_start_cap", service="new") == [10.0]


def test_a_healthy_new_backend_completes_its_ramp(tmp_path, backends):  # noqa: F811
    per_second, served, text = slow_start_run(tmp_path, backends, *GUARD, seconds=6, metrics_at_end=True)
    assert served > 300, served
    assert per_second[2] >= 25, per_second  # it stepped up: 10, 20, 30 ...
    assert samples(text, "leastload_service_slow_start_held", service="new") in ([], [0.0])
