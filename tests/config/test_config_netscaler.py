"""NetScaler CLI lines -> the config model: a corpus of good and bad lines.

Every good line is parsed, checked, printed and parsed again (the round
trip, through the CLI printer and through the TOML form); every bad line
gives exactly one error naming its file and line.
"""
import pytest

from leastload.config import (ConfigError, parse_netscaler, parse_toml, to_data, to_netscaler,
                              to_toml)

BASE = """\
add server web1 10.0.0.1
add service S1 web1 HTTP 80
add service S2 10.0.0.2 HTTP 80
add lb vserver vs1 HTTP 10.0.0.100 80
"""
NEXT = 5  # the line number of a case's first line


def parse(extra, strict=False):
    return parse_netscaler(BASE + extra, "t.conf", strict=strict)


def vs(config, name="vs1"):
    return config.vserver(name)


def service(config, name):
    return config.service(name)


GOOD = [
    ("add lb vserver vs2 HTTP", lambda c: (vs(c, "vs2").address, vs(c, "vs2").port) == (None, None)),
    ("add lb vserver vs2 HTTP 10.0.0.5 *", lambda c: vs(c, "vs2").port == 65535),
    ("add lb vserver vs2 ssl 2001:DB8::1 443",
     lambda c: (vs(c, "vs2").service_type, vs(c, "vs2").address) == ("SSL", "2001:db8::1")),
    ("set lb vserver vs1 -lbMethod LEASTBANDWIDTH", lambda c: vs(c).lb_method == "LEASTBANDWIDTH"),
    ("set lb vserver vs1 -lbm leastpackets", lambda c: vs(c).lb_method == "LEASTPACKETS"),
    ("SET LB VSERVER vs1 -LBMETHOD RoundRobin", lambda c: vs(c).lb_method == "ROUNDROBIN"),
    ("set lb vserver vs1 -newServiceRequest 10",
     lambda c: (vs(c).new_service_request, vs(c).new_service_request_unit) == (10, "PER_SECOND")),
    ("set lb vserver vs1 -newServiceRequest 50 PERCENT -newServiceRequestIncrementInterval 5",
     lambda c: (vs(c).new_service_request, vs(c).new_service_request_unit,
                vs(c).new_service_request_increment_interval) == (50, "PERCENT", 5)),
    ("set lb vserver vs1 -newServiceRequestI 10", lambda c: vs(c).new_service_request_increment_interval == 10),
    ("set lb vserver vs1 -newServiceRequestUnit percent", lambda c: vs(c).new_service_request_unit == "PERCENT"),
    ("set lb vserver vs1 -hashLength 80 -netmask 255.255.255.0 -lbMethod SOURCEIPHASH",
     lambda c: (vs(c).hash_length, vs(c).netmask, vs(c).lb_method) == (80, "255.255.255.0", "SOURCEIPHASH")),
    ("set lb vserver vs1 -lbMethod LRTM", lambda c: vs(c).lb_method == "LRTM"),
    ("set lb vserver vs1 -lbMethod customload", lambda c: vs(c).lb_method == "CUSTOMLOAD"),
    ("set lb vserver vs1 -lbMethod LEASTREQUEST -hashl 4096", lambda c: vs(c).hash_length == 4096),
    ("bind lb vserver vs1 S1", lambda c: [(b.service, b.weight) for b in vs(c).bindings] == [("S1", None)]),
    ("bind lb vserver vs1 S2 -weight 5", lambda c: vs(c).bindings[0].weight == 5),
    ("bind lb vserver vs1 S2 -W 5", lambda c: vs(c).bindings[0].weight == 5),
    ("bind lb vserver vs1 S1 -weight 100\nbind lb vserver vs1 S2",
     lambda c: [b.service for b in vs(c).bindings] == ["S1", "S2"]),
    ("bind lb vserver vs1 S1\nbind lb vserver vs1 S2\nunbind lb vserver vs1 S1",
     lambda c: [b.service for b in vs(c).bindings] == ["S2"]),
    ("set service S1 -weight 7", lambda c: service(c, "S1").weight == 7),
    ("set service S1 -state DISABLED", lambda c: service(c, "S1").state == "DISABLED"),
    ("disable service S1", lambda c: service(c, "S1").state == "DISABLED"),
    ("disable service S1\nenable service S1", lambda c: service(c, "S1").state == "ENABLED"),
    ('add service "my svc" 10.0.0.9 HTTP 8080', lambda c: service(c, "my svc").port == 8080),
    ('add server "db 1" 10.0.0.7\nadd service db "db 1" MYSQL 3306', lambda c: service(c, "db").host == "db 1"),
    ("add service web#1@dc:a=b-c.d_e 10.0.0.9 HTTP 80", lambda c: service(c, "web#1@dc:a=b-c.d_e").port == 80),
    ("add service S3 10.0.0.3 TCP 443 -ttfb 0.25 -requestBytes 100 -responseBytes 9000",
     lambda c: (service(c, "S3").ttfb, service(c, "S3").request_bytes, service(c, "S3").response_bytes)
     == (0.25, 100, 9000)),
    ("   # an indented comment\n\n# another", lambda c: c == parse("")),
    ('add lb vserver "vs two" HTTP 10.1.1.1 80 -lbMethod LEASTCONNECTION',
     lambda c: vs(c, "vs two").lb_method == "LEASTCONNECTION"),
    ("add server host1 app.example.com", lambda c: c.server("host1").address == "app.example.com"),
    ("add service S4 10.0.0.4 HTTP 80\nbind lb vserver vs1 S4\nset lb vserver vs1 -newServiceRequest 4\n"
     "bind lb vserver vs1 S1",
     lambda c: [b.slow_start for b in vs(c).bindings] == [False, True]),
    ("set lb vserver vs1 -newServiceRequest 4\nbind lb vserver vs1 S1\nset lb vserver vs1 -newServiceRequest 0",
     lambda c: [b.slow_start for b in vs(c).bindings] == [False]),  # slow start off at the end: none in it
    ("add lb vserver vs2 HTTP\nbind lb vserver vs2 S1\nbind lb vserver vs1 S1",
     lambda c: [b.service for b in vs(c, "vs2").bindings] == [b.service for b in vs(c).bindings] == ["S1"]),
]

