"""The methods, the tie rule, service states, bind order and startup round robin."""
import pytest

from leastload.engine.errors import NoServiceAvailable
from leastload.engine.methods import KEYLESS_METHODS  # the hash methods' keys: tests/hashing/test_hash_methods.py


def make(impl, method, weights=(1, 1, 1), **options):
    vs = impl.VirtualServer(method, clock=impl.ManualClock(50.0), **options)
    for k, weight in enumerate(weights, 1):
        vs.bind(f"S{k}", weight)
    return vs


def picks(vs, count):
    return [vs.select() for _ in range(count)]


def test_weighted_round_robin_interleaves_rounds(impl):
    vs = make(impl, "ROUNDROBIN", (2, 3, 4))
    cycle = "S1 S2 S3 S1 S2 S3 S2 S3 S3".split()
    assert picks(vs, 27) == cycle * 3
    assert [vs.active(n) for n in ("S1", "S2", "S3")] == [6, 9, 12]


def test_round_robin_ignores_load(impl):
    vs = make(impl, "ROUNDROBIN")
    for _ in range(5):
        vs.begin("S1")
    assert picks(vs, 4) == ["S1", "S2", "S3", "S1"]
    assert vs.load("S1") == 7  # ROUNDROBIN reports active transactions


def test_least_connection_takes_idle_services_first_whatever_their_weight(impl):
    vs = make(impl, "LEASTCONNECTION", (1, 100, 50))
    vs.begin("S2")  # S2 busy, at Nw = 100; S1 and S3 idle at 0
    assert picks(vs, 2) == ["S1", "S3"]  # idle ones, round robin, though S1 weighs 1
    # All at one active: Nw = 10000, 100, 200 -> S2, then S2 at 200 ties S3, after S2 -> S3.
    assert picks(vs, 2) == ["S2", "S3"]
    assert [vs.score(n) for n in ("S1", "S2", "S3")] == [10000.0, 200.0, 400.0]
    assert vs.load("S2") == 2


def test_least_connection_counts_finished_transactions_out(impl):
    vs = make(impl, "LEASTCONNECTION")
    assert picks(vs, 3) == ["S1", "S2", "S3"]
    vs.finish("S2", status=500)  # any status ends the transaction
    assert vs.select() == "S2"


def test_response_time_average(impl):
    vs = make(impl, "LEASTRESPONSETIME")
    for _ in range(8):
        vs.begin("S1")
    assert vs.info("S1")["ttfb"] is None
    assert vs.load("S1") == 0.0  # no TTFB yet counts as 0
    vs.finish("S1", ttfb=0.8)
    assert vs.info("S1")["ttfb"] == 0.8  # the first sample sets it
    vs.finish("S1", ttfb=1.6)
    assert vs.info("S1")["ttfb"] == 0.9  # (7 * 800000 + 1600000 + 4) // 8 us
    vs.finish("S1", ttfb=5.0, status=503)
    vs.finish("S1", ttfb=5.0, status=201)
    vs.finish("S1")  # no ttfb given
    assert vs.info("S1")["ttfb"] == 0.9  # only status 200 with a ttfb moves it
    assert vs.active("S1") == 3
    assert vs.load("S1") == pytest.approx(2.7)  # 3 active x 0.9 s
    assert vs.score("S1") == pytest.approx(27000.0)


def test_response_time_rounding_in_microseconds(impl):
    vs = make(impl, "LEASTRESPONSETIME")
    for _ in range(3):
        vs.begin("S1")
    vs.finish("S1", ttfb=1.0)
    vs.finish("S1", ttfb=1.000004)  # 1000000.5 us: the mean rounds half up
    assert vs.info("S1")["ttfb"] == 1.000001
    vs.begin("S2")
    vs.finish("S2", ttfb=2.4e-6)  # 2.4 us -> 2 us
    assert vs.info("S2")["ttfb"] == 2e-6
    vs.finish("S1", ttfb=0)
    assert vs.info("S1")["ttfb"] == 0.875001  # (7 * 1000001 + 0 + 4) // 8 = 875001


