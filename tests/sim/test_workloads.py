"""leastload.sim.workloads: seeded traces, their invariants, save/load and validation."""
import dataclasses

import numpy as np
import pytest

from leastload.sim import workloads as W


@pytest.fixture(scope="module")
def trace():
    events = W.down_up(1, 0.5, 2.0) + W.bind_at("S5", 1.0) + W.out_of_service(2, 3.0, back_at=4.0)
    return W.make_trace(n_services=8, n_requests=50_000, rate=10_000.0, seed=3, degrading=1,
                        weights="random", events=events)


def test_same_seed_same_trace_other_seed_other_trace():
    a = W.make_trace(16, 5_000, seed=7, pattern="bursty")
    assert a == W.make_trace(16, 5_000, seed=7, pattern="bursty")
    b = W.make_trace(16, 5_000, seed=8, pattern="bursty")
    assert a != b
    assert not np.array_equal(a.arrival, b.arrival)


def test_streams_are_independent_of_the_pattern():
    # sizes come from their own stream: a new arrival pattern leaves them alone
    a = W.make_trace(16, 5_000, seed=1, pattern="poisson")
    b = W.make_trace(16, 5_000, seed=1, pattern="diurnal")
    assert np.array_equal(a.resp_bytes, b.resp_bytes)
    assert not np.array_equal(a.arrival, b.arrival)


def test_fields_dtypes_and_shapes(trace):
    m, n, k = trace.n_services, len(trace), trace.n_events
    assert trace.services == tuple(f"S{i}" for i in range(8))
    expected = {"weights": (np.uint8, m), "initially_bound": (np.bool_, m), "ttfb_base": (np.float64, m),
                "ttfb_slope": (np.float64, m), "arrival": (np.float64, n), "ttfb_factor": (np.float64, n),
                "transfer": (np.float64, n), "status": (np.uint16, n), "req_bytes": (np.uint64, n),
                "resp_bytes": (np.uint64, n), "req_packets": (np.uint64, n), "resp_packets": (np.uint64, n),
                "event_time": (np.float64, k), "event_kind": (np.uint8, k), "event_service": (np.uint32, k)}
    assert {f.name for f in dataclasses.fields(trace)} == {"services", *expected}
    for field, (dtype, length) in expected.items():
        a = getattr(trace, field)
        assert a.dtype == dtype and a.shape == (length,) and a.flags.c_contiguous, field
    assert (m, n, k) == (8, 50_000, 5)


@pytest.mark.parametrize("pattern", sorted(W.PATTERNS))
def test_arrivals_sorted_non_negative_at_the_rate(pattern):
    t = W.make_trace(4, 40_000, rate=5_000.0, pattern=pattern, seed=2)
    assert (t.arrival >= 0).all() and (np.diff(t.arrival) >= 0).all()
    assert 40_000 / t.duration == pytest.approx(5_000.0, rel=0.1)


def test_bursty_traffic_has_bursts_and_diurnal_a_ramp():
    bursty = W.make_trace(4, 100_000, rate=10_000.0, pattern="bursty", seed=0,
                          pattern_options={"burst_factor": 10.0, "period": 2.0, "burst": 0.2})
    per_100ms = np.bincount((bursty.arrival / 0.1).astype(np.int64))
    assert per_100ms.max() > 5 * np.median(per_100ms)
    steady = W.make_trace(4, 100_000, rate=10_000.0, pattern="poisson", seed=0)
    per_100ms = np.bincount((steady.arrival / 0.1).astype(np.int64))[:-1]
    assert per_100ms.max() < 1.5 * np.median(per_100ms)
    diurnal = W.make_trace(4, 100_000, rate=10_000.0, pattern="diurnal", seed=0)
    tenths = np.bincount((10 * diurnal.arrival / diurnal.duration).astype(np.int64), minlength=11)
    assert tenths[4:6].min() > 3 * max(tenths[0], tenths[9])  # peak mid-trace, troughs at the ends