# (line, warning): lines the engine does not model; the rest of the line still applies
WARNED = [
    ("add lb monitor mon1 PING", "lb monitor 'mon1': type PING is not modelled by leastload (it models HTTP and TCP), "
                                 "ignored", lambda c: c.monitors == []),
    ("set lb monitor mon1 HTTP -interval 10", "command 'set lb monitor' is not modelled by leastload, ignored", None),
    ("set lb vserver vs1 -persistenceType SOURCEIP -lbMethod ROUNDROBIN",
     "option -persistenceType is not modelled by leastload, ignored", lambda c: vs(c).lb_method == "ROUNDROBIN"),
    ("disable service S1 30", "disable service: delay '30' is not modelled, ignored",
     lambda c: service(c, "S1").state == "DISABLED"),
    ("add service S4 10.0.0.4 HTTP 80 -maxClient 100",
     "option -maxClient is not modelled by leastload, ignored", lambda c: service(c, "S4").port == 80),
    ("rm service S1", "command 'rm service S1' is not modelled by leastload, ignored", None),
    ("bind lb vserver vs1 -policyName pol1 -priority 100 -gotoPriorityExpression END",
     "options -policyName, -priority, -gotoPriorityExpression are not modelled by leastload, ignored",
     lambda c: vs(c).bindings == []),
]

