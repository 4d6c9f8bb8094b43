"""Health monitors (`add lb monitor`, `bind|unbind service -monitorName`) and the
TOML form's [proxy] table: every option and its default, every error with its
file:line, the warnings for what is not modelled, and round trips in both forms."""
import json

import pytest

from leastload.config import (PROXY_KEYS, ConfigError, Monitor, build, parse_netscaler, parse_toml, to_data,
                              to_json, to_netscaler, to_toml)
from leastload.config.printer import PROXY_COMMENT

from test_config_netscaler import BASE, NEXT, parse  # the same base config and line numbers


def mon(config, name="m1"):
    return config.monitor(name)


def round_trips(config):
    """NetScaler lines and the TOML form both carry the model; printing is stable."""
    printed = to_netscaler(config)
    again = parse_netscaler(printed, "p.conf")
    assert again == config and again.warnings == [] and to_data(again) == to_data(config)
    assert to_netscaler(again) == printed
    toml_text = to_toml(config)
    from_toml = parse_toml(toml_text, "p.toml")
    assert from_toml == config and from_toml.warnings == []
    assert to_toml(from_toml) == toml_text and to_netscaler(from_toml) == printed


# ---- NetScaler lines ------------------------------------------------------------

def test_the_defaults_are_the_vendors():
    config = parse("add lb monitor m1 HTTP\nadd lb monitor m2 TCP\n")
    assert config.monitors == [
        Monitor("m1", "HTTP", resp_codes=((200, 200),), http_request=("HEAD", "/"), interval=5.0,
                resptimeout=2.0, retries=3, success_retries=1),
        Monitor("m2", "TCP")]
    assert [m.line for m in config.monitors] == [5, 6]
    assert config.monitor("m9") is None
    assert config.service("S1").monitors == []
    assert to_netscaler(config).splitlines()[1:3] == ["add lb monitor m1 HTTP", "add lb monitor m2 TCP"]
    round_trips(config)


GOOD = [
    ("add lb monitor m1 tcp", lambda c: mon(c).monitor_type == "TCP"),
    ("ADD LB MONITOR m1 Http", lambda c: mon(c).monitor_type == "HTTP"),
    ("add lb monitor m1 HTTP -respCode 200-299", lambda c: mon(c).resp_codes == ((200, 299),)),
    ("add lb monitor m1 HTTP -respCode 200 302 400-404",
     lambda c: mon(c).resp_codes == ((200, 200), (302, 302), (400, 404))),
    ("add lb monitor m1 HTTP -respCode 100-599", lambda c: mon(c).resp_codes == ((100, 599),)),
    ("add lb monitor m1 HTTP -respCode 200-200", lambda c: mon(c).resp_codes == ((200, 200),)),
    ('add lb monitor m1 HTTP -httpRequest "GET /health"', lambda c: mon(c).http_request == ("GET", "/health")),
    ('add lb monitor m1 HTTP -httpRequest "OPTIONS /a/b?x=1&y=\\"2\\""',
     lambda c: mon(c).http_request == ("OPTIONS", '/a/b?x=1&y="2"')),
    ("add lb monitor m1 HTTP -interval 10", lambda c: mon(c).interval == 10),
    ("add lb monitor m1 HTTP -interval 10 SEC", lambda c: mon(c).interval == 10),
    ("add lb monitor m1 HTTP -interval 2 min", lambda c: mon(c).interval == 120),
    ("add lb monitor m1 HTTP -interval 349 MIN", lambda c: mon(c).interval == 20940),
    ("add lb monitor m1 HTTP -interval 20940", lambda c: mon(c).interval == 20940),
    ("add lb monitor m1 HTTP -interval 500 MSEC -resptimeout 250 MSEC",
     lambda c: (mon(c).interval, mon(c).resptimeout) == (0.5, 0.25)),
    ("add lb monitor m1 TCP -interval 3 -resptimeout 2999 msec", lambda c: mon(c).resptimeout == 2.999),
    ("add lb monitor m1 HTTP -interval 20940 -resptimeout 20939",
     lambda c: (mon(c).interval, mon(c).resptimeout) == (20940, 20939)),
    ("add lb monitor m1 HTTP -resptimeout 4", lambda c: mon(c).resptimeout == 4),  # < the default interval
    ("add lb monitor m1 HTTP -resptimeout 1 -interval 1001 MSEC", lambda c: mon(c).interval == 1.001),
    ("add lb monitor m1 TCP -retries 1", lambda c: mon(c).retries == 1),
    ("add lb monitor m1 TCP -retries 127 -successRetries 32",
     lambda c: (mon(c).retries, mon(c).success_retries) == (127, 32)),
    ("add lb monitor m1 HTTP -RESPCODE 201 -RespTimeout 1 -SUCCESSRETRIES 2",
     lambda c: (mon(c).resp_codes, mon(c).resptimeout, mon(c).success_retries) == (((201, 201),), 1, 2)),
    ("add lb monitor m1 HTTP -respC 204 -httpR \"HEAD /x\" -int 9 -respT 3 -ret 4 -succ 5",
     lambda c: (mon(c).resp_codes, mon(c).http_request, mon(c).interval, mon(c).resptimeout, mon(c).retries,
                mon(c).success_retries) == (((204, 204),), ("HEAD", "/x"), 9, 3, 4, 5)),
    ('add lb monitor "my mon" HTTP\nbind service S1 -monitorName "my mon"',
     lambda c: c.service("S1").monitors == ["my mon"]),
    ("add lb monitor m1 HTTP\nbind service S1 -monitorName m1", lambda c: c.service("S1").monitors == ["m1"]),
    ("add lb monitor m1 HTTP\nbind service S1 -m m1", lambda c: c.service("S1").monitors == ["m1"]),
    ("add lb monitor m1 HTTP\nadd lb monitor m2 TCP\nbind service S1 -monitorName m2\n"
     "bind service S1 -monitorName m1\nbind service S2 -monitorName m1",
     lambda c: (c.service("S1").monitors, c.service("S2").monitors) == (["m2", "m1"], ["m1"])),
    ("add lb monitor m1 HTTP\nbind service S1 -monitorName m1\nunbind service S1 -monitorName m1",
     lambda c: c.service("S1").monitors == []),
    ("add lb monitor m1 HTTP\nadd lb monitor m2 TCP\nbind service S1 -monitorName m1\n"
     "bind service S1 -monitorName m2\nunbind service S1 -monitorName m1",
     lambda c: c.service("S1").monitors == ["m2"]),
    ("add lb monitor m1 HTTP\nbind lb monitor m1 S1", lambda c: c.service("S1").monitors == ["m1"]),
    ("add lb monitor m1 HTTP\nbind lb monitor m1 S1\nunbind lb monitor m1 S1",
     lambda c: c.service("S1").monitors == []),
    ("bind service S1 -monitorName http\nbind service S1 -monitorName tcp",  # the vendor's built-in monitors
     lambda c: c.service("S1").monitors == ["http", "tcp"] and c.monitors == []
     and mon(c, "http") == Monitor("http", "HTTP") and mon(c, "tcp") == Monitor("tcp", "TCP")),
    ("add lb monitor m1 HTTP\nbind service S1 -monitorName m1\nset service S1 -weight 3\ndisable service S1",
     lambda c: c.service("S1").monitors == ["m1"] and c.service("S1").state == "DISABLED"),
]


