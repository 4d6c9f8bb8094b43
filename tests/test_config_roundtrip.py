"""Random config models: printed as NetScaler lines or TOML, they parse back to
the same model, and printing is stable. LEASTLOAD_HYPOTHESIS_EXAMPLES lowers the
number of examples (300 at most)."""
import os
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leastload.config import (LB_METHODS, Binding, Config, Server, Service, VServer, parse_netscaler,
                              parse_toml, to_netscaler, to_toml)
from leastload.config.model import SERVICE_TYPES

FIRST = string.ascii_letters + string.digits + "_"
REST = FIRST + "#. :@=-"
names = st.builds(lambda a, b: a + b, st.sampled_from(FIRST), st.text(REST, max_size=12))
ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
ipv6 = st.integers(1, 2**128 - 1).map(lambda n: str(__import__("ipaddress").IPv6Address(n)))
addresses = st.one_of(ipv4, ipv6)
domains = st.lists(st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8), min_size=1,
                   max_size=3).map(".".join)
maybe = lambda s: st.one_of(st.none(), s)  # noqa: E731


@st.composite
def configs(draw):
    servers = [Server(n, draw(st.one_of(addresses, domains)))
               for n in draw(st.lists(names, max_size=3, unique=True))]
    services = []
    for n in draw(st.lists(names, min_size=1, max_size=6, unique=True)):
        host = draw(st.one_of(addresses, st.sampled_from([s.name for s in servers]))) if servers \
            else draw(addresses)
        services.append(Service(
            name=n, host=host, service_type=draw(st.sampled_from(SERVICE_TYPES)), port=draw(st.integers(0, 65535)),
            weight=draw(maybe(st.integers(1, 100))), state=draw(st.sampled_from(["ENABLED", "DISABLED"])),
            ttfb=draw(maybe(st.floats(1e-6, 3600.0))), request_bytes=draw(maybe(st.integers(0, 10**9))),
            response_bytes=draw(maybe(st.integers(0, 10**9)))))
    vservers = []
    for n in draw(st.lists(names, max_size=3, unique=True)):
        unit = draw(st.sampled_from(["PER_SECOND", "PERCENT"]))
        rate = draw(st.integers(0, 100 if unit == "PERCENT" else 2**32 - 2))
        addressed = draw(st.booleans())
        bound = draw(st.lists(st.sampled_from([s.name for s in services]), unique=True))
        vservers.append(VServer(
            name=n, service_type=draw(st.sampled_from(SERVICE_TYPES)),
            address=draw(addresses) if addressed else None, port=draw(st.integers(0, 65535)) if addressed else None,
            lb_method=draw(st.sampled_from(LB_METHODS)), new_service_request=rate, new_service_request_unit=unit,
            new_service_request_increment_interval=draw(st.integers(0, 3600)),
            hash_length=draw(maybe(st.integers(1, 4096))),
            netmask=draw(maybe(st.integers(0, 32).map(lambda b: str(__import__("ipaddress").IPv4Network(
                f"0.0.0.0/{b}").netmask)))),
            bindings=[Binding(s, draw(maybe(st.integers(1, 100))), rate > 0 and draw(st.booleans())) for s in bound]))
    return Config(servers=servers, services=services, vservers=vservers)


@settings(max_examples=min(300, int(os.environ.get("LEASTLOAD_HYPOTHESIS_EXAMPLES", "300"))), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_print_parse_is_the_identity(config):
    printed = to_netscaler(config)
    again = parse_netscaler(printed, "p.conf")
    assert again == config and again.warnings == []
    assert to_netscaler(again) == printed
    from_toml = parse_toml(to_toml(config), "p.toml")
    assert from_toml == config and from_toml.warnings == []
