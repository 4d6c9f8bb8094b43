"""show(): the vserver as data, printed like the vendor's `show lb vserver`."""
import dataclasses

import pytest

from leastload.engine.show import ServiceView, VServerView
from leastload.sim.simulate import simulate

VENDOR_LINE = "New Service Startup Request Rate: 5 PER_SECOND, Increment Interval: 10"


def br_lb(impl, method="LEASTBANDWIDTH"):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer(method, clock=clock, name="BR_LB")
    vs.bind("S1", 2)
    vs.bind("S2")
    # the vendor's example: set lb vserver BR_LB -newServiceRequest 5 PER_SECOND -newServiceRequestIncrementInterval 10
    vs.set(new_service_request=5, new_service_request_unit="PER_SECOND", new_service_request_increment_interval=10)
    return vs, clock


def rows(view):
    """The service rows of str(view): {name: [#), name, state, weight, N, Nw, active, cap, phase]}."""
    lines = str(view).splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "service"])
    out = {}
    for line in lines[start + 1:]:
        if line == "Done":
            break
        fields = line.split(None, 8)
        out[fields[1]] = fields
    return out


def test_show_is_data(impl):
    vs, clock = br_lb(impl)
    vs.record("S1", bytes=3000)
    view = vs.show()
    assert isinstance(view, VServerView)
    assert (view.name, view.method) == ("BR_LB", "LEASTBANDWIDTH")
    assert (view.new_service_request, view.new_service_request_unit, view.new_service_request_increment_interval) \
        == (5, "PER_SECOND", 10)
    assert (view.startup_rr_factor, view.startup_rr_left) == (0, 0)
    assert all(isinstance(s, ServiceView) for s in view.services)
    s1, s2 = view.services
    assert (s1.name, s1.state, s1.weight, s1.load, s1.score, s1.active, s1.cap, s1.phase) == \
        ("S1", "UP", 2, 3000, 15_000_000.0, 0, None, "normal")
    assert (s2.name, s2.weight, s2.load, s2.score) == ("S2", 1, 0, 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.method = "ROUNDROBIN"


def test_str_has_the_vendor_line(impl):
    vs, clock = br_lb(impl)
    text = str(vs.show())
    assert VENDOR_LINE in text.splitlines()
    assert text.splitlines()[0].startswith("BR_LB")
    assert "LEASTBANDWIDTH" in text.splitlines()[0]
    assert text.splitlines()[-1] == "Done"
    assert "State: UP" in text


def test_str_reflects_other_settings(impl):
    vs, clock = br_lb(impl)
    vs.set(new_service_request=25, new_service_request_unit="PERCENT", new_service_request_increment_interval=0,
           startup_rr_factor=100, method="LEASTPACKETS")
    text = str(vs.show())
    assert "New Service Startup Request Rate: 25 PERCENT, Increment Interval: 0" in text
    assert "LEASTPACKETS" in text.splitlines()[0]
    view = vs.show()
    assert (view.startup_rr_factor, view.startup_rr_left) == (100, 100)


def test_method_settings_line(impl):
    vs, clock = br_lb(impl)
    assert "Hash:" not in str(vs.show()) and "PEAKEWMA" not in str(vs.show())
    vs.set(method="PEAKEWMA", peakewma_decay=2.5)
    assert "PEAKEWMA decay: 2.5 s" in str(vs.show()).splitlines()
    vs.set(method="URLHASH", hashlength=40)
    assert "Hash: netmask 255.255.255.255, v6netmasklen 128, hashlength 40, hash_seed 0" in str(vs.show()).splitlines()


def test_rows_list_state_weight_n_nw_cap_and_phase(impl):
    vs, clock = br_lb(impl)
    vs.record("S1", bytes=3000)
    vs.record("S2", bytes=500)
    vs.bind("S3", 4)  # automated slow start, cap 0
    vs.bind("S4")
    vs.set_state("S4", "DOWN")  # DOWN: its ramp stays, it is just not UP
    got = rows(vs.show())
    assert list(got) == ["S1", "S2", "S3", "S4"]  # bind order
    assert got["S1"][1:] == ["S1", "UP", "2", "3000", "15000000.00", "0", "-", "normal"]
    assert got["S2"][1:] == ["S2", "UP", "1", "500", "5000000.00", "0", "-", "normal"]
    assert got["S3"][1:] == ["S3", "UP", "4", "0", "0.00", "0", "0", "slow start (0 increments)"]
    assert got["S4"][2] == "DOWN"
    assert [g[0] for g in got.values()] == ["1)", "2)", "3)", "4)"]


def test_rows_follow_the_ramp(impl):
    vs, clock = br_lb(impl, "ROUNDROBIN")
    vs.bind("S3")
    simulate(vs, clock, rate=60, duration=21)  # two boundaries: increments 2, cap 10 (x 3 < 60)
    got = rows(vs.show())
    assert got["S3"][2:] == ["UP", "1", "0", "0.00", "0", "10", "slow start (2 increments)"]
    vs.set(new_service_request_increment_interval=0)
    assert rows(vs.show())["S3"][7:] == ["5", "slow start (manual)"]
    vs.set(new_service_request=0)
    assert rows(vs.show())["S3"][7:] == ["-", "normal"]


def test_least_response_time_load_in_seconds(impl):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer("LEASTRESPONSETIME", clock=clock)
    vs.bind("S1", 4)
    vs.begin("S1")
    vs.finish("S1", ttfb=0.5)
    for _ in range(3):
        vs.begin("S1")
    s1 = vs.show().services[0]
    assert (s1.load, s1.score, s1.active) == (1.5, 3750.0, 3)  # 3 x 0.5 s; x 10000 / 4
    assert rows(vs.show())["S1"][3:7] == ["4", "1.5", "3750.00", "3"]


def test_show_reads_the_clock(impl):
    vs, clock = br_lb(impl)
    vs.record("S1", bytes=3000)
    clock.set(14.0)  # the bytes of second 0 leave the 14-second window
    assert vs.show().services[0].load == 0


def test_empty_and_all_down(impl):
    vs = impl.VirtualServer("ROUNDROBIN", clock=impl.ManualClock(0.0))
    view = vs.show()
    assert view.services == () and view.name == "vserver"
    assert str(view).splitlines()[-1] == "Done"
    vs.bind("S1")
    vs.set_state("S1", "DOWN")
    assert "State: DOWN" in str(vs.show())