@pytest.mark.parametrize("method", KEYLESS_METHODS)
@pytest.mark.parametrize("state", ["DOWN", "OUT_OF_SERVICE"])
def test_services_not_up_are_never_selected(impl, method, state):
    vs = make(impl, method, (1, 100, 1))
    for name in ("S1", "S3"):  # S2 is the best by every measure
        for _ in range(5):
            vs.begin(name)
        vs.record(name, bytes=50, packets=50)
    vs.set_state("S2", state)
    assert vs.state("S2") == state
    assert "S2" not in picks(vs, 30)
    vs.set_state("S2", "UP")
    assert "S2" in picks(vs, 3)


@pytest.mark.parametrize("method", KEYLESS_METHODS)
def test_no_service_up(impl, method):
    vs = make(impl, method)
    vs.set_state("S1", "DOWN")
    vs.set_state("S2", "OUT_OF_SERVICE")
    vs.set_state("S3", "DOWN")
    before = vs.snapshot()
    with pytest.raises(NoServiceAvailable, match=r"^no service is UP and eligible$"):
        vs.select()
    assert vs.snapshot() == before


@pytest.mark.parametrize("method", KEYLESS_METHODS)
def test_empty_vserver(impl, method):
    vs = make(impl, method, ())
    with pytest.raises(NoServiceAvailable, match=r"^no service is UP and eligible$"):
        vs.select()


def test_unbind_and_rebind_move_to_the_end(impl):
    vs = make(impl, "ROUNDROBIN")
    vs.begin("S1")
    vs.unbind("S1")
    vs.bind("S1", 2)
    assert vs.services == ("S2", "S3", "S1")
    assert vs.active("S1") == 0 and vs.weight("S1") == 2  # unbinding dropped the counters
    assert picks(vs, 4) == ["S2", "S3", "S1", "S1"]


def test_the_cursor_keeps_its_place_when_its_service_leaves(impl):
    vs = make(impl, "ROUNDROBIN", (1, 1, 1, 1))
    assert picks(vs, 2) == ["S1", "S2"]
    vs.unbind("S2")
    assert vs.snapshot()["cursor"] == 1  # one bound service (S1) at or before the cursor
    vs.bind("S2")  # back at the end: S1 S3 S4 S2
    assert vs.snapshot()["cursor"] == 1
    # The next pick is the first after the old place of S2 (between S1 and S3).
    assert picks(vs, 4) == ["S3", "S4", "S2", "S1"]


def test_set_method_restarts_the_round(impl):
    def nine_then_one(reset):
        vs = make(impl, "ROUNDROBIN", (2, 3, 4))
        assert picks(vs, 8) == "S1 S2 S3 S1 S2 S3 S2 S3".split()
        assert vs.snapshot()["rr_round"] == 3
        if reset:
            vs.set_method("ROUNDROBIN")
            assert vs.snapshot()["rr_round"] == 1
        return vs.select()

    assert nine_then_one(reset=False) == "S3"  # round 4: only S3 weighs 4
    assert nine_then_one(reset=True) == "S1"  # round 1 had nothing after S3: round 2 from S1


def test_set_method_changes_the_measure(impl):
    vs = make(impl, "LEASTCONNECTION")
    vs.record("S1", bytes=10)
    vs.record("S2", bytes=5)
    vs.record("S3", bytes=7)
    for name in ("S2", "S3"):
        vs.begin(name)
    assert vs.select() == "S1"
    vs.set_method("LEASTBANDWIDTH")
    assert vs.method == "LEASTBANDWIDTH"
    assert vs.select() == "S2"
    assert vs.load("S3") == 7


def test_startup_round_robin_then_the_method(impl):
    vs = make(impl, "LEASTCONNECTION", (1, 1, 5), startup_rr_factor=4)
    for _ in range(10):
        vs.begin("S1")  # S1 would never be picked by least connection
    assert vs.startup_rr_factor == 4
    lefts = []
    for _ in range(4):
        vs.select()
        lefts.append(vs.startup_rr_left)
    assert lefts == [3, 2, 1, 0]
    assert [vs.info(n)["selected"] for n in ("S1", "S2", "S3")] == [2, 1, 1]
    # Least connection now: S3 (weight 5) until its Nw = 5/5 ties S2's 1/1, then S2.
    assert picks(vs, 5) == ["S3", "S3", "S3", "S3", "S2"]
    vs.set_method("LEASTCONNECTION")  # setting the method restarts startup round robin
    assert vs.startup_rr_left == 4
    assert vs.select() == "S3"  # plain round robin after the cursor (S2)
    assert vs.select() == "S1"