BAD = [
    ("add lb vserver vs1 HTTP 10.0.0.1 80", "lb vserver 'vs1' already exists"),
    ("add lb vserver vs2 HTTP 10.0.0.1", "add lb vserver: needs NAME TYPE [IP PORT], got vs2 HTTP 10.0.0.1"),
    ("add lb vserver", "add lb vserver: needs NAME TYPE [IP PORT], got nothing"),
    ("add lb vserver vs2 FOO 10.0.0.1 80", "service type: must be one of HTTP, FTP, "),
    ("add lb vserver vs2 HTTP 10.0.0.300 80", "IP address: must be an IPv4 or IPv6 address, got '10.0.0.300'"),
    ("add lb vserver vs2 HTTP 10.0.0.3 70000", "port: must be an integer in 0..65535, got 70000"),
    ("add lb vserver vs2 HTTP 10.0.0.3 http", "port: must be an integer in 0..65535, got 'http'"),
    ("set lb vserver vs1 -lbMethod FASTEST", "-lbMethod: must be one of ROUNDROBIN, LEASTCONNECTION, "),
    ("set lb vserver vs1 -newServiceRequest -3", "-newServiceRequest: must be an integer in 0..4294967294, got -3"),
    ("set lb vserver vs1 -newServiceRequest 150 PERCENT",
     "-newServiceRequest: must be an integer in 0..100 with PERCENT, got 150"),
    ("set lb vserver vs1 -newServiceRequest 4 PER_MINUTE",
     "newServiceRequestUnit: must be one of PER_SECOND, PERCENT, got 'PER_MINUTE'"),
    ("set lb vserver vs1 -newServiceRequest 4 PER_SECOND 10",
     "-newServiceRequest: needs a value and an optional unit (PER_SECOND or PERCENT)"),
    ("set lb vserver vs1 -newServiceRequestIncrementInterval 4000",
     "-newServiceRequestIncrementInterval: must be an integer in 0..3600, got 4000"),
    ("set lb vserver vs1 -hashLength 0", "-hashLength: must be an integer in 1..4096, got 0"),
    ("set lb vserver vs1 -netmask 255.0.255.0", "-netmask: must be an IPv4 netmask such as 255.255.255.0, "
                                                "got '255.0.255.0'"),
    ("set lb vserver vs1 -new 4", "-new: ambiguous, could be -newServiceRequest or -newServiceRequestUnit or "
                                  "-newServiceRequestIncrementInterval"),
    ("set lb vserver vs1 -lbMethod", "-lbMethod: needs a value"),
    ("set lb vserver vs1 -lbMethod ROUNDROBIN LEASTCONNECTION",
     "-lbMethod: needs one value, got 2: ROUNDROBIN LEASTCONNECTION"),
    ("set lb vserver vs9 -lbMethod ROUNDROBIN", "no lb vserver named 'vs9' (add lb vserver first)"),
    ("set lb vserver vs1", "set lb vserver: needs at least one option, e.g. -lbMethod"),
    ("set lb vserver vs1 -lbMethod ROUNDROBIN -lbm LEASTCONNECTION", "-lbMethod: given twice"),
    ("bind lb vserver vs1 S9", "no service named 'S9' (add service first)"),
    ("bind lb vserver vs1 S1 -weight 0", "-weight: must be an integer in 1..100, got 0"),
    ("bind lb vserver vs1 S1 -weight 101", "-weight: must be an integer in 1..100, got 101"),
    ("bind lb vserver vs1 S1 -weight two", "-weight: must be an integer in 1..100, got 'two'"),
    ("bind lb vserver vs1", "bind lb vserver: needs VSERVER SERVICE, got vs1"),
    ("unbind lb vserver vs1 S1", "service 'S1' is not bound to lb vserver 'vs1'"),
    ("add service S1 10.0.0.1 HTTP 80", "service 'S1' already exists"),
    ("add service S5 web9 HTTP 80", "no server named 'web9' (add server web9 ADDRESS first, or give an IP address)"),
    ("add service S5 10.0.0.5 HTTP", "add service: needs NAME IP|SERVER TYPE PORT, got S5 10.0.0.5 HTTP"),
    ('add service "bad name!" 10.0.0.5 HTTP 80', "service name: must be a name of 1..127 characters"),
    ('add service "S5 10.0.0.5 HTTP 80', 'a quoted name has no closing "'),
    ('add service "a \\"quoted\\" name" 10.0.0.9 HTTP 80', "service name: must be a name of 1..127 characters"),
    ('add service S"5 10.0.0.5 HTTP 80', "a \" inside 'S\"5': quote the whole name"),
    ("set service S1 -weight 0", "-weight: must be an integer in 1..100, got 0"),
    ("set service S1 -state OFF", "-state: must be one of ENABLED, DISABLED, got 'OFF'"),
    ("set service S9 -weight 2", "no service named 'S9' (add service first)"),
    ("set service S1", "set service: needs at least one option, e.g. -weight"),
    ("add server web1 10.0.0.9", "server 'web1' already exists"),
    ("add server web2 not_a_host!", "address: must be an IP address or a domain name, got 'not_a_host!'"),
    ("disable service S9", "no service named 'S9' (add service first)"),
    ("add service S5 10.0.0.5 HTTP 80 -ttfb 0", "-ttfb: must be a number in (0, 3600], got '0'"),
    ("add service S5 10.0.0.5 HTTP 80 -ttfb abc", "-ttfb: must be a number in (0, 3600], got 'abc'"),
    ("add service S5 10.0.0.5 HTTP 80 -requestBytes -1", "-requestBytes: must be an integer in 0..1000000000, got -1"),
    ("bind lb vserver vs1 S1\nbind lb vserver vs1 S1", "service 'S1' is already bound to lb vserver 'vs1'"),
]


