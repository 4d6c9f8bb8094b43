"""The command line, through the console script: --version, show, simulate, and
every command's bad input as one line on stderr with exit code 2."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import leastload
from leastload.engine.errors import METHODS
from leastload.engine.methods import METHODS
from leastload.config import load, parse_netscaler, parse_toml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SLOWSTART = str(EXAMPLES / "slowstart.conf")


def run(*args, cwd=None, code=None):
    """`python -m leastload ARGS` in a child (or `python -c CODE`), bounded in time."""
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "leastload", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd)


def assert_user_error(result, expected, *, exact=True):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    if exact:
        assert lines[0] == expected
    else:
        assert lines[0].startswith(expected), lines[0]


def test_version():
    result = run("--version")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == f"leastload {leastload.__version__}\n"
    assert leastload.__version__.count(".") == 2


def test_show_prints_lines_that_parse_back_to_the_same_model():
    result = run("show", SLOWSTART)
    assert result.returncode == 0 and result.stderr == ""
    assert parse_netscaler(result.stdout, "out") == load(SLOWSTART)
    as_json = json.loads(run("show", SLOWSTART, "--json").stdout)
    assert [b["service"] for b in as_json["vservers"][0]["bindings"]] == [f"Service{i}" for i in range(1, 6)]
    assert parse_toml(run("show", SLOWSTART, "--toml").stdout, "out") == load(SLOWSTART)


def test_show_and_version_need_no_numpy(tmp_path):
    code = ("import sys; sys.modules['numpy'] = None\n"
            "from leastload.__main__ import main\n"
            f"main(['show', {SLOWSTART!r}])\n"
            "assert 'numpy' not in sys.modules or sys.modules['numpy'] is None\n"
            "main(['--version'])\n")
    result = run(code=code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(f"bind lb vserver vs-slowstart Service5\nleastload {leastload.__version__}\n")


def test_show_warns_about_unmodelled_lines_and_strict_refuses(tmp_path):
    conf = tmp_path / "ns.conf"
    conf.write_text("add service S1 10.0.0.1 HTTP 80\nadd lb monitor m1 PING\nset ns config -IPAddress 10.0.0.9\n")
    result = run("show", str(conf))
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        f"{conf}:2: warning: lb monitor 'm1': type PING is not modelled by leastload (it models HTTP and TCP), ignored",
        f"{conf}:3: warning: command 'set ns config' is not modelled by leastload, ignored"]
    assert result.stdout == "add service S1 10.0.0.1 HTTP 80\n"
    assert_user_error(run("show", str(conf), "--strict"),
                      f"{conf}:2: lb monitor 'm1': type PING is not modelled by leastload (it models HTTP and TCP), "
                      "ignored (--strict)")


def bad_files(tmp_path):
    (tmp_path / "bad.conf").write_text("add service S1 10.0.0.1 HTTP 80\nbind lb vserver nope S1\n")
    (tmp_path / "token.conf").write_text("add service S1 10.0.0.1 HTTP 80\n"
                                         "add lb vserver v HTTP -lbMethod USER_TOKEN\nbind lb vserver v S1\n")
    (tmp_path / "bad.toml").write_text('[service.S1]\nhost = "10.0.0.1"\ntype = "HTTP"\nport = 80\nweight = 0\n')
    (tmp_path / "empty.conf").write_text("# nothing\n")
    (tmp_path / "lonely.conf").write_text("add lb vserver v HTTP\n")
    (tmp_path / "w.csv").write_text("time,request_bytes\n0.5,100\n1.5,-3\n")
    (tmp_path / "late.csv").write_text("time\n0.5\n99\n")
    (tmp_path / "ev.csv").write_text("time,event\n0.5,\n1,explode:Service1\n")
    (tmp_path / "w.json").write_text('[{"time": 0.1}, {"time": "soon"}]')
    (tmp_path / "notjson.json").write_text('[{"time": 0.1},')


BAD = [
    # the command itself
    ((), "leastload: the following arguments are required: COMMAND"),
    (("nope",), "leastload: argument COMMAND: invalid choice: 'nope' (choose from 'backends', 'bench', 'ctl', "
                "'demo', 'nginx-conf', 'proxy', 'show', 'simulate', 'top')"),
    # show
    (("show",), "leastload show: a CONFIG, or --shared NAME, is needed"),
    (("show", SLOWSTART, "--shared", "web"), "leastload show: --shared NAME takes no CONFIG, --json, --toml or --strict"),
    (("show", "--shared", "leastload-test-none"),
     "leastload show: --shared 'leastload-test-none': no shared vserver of that name (/dev/shm/leastload.leastload-test-none)"),
    # nginx-conf
    (("nginx-conf",), "leastload nginx-conf: the following arguments are required: CONFIG"),
    (("nginx-conf", "missing.conf"), "missing.conf: no such file"),
    (("nginx-conf", SLOWSTART, "--vserver", "nope"), f"leastload nginx-conf: --vserver nope: no such lb vserver in {SLOWSTART}"),
    (("show", "missing.conf"), "missing.conf: no such file"),
    (("show", "bad.conf"), "bad.conf:2: no lb vserver named 'nope' (add lb vserver first)"),
    (("show", "bad.toml"), "bad.toml:5: service 'S1': weight: must be an integer in 1..100, got 0"),
    (("show", SLOWSTART, "--json", "--toml"), "leastload show: argument --toml: not allowed with argument --json"),
    (("show", SLOWSTART, "--colour"), "leastload show: unrecognized arguments: --colour"),
    # simulate: flags
    (("simulate", "--rate", "-5"), "leastload simulate: --rate: must be > 0, got -5"),
    (("simulate", "--rate", "fast"), "leastload simulate: --rate: must be a number, got 'fast'"),
    (("simulate", "--rate", "2.5"), "leastload simulate: --rate: must be a whole number of requests per second "
                                    "for the steady workload, got 2.5"),
    (("simulate", "--duration", "0"), "leastload simulate: --duration: must be >= 1, got 0"),
    (("simulate", "--duration", "1.5"), "leastload simulate: --duration: must be an integer, got '1.5'"),
    (("simulate", "--rate", "100000", "--duration", "2000"), "leastload simulate: --rate: --rate x --duration must "
     "be at most 100000000 requests for the steady workload, got 100000 x 2000"),
    (("simulate", "--workload", "poisson", "--rate", "1e6", "--duration", "60"), "leastload simulate: --rate: "
     "--rate x --duration must be at most 20000000 requests for the poisson workload, got 1e+06 x 60"),
    (("simulate", "--services", "0"), "leastload simulate: --services: must be >= 1, got 0"),
    (("simulate", "--new", "100", "--duration", "3"),
     "leastload simulate: --new: must be before the end of the run (--duration 3), got 100"),
    (("simulate", "--method", "FASTEST"),
     f"leastload simulate: --method: must be one of {', '.join(METHODS)}, got FASTEST"),
    (("simulate", "--slow-start", "4", "PER_MINUTE", "10"),
     "leastload simulate: --slow-start: UNIT must be one of PER_SECOND, PERCENT, got PER_MINUTE"),
    (("simulate", "--slow-start", "400", "PERCENT", "10"), "leastload simulate: --slow-start: must be <= 100, got 400"),
    (("simulate", "--every", "0"), "leastload simulate: --every: must be >= 1, got 0"),
    (("simulate", "--json"), "leastload simulate: argument --json: expected one argument"),
    (("simulate", "--json", "no/such/dir/out.json"),
     "leastload simulate: --json: no such directory no/such/dir, got no/such/dir/out.json"),
    (("simulate", "--csv", "."), "leastload simulate: --csv: is a directory, got ."),
    (("simulate", "--workload", "zipf"), "leastload simulate: --workload: must be one of steady, poisson, bursty, "
                                         "diurnal or a .csv or .json file, got zipf"),
    (("simulate", "--event", "soon:bind:S1"),
     "leastload simulate: --event: must be T:ACTION:SERVICE with T seconds >= 0, got soon:bind:S1"),
    (("simulate", "--event", "5:explode:S1"), "leastload simulate: --event: must be T:ACTION:SERVICE with ACTION one "
                                              "of bind, unbind, down, up, out_of_service, got 5:explode:S1"),
    (("simulate", "--event", "70:down:S1"),
     "leastload simulate: --event: time must be before the end of the run (60 s), got 70:down:S1"),
    (("simulate", "--event", "5:down:S9"), "leastload simulate: --event: 'S9' is not bound to 'vserver' then, "
                                           "got 5:down:S9"),
    (("simulate", "--event", "5:bind:S2"), "leastload simulate: --event: 'S2' is already bound to 'vserver' then, "
                                           "got 5:bind:S2"),
    (("simulate", "--event", "5:unbind:S2", "--event", "6:up:S2"),
     "leastload simulate: --event: 'S2' is not bound to 'vserver' then, got 6:up:S2"),
    (("simulate", "--implementation", "java"),
     "leastload simulate: argument --implementation: invalid choice: 'java' (choose from 'c', 'python')"),
    # simulate: config and workload files
    (("simulate", "missing.conf"), "missing.conf: no such file"),
    (("simulate", "bad.conf"), "bad.conf:2: no lb vserver named 'nope' (add lb vserver first)"),
    (("simulate", "token.conf"), "token.conf:2: lbMethod USER_TOKEN is not supported by this engine yet (it has "
                                 f"{', '.join(METHODS)})"),
    (("simulate", "empty.conf"), "leastload simulate: CONFIG: empty.conf has no lb vserver to simulate"),
    (("simulate", "lonely.conf"), "leastload simulate: CONFIG: lb vserver 'v' has no service bound and no --event "
                                  "binds one"),
    (("simulate", SLOWSTART, "--services", "3"),
     "leastload simulate: --services: not with a CONFIG (the config sets the vserver), got 3"),
    (("simulate", SLOWSTART, "--vserver", "nope"),
     f"leastload simulate: --vserver: no lb vserver named 'nope' in {SLOWSTART}"),
    (("simulate", SLOWSTART, "--event", "5:bind:Service9"),
     "leastload simulate: --event: no service named 'Service9' in the config, got 5:bind:Service9"),
    (("simulate", "--workload", "w.csv"), "w.csv:3: request_bytes: must be an integer in 0..1000000000, got '-3'"),
    (("simulate", "--workload", "late.csv", "--duration", "10"),
     "leastload simulate: --duration: the workload file has requests until 99 s, past the end of the run, got 10"),
    (("simulate", "--workload", "ev.csv"), "ev.csv:3: event: must be ACTION:SERVICE with ACTION one of bind, unbind, "
                                           "down, up, out_of_service, got 'explode:Service1'"),
    (("simulate", "--workload", "w.json"), "w.json: row 1: time: must be a number, got 'soon'"),
    (("simulate", "--workload", "notjson.json"), "notjson.json:1: bad JSON: Expecting value"),
    (("simulate", "--workload", "w.csv", "--rate", "10"),
     "leastload simulate: --rate: not with a workload file (its rows are the requests), got 10"),
    (("simulate", "--workload", "missing.csv"), "missing.csv: no such file"),
    # the other commands: their argument errors are one line too
    (("demo", "--implementation", "java"),
     "leastload demo: argument --implementation: invalid choice: 'java' (choose from 'c', 'python')"),
    (("demo", "--plot", "no/such/dir/x.png"),
     "leastload demo: --plot: must be a file in an existing directory, got no/such/dir/x.png"),
    (("bench", "--frobnicate"), "leastload bench: unrecognized arguments: --frobnicate"),
    (("proxy", "--frobnicate"), "leastload proxy: "),
    (("backends", "--frobnicate"), "leastload backends: "),
    (("ctl", "http://127.0.0.1:1"), "leastload ctl: a command is needed (e.g. disable service NAME)"),
    (("top", "http://127.0.0.1:1"), "leastload top: no answer from http://127.0.0.1:1: "),
    (("top", "127.0.0.1:9100"), "leastload top: URL: must be http://HOST:PORT, got '127.0.0.1:9100'"),
    (("top", "http://127.0.0.1:1", "--interval", "0"), "leastload top: --interval: must be >= 0.05, got 0"),
]


def test_the_bad_input_table_covers_every_command():
    from leastload.__main__ import COMMANDS

    assert {args[0] for args, _ in BAD if args} >= set(COMMANDS)


@pytest.mark.parametrize("args, expected", BAD, ids=[" ".join(a) or "(nothing)" for a, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, expected):
    bad_files(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run(*args, cwd=tmp_path)
    assert_user_error(result, expected, exact=not expected.endswith(": "))
    assert result.stdout == "" or args[0] in ("demo",)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_a_missing_top_extra_is_named():
    code = ("import sys; sys.modules['rich'] = None\n"
            "from leastload.__main__ import main\n"
            "sys.exit(main(['top', 'http://127.0.0.1:1']))\n")
    assert_user_error(run(code=code), "leastload top: the live view needs rich: pip install 'leastload[top]'")


def test_a_missing_plot_extra_is_named_and_nothing_is_written(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from leastload.__main__ import main\n"
            f"sys.exit(main(['simulate', {SLOWSTART!r}, '--csv', 'out.csv', '--plot', 'out.png']))\n")
    result = run(code=code, cwd=tmp_path)
    assert_user_error(result, "leastload simulate: --plot needs matplotlib: pip install 'leastload[plot]'")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["demo", "--plot", "out.png"], "leastload demo: --plot needs matplotlib: pip install 'leastload[plot]'"),
    (["bench", "--quick", "--png", "out.png"],
     "leastload bench: --png: needs matplotlib, which is not installed (pip install 'leastload[plot]')"),
])
def test_other_commands_name_the_missing_extra_before_running(tmp_path, args, message):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from leastload.__main__ import main\n"
            f"sys.exit(main({args!r}))\n")
    result = run(code=code, cwd=tmp_path)
    assert_user_error(result, message)
    assert result.stdout == "" and list(tmp_path.iterdir()) == []


def test_simulate_outputs_agree(tmp_path):
    result = run("simulate", SLOWSTART, "--duration", "30", "--csv", "out.csv", "--json", "out.json", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""  # no progress bar: stderr is not a terminal
    data = json.loads((tmp_path / "out.json").read_text())
    (vs,) = data["vservers"]
    series = vs["requests_per_second"]
    assert series["Service5"][:21:10] == [0, 4, 8] and series["Service1"][:21:10] == [25, 24, 23]
    rows = (tmp_path / "out.csv").read_text().splitlines()
    assert rows[0] == "vserver,second,service,requests"
    from_csv = {}
    for row in rows[1:]:
        name, second, service, requests = row.split(",")
        assert name == "vs-slowstart"
        if service:
            from_csv.setdefault(service, []).append(int(requests))
        else:
            assert requests == "0"  # nothing dropped
    assert from_csv == series
    summary = {r["name"]: r for r in vs["summary"]}
    printed = {line.split()[0]: line.split() for line in result.stdout.splitlines()[2:7]}
    for name, row in summary.items():
        assert row["requests"] == sum(series[name]) == int(printed[name][1])
        assert row["bytes"] == int(printed[name][3]) and row["packets"] == int(printed[name][4])
    assert sum(r["requests"] for r in vs["summary"]) == 30 * 100


def test_simulate_events_and_a_workload_file(tmp_path):
    (tmp_path / "w.csv").write_text("time,event,ttfb\n" + "".join(f"{i / 10},,0.01\n" for i in range(40))
                                    + "2,down:S1,\n3,up:S1,\n")
    result = run("simulate", "--workload", "w.csv", "--services", "2", "--method", "LEASTCONNECTION",
                 "--event", "1:bind:new", "--new", "1", "--json", "o.json", cwd=tmp_path)
    # --new 1 binds 'new' at 1 s as well: the two binds of the same service collide
    assert_user_error(result, "leastload simulate: --event: 'new' is already bound to 'vserver' then, "
                              "got 1:bind:new")
    result = run("simulate", "--workload", "w.csv", "--services", "2", "--method", "LEASTCONNECTION",
                 "--new", "1", "--json", "o.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    vs = json.loads((tmp_path / "o.json").read_text())["vservers"][0]
    series = vs["requests_per_second"]
    assert series["new"][0] == 0 and series["S1"][2] == 0  # not bound yet; DOWN in second 2
    assert sum(map(sum, series.values())) == 40
    assert [(e["time"], e["action"], e["service"]) for e in vs["events"]] == [
        (1.0, "bind", "new"), (2.0, "down", "S1"), (3.0, "up", "S1")]


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir() if p.suffix in (".conf", ".toml")))
def test_every_example_config_shows_and_simulates(tmp_path, name):
    path = str(EXAMPLES / name)
    config = load(path)
    assert config.warnings == [] and config.vservers
    shown = run("show", path)
    assert shown.returncode == 0 and shown.stderr == ""
    assert parse_netscaler(shown.stdout, "out") == config
    result = run("simulate", path, "--duration", "3", "--json", "o.json", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    vservers = json.loads((tmp_path / "o.json").read_text())["vservers"]
    assert [v["name"] for v in vservers] == [v.name for v in config.vservers]
    assert all(sum(map(sum, v["requests_per_second"].values())) == 300 for v in vservers)
