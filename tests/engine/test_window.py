"""The 14-second window of bytes and packets (docs/semantics.md "Time")."""
import pytest

MAX64 = 2**64 - 1


def make(impl, start=0.0, method="LEASTBANDWIDTH"):
    clock = impl.ManualClock(start)
    vs = impl.VirtualServer(method, clock=clock)
    vs.bind("S1")
    return vs, clock


def window(vs, name="S1"):
    info = vs.info(name)
    return info["bytes"], info["packets"]


@pytest.mark.parametrize("record_at, read_at, counts", [
    (5.0, 5.0, True),
    (5.0, 18.0, True),
    (5.0, 18.999, True),    # t + 13.999
    (5.0, 19.0, False),     # t + 14.0: the bucket of second 5 has left
    (5.0, 19.001, False),   # t + 14.001
    (5.5, 18.999, True),    # buckets are whole seconds: 5.5 lives in [5, 6)
    (5.5, 19.0, False),
    (5.5, 19.499, False),   # t + 13.999
    (-3.5, 9.999, True),    # negative clocks: second -4
    (-3.5, 10.0, False),
])
def test_a_record_counts_for_fourteen_whole_seconds(impl, record_at, read_at, counts):
    vs, clock = make(impl, record_at)
    vs.record("S1", bytes=1000, packets=7)
    clock.set(read_at)
    assert window(vs) == ((1000, 7) if counts else (0, 0))
    assert vs.load("S1") == (1000 if counts else 0)


def fill_fourteen_seconds(vs, clock):
    """2**k bytes and k+1 packets in second k, for k = 0..13."""
    for k in range(14):
        clock.set(k + 0.5)
        vs.record("S1", bytes=2**k, packets=k + 1)


@pytest.mark.parametrize("jump, left", [(0.4, 2**14 - 1), (1.0, 2**14 - 2), (13.0, 2**13),
                                        (14.0, 0), (15.0, 0), (1000.0, 0), (1e9, 0)])
def test_jumps_of_fourteen_seconds_or_more_empty_the_window(impl, jump, left):
    vs, clock = make(impl)
    fill_fourteen_seconds(vs, clock)  # the clock stands at 13.5
    clock.advance(jump)
    assert vs.load("S1") == left


@pytest.mark.parametrize("read_at, bytes_left, packets_left", [
    (13.999, 2**14 - 1, 105),
    (14.0, 2**14 - 2, 104),              # second 0 left
    (16.5, 2**14 - 8, 105 - 1 - 2 - 3),  # seconds 0, 1, 2 left
    (26.0, 2**13, 14),                   # only second 13 is left
    (27.0, 0, 0),
])
def test_partial_expiry(impl, read_at, bytes_left, packets_left):
    vs, clock = make(impl)
    fill_fourteen_seconds(vs, clock)
    clock.set(read_at)
    assert window(vs) == (bytes_left, packets_left)


def test_walking_the_clock_expires_one_second_at_a_time(impl):
    vs, clock = make(impl)
    fill_fourteen_seconds(vs, clock)
    seen = []
    for step in range(56):  # 13.5 .. 27.25 by quarter seconds, reading each time
        clock.set(13.5 + step / 4)
        seen.append(window(vs)[0])
    # Second k leaves when the clock reaches k + 14: the sum drops by 2**k then.
    expected = [sum(2**k for k in range(14) if k + 14 > 13.5 + step / 4) for step in range(56)]
    assert seen == expected


def test_the_clock_going_backwards_is_no_time_passing(impl):
    vs, clock = make(impl, 10.5)
    vs.record("S1", bytes=100)
    before = vs.snapshot()
    clock.set(3.0)
    assert vs.load("S1") == 100  # no error, no counter change
    assert vs.snapshot() == before
    vs.record("S1", bytes=7)  # goes into the current bucket, second 10
    assert vs.snapshot()["second"] == 10
    clock.set(9.9)
    assert vs.load("S1") == 107
    clock.set(23.999)  # second 3 would have left at 17; second 10 is still in
    assert vs.load("S1") == 107
    clock.set(24.0)
    assert vs.load("S1") == 0


def test_selection_counters_roll_with_the_second(impl):
    vs, clock = make(impl, 10.5)
    vs.select()
    clock.set(4.0)  # backwards: still second 10
    vs.select()
    info = vs.info("S1")
    assert (info["sel_this_sec"], info["sel_last_sec"], info["selected"]) == (2, 0, 2)
    clock.set(11.2)  # exactly one second later
    vs.select()
    info = vs.info("S1")
    assert (info["sel_this_sec"], info["sel_last_sec"], info["selected"]) == (1, 2, 3)
    clock.set(13.0)  # two seconds later: the previous second saw nothing
    info = vs.info("S1")
    assert (info["sel_this_sec"], info["sel_last_sec"]) == (0, 0)


def test_huge_counts_are_exact(impl):
    vs, clock = make(impl)
    for k in range(14):  # 100 Gbit/s for 14 s
        clock.set(float(k))
        vs.record("S1", bytes=175_000_000_000)
    assert vs.load("S1") == 14 * 175_000_000_000
    assert type(vs.load("S1")) is int
    vs2, _ = make(impl)
    vs2.record("S1", bytes=MAX64 - 1)
    vs2.record("S1", bytes=1)
    assert vs2.load("S1") == MAX64  # a float would have rounded this to 2**64


@pytest.mark.parametrize("full, extra", [("bytes", "bytes"), ("packets", "packets"), ("packets", "both")])
def test_overflow_of_the_window_total_raises_and_adds_nothing(impl, full, extra):
    vs, clock = make(impl, 0.5)
    vs.record("S1", **{full: MAX64})
    before = vs.snapshot()
    more = {"bytes": 5, "packets": 1} if extra == "both" else {extra: 1}
    with pytest.raises(OverflowError, match="window total"):
        vs.record("S1", **more)
    assert vs.snapshot() == before  # with "both", the bytes were not added either
    clock.set(13.9)
    with pytest.raises(OverflowError):
        vs.record("S1", **more)
    clock.set(14.0)  # the window moves before the check: the full second has left
    vs.record("S1", **more)
    assert window(vs) == (more.get("bytes", 0), more.get("packets", 0))


def test_the_default_clock_is_time_monotonic(impl):
    """No clock given: the vserver reads the clock time.monotonic() reads."""
    import time

    vs = impl.VirtualServer("LEASTBANDWIDTH")
    for _ in range(1000):  # the same source and the same double (the C engine reads it without a call)
        before = time.monotonic()
        now = vs.now()
        after = time.monotonic()
        assert before <= now <= after
    vs.bind("S1")
    vs.record("S1", bytes=7)
    assert vs.load("S1") == 7  # the window sits at the current second of that clock


class _CountingClock:
    """Any object with now() will do; this one counts how often it is read."""

    def __init__(self, t):
        self.t, self.reads = t, 0

    def now(self):
        self.reads += 1
        return self.t


def test_any_object_with_now_is_a_clock(impl):
    clock = _CountingClock(5.5)
    vs = impl.VirtualServer("LEASTBANDWIDTH", clock=clock)
    vs.bind("S1")
    vs.record("S1", bytes=3)
    reads = clock.reads
    clock.t = 19.0  # 14 s after second 5: the bucket is gone
    assert vs.load("S1") == 0
    assert clock.reads == reads + 1  # one read per call that observes time
