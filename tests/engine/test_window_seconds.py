"""window_seconds: the bytes/packets window's length (1..60, default 14)."""
import pytest


def make(impl, **options):
    clock = impl.ManualClock(100.0)
    vs = impl.VirtualServer("LEASTBANDWIDTH", clock=clock, **options)
    for name in ("S1", "S2"):
        vs.bind(name)
    return vs, clock


@pytest.mark.parametrize("window", [1, 5, 14, 60])
def test_traffic_counts_for_exactly_the_window(impl, window):
    vs, clock = make(impl, window_seconds=window)
    assert vs.window_seconds == window
    vs.record("S1", bytes=1000)  # at second 100
    clock.set(100.0 + window - 0.001)
    assert vs.load("S1") == 1000  # still inside: seconds 100 .. 100 + window - 1
    clock.set(100.0 + window)
    assert vs.load("S1") == 0


def test_a_shorter_window_drops_the_older_seconds_and_a_longer_one_keeps_what_is_left(impl):
    vs, clock = make(impl)
    for second in range(100, 110):  # 1 byte at each of seconds 100..109
        clock.set(float(second))
        vs.record("S1", bytes=1)
    vs.set(window_seconds=3)  # seconds 107..109 stay
    assert vs.load("S1") == 3
    vs.set(window_seconds=30)  # the dropped seconds do not come back
    assert vs.load("S1") == 3
    vs.record("S2", bytes=2)
    clock.set(138.5)  # seconds 109..138: the last byte of S1 (and S2's 2, at 109) still in
    assert (vs.load("S1"), vs.load("S2")) == (1, 2)
    clock.set(139.0)
    assert (vs.load("S1"), vs.load("S2")) == (0, 0)


def test_the_window_decides_the_pick(impl):
    vs, clock = make(impl, window_seconds=2)
    vs.record("S1", bytes=5000)
    vs.record("S2", bytes=100)
    assert vs.select() == "S2"
    clock.advance(2.0)  # both totals gone: tied, round robin after S2
    assert vs.select() == "S1"


@pytest.mark.parametrize("value, error", [(0, ValueError), (61, ValueError), (2.0, TypeError), (True, TypeError)])
def test_a_bad_window_is_refused_and_changes_nothing(impl, value, error):
    vs, _ = make(impl)
    vs.record("S1", bytes=7)
    with pytest.raises(error, match=r"^window_seconds must be an int in 1\.\.60, got "):
        vs.set(window_seconds=value, method="LEASTPACKETS")
    assert (vs.window_seconds, vs.method, vs.load("S1")) == (14, "LEASTBANDWIDTH", 7)
    with pytest.raises(error):
        impl.VirtualServer("LEASTBANDWIDTH", window_seconds=value)