@pytest.mark.parametrize("text, check", GOOD, ids=[case[0][:60] for case in GOOD])
def test_good_lines_parse_and_round_trip(text, check):
    config = parse(text)
    assert config.warnings == []
    assert check(config)
    round_trips(config)


def test_a_monitor_prints_back_as_the_vendors_lines_and_in_the_toml_form():
    config = parse('add lb monitor "web mon" HTTP -respCode 200 300-302 -httpRequest "GET /health" '
                   "-interval 500 MSEC -resptimeout 200 MSEC -retries 5 -successRetries 2\n"
                   "add lb monitor m2 TCP -interval 2 MIN -resptimeout 10\n"
                   'bind service S1 -monitorName "web mon"\nbind service S1 -monitorName m2\n'
                   "bind lb monitor http S2\n")
    assert to_netscaler(config).splitlines() == [
        "add server web1 10.0.0.1",
        'add lb monitor "web mon" HTTP -respCode 200 300-302 -httpRequest "GET /health" -interval 500 MSEC '
        "-resptimeout 200 MSEC -retries 5 -successRetries 2",
        "add lb monitor m2 TCP -interval 120 -resptimeout 10",
        "add service S1 web1 HTTP 80",
        'bind service S1 -monitorName "web mon"',
        "bind service S1 -monitorName m2",
        "add service S2 10.0.0.2 HTTP 80",
        "bind service S2 -monitorName http",
        "add lb vserver vs1 HTTP 10.0.0.100 80 -lbMethod LEASTCONNECTION",
    ]
    toml_text = to_toml(config)
    assert ('[monitor."web mon"]\ntype = "HTTP"\nresp_codes = [200, "300-302"]\nhttp_request = "GET /health"\n'
            "interval = 0.5\nresptimeout = 0.2\nretries = 5\nsuccess_retries = 2\n\n"
            '[monitor.m2]\ntype = "TCP"\ninterval = 120\nresptimeout = 10\n') in toml_text
    assert 'monitors = ["web mon", "m2"]' in toml_text and 'monitors = ["http"]' in toml_text
    data = json.loads(to_json(config))
    assert data["monitors"][0] == {"name": "web mon", "monitor_type": "HTTP", "resp_codes": [[200, 200], [300, 302]],
                                   "http_request": ["GET", "/health"], "interval": 0.5, "resptimeout": 0.2,
                                   "retries": 5, "success_retries": 2}
    assert [s["monitors"] for s in data["services"]] == [["web mon", "m2"], ["http"]]
    assert data["proxy"] == {}
    round_trips(config)