def test_round_robin_neither_uses_nor_counts_down_startup_round_robin(impl):
    vs = make(impl, "ROUNDROBIN", (1, 1, 5), startup_rr_factor=3)
    # Weighted from the first request: round 1 takes all, rounds 2..5 only S3.
    assert picks(vs, 10) == ["S1", "S2", "S3", "S3", "S3", "S3", "S3", "S1", "S2", "S3"]
    assert vs.startup_rr_left == 3
    vs.set_method("LEASTCONNECTION")  # now it counts: plain round robin after the cursor (S3)
    assert picks(vs, 3) == ["S1", "S2", "S3"]
    assert vs.startup_rr_left == 0
    assert vs.select() == "S3"  # least connection: Nw 3/1, 3/1, 7/5 (x 10000)


def test_startup_factor_applies_at_the_next_set_method(impl):
    vs = make(impl, "LEASTCONNECTION")
    vs.startup_rr_factor = 2
    assert (vs.startup_rr_factor, vs.startup_rr_left) == (2, 0)
    vs.set_method("LEASTCONNECTION")
    assert vs.startup_rr_left == 2


@pytest.mark.parametrize("method, counter", [("LEASTBANDWIDTH", "bytes"), ("LEASTPACKETS", "packets")])
def test_rtsp_nat_counts_control_traffic(impl, method, counter):
    plain = make(impl, method)
    nat = make(impl, method, rtsp_nat=True)
    assert (plain.rtsp_nat, nat.rtsp_nat) == (False, True)
    for vs in (plain, nat):
        vs.record("S1", control=True, **{counter: 100})
        vs.record("S1", **{counter: 3})
    assert plain.load("S1") == 3
    assert nat.load("S1") == 103
    plain.rtsp_nat = True
    plain.record("S1", control=True, **{counter: 10})
    assert plain.load("S1") == 13


def test_weight_changes_apply_to_the_next_pick(impl):
    vs = make(impl, "LEASTCONNECTION")
    assert picks(vs, 3) == ["S1", "S2", "S3"]
    vs.set_weight("S3", 2)
    assert vs.weight("S3") == 2
    assert vs.select() == "S3"  # Nw 5000 against 10000


def test_cap_limits_selections_per_second(impl):
    clock = impl.ManualClock(7.0)
    vs = impl.VirtualServer("ROUNDROBIN", clock=clock)
    vs.bind("S1")
    vs.bind("S2")
    vs._set_cap("S2", 1)
    assert picks(vs, 4) == ["S1", "S2", "S1", "S1"]
    assert vs.info("S2")["cap"] == 1
    clock.advance(1.0)
    assert picks(vs, 3) == ["S2", "S1", "S1"]
    vs._set_cap("S2", None)
    assert picks(vs, 2) == ["S2", "S1"]
    vs._set_cap("S1", 0)
    vs._set_cap("S2", 0)
    with pytest.raises(NoServiceAvailable):
        vs.select()


@pytest.mark.parametrize("method", ["LEASTCONNECTION", "LEASTRESPONSETIME"])
def test_score_is_the_documented_float(impl, method):
    """score() = float(load()) * 10000.0 / weight (LEASTRESPONSETIME: load() in seconds)."""
    vs = make(impl, method, range(1, 101))
    for k in range(1, 101):
        name = f"S{k}"
        for _ in range(k % 7 + 1):
            vs.begin(name)
        if method == "LEASTRESPONSETIME":
            vs.begin(name)
            vs.finish(name, ttfb=k / 3)
        n = (k % 7 + 1) * (round(k / 3 * 1e6) if method == "LEASTRESPONSETIME" else 1)
        load = n / 1e6 if method == "LEASTRESPONSETIME" else n
        assert vs.load(name) == load
        assert vs.score(name) == float(load) * 10000.0 / k