def test_the_corpus_has_at_least_40_lines():
    lines = [line for case in (*GOOD, *WARNED, *BAD) for line in case[0].splitlines() if line.strip()]
    assert len(lines) >= 40


@pytest.mark.parametrize("text, check", GOOD, ids=[case[0][:50] for case in GOOD])
def test_good_lines_parse_and_round_trip(text, check):
    config = parse(text)
    assert check(config)
    assert config.warnings == []
    printed = to_netscaler(config)
    again = parse_netscaler(printed, "printed.conf")
    assert again == config and to_data(again) == to_data(config)
    assert to_netscaler(again) == printed  # printing is stable
    assert parse_toml(to_toml(config), "t.toml") == config  # the TOML form carries the same model


@pytest.mark.parametrize("text, warning, check", WARNED, ids=[case[0][:50] for case in WARNED])
def test_unmodelled_lines_warn_and_strict_refuses(text, warning, check):
    config = parse(text)
    assert config.warnings == [f"t.conf:{NEXT}: warning: {warning}"]
    if check is not None:
        assert check(config)
    assert parse_netscaler(to_netscaler(config), "p.conf") == config
    with pytest.raises(ConfigError) as info:
        parse(text, strict=True)
    assert str(info.value) == f"t.conf:{NEXT}: {warning} (--strict)"


@pytest.mark.parametrize("text, message", BAD, ids=[case[0][:50] for case in BAD])
def test_bad_lines_name_their_line(text, message):
    with pytest.raises(ConfigError) as info:
        parse(text)
    line = NEXT + text.count("\n")  # the last line of the case is the bad one
    text_of_error = str(info.value)
    assert text_of_error.startswith(f"t.conf:{line}: {message}")
    assert "\n" not in text_of_error
    assert (info.value.source, info.value.line) == ("t.conf", line)


def test_an_error_after_good_lines_names_the_right_line():
    text = BASE + "# comment\n\nbind lb vserver vs1 S1\nset service S2 -weight 500\n"
    with pytest.raises(ConfigError, match=r"^t\.conf:8: -weight: must be an integer in 1\.\.100, got 500$"):
        parse_netscaler(text, "t.conf")


def test_service_groups_are_not_modelled_and_their_bindings_warn():
    text = "add serviceGroup sg1 HTTP\nbind serviceGroup sg1 10.0.0.9 80\nbind lb vserver vs1 sg1\n"
    config = parse(text)
    assert config.warnings == [
        "t.conf:5: warning: command 'add serviceGroup sg1' is not modelled by leastload, ignored",
        "t.conf:6: warning: command 'bind serviceGroup sg1' is not modelled by leastload, ignored",
        "t.conf:7: warning: service group 'sg1' is not modelled by leastload, its binding ignored"]
    assert vs(config).bindings == []
    with pytest.raises(ConfigError, match=r"^t\.conf:7: no service named 'sg2'"):  # not a group either
        parse(text.replace("bind lb vserver vs1 sg1", "bind lb vserver vs1 sg2"))


def test_printed_lines_are_what_the_vendor_cli_reads():
    config = parse('add service "my svc" 10.0.0.9 HTTP 8080\nset service "my svc" -weight 3\n'
                   "bind lb vserver vs1 S1 -weight 2\nset lb vserver vs1 -lbMethod LEASTBANDWIDTH\n")
    assert to_netscaler(config).splitlines() == [
        "add server web1 10.0.0.1",
        "add service S1 web1 HTTP 80",
        "add service S2 10.0.0.2 HTTP 80",
        'add service "my svc" 10.0.0.9 HTTP 8080',
        'set service "my svc" -weight 3',
        "add lb vserver vs1 HTTP 10.0.0.100 80 -lbMethod LEASTBANDWIDTH",
        "bind lb vserver vs1 S1 -weight 2",
    ]


@pytest.mark.parametrize("order", [
    ["bind lb vserver vs1 S1", "set lb vserver vs1 -newServiceRequest 4 PER_SECOND", "bind lb vserver vs1 S2"],
    ["set lb vserver vs1 -newServiceRequest 4 PER_SECOND", "bind lb vserver vs1 S1",
     "set lb vserver vs1 -newServiceRequest 0", "bind lb vserver vs1 S2",
     "set lb vserver vs1 -newServiceRequest 4 PER_SECOND -newServiceRequestIncrementInterval 10"],
    ["bind lb vserver vs1 S1", "bind lb vserver vs1 S2", "set lb vserver vs1 -newServiceRequest 8"],
])
def test_slow_start_of_bindings_round_trips(order):
    config = parse("\n".join(order) + "\n")
    assert parse_netscaler(to_netscaler(config), "p.conf") == config
    assert parse_toml(to_toml(config), "p.toml") == config