BAD = [
    ("add lb monitor", "add lb monitor: needs NAME TYPE, got nothing"),
    ("add lb monitor m1", "add lb monitor: needs NAME TYPE, got m1"),
    ("add lb monitor -interval 5", "add lb monitor: needs NAME TYPE, got nothing"),
    ("add lb monitor m1 HTTP\nadd lb monitor m1 TCP", "lb monitor 'm1' already exists"),
    ("add lb monitor m1 PING\nadd lb monitor m1 TCP", "lb monitor 'm1' already exists"),
    ("add lb monitor http HTTP", "lb monitor 'http' is one of the vendor's built-in monitors: give yours another name"),
    ("add lb monitor ping-default TCP", "lb monitor 'ping-default' is one of the vendor's built-in monitors"),
    ('add lb monitor "bad!" HTTP', "monitor name: must be a name of 1..127 characters"),
    ("add lb monitor m1 HTTP extra", "add lb monitor: unexpected argument 'extra'"),
    ("add lb monitor m1 HTTP -respCode", "-respCode: needs one or more codes or ranges, such as 200 or 200-299"),
    ("add lb monitor m1 HTTP -respCode 99",
     "-respCode: must be a status code in 100..599 or a range such as 200-299, got '99'"),
    ("add lb monitor m1 HTTP -respCode 200 600", "-respCode: must be a status code in 100..599 or a range such as "
                                                 "200-299, got '600'"),
    ("add lb monitor m1 HTTP -respCode 300-200", "-respCode: must be a status code in 100..599 or a range such as "
                                                 "200-299, got '300-200'"),
    ("add lb monitor m1 HTTP -respCode 2xx", "-respCode: must be a status code in 100..599 or a range such as "
                                             "200-299, got '2xx'"),
    ("add lb monitor m1 TCP -respCode 200", "-respCode: only for HTTP monitors, 'm1' is TCP"),
    ('add lb monitor m1 TCP -httpRequest "GET /"', "-httpRequest: only for HTTP monitors, 'm1' is TCP"),
    ('add lb monitor m1 HTTP -httpRequest "GET"',
     "-httpRequest: must be a method and a path such as \"GET /health\", got 'GET'"),
    ('add lb monitor m1 HTTP -httpRequest "GET health"',
     "-httpRequest: must be a method and a path such as \"GET /health\", got 'GET health'"),
    ('add lb monitor m1 HTTP -httpRequest "GET / HTTP/1.1"',
     "-httpRequest: must be a method and a path such as \"GET /health\", got 'GET / HTTP/1.1'"),
    ('add lb monitor m1 HTTP -httpRequest "G(E)T /"',
     "-httpRequest: must be a method and a path such as \"GET /health\", got 'G(E)T /'"),
    ("add lb monitor m1 HTTP -httpRequest GET /health",
     '-httpRequest: needs one quoted value, such as "GET /health", got GET /health'),
    ("add lb monitor m1 HTTP -httpRequest", '-httpRequest: needs one quoted value, such as "GET /health", got nothing'),
    ("add lb monitor m1 HTTP -interval 0", "-interval: must be an integer in 1..20940, got 0"),
    ("add lb monitor m1 HTTP -interval 20941", "-interval: must be an integer in 1..20940, got 20941"),
    ("add lb monitor m1 HTTP -interval five", "-interval: must be an integer in 1..20940, got 'five'"),
    ("add lb monitor m1 HTTP -interval 350 MIN", "-interval: must be an integer in 1..349 with MIN, got 350"),
    ("add lb monitor m1 HTTP -interval 20940001 MSEC",
     "-interval: must be an integer in 1..20940000 with MSEC, got 20940001"),
    ("add lb monitor m1 HTTP -interval 5 HOURS", "-interval unit: must be one of SEC, MSEC, MIN, got 'HOURS'"),
    ("add lb monitor m1 HTTP -interval 5 SEC 3", "-interval: needs a value and an optional unit (SEC, MSEC or MIN)"),
    ("add lb monitor m1 HTTP -interval", "-interval: needs a value and an optional unit (SEC, MSEC or MIN)"),
    ("add lb monitor m1 HTTP -resptimeout 0", "-resptimeout: must be an integer in 1..20939, got 0"),
    ("add lb monitor m1 HTTP -interval 20940 -resptimeout 20940",
     "-resptimeout: must be an integer in 1..20939, got 20940"),
    ("add lb monitor m1 HTTP -resptimeout 5", "-resptimeout: the response timeout (5 s) must be less than the "
                                              "interval (5 s)"),
    ("add lb monitor m1 HTTP -interval 2",
     "-interval: the response timeout (2 s) must be less than the interval (2 s)"),
    ("add lb monitor m1 HTTP -interval 1500 MSEC",
     "-interval: the response timeout (2 s) must be less than the interval (1.5 s)"),
    ("add lb monitor m1 HTTP -interval 1 MIN -resptimeout 60000 MSEC",
     "-resptimeout: the response timeout (60 s) must be less than the interval (60 s)"),
    ("add lb monitor m1 HTTP -retries 0", "-retries: must be an integer in 1..127, got 0"),
    ("add lb monitor m1 HTTP -retries 128", "-retries: must be an integer in 1..127, got 128"),
    ("add lb monitor m1 HTTP -retries 3 4", "-retries: needs one value, got 2: 3 4"),
    ("add lb monitor m1 HTTP -successRetries 0", "-successRetries: must be an integer in 1..32, got 0"),
    ("add lb monitor m1 HTTP -successRetries 33", "-successRetries: must be an integer in 1..32, got 33"),
    ("add lb monitor m1 HTTP -successRetries", "-successRetries: needs a value"),
    ("add lb monitor m1 HTTP -resp 200", "-resp: ambiguous, could be -respCode or -resptimeout"),
    ("add lb monitor m1 HTTP -interval 5 -int 6", "-interval: given twice"),
    ("add lb monitor m1 HTTP\nbind service S9 -monitorName m1", "no service named 'S9' (add service first)"),
    ("bind service S1 -monitorName m9", "no lb monitor named 'm9' (add lb monitor first)"),
    ("bind service S1 -monitorName HTTP", "no lb monitor named 'HTTP' (add lb monitor first)"),  # names keep case
    ("bind service S1", "bind service: needs NAME -monitorName MONITOR"),
    ("bind service", "bind service: needs NAME -monitorName MONITOR, got nothing"),
    ("add lb monitor m1 HTTP\nbind service S1 S2 -monitorName m1",
     "bind service: needs NAME -monitorName MONITOR, got S1 S2"),
    ("add lb monitor m1 HTTP\nbind service S1 -monitorName", "-monitorName: needs a value"),
    ("add lb monitor m1 HTTP\nadd lb monitor m2 HTTP\nbind service S1 -monitorName m1 m2",
     "-monitorName: needs one value, got 2: m1 m2"),
    ("add lb monitor m1 HTTP\nbind service S1 -monitorName m1\nbind service S1 -monitorName m1",
     "lb monitor 'm1' is already bound to service 'S1'"),
    ("add lb monitor m1 HTTP\nunbind service S1 -monitorName m1", "lb monitor 'm1' is not bound to service 'S1'"),
    ("unbind service S1 -monitorName m9", "no lb monitor named 'm9' (add lb monitor first)"),
    ("unbind service S1", "unbind service: needs NAME -monitorName MONITOR"),
    ("add lb monitor m1 HTTP\nbind lb monitor m1", "bind lb monitor: needs MONITOR SERVICE, got m1"),
    ("add lb monitor m1 HTTP\nbind lb monitor m1 S9", "no service named 'S9' (add service first)"),
    ("unbind lb monitor m9 S1", "no lb monitor named 'm9' (add lb monitor first)"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[case[0][:60] for case in BAD])
def test_bad_lines_name_their_line(text, message):
    with pytest.raises(ConfigError) as info:
        parse(text)
    line = NEXT + text.count("\n")  # the last line of the case is the bad one
    assert str(info.value).startswith(f"t.conf:{line}: {message}")
    assert "\n" not in str(info.value)
    assert (info.value.source, info.value.line) == ("t.conf", line)


# (lines, [(line offset, warning)], check): one warning per unmodelled line; the rest applies
WARNED = [
    ("add lb monitor p1 PING -destIP 10.0.0.9 -LRTM ENABLED",
     [(0, "lb monitor 'p1': type PING is not modelled by leastload (it models HTTP and TCP), ignored")],
     lambda c: c.monitors == [] and c.monitor("p1") is None),
    ("add lb monitor e1 HTTP-ECV -send \"GET /\" -recv OK",
     [(0, "lb monitor 'e1': type HTTP-ECV is not modelled by leastload (it models HTTP and TCP), ignored")],
     lambda c: c.monitors == []),
    ("add lb monitor p1 ping\nbind service S1 -monitorName p1\nunbind service S1 -monitorName p1",
     [(0, "lb monitor 'p1': type ping is not modelled by leastload (it models HTTP and TCP), ignored"),
      (1, "lb monitor 'p1' is not modelled by leastload, its binding ignored"),
      (2, "lb monitor 'p1' is not modelled by leastload, its binding ignored")],
     lambda c: c.service("S1").monitors == []),
    ("bind service S1 -monitorName ping", [(0, "lb monitor 'ping' is not modelled by leastload, its binding ignored")],
     lambda c: c.service("S1").monitors == []),
    ("bind lb monitor tcp-default S1",
     [(0, "lb monitor 'tcp-default' is not modelled by leastload, its binding ignored")],
     lambda c: c.service("S1").monitors == []),
    ("add lb monitor m1 HTTP -secure YES -interval 10",
     [(0, "option -secure is not modelled by leastload, ignored")], lambda c: mon(c).interval == 10),
    ("add lb monitor m1 HTTP\nbind service S1 -monitorName m1 -weight 2",
     [(1, "option -weight is not modelled by leastload, ignored")], lambda c: c.service("S1").monitors == ["m1"]),
    ("bind service S1 -policyName pol1 -priority 10",
     [(0, "options -policyName, -priority are not modelled by leastload, ignored")],
     lambda c: c.service("S1").monitors == []),
    ("add lb monitor m1 HTTP\nset lb monitor m1 HTTP -interval 10",
     [(1, "command 'set lb monitor' is not modelled by leastload, ignored")], lambda c: mon(c).interval == 5),
    ("add lb monitor m1 HTTP\nrm lb monitor m1 HTTP",
     [(1, "command 'rm lb monitor' is not modelled by leastload, ignored")], lambda c: mon(c) is not None),
]


@pytest.mark.parametrize("text, warnings, check", WARNED, ids=[case[0][:60] for case in WARNED])
def test_unmodelled_monitors_warn_once_a_line_and_strict_refuses(text, warnings, check):
    config = parse(text)
    assert config.warnings == [f"t.conf:{NEXT + offset}: warning: {w}" for offset, w in warnings]
    assert check(config)
    assert parse_netscaler(to_netscaler(config), "p.conf") == config
    assert parse_toml(to_toml(config), "p.toml") == config
    offset, first = warnings[0]
    with pytest.raises(ConfigError) as info:
        parse(text, strict=True)
    assert str(info.value) == f"t.conf:{NEXT + offset}: {first} (--strict)"


def test_engines_and_simulate_ignore_monitors(impl, tmp_path, capsys):
    from leastload.cli import showconfig
    from leastload.sim import simulate

    text = BASE + ("add lb monitor m1 HTTP -respCode 200-299\nadd lb monitor m2 TCP\n"
                   "bind service S1 -monitorName m1\nbind service S2 -monitorName m2\n"
                   "bind service S2 -monitorName http\n"
                   "bind lb vserver vs1 S1\nbind lb vserver vs1 S2\n")
    config = parse_netscaler(text, "c.conf")
    vs = build(config, impl.ManualClock(0.0), impl)["vs1"]
    assert vs.services == ("S1", "S2") and [vs.state(n) for n in vs.services] == ["UP", "UP"]
    conf = tmp_path / "m.conf"
    conf.write_text(text)
    assert showconfig.main([str(conf)]) == 0
    assert capsys.readouterr().out == to_netscaler(config)
    assert simulate.main([str(conf), "--duration", "2"]) == 0
    out = capsys.readouterr().out
    assert "S1" in out and "S2" in out


# ---- the TOML form ----------------------------------------------------------------

TOML_BASE = """\
[server.web1]
address = "10.0.0.1"

[monitor.m1]
type = "HTTP"

[service.S1]
host = "web1"
type = "HTTP"
port = 80
"""  # 10 lines: a case's first line is 11


def parse_t(extra, strict=False):
    return parse_toml(TOML_BASE + extra, "t.toml", strict=strict)


TOML_GOOD = [
    ("", lambda c: c.monitors == [Monitor("m1", "HTTP")] and c.monitors[0].line == 4 and c.proxy == {}),
    ('[monitor.m2]\ntype = "tcp"\ninterval = 0.5\nresptimeout = 0.001\nretries = 127\nsuccess_retries = 32\n',
     lambda c: mon(c, "m2") == Monitor("m2", "TCP", interval=0.5, resptimeout=0.001, retries=127,
                                       success_retries=32)),
    ('[monitor.m2]\ntype = "HTTP"\nresp_codes = [200, "201", "300-399"]\nhttp_request = "GET /health"\n'
     "interval = 20940\nresptimeout = 20938.999\n",
     lambda c: (mon(c, "m2").resp_codes, mon(c, "m2").http_request, mon(c, "m2").interval,
                mon(c, "m2").resptimeout) == (((200, 200), (201, 201), (300, 399)), ("GET", "/health"), 20940,
                                              20938.999)),
    ('[service.S2]\nhost = "10.0.0.2"\ntype = "HTTP"\nport = 80\nmonitors = ["m1", "http", "tcp"]\n',
     lambda c: c.service("S2").monitors == ["m1", "http", "tcp"]),
    ('[service.S2]\nhost = "10.0.0.2"\ntype = "HTTP"\nport = 80\nmonitors = []\n',
     lambda c: c.service("S2").monitors == []),
    ('[monitor."my mon"]\ntype = "HTTP"\n[service.S2]\nhost = "10.0.0.2"\ntype = "HTTP"\nport = 80\n'
     'monitors = ["my mon"]\n', lambda c: c.service("S2").monitors == ["my mon"]),
    ("[proxy]\nretries = 0\nconnect_timeout = 3\ntimeout = 30.5\nclient_timeout = 86400\nheader_timeout = 0.001\n"
     "body_timeout = 60\ntunnel_timeout = 7200\nmax_body = 1\nmax_request_line = 8192\nmax_header_size = 32768\nmax_headers = 100\n"
     'max_connections = 1000\npool_size = 256\noverload_connections = 750\noverload_timeout = 1.5\n'
     'linger_bytes = 0\nxff = "Replace"\nforwarded = true\nvia = false\nbackend_header = "X-Served-By"\n'
     'tls_cert = ["a.crt", "b.crt"]\ntls_key = ["a.key", "b.key"]\naccept_proxy = true\n'
     'admin = "127.0.0.1:9000"\naccess_log = "-"\nlog_format = "json"\nlog_level = "info"\nworkers = 256\n',
     lambda c: c.proxy == {
         "retries": 0, "connect_timeout": 3.0, "timeout": 30.5, "client_timeout": 86400.0, "header_timeout": 0.001,
         "body_timeout": 60.0, "tunnel_timeout": 7200.0, "max_body": 1, "max_request_line": 8192, "max_header_size": 32768,
         "max_headers": 100, "max_connections": 1000, "pool_size": 256, "overload_connections": 750,
         "overload_timeout": 1.5, "linger_bytes": 0, "xff": "replace", "forwarded": True,
         "via": False, "backend_header": "X-Served-By", "tls_cert": ["a.crt", "b.crt"],
         "tls_key": ["a.key", "b.key"], "accept_proxy": True, "admin": "127.0.0.1:9000", "access_log": "-", "log_format": "json", "log_level": "INFO",
         "workers": 256} and list(c.proxy) == list(PROXY_KEYS) and isinstance(c.proxy["connect_timeout"], float)),
    ('[proxy]\nadmin = "[::1]:0"\nretries = 10\nworkers = 1\naccess_log = "/var/log/ll \\"x\\".log"\n',
     lambda c: c.proxy == {"admin": "[::1]:0", "retries": 10, "workers": 1, "access_log": '/var/log/ll "x".log'}),
    ('[proxy]\nadmin = "localhost:65535"\n', lambda c: c.proxy == {"admin": "localhost:65535"}),
]


@pytest.mark.parametrize("text, check", TOML_GOOD, ids=[case[0][:60] for case in TOML_GOOD])
def test_good_toml_parses_and_round_trips(text, check):
    config = parse_t(text)
    assert config.warnings == []
    assert check(config)
    toml_text = to_toml(config)
    again = parse_toml(toml_text, "p.toml")
    assert again == config and again.warnings == [] and to_toml(again) == toml_text
    printed = to_netscaler(config)
    assert parse_netscaler(printed, "p.conf").proxy == {}  # NetScaler lines cannot carry [proxy]
    assert printed.startswith(PROXY_COMMENT + "\n") == bool(config.proxy)
    config.proxy = {}
    round_trips(config)


TOML_BAD = [
    ('[monitor.m2]\ninterval = 10\n', 11, "monitor 'm2': needs type ="),
    ('[monitor.m2]\ntype = 3\n', 12, "monitor 'm2': type: must be a string, got 3"),
    ('[monitor]\nm2 = 3\n', 12, "monitor.m2: must be a table"),
    ('[monitor.http]\ntype = "HTTP"\n', 11,
     "monitor 'http' is one of the vendor's built-in monitors: give yours another name"),
    ('[monitor."bad!"]\ntype = "HTTP"\n', 11, "monitor 'bad!': name: must be a name of 1..127 characters"),
    ('[monitor.m2]\ntype = "HTTP"\nresp_codes = 200\n', 13,
     "monitor 'm2': resp_codes: must be a list of status codes and ranges, such as [200, \"300-302\"], got 200"),
    ('[monitor.m2]\ntype = "HTTP"\nresp_codes = []\n', 13, "monitor 'm2': resp_codes: must be a list"),
    ('[monitor.m2]\ntype = "HTTP"\nresp_codes = [200, 700]\n', 13,
     "monitor 'm2': resp_codes: must be a status code in 100..599 or a range such as 200-299, got 700"),
    ('[monitor.m2]\ntype = "HTTP"\nresp_codes = ["299-200"]\n', 13,
     "monitor 'm2': resp_codes: must be a status code in 100..599 or a range such as 200-299, got '299-200'"),
    ('[monitor.m2]\ntype = "HTTP"\nresp_codes = [true]\n', 13,
     "monitor 'm2': resp_codes: must be a status code in 100..599 or a range such as 200-299, got True"),
    ('[monitor.m2]\ntype = "TCP"\nresp_codes = [200]\n', 13,
     "monitor 'm2': resp_codes: only for HTTP monitors, this one is TCP"),
    ('[monitor.m2]\ntype = "TCP"\nhttp_request = "GET /"\n', 13,
     "monitor 'm2': http_request: only for HTTP monitors, this one is TCP"),
    ('[monitor.m2]\ntype = "HTTP"\nhttp_request = "/health"\n', 13,
     "monitor 'm2': http_request: must be a method and a path such as \"GET /health\", got '/health'"),
    ('[monitor.m2]\ntype = "HTTP"\nhttp_request = 1\n', 13,
     "monitor 'm2': http_request: must be a method and a path such as \"GET /health\", got 1"),
    ('[monitor.m2]\ntype = "HTTP"\ninterval = 0\n', 13,
     "monitor 'm2': interval: must be a number of seconds in [0.001, 20940], whole milliseconds, got 0"),
    ('[monitor.m2]\ntype = "HTTP"\ninterval = 20940.001\n', 13,
     "monitor 'm2': interval: must be a number of seconds in [0.001, 20940], whole milliseconds, got 20940.001"),
    ('[monitor.m2]\ntype = "HTTP"\ninterval = 2.0005\n', 13,
     "monitor 'm2': interval: must be a number of seconds in [0.001, 20940], whole milliseconds, got 2.0005"),
    ('[monitor.m2]\ntype = "HTTP"\ninterval = "5"\n', 13, "monitor 'm2': interval: must be a number of seconds"),
    ('[monitor.m2]\ntype = "HTTP"\ninterval = true\n', 13, "monitor 'm2': interval: must be a number of seconds"),
    ('[monitor.m2]\ntype = "HTTP"\ninterval = inf\n', 13, "monitor 'm2': interval: must be a number of seconds"),
    ('[monitor.m2]\ntype = "HTTP"\nresptimeout = 20940\ninterval = 20940\n', 13,
     "monitor 'm2': resptimeout: must be a number of seconds in [0.001, 20939], whole milliseconds, got 20940"),
    ('[monitor.m2]\ntype = "HTTP"\nresptimeout = 5\n', 13,
     "monitor 'm2': resptimeout: the response timeout (5 s) must be less than the interval (5 s)"),
    ('[monitor.m2]\ntype = "HTTP"\ninterval = 1.5\n', 13,
     "monitor 'm2': interval: the response timeout (2 s) must be less than the interval (1.5 s)"),
    ('[monitor.m2]\ntype = "HTTP"\nretries = 0\n', 13, "monitor 'm2': retries: must be an integer in 1..127, got 0"),
    ('[monitor.m2]\ntype = "HTTP"\nretries = 128\n', 13,
     "monitor 'm2': retries: must be an integer in 1..127, got 128"),
    ('[monitor.m2]\ntype = "HTTP"\nretries = "3"\n', 13,
     "monitor 'm2': retries: must be an integer in 1..127, got '3'"),
    ('[monitor.m2]\ntype = "HTTP"\nsuccess_retries = 33\n', 13,
     "monitor 'm2': success_retries: must be an integer in 1..32, got 33"),
    ('[monitor.m2]\ntype = "HTTP"\nsuccess_retries = 0\n', 13,
     "monitor 'm2': success_retries: must be an integer in 1..32, got 0"),
    ('[service.S2]\nhost = "10.0.0.2"\ntype = "HTTP"\nport = 80\nmonitors = "m1"\n', 15,
     "service 'S2': monitors: must be a list of monitor names, got 'm1'"),
    ('[service.S2]\nhost = "10.0.0.2"\ntype = "HTTP"\nport = 80\nmonitors = ["m9"]\n', 15,
     "service 'S2': monitors: no monitor named 'm9'"),
    ('[service.S2]\nhost = "10.0.0.2"\ntype = "HTTP"\nport = 80\nmonitors = [1]\n', 15,
     "service 'S2': monitors: no monitor named 1"),
    ('[service.S2]\nhost = "10.0.0.2"\ntype = "HTTP"\nport = 80\nmonitors = ["m1", "m1"]\n', 15,
     "service 'S2': monitors: 'm1' is listed twice"),
    ("[proxy]\ntimeouts = 3\n", 12, "proxy: unknown key 'timeouts' (the keys: " + ", ".join(PROXY_KEYS) + ")"),
    ("[proxy]\nretries = 101\n", 12, "proxy: retries: must be an integer in 0..100, got 101"),
    ("[proxy]\nretries = -1\n", 12, "proxy: retries: must be an integer in 0..100, got -1"),
    ("[proxy]\nworkers = 0\n", 12, "proxy: workers: must be an integer in 1..256, got 0"),
    ("[proxy]\nworkers = 257\n", 12, "proxy: workers: must be an integer in 1..256, got 257"),
    ("[proxy]\nworkers = 2.0\n", 12, "proxy: workers: must be an integer in 1..256, got 2.0"),
    ("[proxy]\nconnect_timeout = 0\n", 12, "proxy: connect_timeout: must be a number in (0, 86400], got 0"),
    ("[proxy]\ntimeout = 86400.5\n", 12, "proxy: timeout: must be a number in (0, 86400], got 86400.5"),
    ('[proxy]\nclient_timeout = "60"\n', 12, "proxy: client_timeout: must be a number in (0, 86400], got '60'"),
    ("[proxy]\nheader_timeout = nan\n", 12, "proxy: header_timeout: must be a number in (0, 86400], got nan"),
    ("[proxy]\nbody_timeout = false\n", 12, "proxy: body_timeout: must be a number in (0, 86400], got False"),
    ("[proxy]\nmax_body = -1\n", 12, "proxy: max_body: must be an integer in 0..1099511627776, got -1"),
    ("[proxy]\nmax_request_line = 1.5\n", 12, "proxy: max_request_line: must be an integer in 64..1048576, got 1.5"),
    ("[proxy]\nmax_header_size = -5\n", 12, "proxy: max_header_size: must be an integer in 256..16777216, got -5"),
    ('[proxy]\nmax_headers = "100"\n', 12, "proxy: max_headers: must be an integer in 1..10000, got '100'"),
    ("[proxy]\nmax_connections = true\n", 12, "proxy: max_connections: must be an integer in 1..1048576, got True"),
    ("[proxy]\noverload_connections = 0\n", 12, "proxy: overload_connections: must be an integer in 1..1048576, got 0"),
    ("[proxy]\noverload_timeout = -1\n", 12, "proxy: overload_timeout: must be a number in (0, 86400], got -1"),
    ("[proxy]\nlinger_bytes = -1\n", 12, "proxy: linger_bytes: must be an integer in 0..1073741824, got -1"),
    ("[proxy]\npool_size = -1\n", 12, "proxy: pool_size: must be an integer in 0..1048576, got -1"),
    ('[proxy]\nxff = "prepend"\n', 12, "proxy: xff: must be one of append, replace, got 'prepend'"),
    ('[proxy]\nforwarded = "yes"\n', 12, "proxy: forwarded: must be true or false, got 'yes'"),
    ("[proxy]\nvia = 1\n", 12, "proxy: via: must be true or false, got 1"),
    ('[proxy]\nadmin = "localhost"\n', 12,
     "proxy: admin: must be HOST:PORT such as \"127.0.0.1:9000\" (an IPv6 host in brackets), got 'localhost'"),
    ('[proxy]\nadmin = "::1:9000"\n', 12, "proxy: admin: must be HOST:PORT"),
    ('[proxy]\nadmin = "127.0.0.1:65536"\n', 12, "proxy: admin: must be HOST:PORT"),
    ('[proxy]\nadmin = ":9000"\n', 12, "proxy: admin: must be HOST:PORT"),
    ("[proxy]\nadmin = 9000\n", 12, "proxy: admin: must be HOST:PORT"),
    ('[proxy]\naccess_log = ""\n', 12, "proxy: access_log: must be a non-empty string, got ''"),
    ("[proxy]\naccess_log = true\n", 12, "proxy: access_log: must be a non-empty string, got True"),
    ('[proxy]\nlog_format = "text"\n', 12, "proxy: log_format: must be one of combined, json, got 'text'"),
    ('[proxy]\nlog_level = "TRACE"\n', 12, "proxy: log_level: must be one of DEBUG, INFO, WARNING, ERROR, got 'TRACE'"),
]


@pytest.mark.parametrize("text, line, message", TOML_BAD, ids=[case[0][:60] for case in TOML_BAD])
def test_bad_toml_names_its_line(text, line, message):
    with pytest.raises(ConfigError) as info:
        parse_t(text)
    assert str(info.value).startswith(f"t.toml:{line}: {message}")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text, message", [
    ("proxy = 3\n", "t.toml:1: proxy: must be a table, got 3"),
    ("proxy.retries = 101\n", "t.toml:1: proxy: retries: must be an integer in 0..100, got 101"),
    ('[server.web1]\naddress = "10.0.0.1"\n\n[proxy]\nworkers = 2\n\n[proxy.admin]\nport = 9\n',
     "t.toml:7: proxy: admin: must be HOST:PORT"),
])
def test_proxy_settings_written_otherwise_name_their_line(text, message):
    with pytest.raises(ConfigError) as info:
        parse_toml(text, "t.toml")
    assert str(info.value).startswith(message)


