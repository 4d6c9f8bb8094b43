"""The window roll: the clock enters a new second and every service's oldest bucket leaves."""
import pytest

from leastload.bench import cases


@pytest.mark.benchmark(group="window roll (one select() that rolls out traffic of all n services)")
def test_window_roll(benchmark, impl, n):
    state = {}

    def prime():  # untimed: traffic on every service in the bucket that leaves next
        vs, clock, t = cases.window_primed(impl, n, state.get("vs"), state.get("clock"))
        state.update(vs=vs, clock=clock)
        return (vs, clock, t), {}

    def roll(vs, clock, t):
        clock.set(t)
        return vs.select()

    benchmark.pedantic(roll, setup=prime, rounds=20 if n <= 1024 else 5, iterations=1)
    assert state["vs"].load("S0") == 0  # the traffic really left the window
