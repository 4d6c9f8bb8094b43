"""The TOML form of the config model: good and bad documents, the line of each
error, and the round trip (TOML -> model -> NetScaler lines -> model)."""
import pytest

from leastload.config import ConfigError, load, parse_netscaler, parse_toml, to_netscaler, to_toml

BASE = """\
[server.web1]
address = "10.0.0.1"

[service.S1]
host = "web1"
type = "HTTP"
port = 80

[service.S2]
host = "10.0.0.2"
type = "http"
port = 80
"""  # 12 lines: a case's first line is 13


def parse(extra, strict=False):
    return parse_toml(BASE + extra, "t.toml", strict=strict)


GOOD = [
    ('[vserver.vs1]\ntype = "HTTP"\n', lambda c: c.vserver("vs1").lb_method == "LEASTCONNECTION"),
    ('[vserver.vs1]\ntype = "HTTP"\naddress = "10.0.0.100"\nport = 80\nmethod = "roundrobin"\n'
     'services = ["S1", { service = "S2", weight = 3 }]\n',
     lambda c: [(b.service, b.weight) for b in c.vserver("vs1").bindings] == [("S1", None), ("S2", 3)]),
    ('[vserver."vs one"]\ntype = "TCP"\nmethod = "SOURCEIPHASH"\nhash_length = 12\nnetmask = "255.255.0.0"\n',
     lambda c: (c.vserver("vs one").hash_length, c.vserver("vs one").netmask) == (12, "255.255.0.0")),
    ('[vserver.vs1]\ntype = "HTTP"\nnew_service_request = 4\nnew_service_request_increment_interval = 10\n'
     'services = ["S1", { service = "S2", slow_start = true }]\n',
     lambda c: [b.slow_start for b in c.vserver("vs1").bindings] == [False, True]),
    ('[service.S3]\nhost = "10.0.0.3"\ntype = "HTTP"\nport = 8080\nweight = 9\nstate = "disabled"\n'
     'ttfb = 0.05\nrequest_bytes = 10\nresponse_bytes = 20\n',
     lambda c: (c.service("S3").weight, c.service("S3").state, c.service("S3").ttfb) == (9, "DISABLED", 0.05)),
    ('[vserver.vs1]\ntype = "HTTP"\nnew_service_request = 30\nnew_service_request_unit = "PERCENT"\n',
     lambda c: c.vserver("vs1").new_service_request_unit == "PERCENT"),
]

