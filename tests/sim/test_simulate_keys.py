"""The simulator under the hash methods: generated and file keys, per-call replay, stickiness."""
import ipaddress
import json
import subprocess
import sys

import numpy as np
import pytest

from leastload.cmdline import FileError
from leastload.engine.methods import TABLE
from leastload.config import parse_netscaler
from leastload.sim import keys as sim_keys
from leastload.sim import runs, workload_file
from leastload.sim.replay import replay, replay_per_call
from leastload.sim.simulate import simulate
from leastload.sim.workloads import make_trace

HASHED = sorted(m.name for m in TABLE if m.family == "hash")


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "leastload", "simulate", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("method", HASHED)
def test_generated_keys_are_seeded_zipf_draws_of_the_methods_form(method, impl):
    keys = sim_keys.generated(method, 20_000, distinct=50, skew=1.0, seed=7)
    assert len(keys) == 20_000 and len(keys.values) == 50
    again = sim_keys.generated(method, 20_000, distinct=50, skew=1.0, seed=7)
    assert np.array_equal(keys.ids, again.ids) and keys.values == again.values
    assert not np.array_equal(keys.ids, sim_keys.generated(method, 20_000, 50, 1.0, seed=8).ids)
    counts = np.bincount(keys.ids, minlength=50)
    # Zipf, exponent 1: the most popular key about twice the second, ten times the tenth
    assert counts.argmax() == 0 and 1.6 < counts[0] / counts[1] < 2.5 and 7 < counts[0] / counts[9] < 14
    vs = impl.VirtualServer(method)
    for name in ("a", "b", "c"):
        vs.bind(name)
    assert {vs.select(key=v) for v in keys.values} <= {"a", "b", "c"}  # every value a key of the method's form
    assert len(set(keys.values)) == 50


def test_uniform_keys_and_bad_options():
    counts = np.bincount(sim_keys.generated("URLHASH", 50_000, distinct=10, skew=0).ids, minlength=10)
    assert counts.min() > 0.9 * 5000 and counts.max() < 1.1 * 5000
    with pytest.raises(ValueError, match="distinct"):
        sim_keys.generated("URLHASH", 10, distinct=0)
    with pytest.raises(ValueError, match="skew"):
        sim_keys.generated("URLHASH", 10, skew=-1)
    with pytest.raises(ValueError, match="hash method"):
        sim_keys.values("ROUNDROBIN", 3)


def test_key_cells_are_parsed_per_method():
    v4 = ipaddress.ip_address
    assert sim_keys.parse("SOURCEIPHASH", " 10.0.0.1 ") == v4("10.0.0.1")
    assert sim_keys.parse("SRCIPDESTIPHASH", "10.0.0.1  192.0.2.1") == (v4("10.0.0.1"), v4("192.0.2.1"))
    assert sim_keys.parse("SRCIPDESTIPHASH", ["10.0.0.1", "::1"]) == (v4("10.0.0.1"), v4("::1"))
    assert sim_keys.parse("SRCIPSRCPORTHASH", "10.0.0.1:5060") == (v4("10.0.0.1"), 5060)
    assert sim_keys.parse("SRCIPSRCPORTHASH", "[2001:db8::1]:80") == (v4("2001:db8::1"), 80)
    assert sim_keys.parse("SRCIPSRCPORTHASH", ["10.0.0.1", 80]) == (v4("10.0.0.1"), 80)
    assert sim_keys.parse("DOMAINHASH", "Shop.Example.com.") == "shop.example.com"
    assert sim_keys.parse("URLHASH", "/a?b") == "/a?b" and sim_keys.parse("TOKEN", 42) == "42"
    assert sim_keys.parse("URLHASH", " ") is None
    for method, bad in (("SOURCEIPHASH", "10.0.0.300"), ("SRCIPDESTIPHASH", "10.0.0.1"),
                        ("SRCIPSRCPORTHASH", "10.0.0.1:70000"), ("SRCIPSRCPORTHASH", "10.0.0.1"),
                        ("URLHASH", ["/a"]), ("SOURCEIPHASH", 5)):
        with pytest.raises(ValueError, match=f"key: lbMethod {method} takes"):
            sim_keys.parse(method, bad)


def test_replay_with_keys_goes_per_call_and_keeps_each_key_on_one_service(impl):
    trace = make_trace(n_services=5, n_requests=4000, rate=2000, seed=3)
    keys = sim_keys.generated("URLHASH", len(trace), distinct=300, seed=3)
    results = []
    for driver in (replay, replay_per_call):
        clock = impl.ManualClock(0.0)
        vs = impl.VirtualServer("URLHASH", clock=clock)
        results.append(driver(vs, clock, trace, keys))
    assert results[0].equals(results[1])
    stats = sim_keys.stats(keys.ids, results[0].chosen)
    assert stats.on_several == 0 and stats.on_one == stats.distinct == len(np.unique(keys.ids))
    assert len(np.unique(results[0].chosen)) == 5  # and the keys spread over all five
    with pytest.raises(ValueError, match="one key per request"):
        replay_per_call(impl.VirtualServer("URLHASH", clock=impl.ManualClock(0.0)), impl.ManualClock(0.0),
                        trace, keys=list(keys)[:10])


