"""Workload files (CSV, JSON), the runs built from them, and the progress bar."""
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from leastload.cmdline import FileError
from leastload.config import parse_netscaler
from leastload.sim import progress as progress_module
from leastload.sim import runs, workload_file
from leastload.sim.progress import Progress

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_csv_rows_defaults_order_and_events(tmp_path):
    path = write(tmp_path, "w.csv", "time,event,request_bytes,status\n"
                                    "1.5,,10,\n0.5,,,503\n1.0,down:S2,,\n1.5,,30,\n0.75,up:S2,,\n")
    w = workload_file.read(path)
    assert w.time == [0.5, 1.5, 1.5]  # in time order; equal times keep file order
    assert w.request_bytes == [workload_file.DEFAULT_REQUEST_BYTES, 10, 30]
    assert w.response_bytes == [workload_file.DEFAULT_RESPONSE_BYTES] * 3
    assert w.status == [503, 200, 200] and w.duration == [0.0] * 3 and w.ttfb is None
    assert [(e.time, e.action, e.service) for e in w.events] == [(0.75, "up", "S2"), (1.0, "down", "S2")]
    assert [e.where for e in w.events] == [f"{path}:6", f"{path}:4"]
    assert w.end == 1.5


def test_json_rows_with_ttfb(tmp_path):
    path = write(tmp_path, "w.json", json.dumps([
        {"time": 0.2, "ttfb": 0.5, "duration": 0.1}, {"time": 0.1, "ttfb": 0.25},
        {"time": 3, "event": "bind:name:with:colons"}]))
    w = workload_file.read(path)
    assert w.time == [0.1, 0.2] and w.ttfb == [0.25, 0.5] and w.duration == [0.0, 0.1]
    assert [(e.action, e.service) for e in w.events] == [("bind", "name:with:colons")]