BAD = [
    ('[vserver.vs1]\ntype = "HTTP"\nmethod = "FASTEST"\n', 15,
     "vserver 'vs1': method: must be one of ROUNDROBIN, "),
    ('[vserver.vs1]\ntype = "HTTP"\nservices = ["S9"]\n', 15, "vserver 'vs1': services: no service named 'S9'"),
    ('[vserver.vs1]\ntype = "HTTP"\nservices = ["S1", "S1"]\n', 15, "vserver 'vs1': services: 'S1' is listed twice"),
    ('[vserver.vs1]\ntype = "HTTP"\nservices = [{ service = "S1", weight = 0 }]\n', 15,
     "vserver 'vs1': services: weight: must be an integer in 1..100, got 0"),
    ('[vserver.vs1]\ntype = "HTTP"\nservices = [{ name = "S1" }]\n', 15,
     "vserver 'vs1': services: a table entry takes service = and optional weight = and slow_start =, got ['name']"),
    ('[vserver.vs1]\nmethod = "ROUNDROBIN"\n', 13, "vserver 'vs1': needs type ="),
    ('[vserver.vs1]\ntype = "HTTP"\naddress = "10.0.0.1"\n', 13, "vserver 'vs1': address and port go together"),
    ('[vserver.vs1]\ntype = "HTTP"\nnew_service_request = 200\nnew_service_request_unit = "PERCENT"\n', 15,
     "vserver 'vs1': new_service_request: must be an integer in 0..100 with PERCENT, got 200"),
    ('[vserver.vs1]\ntype = "HTTP"\nnew_service_request_increment_interval = -1\n', 15,
     "vserver 'vs1': new_service_request_increment_interval: must be an integer in 0..3600, got -1"),
    ('[vserver.vs1]\ntype = "HTTP"\nhash_length = "80"\n', 15,
     "vserver 'vs1': hash_length: must be an integer in 1..4096, got '80'"),
    ('[service.S3]\nhost = "web9"\ntype = "HTTP"\nport = 80\n', 14,
     "service 'S3': host: must be an IP address or a server's name, got 'web9'"),
    ('[service.S3]\nhost = "10.0.0.3"\ntype = "HTTP"\nport = 99999\n', 16,
     "service 'S3': port: must be an integer in 0..65535, got 99999"),
    ('[service.S3]\nhost = "10.0.0.3"\ntype = "HTTP"\nport = 80\nweight = true\n', 17,
     "service 'S3': weight: must be an integer in 1..100, got True"),
    ('[service.S3]\nhost = "10.0.0.3"\ntype = "HTTP"\nport = 80\nttfb = -1\n', 17,
     "service 'S3': ttfb: must be a number in (0, 3600], got -1"),
    ('[service.S3]\nhost = "10.0.0.3"\nport = 80\n', 13, "service 'S3': needs type ="),
    ('[service."bad!"]\nhost = "10.0.0.3"\ntype = "HTTP"\nport = 80\n', 13,
     "service 'bad!': name: must be a name of 1..127 characters"),
    ('[server.web2]\naddress = 10\n', 14, "server 'web2': address: must be a string, got 10"),
    ('[vserver.vs1]\ntype = "HTTP"\ntype = "TCP"\n', 15, "bad TOML: "),
    ('[vserver.vs1\n', 13, "bad TOML: "),
    ('[vserver]\nvs1 = 3\n', 14, "vserver.vs1: must be a table"),
    ('[service.S3]\nhost = "10.0.0.3"\ntype = "HTTP"\nport = "80"\n', 16,
     "service 'S3': port: must be an integer in 0..65535 or \"*\", got '80'"),
]

WARNED = [
    ('[vserver.vs1]\ntype = "HTTP"\npersistence = "SOURCEIP"\n', 15,
     "vserver 'vs1': key 'persistence' is not modelled by leastload, ignored"),
    ('[pool.p1]\ntype = "HTTP"\n', 13, "'pool' is not modelled by leastload, ignored (tables: server, monitor, "
                                      "service, vserver, proxy)"),
    ('[monitor.m1]\ntype = "PING"\n', 14, "monitor 'm1': type 'PING' is not modelled by leastload (it models HTTP "
                                         "and TCP), ignored"),
]


def test_the_corpus():
    assert len(GOOD) + len(BAD) + len(WARNED) >= 25


@pytest.mark.parametrize("text, check", GOOD)
def test_good_documents_parse_and_round_trip(text, check):
    config = parse(text)
    assert check(config) and config.warnings == []
    assert parse_netscaler(to_netscaler(config), "p.conf") == config
    assert parse_toml(to_toml(config), "p.toml") == config


@pytest.mark.parametrize("text, line, message", BAD)
def test_bad_documents_name_their_line(text, line, message):
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert str(info.value).startswith(f"t.toml:{line}: {message}")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text, line, warning", WARNED)
def test_unmodelled_keys_warn_and_strict_refuses(text, line, warning):
    assert parse(text).warnings == [f"t.toml:{line}: warning: {warning}"]
    with pytest.raises(ConfigError, match=rf"^t\.toml:{line}: "):
        parse(text, strict=True)


def test_the_examples_say_the_same_in_both_forms():
    """examples/slowstart.toml is examples/slowstart.conf in the TOML form."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples"
    conf, toml = load(root / "slowstart.conf"), load(root / "slowstart.toml")
    assert conf == toml and conf.warnings == toml.warnings == []
