"""weights_from_utilization: weights from the load the services report, after gRPC's
weighted round robin (leastload.engine.utilization), on both engines.

The worked table (docs/methods.md): weight = qps / (utilization + eps / qps), counted
after a 10 s blackout from a service's first weighted report, dropped 3 minutes after its
last, applied to the engine once a second as integers 1..100 (the largest 100)."""
import pytest

from leastload.engine.utilization import weight_of

# (service, rps_fractional, eps, cpu_utilization, application_utilization) -> gRPC's weight
TABLE = [
    ("A", 100.0, 0.0, 0.5, 0.0, 200.0),          # 100 / 0.5
    ("B", 100.0, 10.0, 0.5, 0.0, 100.0 / 0.6),   # 100 / (0.5 + 10/100)
    ("C", 50.0, 0.0, 0.9, 0.25, 200.0),          # application_utilization first: 50 / 0.25
    ("D", 30.0, 0.0, 0.9, 0.0, 30.0 / 0.9),
]


def reporting(impl, method="ROUNDROBIN", **settings):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer(method, clock, weights_from_utilization=True, **settings)
    for name, *_ in TABLE:
        vs.bind(name)
    return vs, clock


def report_all(vs):
    for name, qps, eps, cpu, app, _ in TABLE:
        vs.report_utilization(name, rps_fractional=qps, eps=eps, cpu_utilization=cpu, application_utilization=app)


def test_the_worked_table(impl):
    vs, clock = reporting(impl)
    for name, qps, eps, cpu, app, weight in TABLE:
        got = vs.report_utilization(name, rps_fractional=qps, eps=eps, cpu_utilization=cpu,
                                    application_utilization=app)
        assert got == pytest.approx(weight, rel=1e-12) == weight_of(qps, eps, app or cpu)
    assert vs.utilization_weights() == {name: None for name, *_ in TABLE}  # in their blackout
    clock.advance(10.0)
    vs.select()  # a call that reads the clock: the once-a-second update runs
    assert vs.utilization_weights() == pytest.approx({name: w for name, *_, w in TABLE})
    # the engine's: the largest (200) is 100, the others their share, rounded
    assert [vs.weight(name) for name, *_ in TABLE] == [100, 83, 100, 17]


def test_blackout_expiry_and_the_mean_for_the_silent(impl):
    vs, clock = reporting(impl)
    vs.report_utilization("A", rps_fractional=100, cpu_utilization=0.5)
    clock.advance(10.0)
    vs.select()
    assert [vs.weight(name) for name, *_ in TABLE] == [1, 1, 1, 1]  # one weight: plain round robin
    vs.report_utilization("B", rps_fractional=100, cpu_utilization=0.25)  # 400: its blackout starts now
    clock.advance(5.0)
    vs.select()
    assert vs.utilization_weights()["B"] is None
    clock.advance(5.0)
    vs.select()
    # A 200, B 400; C and D said nothing: the mean, 300
    assert [vs.weight(name) for name, *_ in TABLE] == [50, 100, 75, 75]
    clock.advance(180.0)  # no report for 3 minutes: every weight expired
    vs.select()
    assert vs.utilization_weights() == {name: None for name, *_ in TABLE}
    assert [vs.weight(name) for name, *_ in TABLE] == [1, 1, 1, 1]


def test_a_report_that_cannot_weigh_keeps_the_last_weight(impl):
    vs, clock = reporting(impl)
    vs.report_utilization("A", rps_fractional=100, cpu_utilization=0.5)
    assert vs.report_utilization("A", rps_fractional=0, cpu_utilization=0.5) == 0.0  # no queries
    assert vs.report_utilization("A", rps_fractional=100) == 0.0  # no utilization
    clock.advance(10.0)
    assert vs.utilization_weights()["A"] == 200.0


def test_round_robin_follows_the_weights(impl):
    vs, clock = reporting(impl)
    report_all(vs)
    clock.advance(10.0)
    picks = [vs.select() for _ in range(300)]
    for name in picks:
        vs.finish(name)
    share = {name: picks.count(name) for name, *_ in TABLE}
    assert share == {"A": 100, "B": 83, "C": 100, "D": 17}  # one weighted round: 300 picks


def test_off_the_reports_change_no_weight(impl):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer("ROUNDROBIN", clock)
    vs.bind("A", 3)
    vs.bind("B", 5)
    vs.report_utilization("A", rps_fractional=100, cpu_utilization=0.9)
    clock.advance(30.0)
    vs.select()
    assert (vs.weight("A"), vs.weight("B")) == (3, 5)
    assert vs.utilization_weights()["A"] == pytest.approx(100 / 0.9)


@pytest.mark.parametrize("kw, error, text", [
    ({"cpu_utilization": -0.1}, ValueError, "cpu_utilization must be a finite number >= 0, got -0.1"),
    ({"eps": float("inf")}, ValueError, "eps must be a finite number >= 0, got inf"),
    ({"rps_fractional": "10"}, TypeError, "rps_fractional must be a number >= 0, got str '10'"),
    ({"application_utilization": True}, TypeError, "application_utilization must be a number >= 0, got bool True"),
])
def test_bad_reports_are_named_and_change_nothing(impl, kw, error, text):
    vs, clock = reporting(impl)
    with pytest.raises(error, match="^" + text):
        vs.report_utilization("A", **kw)
    with pytest.raises(Exception, match="unknown service 'Z'"):
        vs.report_utilization("Z", rps_fractional=1, cpu_utilization=0.5)
    clock.advance(10.0)
    assert vs.utilization_weights()["A"] is None
