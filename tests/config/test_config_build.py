"""Engine vservers built from the config model, on both engines."""
from pathlib import Path

import pytest

from leastload.engine.errors import METHODS
from leastload.config import ConfigError, build, parse_netscaler
from leastload.sim.simulate import simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CONFIG = """\
add service S1 10.0.0.1 HTTP 80
add service S2 10.0.0.2 HTTP 80
add service S3 10.0.0.3 HTTP 80
set service S3 -weight 4
add lb vserver web HTTP 10.0.0.100 80 -lbMethod LEASTBANDWIDTH
bind lb vserver web S1 -weight 2
bind lb vserver web S2
bind lb vserver web S3
disable service S2
add lb vserver api HTTP -lbMethod ROUNDROBIN
bind lb vserver api S3 -weight 9
"""


def test_build_binds_in_order_with_weights_and_states(impl):
    clock = impl.ManualClock(0.0)
    vservers = build(parse_netscaler(CONFIG, "c.conf"), clock, impl)
    assert list(vservers) == ["web", "api"]
    web, api = vservers["web"], vservers["api"]
    assert (web.method, web.name, api.method) == ("LEASTBANDWIDTH", "web", "ROUNDROBIN")
    assert web.services == ("S1", "S2", "S3")
    # the binding's weight, else the service's, else 1
    assert [web.weight(n) for n in web.services] == [2, 1, 4] and api.weight("S3") == 9
    assert [web.state(n) for n in web.services] == ["UP", "OUT_OF_SERVICE", "UP"]
    assert api.state("S3") == "UP"


@pytest.mark.parametrize("method", ["USER_TOKEN", "STATICPROXIMITY"])
def test_a_method_the_engine_lacks_is_an_error_naming_its_line(impl, method):
    assert method not in METHODS  # methods of the vendor's the engine does not have
    text = CONFIG + f"set lb vserver api -lbMethod {method}\n"
    config = parse_netscaler(text, "c.conf")  # the model keeps it
    assert config.vserver("api").lb_method == method
    with pytest.raises(ConfigError) as info:
        build(config, impl.ManualClock(0.0), impl)
    assert str(info.value).startswith(f"c.conf:12: lbMethod {method} is not supported by this engine yet")


def test_slow_start_applies_to_services_bound_after_it_was_set(impl):
    from leastload.config import load

    config = load(EXAMPLES / "slowstart.conf")
    clock = impl.ManualClock(0.0)
    vs = build(config, clock, impl)["vs-slowstart"]
    assert [vs.slow_start(n) is not None for n in vs.services] == [False] * 4 + [True]
    assert (vs.new_service_request, vs.new_service_request_increment_interval) == (4, 10)
    sim = simulate(vs, clock, rate=100, duration=51)
    assert [sim.at(t)["Service5"] for t in range(0, 51, 10)] == [0, 4, 8, 12, 16, 20]  # the vendor's table
    assert [sim.at(t)["Service1"] for t in range(0, 51, 10)] == [25, 24, 23, 22, 21, 20]


def test_services_bound_before_and_after_slow_start_keep_their_order(impl):
    text = ("add service A 10.0.0.1 HTTP 80\nadd service B 10.0.0.2 HTTP 80\nadd service C 10.0.0.3 HTTP 80\n"
            "add lb vserver v HTTP -lbMethod ROUNDROBIN -newServiceRequest 5\n"
            "bind lb vserver v A\nbind lb vserver v B\nset lb vserver v -newServiceRequest 0\nbind lb vserver v C\n"
            "set lb vserver v -newServiceRequest 5\n")
    config = parse_netscaler(text, "o.conf")
    assert [b.slow_start for b in config.vserver("v").bindings] == [True, True, False]
    vs = build(config, impl.ManualClock(0.0), impl)["v"]
    assert vs.services == ("A", "B", "C")
    # A was bound alone (nobody to take its surplus: no slow start); B joined A in slow
    # start; turning slow start off ended B's; C was bound with it off
    assert [vs.slow_start(n) is not None for n in vs.services] == [False, False, False]
    assert vs.new_service_request == 5