def test_proxy_settings_as_dotted_keys():
    config = parse_toml('proxy.timeout = 5\nproxy.xff = "replace"\n\n[service.S1]\nhost = "10.0.0.1"\ntype = "HTTP"\n'
                        "port = 80\n", "t.toml")
    assert config.proxy == {"timeout": 5.0, "xff": "replace"} and config.warnings == []
    assert parse_toml(to_toml(config), "p.toml") == config


def test_a_proxy_key_is_found_in_its_own_table_not_in_a_monitors():
    text = '[monitor.m2]\ntype = "TCP"\nretries = 5\n\n[proxy]\nworkers = 4\nretries = 120\n'
    with pytest.raises(ConfigError, match=r"^t\.toml:17: proxy: retries: must be an integer in 0\.\.100, got 120$"):
        parse_t(text)


TOML_WARNED = [
    ('[monitor.p1]\ntype = "PING"\ndest_ip = "10.0.0.9"\n',
     [(12, "monitor 'p1': type 'PING' is not modelled by leastload (it models HTTP and TCP), ignored")],
     lambda c: [m.name for m in c.monitors] == ["m1"]),
    ('[monitor.m2]\ntype = "HTTP"\nsecure = true\n',
     [(13, "monitor 'm2': key 'secure' is not modelled by leastload, ignored")], lambda c: mon(c, "m2") is not None),
    ('[monitor.p1]\ntype = "LDNS-DNS"\n[service.S2]\nhost = "10.0.0.2"\ntype = "HTTP"\nport = 80\n'
     'monitors = ["p1", "m1", "ping"]\n',
     [(12, "monitor 'p1': type 'LDNS-DNS' is not modelled by leastload (it models HTTP and TCP), ignored"),
      (17, "service 'S2': monitor 'p1' is not modelled by leastload, its binding ignored"),
      (17, "service 'S2': monitor 'ping' is not modelled by leastload, its binding ignored")],
     lambda c: c.service("S2").monitors == ["m1"]),
]


