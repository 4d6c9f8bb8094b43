"""Random config models: printed as NetScaler lines or TOML, they parse back to
the same model, and printing is stable. LEASTLOAD_HYPOTHESIS_EXAMPLES lowers the
number of examples (300 at most). The [proxy] table exists in the TOML form only."""
import dataclasses
import os
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leastload.config import (LB_METHODS, Binding, Config, Monitor, Server, Service, VServer, parse_netscaler,
                              parse_toml, to_data, to_netscaler, to_toml)
from leastload.config.model import BUILTIN_MONITOR_TYPES, SERVICE_TYPES, UNMODELLED_BUILTIN_MONITORS
from leastload.config.printer import PROXY_COMMENT
from leastload.config.proxy_settings import SETTING as PROXY_SETTING

FIRST = string.ascii_letters + string.digits + "_"
REST = FIRST + "#. :@=-"
names = st.builds(lambda a, b: a + b, st.sampled_from(FIRST), st.text(REST, max_size=12))
ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
ipv6 = st.integers(1, 2**128 - 1).map(lambda n: str(__import__("ipaddress").IPv6Address(n)))
addresses = st.one_of(ipv4, ipv6)
domains = st.lists(st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8), min_size=1,
                   max_size=3).map(".".join)
maybe = lambda s: st.one_of(st.none(), s)  # noqa: E731


BUILTINS = set(BUILTIN_MONITOR_TYPES) | set(UNMODELLED_BUILTIN_MONITORS)
# a path: printable ASCII, quotes and backslashes included (the CLI printer escapes them)
paths = st.text(string.ascii_letters + string.digits + "/-._~%?=&\"\\", max_size=20).map(lambda t: "/" + t)


@st.composite
def monitors(draw, name):
    kind = draw(st.sampled_from(["HTTP", "TCP"]))
    interval_ms = draw(st.one_of(st.integers(2, 20940).map(lambda s: s * 1000), st.integers(2, 20_940_000)))
    resptimeout_ms = draw(st.one_of(st.just(min(2000, interval_ms - 1)),
                                    st.integers(1, min(interval_ms - 1, 20_939_000))))
    m = Monitor(name=name, monitor_type=kind, interval=interval_ms / 1000, resptimeout=resptimeout_ms / 1000,
                retries=draw(st.integers(1, 127)), success_retries=draw(st.integers(1, 32)))
    if kind == "HTTP":
        ranges = st.tuples(st.integers(100, 599), st.integers(0, 99)).map(lambda t: (t[0], min(599, t[0] + t[1])))
        m.resp_codes = tuple(draw(st.lists(st.one_of(ranges, st.integers(100, 599).map(lambda c: (c, c))),
                                           min_size=1, max_size=4)))
        m.http_request = (draw(st.sampled_from(["GET", "HEAD", "POST", "OPTIONS"])), draw(paths))
    return m


proxy_settings = st.fixed_dictionaries({}, optional={
    "retries": st.integers(0, 100),
    **{k: st.floats(0, 86400, exclude_min=True) for k in ("connect_timeout", "timeout", "client_timeout",
                                                            "header_timeout", "body_timeout", "tunnel_timeout",
                                                            "overload_timeout")},
    **{k: st.integers(PROXY_SETTING[k].low, PROXY_SETTING[k].high)
       for k in ("max_body", "max_request_line", "max_header_size", "max_headers", "max_connections", "pool_size")},
    "overload_connections": st.integers(1, 1 << 20),
    "linger_bytes": st.integers(0, 1 << 30),
    "xff": st.sampled_from(["append", "replace"]),
    "forwarded": st.booleans(), "via": st.booleans(),
    "admin": st.builds(lambda h, p: f"{h}:{p}", st.sampled_from(["127.0.0.1", "[::1]", "localhost", "0.0.0.0"]),
                       st.integers(0, 65535)),
    "access_log": st.text(min_size=1, max_size=20),
    "log_format": st.sampled_from(["combined", "json"]),
    "log_level": st.sampled_from(["DEBUG", "INFO", "WARNING", "ERROR"]),
    "workers": st.integers(1, 256),
})


@st.composite
def configs(draw):
    servers = [Server(n, draw(st.one_of(addresses, domains)))
               for n in draw(st.lists(names, max_size=3, unique=True))]
    monitor_list = [draw(monitors(n)) for n in draw(st.lists(names.filter(lambda n: n not in BUILTINS),
                                                              max_size=3, unique=True))]
    bindable = [m.name for m in monitor_list] + list(BUILTIN_MONITOR_TYPES)
    services = []
    for n in draw(st.lists(names, min_size=1, max_size=6, unique=True)):
        host = draw(st.one_of(addresses, st.sampled_from([s.name for s in servers]))) if servers \
            else draw(addresses)
        services.append(Service(
            name=n, host=host, service_type=draw(st.sampled_from(SERVICE_TYPES)), port=draw(st.integers(0, 65535)),
            weight=draw(maybe(st.integers(1, 100))), state=draw(st.sampled_from(["ENABLED", "DISABLED"])),
            ttfb=draw(maybe(st.floats(1e-6, 3600.0))), request_bytes=draw(maybe(st.integers(0, 10**9))),
            response_bytes=draw(maybe(st.integers(0, 10**9))),
            monitors=draw(st.lists(st.sampled_from(bindable), unique=True, max_size=3))))
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
    return Config(servers=servers, services=services, vservers=vservers, monitors=monitor_list)


@settings(max_examples=min(300, int(os.environ.get("LEASTLOAD_HYPOTHESIS_EXAMPLES", "300"))), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_print_parse_is_the_identity(config):
    printed = to_netscaler(config)
    again = parse_netscaler(printed, "p.conf")
    assert again == config and again.warnings == []
    assert to_netscaler(again) == printed
    from_toml = parse_toml(to_toml(config), "p.toml")
    assert from_toml == config and from_toml.warnings == []
    assert to_data(from_toml) == to_data(config)


@settings(max_examples=min(300, int(os.environ.get("LEASTLOAD_HYPOTHESIS_EXAMPLES", "300"))), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(configs(), proxy_settings)
def test_the_proxy_table_round_trips_in_the_toml_form(config, proxy):
    config.proxy = proxy
    text = to_toml(config)
    again = parse_toml(text, "p.toml")
    assert again == config and again.warnings == [] and to_toml(again) == text
    printed = to_netscaler(config)  # NetScaler lines cannot carry it: a comment says so
    assert printed.startswith(PROXY_COMMENT + "\n") if proxy else PROXY_COMMENT not in printed
    assert parse_netscaler(printed, "p.conf") == dataclasses.replace(config, proxy={})