def test_sizes_have_heavy_tails_and_packets_follow_bytes(trace):
    for nbytes in (trace.req_bytes, trace.resp_bytes):
        assert nbytes.min() >= 1 and nbytes.max() <= W.MAX_BYTES
        assert nbytes.max() > 100 * np.median(nbytes)
    assert np.array_equal(trace.resp_packets, np.ceil(trace.resp_bytes / 1460).astype(np.uint64) + 1)
    small = W.make_trace(2, 1_000, seed=3, mss=100)
    assert np.array_equal(small.req_packets, (small.req_bytes + 99) // 100 + 1)


def test_statuses_ttfb_and_transfer(trace):
    values, counts = np.unique(trace.status, return_counts=True)
    assert set(values) == {200, 404, 500, 503}
    assert counts[0] / len(trace) == pytest.approx(0.95, abs=0.01)
    assert (trace.ttfb_factor > 0).all() and np.median(trace.ttfb_factor) == pytest.approx(1.0, abs=0.02)
    assert (trace.transfer >= 0).all() and (trace.transfer > 0.01).any()
    assert (trace.ttfb_base > 0).all() and trace.ttfb_base.max() > 3 * np.median(trace.ttfb_base)  # slow ones
    degrading = np.flatnonzero(trace.ttfb_slope)
    assert len(degrading) == 1
    s = degrading[0]
    grown = trace.ttfb_base[s] * (1 + trace.ttfb_slope[s] * trace.duration)
    assert grown == pytest.approx(10 * trace.ttfb_base[s])
    worst = max(trace.ttfb(i).max() for i in range(trace.n_services))
    assert 0 < worst < W.GENERATED_MAX_TTFB


def test_events_sorted_and_late_bind_starts_unbound(trace):
    assert (np.diff(trace.event_time) >= 0).all()
    kinds = [W.EVENT_KINDS[k] for k in trace.event_kind]
    assert kinds == ["DOWN", "BIND", "UP", "OUT_OF_SERVICE", "UP"]
    assert trace.services[trace.event_service[1]] == "S5"
    assert list(np.flatnonzero(~trace.initially_bound)) == [5]


def test_save_load_round_trip_is_exact(trace, tmp_path):
    path = tmp_path / "trace.bin"  # no .npz suffix: the file is written exactly there
    trace.save(path)
    assert path.exists()
    back = W.Trace.load(path)
    assert back == trace and back.services == trace.services
    for f in dataclasses.fields(trace):
        a, b = getattr(trace, f.name), getattr(back, f.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), f.name


def test_load_rejects_other_npz(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, x=np.arange(3))
    with pytest.raises(ValueError, match="not a leastload trace"):
        W.Trace.load(path)


def test_head_keeps_a_prefix_and_its_events(trace):
    h = trace.head(15_000)
    assert len(h) == 15_000 and np.array_equal(h.resp_bytes, trace.resp_bytes[:15_000])
    assert (h.event_time <= h.arrival[-1]).all() and h.n_events == int((trace.event_time <= h.arrival[-1]).sum())
    assert len(trace.head(0)) == 0 and trace.head(0).n_events == 0


def _with(trace, **changes):
    return dataclasses.replace(trace, **changes)


@pytest.mark.parametrize("field, value, message", [
    ("weights", np.zeros(8, dtype=np.uint8), "weights: must be in 1..100"),
    ("weights", np.ones(8, dtype=np.int64), "weights: must have dtype uint8, got int64"),
    ("ttfb_base", np.ones(7), "ttfb_base: must have one entry per service"),
    ("ttfb_base", np.zeros(8), "ttfb_base: must be > 0"),
    ("ttfb_slope", np.full(8, np.nan), "ttfb_slope: must be finite"),
    ("status", np.full(50_000, 99, dtype=np.uint16), "status: must be HTTP statuses"),
    ("req_bytes", [1] * 50_000, "req_bytes: must be a numpy array"),
    ("transfer", -np.ones(50_000), "transfer: must be >= 0"),
    ("arrival", np.ones((50_000, 1)), "arrival: must be 1-D"),
    ("event_kind", np.full(5, 9, dtype=np.uint8), "event_kind: must be 0..4"),
    ("event_service", np.full(5, 8, dtype=np.uint32), "event_service: must index services"),
    ("services", ("S0",) * 8, "services: names must be unique"),
])
def test_validation_names_the_field(trace, field, value, message):
    with pytest.raises(ValueError, match="Trace." + message.replace("(", r"\(").replace(".", r"\.")):
        _with(trace, **{field: value})


def test_validation_of_order_and_limits(trace):
    backwards = trace.arrival.copy()
    backwards[100], backwards[101] = backwards[101] + 1, backwards[100]
    with pytest.raises(ValueError, match=r"Trace\.arrival: must be non-decreasing, but index 101"):
        _with(trace, arrival=backwards)
    with pytest.raises(ValueError, match=r"Trace\.event_time: must be non-decreasing"):
        _with(trace, event_time=trace.event_time[::-1].copy())
    with pytest.raises(ValueError, match=r"Trace\.arrival: must be C-contiguous"):
        _with(trace, arrival=np.repeat(trace.arrival, 2)[::2])
    with pytest.raises(ValueError, match=r"Trace\.ttfb_factor: .* over 3600 s"):
        _with(trace, ttfb_factor=trace.ttfb_factor * 1e5)
    with pytest.raises(ValueError, match=r"Trace\.ttfb_slope: makes some service's TTFB reach 0"):
        _with(trace, ttfb_slope=np.full(8, -1.0))


def test_validation_of_event_consistency(trace):
    with pytest.raises(ValueError, match=r"events: event 2 binds 'S0', which is already bound"):
        W.make_trace(4, 100, events=W.unbind_at(0, 0.1) + W.bind_at(0, 0.2) + W.bind_at(0, 0.3))
    with pytest.raises(ValueError, match=r"events: event 1 \(DOWN\) is for 'S2', which is not bound"):
        W.make_trace(4, 100, events=W.unbind_at(2, 0.1) + W.down_up(2, 0.2, 0.3))
    ok = W.make_trace(4, 100, events=W.unbind_at(2, 0.1) + W.bind_at(2, 0.2) + W.flap(2, 0.3, 0.1, 3))
    assert ok.n_events == 8 and ok.initially_bound.all()
    # a hand-made Trace may hold such events: the replay skips them
    odd = _with(ok, event_kind=np.full(8, W.BIND, dtype=np.uint8))
    assert odd.n_events == 8


def test_make_trace_rejects_bad_arguments():
    for kwargs, message in [({"pattern": "zigzag"}, "pattern must be one of"),
                            ({"rate": 0.0}, "rate must be a positive"),
                            ({"n_services": 0}, "n_services must be an int >= 1"),
                            ({"events": [(1.0, "REBOOT", 0)]}, "kind must be one of"),
                            ({"events": [(1.0, "DOWN", "nope")]}, "unknown service 'nope'"),
                            ({"slow_factor": 1000.0, "slow_fraction": 0.5}, "TTFBs up to")]:
        with pytest.raises(ValueError, match=message):
            W.make_trace(**{"n_services": 4, "n_requests": 1_000, **kwargs})


def test_sizes_from_3_to_262144_services():
    for n in (3, 262_144):
        t = W.make_trace(n, 20_000, degrading=2)
        assert t.n_services == n and len(t.services) == n and t.services[-1] == f"S{n - 1}"
        assert len(np.flatnonzero(t.ttfb_slope)) == 2
