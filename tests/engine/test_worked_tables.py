"""The worked tables of docs/methods.md that are not the vendor's, replayed row by
row on both engines, with what vs.explain() reports for each pick."""
import pytest

LC_WEIGHTED = [  # (Nw of S1, S2, S3 before the pick, the tie set, the pick)
    ((0, 0, 0), ("S1", "S2", "S3"), "S1"),
    ((10000, 0, 0), ("S2", "S3"), "S2"),
    ((10000, 5000, 0), ("S3",), "S3"),
    ((10000, 5000, 10000), ("S2",), "S2"),
    ((10000, 10000, 10000), ("S1", "S2", "S3"), "S3"),
    ((10000, 10000, 20000), ("S1", "S2"), "S1"),
]

LRTM_PROBES = [  # (N of S1, S2, S3 in ms before the pick, the pick)
    ((0, 0, 0), "S1"), ((1, 0, 0), "S2"), ((1, 3, 0), "S3"), ((1, 3, 2), "S1"),
    ((2, 3, 2), "S3"), ((2, 3, 4), "S1"), ((3, 3, 4), "S2"),
]

P2C_FOUR = [  # (N of S1..S4 before the pick, the two drawn, the pick)
    ((0, 0, 0, 0), ("S4", "S1"), "S4"), ((0, 0, 0, 1), ("S4", "S1"), "S1"),
    ((1, 0, 0, 1), ("S4", "S3"), "S3"), ((1, 0, 1, 1), ("S2", "S1"), "S2"),
    ((1, 1, 1, 1), ("S4", "S3"), "S4"), ((1, 1, 1, 2), ("S2", "S3"), "S2"),
]


def make(impl, method, weights):
    vs = impl.VirtualServer(method, clock=impl.ManualClock(0.0))
    for i, w in enumerate(weights, 1):
        vs.bind(f"S{i}", w)
    return vs


@pytest.mark.parametrize("row", range(len(LC_WEIGHTED)))
def test_leastconnection_weighted(impl, row):
    vs = make(impl, "LEASTCONNECTION", (1, 2, 1))
    for before, tie, pick in LC_WEIGHTED[: row + 1]:
        assert tuple(vs.score(n) for n in vs.services) == before
        assert vs.select() == pick
        e = vs.explain()
        assert (tuple(c.key for c in e.candidates), e.tie, e.reproduced) == (before, tie, True)


@pytest.mark.parametrize("row", range(len(LRTM_PROBES)))
def test_lrtm(impl, row):
    vs = make(impl, "LRTM", (1, 1, 1))
    for name, rtt in (("S1", 0.001), ("S2", 0.003), ("S3", 0.002)):
        vs.probe(name, rtt=rtt)
    for before, pick in LRTM_PROBES[: row + 1]:
        assert tuple(round(vs.load(n) * 1000) for n in vs.services) == before
        assert vs.select() == pick
        assert tuple(c.n for c in vs.explain().candidates) == tuple(ms * 1000 for ms in before)


@pytest.mark.parametrize("row", range(len(P2C_FOUR)))
def test_p2c(impl, row):
    vs = make(impl, "P2C", (1, 1, 1, 1))
    for before, drawn, pick in P2C_FOUR[: row + 1]:
        assert tuple(vs.load(n) for n in vs.services) == before
        assert vs.select() == pick
        assert vs.explain().drawn == drawn
