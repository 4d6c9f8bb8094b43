"""LEASTREQUEST, LRTM and CUSTOMLOAD, and the method registry against the C table.

The vendor's documentation gives LEASTREQUEST a worked example (three services
handling 3, 15 and no requests) and describes LRTM (least response time from
monitor probes) and CUSTOMLOAD (caller-reported metrics, each with a weight and a
threshold) in words; these tests hold both engines to those descriptions.
"""
import pytest

from leastload.engine import methods as _methods
from leastload.engine.errors import NoServiceAvailable


def make(impl, method, weights=(1, 1, 1)):
    vs = impl.VirtualServer(method, clock=impl.ManualClock(50.0))
    for k, weight in enumerate(weights, 1):
        vs.bind(f"S{k}", weight)
    return vs


def picks(vs, count):
    return [vs.select() for _ in range(count)]


# ---- LEASTREQUEST ------------------------------------------------------------------

def test_least_request_follows_the_vendors_example(impl):
    # Service-HTTP-1 handles 3 requests, Service-HTTP-2 15, Service-HTTP-3 none.
    vs = make(impl, "LEASTREQUEST")
    for name, handling in (("S1", 3), ("S2", 15)):
        for _ in range(handling):
            vs.begin(name)
    # The vendor's table: requests 1-3 to Service-HTTP-3 (fewest), request 4 to
    # Service-HTTP-1 (tied at 3, round robin), 5 to Service-HTTP-3, 6 to Service-HTTP-1 ...
    assert picks(vs, 6) == ["S3", "S3", "S3", "S1", "S3", "S1"]
    # ... until both handle as many as Service-HTTP-2; then all three in turn.
    # (now S1 handles 5, S3 4: S3 first, then the two alternate)
    assert picks(vs, 21) == ["S3", "S1"] * 10 + ["S3"]
    assert [vs.load(n) for n in ("S1", "S2", "S3")] == [15, 15, 15]
    assert picks(vs, 3) == ["S1", "S2", "S3"]


def test_least_request_gives_a_finished_request_back(impl):
    # "If requests to Service-HTTP-2 complete, it might get new requests before the others."
    vs = make(impl, "LEASTREQUEST")
    for name, handling in (("S1", 2), ("S2", 4), ("S3", 2)):
        for _ in range(handling):
            vs.begin(name)
    for _ in range(3):
        vs.finish("S2")
    assert vs.select() == "S2"
    assert vs.load("S2") == 2


# ---- LRTM ----------------------------------------------------------------------

def test_lrtm_shares_by_the_inverse_of_the_probed_response_time(impl):
    vs = make(impl, "LRTM", (1, 1))
    vs.probe("S1", 0.001)
    vs.probe("S2", 0.003)
    chosen = picks(vs, 40)  # nothing finishes: N = active x probe
    assert (chosen.count("S1"), chosen.count("S2")) == (30, 10)
    assert vs.load("S1") == pytest.approx(30 * 0.001)
    assert vs.load("S2") == pytest.approx(10 * 0.003)


def test_lrtm_uses_probes_and_not_ttfb_and_least_response_time_the_reverse(impl):
    for method, slow_by in (("LRTM", "probe"), ("LEASTRESPONSETIME", "ttfb")):
        vs = make(impl, method, (1, 1))
        for name, seconds in (("S1", 0.050), ("S2", 0.001)):
            if slow_by == "probe":
                vs.probe(name, seconds)
                vs.begin(name)
                vs.finish(name, ttfb=0.5 - seconds, status=200)  # the other input, reversed
            else:
                vs.probe(name, 0.5 - seconds)
                vs.begin(name)
                vs.finish(name, ttfb=seconds, status=200)
        vs.begin("S1")
        vs.begin("S2")  # one active each: N = 1 x the method's time
        assert vs.select() == "S2", method


def test_probes_are_smoothed_like_ttfb(impl):
    vs = make(impl, "LRTM", (1,))
    assert vs.info("S1")["probe"] is None
    vs.probe("S1", 0.008)
    vs.probe("S1", 0.0)  # 7/8 of 8000 us
    assert vs.info("S1")["probe"] == pytest.approx(0.007)
    with pytest.raises(ValueError, match=r"^rtt must be a number of seconds in 0\.\.3600, got -1\.0$"):
        vs.probe("S1", -1.0)
    assert vs.info("S1")["probe"] == pytest.approx(0.007)


# ---- CUSTOMLOAD ------------------------------------------------------------------

def test_customload_skips_a_service_with_a_metric_over_its_threshold(impl):
    vs = make(impl, "CUSTOMLOAD")
    vs.report_load("S2", {"cpu": (95, 1, 90)})
    assert "S2" not in picks(vs, 9)
    assert vs.info("S2")["over_threshold"] is True
    vs.report_load("S2", {"cpu": (40, 1, 90)})  # back under it: eligible again
    assert "S2" in picks(vs, 3)