SAVED_CONFIG = """\
#NS13.1 Build 49.13
# Last modified by `save config`, Tue Dec  1 03:00:00 2026
set ns config -IPAddress 10.0.0.5 -netmask 255.255.255.0
enable ns feature LB SSL
enable ns mode FR L3 Edge USNIP PMTUD
set ns httpParam -dropInvalReqs ON
add ns ip 10.0.0.6 255.255.255.0 -vServer DISABLED
add server web-01 10.1.0.11
add server web-02 10.1.0.12
add server web-03 10.1.0.13 -comment "rack B"
add serviceGroup sg-app HTTP -maxClient 0 -maxReq 0 -cip DISABLED -usip NO -useproxyport YES -cltTimeout 180 -svrTimeout 360 -CKA NO -TCPB NO -CMP YES
add service svc-web-01 web-01 HTTP 80 -gslb NONE -maxClient 0 -maxReq 0 -cip ENABLED X-Forwarded-For -usip NO -useproxyport YES -sp ON -cltTimeout 180 -svrTimeout 360 -CKA NO -TCPB NO -CMP YES
add service svc-web-02 web-02 HTTP 80 -gslb NONE -maxClient 0 -maxReq 0 -cip ENABLED X-Forwarded-For -usip NO -useproxyport YES -sp ON -cltTimeout 180 -svrTimeout 360 -CKA NO -TCPB NO -CMP YES
add service svc-web-03 web-03 HTTP 80 -gslb NONE -maxClient 0 -maxReq 0 -cip ENABLED X-Forwarded-For -usip NO -useproxyport YES -sp ON -cltTimeout 180 -svrTimeout 360 -CKA NO -TCPB NO -CMP YES
add lb vserver vs-web HTTP 10.0.0.100 80 -persistenceType NONE -lbMethod LEASTBANDWIDTH -cltTimeout 180
add lb vserver vs-app HTTP 10.0.0.101 80 -persistenceType SOURCEIP -timeout 10 -lbMethod ROUNDROBIN -newServiceRequest 10 PER_SECOND -newServiceRequestIncrementInterval 5
bind lb vserver vs-web svc-web-01
bind lb vserver vs-web svc-web-02 -weight 3
bind lb vserver vs-web svc-web-03
bind lb vserver vs-app sg-app
bind lb vserver vs-web -policyName rw-pol -priority 100 -gotoPriorityExpression END -type REQUEST
bind serviceGroup sg-app web-01 8080
add lb monitor mon-http HTTP -respCode 200 -httpRequest "HEAD /health"
bind service svc-web-01 -monitorName mon-http
set lb vserver vs-web -newServiceRequest 2 PERCENT
disable service svc-web-03
"""


def test_a_saved_appliance_config():
    """A config as `save config` writes it: what leastload models comes through,
    every other line is one warning naming it."""
    config = parse_netscaler(SAVED_CONFIG, "ns.conf")
    assert to_netscaler(config).splitlines() == [
        "add server web-01 10.1.0.11",
        "add server web-02 10.1.0.12",
        "add server web-03 10.1.0.13",
        'add lb monitor mon-http HTTP -httpRequest "HEAD /health"',
        "add service svc-web-01 web-01 HTTP 80",
        "bind service svc-web-01 -monitorName mon-http",
        "add service svc-web-02 web-02 HTTP 80",
        "add service svc-web-03 web-03 HTTP 80 -state DISABLED",
        "add lb vserver vs-web HTTP 10.0.0.100 80 -lbMethod LEASTBANDWIDTH",
        "bind lb vserver vs-web svc-web-01",
        "bind lb vserver vs-web svc-web-02 -weight 3",
        "bind lb vserver vs-web svc-web-03",
        "set lb vserver vs-web -newServiceRequest 2 PERCENT",
        "add lb vserver vs-app HTTP 10.0.0.101 80 -lbMethod ROUNDROBIN -newServiceRequest 10 PER_SECOND "
        "-newServiceRequestIncrementInterval 5",
    ]
    warned = [int(w.split(":")[1]) for w in config.warnings]
    assert warned == [3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16, 20, 21, 22]
    assert all(" warning: " in w for w in config.warnings)