@pytest.mark.parametrize("text, warnings, check", TOML_WARNED, ids=[case[0][:60] for case in TOML_WARNED])
def test_unmodelled_toml_monitors_warn_and_strict_refuses(text, warnings, check):
    config = parse_t(text)
    assert config.warnings == [f"t.toml:{line}: warning: {w}" for line, w in warnings]
    assert check(config)
    assert parse_toml(to_toml(config), "p.toml") == config
    line, first = warnings[0]
    with pytest.raises(ConfigError) as info:
        parse_t(text, strict=True)
    assert str(info.value) == f"t.toml:{line}: {first} (--strict)"


def test_the_proxy_table_prints_back_in_the_toml_and_json_forms():
    config = parse_t('[proxy]\nworkers = 4\nadmin = "127.0.0.1:9000"\ntimeout = 5\nvia = true\n'
                     'access_log = "caf\\u00e9\\u0001.log"\n')
    toml_text = to_toml(config)
    assert toml_text.startswith('[proxy]\ntimeout = 5.0\nvia = true\nadmin = "127.0.0.1:9000"\n'
                                'access_log = "caf\u00e9\\u0001.log"\nworkers = 4\n\n')  # PROXY_KEYS order
    assert parse_toml(toml_text, "p.toml") == config
    data = json.loads(to_json(config))
    assert data["proxy"] == {"timeout": 5.0, "via": True, "admin": "127.0.0.1:9000", "access_log": "caf\u00e9\x01.log",
                             "workers": 4}
    assert list(data["proxy"]) == ["timeout", "via", "admin", "access_log", "workers"]
    assert to_netscaler(config).splitlines()[0] == PROXY_COMMENT == "# proxy settings: only in the TOML form " \
                                                                    "(leastload show --toml)"