@pytest.mark.parametrize("name, text, message", [
    ("a.csv", "", "a.csv:1: empty file: needs a header line"),
    ("a.csv", "when\n1\n", "a.csv:1: the header needs a time column"),
    ("a.csv", "time,colour\n1,red\n", "a.csv:2: unknown column 'colour'"),
    ("a.csv", "time\n1,2\n", "a.csv:2: more cells than the header has columns"),
    ("a.csv", "time,ttfb\n1,0.1\n2,\n", "a.csv:3: ttfb: give it on every request row or on none"),
    ("a.csv", "time,ttfb\n1,0\n", "a.csv:2: ttfb: must be in (0, 3600], got '0'"),
    ("a.csv", "time\n-1\n", "a.csv:2: time: must be in [0, 1.09951e+12], got '-1'"),
    ("a.csv", "time,status\n\n,200\n", "a.csv:3: time: missing"),
    ("a.csv", "time,status\n1,99\n", "a.csv:2: status: must be an integer in 100..599, got '99'"),
    ("a.csv", "time,duration\n1,nan\n", "a.csv:2: duration: must be in [0, 3600], got 'nan'"),
    ("a.json", '{"time": 1}', "a.json: must be a JSON list of row objects"),
    ("a.json", '[{"time": 1}, 7]', "a.json: row 1: must be an object, got 7"),
    ("a.json", '[{"time": true}]', "a.json: row 0: time: must be a number, got True"),
    ("a.json", '[{"time": 1, "request_bytes": 1.5}]',
     "a.json: row 0: request_bytes: must be an integer in 0..1000000000, got 1.5"),
])
def test_bad_workload_files(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    with pytest.raises(FileError) as info:
        workload_file.read(path)
    assert str(info.value).startswith(str(tmp_path / message.split(":")[0]) + message[len(message.split(":")[0]):])
    assert "\n" not in str(info.value)


CONFIG = """\
add service S1 10.0.0.1 HTTP 80 -ttfb 0.5
add service S2 10.0.0.2 HTTP 80
add service S3 10.0.0.3 HTTP 80
add lb vserver rr HTTP -lbMethod ROUNDROBIN
bind lb vserver rr S1
bind lb vserver rr S2
"""


def test_a_file_replayed_through_a_config(impl, tmp_path):
    """Round robin over S1 S2; S2 DOWN at 1.0, S3 bound at 2.0: every count follows."""
    rows = "".join(f"{t / 4},,100,1000\n" for t in range(12))
    path = write(tmp_path, "w.csv", "time,event,request_bytes,response_bytes\n" + rows
                 + "1.0,down:S2,,\n2.0,bind:S3,,\n")
    config = parse_netscaler(CONFIG, "c.conf")
    w = workload_file.read(path)
    run = runs.run_trace(config, config.vserver("rr"), impl, 3, w.events, None, 0.0, 0, w)
    assert run.services == ("S1", "S2", "S3")
    assert run.counts.tolist() == [[2, 2, 0], [4, 0, 0], [2, 0, 2]]
    assert run.dropped.tolist() == [0, 0, 0]
    by_name = {r.name: r for r in run.results}
    assert by_name["S1"].requests == 8 and by_name["S1"].bytes == 8 * 1100
    assert by_name["S2"].state == "DOWN"
    assert by_name["S1"].packets == 8 * (workload_file.packets(100) + workload_file.packets(1000))


def test_steady_runs_use_the_services_sizes(impl):
    text = CONFIG + "set service S2 -requestBytes 50 -responseBytes 950\n"
    config = parse_netscaler(text, "c.conf")
    run = runs.run_steady(config, config.vserver("rr"), impl, 10, 2, [])
    by_name = {r.name: r for r in run.results}
    assert by_name["S1"].requests == by_name["S2"].requests == 10
    assert by_name["S2"].bytes == 10 * 1000
    assert by_name["S1"].bytes == 10 * (workload_file.DEFAULT_REQUEST_BYTES + workload_file.DEFAULT_RESPONSE_BYTES)


def cli_json(tmp_path, *args):
    out = tmp_path / "o.json"
    result = subprocess.run([sys.executable, "-m", "leastload", "simulate", *args, "--json", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())["vservers"]


def test_generated_workloads_are_seeded_and_the_engines_agree(tmp_path):
    conf = str(EXAMPLES / "weighted.conf")
    args = (conf, "--workload", "bursty", "--rate", "300", "--duration", "5")
    first = cli_json(tmp_path, *args)
    assert cli_json(tmp_path, *args) == first
    assert cli_json(tmp_path, *args, "--implementation", "python") == first  # the batch path = per call
    assert cli_json(tmp_path, *args, "--seed", "7") != first
    assert sum(r["requests"] for r in first[0]["summary"]) == sum(map(sum, first[0]["requests_per_second"].values()))


def test_the_example_workloads_run(tmp_path):
    for name in ("failover.csv", "maintenance.json"):
        conf = EXAMPLES / ("slowstart.conf" if name == "maintenance.json" else "weighted.conf")
        path = str(EXAMPLES / "workloads" / name)
        if name == "failover.csv":
            # the example's events name S2: a config with services S1, S2
            conf = tmp_path / "two.conf"
            conf.write_text("add service S1 10.0.0.1 HTTP 80\nadd service S2 10.0.0.2 HTTP 80\n"
                            "add lb vserver v HTTP -lbMethod LEASTCONNECTION\n"
                            "bind lb vserver v S1\nbind lb vserver v S2\n")
        (vs,) = cli_json(tmp_path, str(conf), "--workload", path, "--implementation", "python")
        assert sum(map(sum, vs["requests_per_second"].values())) + sum(vs["dropped_per_second"]) == \
            len(workload_file.read(path))


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_appears_only_on_a_terminal_after_a_second(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    for name in ("tqdm", "rich", "rich.progress"):  # neither tqdm nor rich: the plain bar
        monkeypatch.setitem(sys.modules, name, None)
    quiet = io.StringIO()
    bar = Progress(10, "simulate", quiet)
    now[0] += 5
    bar.update(5)
    bar.close()
    assert quiet.getvalue() == ""  # not a terminal
    term = FakeTerminal()
    bar = Progress(10, "simulate", term)
    bar.update(3)
    assert term.getvalue() == ""  # under a second so far
    now[0] += 1.5
    bar.update(5)
    assert term.getvalue().endswith("5/10") and "simulate [" in term.getvalue()
    bar.close()
    assert term.getvalue().endswith("\r")


def test_progress_uses_tqdm_when_installed(monkeypatch):
    import types

    calls = []

    class FakeTqdm:
        def __init__(self, total, desc, file, leave):
            calls.append(("open", total, desc, leave))

        def update(self, n):
            calls.append(("update", n))

        def close(self):
            calls.append(("close",))

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeTqdm))
    now = [0.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    bar = Progress(60, "simulate", FakeTerminal())
    bar.update(10)  # under a second: nothing yet
    now[0] = 2.0
    bar.update(30)
    bar.update(60)
    bar.close()
    assert calls == [("open", 60, "simulate", False), ("update", 30), ("update", 30), ("close",)]


def test_progress_uses_rich_when_tqdm_is_missing(monkeypatch):
    pytest.importorskip("rich", reason="rich is not installed (the top extra): its bar cannot be drawn")
    monkeypatch.setitem(sys.modules, "tqdm", None)
    now = [0.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    term = FakeTerminal()
    bar = Progress(60, "simulate", term)
    bar.update(10)
    assert term.getvalue() == ""  # under a second: nothing yet
    now[0] = 2.0
    bar.update(30)
    assert "simulate" in term.getvalue() and bar.bar is not None and not bar.plain
    bar.update(60)
    assert bar.bar.bar.tasks[0].completed == 60  # rich's task advanced by the differences, to the total
    bar.close()