def test_customload_takes_idle_services_first_then_the_lowest_weighted_load(impl):
    vs = make(impl, "CUSTOMLOAD", (1, 1, 2))
    vs.report_load("S1", {"cpu": (10, 1, 100), "mem": (20, 2, 100)})  # load 10 + 40 = 50
    vs.report_load("S2", {"cpu": (30, 1, 100)})                       # load 30
    vs.report_load("S3", {"cpu": (50, 1, 100)})                       # load 50, weight 2: Nw 250000
    assert vs.load("S1") == 50
    vs.begin("S1")
    vs.begin("S2")
    assert vs.select() == "S3"  # the idle one first, though its load is the highest
    # all busy now: Nw = 500000, 300000, 250000
    assert vs.select() == "S3"
    assert [vs.score(n) for n in ("S1", "S2", "S3")] == [500000.0, 300000.0, 250000.0]


def test_customload_with_every_service_over_a_threshold_selects_none(impl):
    vs = make(impl, "CUSTOMLOAD", (1, 1))
    for name in ("S1", "S2"):
        vs.report_load(name, {"conns": (10, 1, 10)})  # at the threshold counts as over
    with pytest.raises(NoServiceAvailable):
        vs.select()


@pytest.mark.parametrize("metrics, error, message", [
    ({"cpu": (1, 0, 10)}, ValueError, r"^metrics\['cpu'\] weight must be an int in 1\.\.100, got 0$"),
    ({"cpu": (1, 1, 0)}, ValueError, r"^metrics\['cpu'\] threshold must be an int >= 1, got 0$"),
    ({"cpu": (-1, 1, 5)}, ValueError, r"metrics\['cpu'\] value"),
    ({"cpu": (1, 1)}, TypeError, r"^metrics\['cpu'\] must be a \(value, weight, threshold\) tuple"),
    ([("cpu", (1, 1, 1))], TypeError, r"^metrics must be a dict"),
    ({"cpu": (2**62, 2, 10)}, OverflowError, r"^metrics: the load \(sum of value \* weight\) must stay below 2\*\*63"),
])
def test_bad_metrics_are_refused_and_change_nothing(impl, metrics, error, message):
    vs = make(impl, "CUSTOMLOAD", (1,))
    vs.report_load("S1", {"cpu": (7, 3, 100)})
    before = vs.info("S1")
    with pytest.raises(error, match=message):
        vs.report_load("S1", metrics)
    assert vs.info("S1") == before


# ---- the registry ----------------------------------------------------------------
# Each row of leastload.engine.methods says what a method is; both engines are held to it.

ACTIVE_UNITS = ("active transactions", "active requests")


@pytest.mark.parametrize("row", _methods.TABLE, ids=lambda row: row.name)
def test_each_registry_row_is_what_the_engine_does(impl, row):
    if not row.supported:
        with pytest.raises(ValueError, match=row.name):
            impl.VirtualServer(row.name)
        return
    vs = make(impl, row.name)
    assert vs.method == row.name
    # the unit: N in seconds is reported as a float, every other N as an int
    assert isinstance(vs.load("S1"), float) == (row.unit == "seconds")
    key = {"hash": "/same/url" if row.name == "URLHASH" else None}.get(row.family)
    if row.name in _methods.NEEDS_KEY and row.name != "URLHASH":
        with pytest.raises((TypeError, ValueError)):  # a hash method needs the request's key
            vs.select()
        return
    for _ in range(5):
        vs.begin("S1")  # S1 the busiest by open transactions
    chosen = [vs.select(key=key) for _ in range(3)]
    if row.family == "roundrobin":
        assert chosen == ["S1", "S2", "S3"]  # open transactions do not matter
    elif key is not None:
        assert len(set(chosen)) == 1  # the key decides, not the load
    elif row.unit in ACTIVE_UNITS:  # DOMAINHASH without a domain too: LEASTCONNECTION
        assert "S1" not in chosen  # least open transactions (sampled: the lower of two draws)


def test_a_c_table_other_than_the_registry_is_refused(c_impl):
    names = [m.name for m in sorted(_methods.TABLE, key=lambda m: m.value)]
    supported = [m.supported for m in sorted(_methods.TABLE, key=lambda m: m.value)]
    _methods.check_against_c(names, supported)  # what importing the C engine did
    with pytest.raises(ImportError, match="does not match the Python registry"):
        _methods.check_against_c(names[::-1], supported)
    with pytest.raises(ImportError, match="does not match the Python registry"):
        _methods.check_against_c(names, [not s for s in supported])
