"""leastload.sim.sweep: configs x workloads x seeds on any executor, one tidy table.

The same table from a local process pool, a thread pool and a real dask.distributed
LocalCluster (two worker processes on 127.0.0.1), and each cell equal to the run
`leastload simulate` makes for it.
"""
import concurrent.futures
from pathlib import Path

import pytest

pytest.importorskip("numpy", reason="leastload.sim needs numpy (the sim extra)")

from leastload.config import load, parse_netscaler  # noqa: E402
from leastload.engine import native  # noqa: E402
from leastload.sim import runs  # noqa: E402
from leastload.sim.sweep import COLUMNS, Generated, Table, run_cell, sweep  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LC = """add service s1 10.0.0.1 HTTP 80
add service s2 10.0.0.2 HTTP 80
add service s3 10.0.0.3 HTTP 80
set service s3 -weight 3
add lb vserver v HTTP 10.0.0.10 80 -lbMethod LEASTCONNECTION
bind lb vserver v s1
bind lb vserver v s2
bind lb vserver v s3
"""
CONFIGS = {"lc": parse_netscaler(LC, "lc.conf"),
           "lb": parse_netscaler(LC.replace("LEASTCONNECTION", "LEASTBANDWIDTH"), "lb.conf")}
WORKLOADS = {"poisson": Generated("poisson", rate=400, duration=3),
             "bursty": Generated("bursty", rate=300, duration=2)}
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def local_table():
    return sweep(CONFIGS, WORKLOADS, SEEDS)  # the default: a local process pool


def test_one_row_per_cell_and_service_in_cell_order(local_table):
    assert isinstance(local_table, Table) and local_table.columns == COLUMNS
    assert len(local_table) == len(CONFIGS) * len(WORKLOADS) * len(SEEDS) * 3
    cells = [(r["config"], r["workload"], r["seed"]) for r in local_table.rows[::3]]
    assert cells == [(c, w, s) for c in CONFIGS for w in WORKLOADS for s in SEEDS]
    for row in local_table:
        assert set(row) == set(COLUMNS)
    methods = {(r["config"], r["method"]) for r in local_table}
    assert methods == {("lc", "LEASTCONNECTION"), ("lb", "LEASTBANDWIDTH")}


def test_each_cell_is_the_run_simulate_makes(local_table):
    for config_name, config in CONFIGS.items():
        vs = config.vservers[0]
        for workload_name, w in WORKLOADS.items():
            for seed in SEEDS:
                run = runs.run_trace(config, vs, native, w.duration, [], w.pattern, float(w.rate), seed, None)
                rows = [r for r in local_table if (r["config"], r["workload"], r["seed"])
                        == (config_name, workload_name, seed)]
                assert [(r["service"], r["requests"], r["bytes"], r["packets"]) for r in rows] == \
                    [(x.name, x.requests, x.bytes, x.packets) for x in run.results]
                assert sum(r["requests"] for r in rows) == int(run.counts.sum())
                assert sum(r["share"] for r in rows) == pytest.approx(1.0)


def test_seeds_differ_and_a_seed_repeats(local_table):
    def served(seed):
        return [r["requests"] for r in local_table if (r["config"], r["workload"], r["seed"]) == ("lc", "poisson", seed)]
    assert served(0) != served(1)
    again = run_cell("lc", CONFIGS["lc"], "poisson", WORKLOADS["poisson"], 0)
    assert [r["requests"] for r in again] == served(0)


def test_a_given_executor_gives_the_same_table_and_stays_open(local_table):
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        assert sweep(CONFIGS, WORKLOADS, SEEDS, executor=pool) == local_table
        assert pool.submit(lambda: 7).result() == 7  # not shut down by sweep()


def test_config_files_by_path(tmp_path):
    table = sweep({"slowstart": EXAMPLES / "slowstart.conf"}, {"p": Generated("poisson", rate=200, duration=2)}, [5],
                  executor=concurrent.futures.ThreadPoolExecutor(1))
    config = load(EXAMPLES / "slowstart.conf")
    assert {r["vserver"] for r in table} == {v.name for v in config.vservers}
    assert sum(r["requests"] for r in table) > 0