def test_a_config_in_both_forms_is_one_model():
    conf = parse_netscaler(
        "add lb monitor health HTTP -respCode 200-299 304 -httpRequest \"GET /healthz\" -interval 10 "
        "-resptimeout 3 -retries 2 -successRetries 2\n"
        "add lb monitor conn TCP -interval 1 -resptimeout 500 MSEC\n"
        "add service S1 10.0.0.1 HTTP 80\nbind service S1 -monitorName health\nbind service S1 -monitorName conn\n"
        "add service S2 10.0.0.2 HTTP 80\nbind lb monitor tcp S2\n", "both.conf")
    toml = parse_toml(
        '[monitor.health]\ntype = "HTTP"\nresp_codes = ["200-299", 304]\nhttp_request = "GET /healthz"\n'
        "interval = 10\nresptimeout = 3\nretries = 2\nsuccess_retries = 2\n\n"
        '[monitor.conn]\ntype = "TCP"\ninterval = 1\nresptimeout = 0.5\n\n'
        '[service.S1]\nhost = "10.0.0.1"\ntype = "HTTP"\nport = 80\nmonitors = ["health", "conn"]\n\n'
        '[service.S2]\nhost = "10.0.0.2"\ntype = "HTTP"\nport = 80\nmonitors = ["tcp"]\n', "both.toml")
    assert conf == toml and conf.warnings == toml.warnings == []
    assert to_netscaler(conf) == to_netscaler(toml) and to_toml(conf) == to_toml(toml)