def test_a_service_down_moves_only_its_own_keys(impl):
    trace = make_trace(n_services=4, n_requests=6000, rate=1000, seed=1,
                       events=[(2.0, "DOWN", 1), (4.0, "UP", 1)])
    keys = sim_keys.generated("SOURCEIPHASH", len(trace), distinct=200, seed=1)
    clock = impl.ManualClock(0.0)
    result = replay_per_call(impl.VirtualServer("SOURCEIPHASH", clock=clock), clock, trace, keys)
    on = {}
    for k, s in zip(keys.ids.tolist(), result.chosen.tolist()):
        on.setdefault(k, set()).add(s)
    moved = {k for k, services in on.items() if len(services) > 1}
    assert moved and all(1 in on[k] for k in moved)  # only keys of the service that went down moved
    assert sim_keys.stats(keys.ids, result.chosen).on_several == len(moved)


def test_steady_simulate_with_keys_reports_each_pick(impl):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer("TOKEN", clock=clock)
    for name in ("S1", "S2", "S3"):
        vs.bind(name)
    keys = sim_keys.generated("TOKEN", 600, distinct=40)
    sim = simulate(vs, clock, rate=200, duration=3, keys=keys)
    assert sim.picks is not None and len(sim.picks) == 600
    assert sim_keys.stats(keys.ids, sim.picks).on_several == 0
    assert np.bincount(sim.picks, minlength=3).tolist() == sim.counts.sum(axis=0).tolist()
    with pytest.raises(ValueError, match="keys must give a key"):
        simulate(vs, clock, rate=200, duration=4, keys=keys)


@pytest.mark.parametrize("workload", ["steady", "poisson"])
def test_command_line_urlhash_keeps_every_key_on_one_service(tmp_path, workload):
    out = tmp_path / "run.json"
    result = cli("--method", "URLHASH", "--services", "5", "--workload", workload, "--rate", "500",
                 "--duration", "4", "--keys", "300", "--key-skew", "0.8", "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = json.loads(out.read_text())["vservers"]
    assert run["method"] == "URLHASH"
    assert run["keys"]["on_several"] == 0 and 200 < run["keys"]["on_one"] == run["keys"]["distinct"] <= 300
    assert all(row["requests"] > 0 for row in run["summary"])
    assert f"keys: {run['keys']['distinct']} distinct served, {run['keys']['distinct']} always by one service\n" \
        in result.stdout + "\n"


def test_command_line_events_move_keys(tmp_path):
    out = tmp_path / "run.json"
    result = cli("--method", "CALLIDHASH", "--rate", "200", "--duration", "6", "--event", "2:down:S2",
                 "--event", "4:up:S2", "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = json.loads(out.read_text())["vservers"]
    assert 0 < run["keys"]["on_several"] < run["keys"]["distinct"] / 2  # S2's keys (about a quarter) moved
    assert "by two or more" in result.stdout


def test_workload_file_keys(tmp_path):
    conf = tmp_path / "v.conf"
    conf.write_text("add service S1 10.0.0.1 HTTP 80\nadd service S2 10.0.0.2 HTTP 80\n"
                    "add service S3 10.0.0.3 HTTP 80\n"
                    "add lb vserver v HTTP 10.0.0.100 80 -lbMethod SRCIPSRCPORTHASH\n"
                    "bind lb vserver v S1\nbind lb vserver v S2\nbind lb vserver v S3\n")
    rows = [{"time": i / 100, "key": [f"10.0.0.{i % 7}", 1000 + i % 3]} for i in range(300)]
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(rows))
    out = tmp_path / "run.json"
    result = cli(str(conf), "--workload", str(wl), "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = json.loads(out.read_text())["vservers"]
    assert run["keys"] == {"distinct": 21, "on_one": 21, "on_several": 0}

    config = parse_netscaler(conf.read_text(), str(conf))
    w = workload_file.read(str(wl))
    assert runs.file_keys(config.vservers[0], w).values[0] == (ipaddress.ip_address("10.0.0.0"), 1000)

    csv = tmp_path / "w.csv"
    csv.write_text("time,key\n0.1,10.0.0.1:80\n0.2,\n")
    result = cli(str(conf), "--workload", str(csv), cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip() == (
        f"{csv}:3: key: lbMethod SRCIPSRCPORTHASH picks by each request's key, and this request has none")
    csv.write_text("time,key\n0.1,10.0.0.1\n")
    result = cli(str(conf), "--workload", str(csv), cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip() == (
        f"{csv}:2: key: lbMethod SRCIPSRCPORTHASH takes ADDRESS:PORT (an IPv6 address in brackets), "
        "got '10.0.0.1'")
    csv.write_text("time\n0.1\n")
    result = cli(str(conf), "--workload", str(csv), cwd=tmp_path)
    assert result.returncode == 2 and "needs a key column" in result.stderr
    result = cli(str(conf), "--workload", str(csv), "--keys", "5", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("leastload simulate: --keys: not with a workload")
    with pytest.raises(FileError, match="needs a key column"):
        runs.file_keys(config.vservers[0], workload_file.read(str(csv)))


def test_the_urlhash_example_moves_only_the_keys_of_the_cache_that_goes_down(tmp_path, ref_impl):
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    out = tmp_path / "run.json"
    result = cli(str(examples / "urlhash.conf"), "--workload", str(examples / "workloads" / "urls.csv"),
                 "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = json.loads(out.read_text())["vservers"]
    urls = set(workload_file.read(str(examples / "workloads" / "urls.csv")).key)
    vs = ref_impl.VirtualServer("URLHASH")
    for name in ("cache1", "cache2", "cache3"):
        vs.bind(name)
    on_cache2 = sum(vs.select(key=url) == "cache2" for url in urls)
    assert 0 < on_cache2 < len(urls)
    assert run["keys"] == {"distinct": len(urls), "on_one": len(urls) - on_cache2, "on_several": on_cache2}