def test_to_pandas(local_table):
    pandas = pytest.importorskip("pandas", reason="pandas is optional (Table.to_pandas)")
    frame = local_table.to_pandas()
    assert list(frame.columns) == list(COLUMNS) and len(frame) == len(local_table)
    by_cell = frame.groupby(["config", "workload", "seed"])["share"].sum()
    assert (abs(by_cell - 1.0) < 1e-9).all()
    assert isinstance(frame, pandas.DataFrame)


def test_a_dask_local_cluster_gives_the_same_table(local_table, dask_cluster):
    from dask.distributed import Client

    with Client(dask_cluster) as client:
        table = sweep(CONFIGS, WORKLOADS, SEEDS, executor=client.get_executor())
        workers = client.run(lambda: __import__("os").getpid())
    assert table == local_table
    assert len(set(workers.values())) == 2  # two real worker processes ran the cells


@pytest.mark.parametrize("args, kwargs, error, message", [
    (({}, WORKLOADS, SEEDS), {}, ValueError, "configs is empty"),
    ((CONFIGS, {}, SEEDS), {}, ValueError, "workloads is empty"),
    ((CONFIGS, WORKLOADS, []), {}, ValueError, "seeds is empty"),
    ((CONFIGS, WORKLOADS, [-1]), {}, ValueError, "seeds must be ints >= 0, got -1"),
    ((CONFIGS, WORKLOADS, [True]), {}, ValueError, "seeds must be ints >= 0, got True"),
    (({"x": 3}, WORKLOADS, SEEDS), {}, TypeError, "configs['x'] must be a path or a leastload.config.Config, got int"),
    ((CONFIGS, {"w": {"rate": 1}}, SEEDS), {}, TypeError, "workloads['w'] must be a leastload.sim.sweep.Generated"),
])
def test_bad_arguments(args, kwargs, error, message):
    with pytest.raises(error) as info:
        sweep(*args, **kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"pattern": "steady", "rate": 1, "duration": 1}, "pattern must be one of poisson, bursty, diurnal, got 'steady'"),
    ({"pattern": "poisson", "rate": 0, "duration": 1}, "rate must be a number above 0, got 0"),
    ({"pattern": "poisson", "rate": float("nan"), "duration": 1}, "rate must be a number above 0, got nan"),
    ({"pattern": "poisson", "rate": 1, "duration": 0}, "duration must be an int >= 1 (seconds), got 0"),
    ({"pattern": "poisson", "rate": 1, "duration": 1.5}, "duration must be an int >= 1 (seconds), got 1.5"),
])
def test_bad_workloads(kwargs, message):
    with pytest.raises(ValueError) as info:
        Generated(**kwargs)
    assert str(info.value) == message


# ---- leastload simulate --sweep FILE ---------------------------------------------------------

import csv  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

SWEEP_FILE = """seeds = [0, 1, 2]
[configs]
lc = "lc.conf"
lb = "lb.conf"
[workloads.poisson]
pattern = "poisson"
rate = 400
duration = 3
[workloads.bursty]
pattern = "bursty"
rate = 300
duration = 2
"""


