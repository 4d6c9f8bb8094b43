"""select_many(k): k distinct services in the method's order, for hedged requests."""
import pytest

from leastload.engine.errors import NoServiceAvailable


def make(impl, method="LEASTCONNECTION", weights=(1, 1, 1, 1)):
    vs = impl.VirtualServer(method, clock=impl.ManualClock(10.0))
    for k, weight in enumerate(weights, 1):
        vs.bind(f"S{k}", weight)
    return vs


def test_the_picks_follow_the_method_and_each_is_charged(impl):
    vs = make(impl)
    for name, active in (("S1", 3), ("S2", 1), ("S3", 0), ("S4", 2)):
        for _ in range(active):
            vs.begin(name)
    assert vs.select_many(3) == ["S3", "S2", "S4"]  # lowest N first, distinct
    assert [vs.active(n) for n in ("S1", "S2", "S3", "S4")] == [3, 2, 1, 3]


def test_it_equals_successive_selects_each_excluding_the_picks_before(impl):
    for method in ("ROUNDROBIN", "LEASTCONNECTION", "LEASTBANDWIDTH"):
        many, one = make(impl, method, (3, 1, 2, 1)), make(impl, method, (3, 1, 2, 1))
        for vs in (many, one):
            vs.record("S2", bytes=500)
            vs.select()
        expected = []
        for _ in range(3):
            expected.append(one.select(exclude=expected))
        assert many.select_many(3) == expected, method
        assert many.snapshot() == one.snapshot(), method


def test_exclude_and_too_few_eligible_give_fewer(impl):
    vs = make(impl)
    vs.set_state("S4", "DOWN")
    assert sorted(vs.select_many(4, exclude=["S1"])) == ["S2", "S3"]
    with pytest.raises(NoServiceAvailable):
        vs.select_many(2, exclude={"S1", "S2", "S3"})
    assert [vs.active(n) for n in ("S1", "S2", "S3", "S4")] == [0, 1, 1, 0]


@pytest.mark.parametrize("k, error", [(0, ValueError), (-2, ValueError), (1.0, TypeError), (True, TypeError),
                                      ("2", TypeError)])
def test_a_bad_k_is_refused_and_charges_nothing(impl, k, error):
    vs = make(impl)
    with pytest.raises(error, match=r"^k must be an int >= 1, got "):
        vs.select_many(k)
    assert [vs.active(n) for n in vs.services] == [0, 0, 0, 0]


def test_a_bad_exclude_charges_nothing(impl):
    vs = make(impl)
    with pytest.raises(TypeError, match="^exclude must be"):
        vs.select_many(2, exclude="S1")
    assert [vs.active(n) for n in vs.services] == [0, 0, 0, 0]


def test_with_a_hash_method_the_key_gives_its_next_best_services(impl):
    vs = make(impl, "URLHASH")
    one = make(impl, "URLHASH")
    picks = vs.select_many(3, key="/cart/42")
    assert picks[0] == one.select(key="/cart/42")  # the key's own service first
    assert len(set(picks)) == 3
    assert picks == [*picks[:1], one.select(key="/cart/42", exclude=picks[:1]),
                     one.select(key="/cart/42", exclude=picks[:2])]