def simulate(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "leastload", "simulate", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def sweep_dir(tmp_path):
    (tmp_path / "lc.conf").write_text(LC)
    (tmp_path / "lb.conf").write_text(LC.replace("LEASTCONNECTION", "LEASTBANDWIDTH"))
    (tmp_path / "sweep.toml").write_text(SWEEP_FILE)
    return tmp_path


def csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def as_text(table):
    return [{k: "" if v is None else str(v) for k, v in row.items()} for row in table]


def test_the_command_writes_the_table_and_prints_the_shares(sweep_dir, local_table):
    done = simulate("--sweep", sweep_dir / "sweep.toml", "--csv", sweep_dir / "out.csv")
    assert done.returncode == 0, done.stderr
    assert csv_rows(sweep_dir / "out.csv") == as_text(local_table)
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["config", "workload", "vserver", "method", "service", "seeds", "share", "%",
                                "lowest", "highest"]
    assert len(lines) == 2 + len(local_table) // len(SEEDS)  # a row per service and cell less the seeds
    lc_poisson = [line.split() for line in lines[2:] if line.split()[:2] == ["lc", "poisson"]]
    shares = [r["share"] for r in local_table if (r["config"], r["workload"]) == ("lc", "poisson")]
    assert sum(float(x[6]) for x in lc_poisson) == pytest.approx(100 * sum(shares) / len(SEEDS), abs=0.02)


def test_the_command_on_a_dask_scheduler(sweep_dir, local_table, dask_cluster):
    done = simulate("--sweep", sweep_dir / "sweep.toml", "--scheduler", dask_cluster.scheduler_address,
                    "--csv", sweep_dir / "dask.csv")
    assert done.returncode == 0, done.stderr
    assert dask_cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    assert csv_rows(sweep_dir / "dask.csv") == as_text(local_table)


@pytest.mark.parametrize("text, message", [
    ("seeds = 2\n[configs]\nlc = \"lc.conf\"\n", "sweep.toml: no 'workloads'"),
    ("colour = 1\n" + SWEEP_FILE, "sweep.toml: unknown key 'colour' (a sweep file has seeds, configs, workloads)"),
    (SWEEP_FILE.replace("seeds = [0, 1, 2]", "seeds = 0"), "sweep.toml: seeds: a count must be in 1..10000, got 0"),
    (SWEEP_FILE.replace("seeds = [0, 1, 2]", "seeds = [1, -1]"),
     "sweep.toml: seeds: a count or a non-empty list of ints >= 0, got [1, -1]"),
    (SWEEP_FILE.replace("lb.conf", "nope.conf"), "sweep.toml: configs.lb: no such file"),
    (SWEEP_FILE.replace('pattern = "bursty"', 'pattern = "steady"'),
     "sweep.toml: workloads.bursty: pattern must be one of poisson, bursty, diurnal, got 'steady'"),
    (SWEEP_FILE.replace("rate = 300", "rate = -3"), "sweep.toml: workloads.bursty: rate must be a number above 0, got -3"),
    (SWEEP_FILE.replace("duration = 2", "duration = 2\nseed = 4"),
     "sweep.toml: workloads.bursty: unknown key 'seed' (a workload has pattern, rate, duration)"),
    (SWEEP_FILE.replace("duration = 2\n", ""), "sweep.toml: workloads.bursty: no 'duration'"),
    ("seeds = [0\n", "sweep.toml: "),
])
def test_a_bad_sweep_file_is_one_line_and_exit_2(sweep_dir, text, message):
    (sweep_dir / "sweep.toml").write_text(text)
    done = simulate("--sweep", "sweep.toml", "--csv", "out.csv", cwd=sweep_dir)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(message), done.stderr
    assert not (sweep_dir / "out.csv").exists()


@pytest.mark.parametrize("args, message", [
    (("--scheduler", "tcp://127.0.0.1:1"), "leastload simulate: --scheduler: only with --sweep FILE, got tcp://127.0.0.1:1"),
    (("lc.conf", "--sweep", "sweep.toml"), "leastload simulate: CONFIG: not with --sweep (the sweep file names its configs), got lc.conf"),
    (("--sweep", "sweep.toml", "--rate", "5"), "leastload simulate: --rate: not with --sweep (the sweep file sets the runs), got 5"),
    (("--sweep", "sweep.toml", "--implementation", "python"), "leastload simulate: --implementation: a sweep runs the C engine, got python"),
    (("--sweep", "missing.toml"), "leastload simulate: --sweep: cannot read missing.toml: No such file or directory"),
])
def test_flags_that_do_not_go_with_a_sweep(sweep_dir, args, message):
    done = simulate(*args, cwd=sweep_dir)
    assert (done.returncode, done.stderr) == (2, message + "\n")


def test_the_example_sweep_file_runs(tmp_path):
    example = EXAMPLES / "sweeps" / "methods.toml"
    done = simulate("--sweep", example, "--csv", tmp_path / "out.csv")
    assert done.returncode == 0, done.stderr
    rows = csv_rows(tmp_path / "out.csv")
    assert {r["config"] for r in rows} == {"weighted", "two-vservers"}
    assert {r["seed"] for r in rows} == {"0", "1", "2", "3"}
    assert all(int(r["requests"]) >= 0 for r in rows) and sum(int(r["requests"]) for r in rows) > 0
