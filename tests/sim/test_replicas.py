"""leastload.sim.replicas: R replicas with an engine each against one global engine.

Short runs of the study's model (30 s, the first 15 not measured): one replica makes
the global engine's picks, R replicas under PER_SECOND slow start let a new backend
have R x the rate, the active-transaction error is 0 for one engine and grows with R,
and the same table comes from a process pool, a thread pool and a Dask LocalCluster.
"""
import concurrent.futures
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy", reason="leastload.sim needs numpy (the sim extra)")

from leastload.sim import replicas  # noqa: E402
from leastload.sim.replicas import COLUMNS, Backend, Model, cells, run_cell, simulate, study, summary  # noqa: E402

SHORT = Model(duration=30, warmup=15)
RAMP = Model(duration=30, warmup=15, bind_at=5, ramp_rate=2, ramp_seconds=5)


def picks(*args, **kwargs):
    run = simulate(*args, **kwargs)
    return run.picks.tolist(), run.response.tolist()


@pytest.mark.parametrize("method, reports", [("LEASTCONNECTION", False), ("ROUNDROBIN", True),
                                             ("LEASTRESPONSETIME", False), ("CUSTOMLOAD", True)])
def test_one_replica_makes_the_global_engines_picks(method, reports):
    one = picks("steady", method, reports, "replicas", 1, "random", 3, SHORT)
    assert one == picks("steady", method, reports, "global", 1, "random", 3, SHORT)
    # the global engine's picks do not depend on R or the spreader: their draws are a stream of their own
    assert one == picks("steady", method, reports, "global", 8, "client-hash", 3, SHORT)
    assert len(one[0]) > 3000 and -1 not in one[0]


def test_replicas_pick_otherwise():
    one = picks("steady", "LEASTCONNECTION", False, "global", 1, "random", 3, SHORT)
    assert picks("steady", "LEASTCONNECTION", False, "replicas", 4, "random", 3, SHORT)[0] != one[0]


def test_the_reference_engine_makes_the_same_picks():
    model = Model(duration=6, warmup=2)
    for method, reports in (("LEASTCONNECTION", False), ("ROUNDROBIN", True)):
        c = simulate("steady", method, reports, "replicas", 3, "random", 1, model)
        python = simulate("steady", method, reports, "replicas", 3, "random", 1, model, implementation="python")
        assert c.picks.tolist() == python.picks.tolist()
        assert c.response.tolist() == python.response.tolist()


def new_backend_per_replica_second(run, model, replicas_):
    """Requests the new backend got from each replica in each second of its ramp."""
    new = run.backends.index(model.new_backend.name)
    counts = np.zeros((replicas_, model.ramp_seconds), dtype=int)
    for t, r, b in zip(run.arrival, run.replica, run.picks):
        if b == new and model.bind_at <= t < model.bind_at + model.ramp_seconds:
            counts[r, int(t) - model.bind_at] += 1
    return counts


@pytest.mark.parametrize("method", ["LEASTCONNECTION", "ROUNDROBIN"])
def test_slow_start_each_replica_gives_the_rate_so_r_replicas_give_r_times(method):
    for r in (1, 2, 4):
        run = simulate("slow-start", method, False, "replicas", r, "random", 0, RAMP)
        # every replica sees about 280 / R requests a second: each applies the cap, 2 a second, fully
        assert (new_backend_per_replica_second(run, RAMP, r) == RAMP.ramp_rate).all()
        rows = run_cell("slow-start", method, False, "replicas", r, "random", 0, RAMP)
        assert {row["overshoot"] for row in rows} == {float(r)}
    rows = run_cell("slow-start", method, False, "global", 4, "random", 0, RAMP)
    assert {row["overshoot"] for row in rows} == {1.0}


def test_slow_start_overshoot_with_sixteen_replicas_is_about_sixteen():
    rows = run_cell("slow-start", "ROUNDROBIN", False, "replicas", 16, "random", 0, RAMP)
    # at 17.5 requests a second a replica can, now and then, have too few to give the new backend 2
    assert 15.0 <= rows[0]["overshoot"] <= 16.0
    hashed = run_cell("slow-start", "ROUNDROBIN", False, "replicas", 16, "client-hash", 0, RAMP)
    # 64 Zipf clients hashed onto 16 replicas: the replicas of a few light clients cannot
    # fill their 2 a second, so the overshoot is below R; each replica still gives up to 2
    run = simulate("slow-start", "ROUNDROBIN", False, "replicas", 16, "client-hash", 0, RAMP)
    per_second = new_backend_per_replica_second(run, RAMP, 16)
    assert per_second.max() == RAMP.ramp_rate and (per_second < RAMP.ramp_rate).sum() > 5
    assert hashed[0]["overshoot"] == per_second.sum() / (RAMP.ramp_rate * RAMP.ramp_seconds) < 15.0


def errors(method, spreader="random", seed=0):
    out = {}
    for r in (2, 4, 8, 16):
        out[r] = run_cell("steady", method, False, "replicas", r, spreader, seed, SHORT)[0]["error"]
    return out


def test_the_active_error_is_zero_for_one_engine_and_grows_with_r():
    for method, reports in replicas.STUDY_METHODS:
        for mode, r in (("global", 8), ("replicas", 1)):
            rows = run_cell("steady", method, reports, mode, r, "random", 0, SHORT)
            assert {row["error"] for row in rows} == {0.0} and {row["active_error"] for row in rows} == {0.0}
    lc = errors("LEASTCONNECTION")
    assert 0 < lc[2] < lc[4] < lc[8] < lc[16]
    assert lc[16] > 0.5  # the picking replica's view is off by over half the true in-flight total


def test_client_hash_loads_one_replica_more_and_keeps_each_client_on_one():
    run = simulate("steady", "LEASTCONNECTION", False, "replicas", 8, "client-hash", 0, SHORT)
    for client in range(SHORT.clients):
        assert len(set(run.replica[run.client == client].tolist())) <= 1
    hashed = run_cell("steady", "LEASTCONNECTION", False, "replicas", 8, "client-hash", 0, SHORT)[0]
    spread = run_cell("steady", "LEASTCONNECTION", False, "replicas", 8, "random", 0, SHORT)[0]
    assert spread["replica_max_share"] < 0.14 < 0.2 < hashed["replica_max_share"]
    assert hashed["error"] > spread["error"]


def test_the_rows_of_a_cell():
    rows = run_cell("steady", "ROUNDROBIN", True, "replicas", 4, "random", 2, SHORT)
    assert [r["backend"] for r in rows] == ["b1", "b2", "b3", "b4"]
    assert all(tuple(r) == COLUMNS for r in rows)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    run = simulate("steady", "ROUNDROBIN", True, "replicas", 4, "random", 2, SHORT)
    measured = (run.arrival >= 15) & (run.arrival < 30)
    assert sum(r["requests"] for r in rows) == int(measured.sum())
    assert rows[0]["p99"] == pytest.approx(float(np.percentile(run.response[measured], 99)))
    # utilization reports make the weights capacities (qps / utilization): b4 has half the others'
    assert rows[3]["share"] == pytest.approx(1 / 7, abs=0.03)
    assert all(r["overshoot"] is None and r["dropped"] == 0 for r in rows)


def test_the_queueing_model_tells_the_methods_apart():
    # round robin gives the slow backend a quarter: 1.4 x what it can serve, and its queue grows
    rr = run_cell("steady", "ROUNDROBIN", False, "global", 1, "random", 0, SHORT)
    lc = run_cell("steady", "LEASTCONNECTION", False, "global", 1, "random", 0, SHORT)
    assert rr[3]["offered"] > 1.3 and max(r["offered"] for r in lc) < 1.0
    assert lc[0]["p99"] < 1.0 < rr[0]["p99"]
    assert 0.0 < lc[0]["p50"] < lc[0]["p99"]


SMALL = [("steady", "LEASTCONNECTION", False, "global", 1, "random", 0, SHORT),
         ("steady", "LEASTCONNECTION", False, "replicas", 4, "client-hash", 0, SHORT),
         ("slow-start", "ROUNDROBIN", True, "replicas", 2, "random", 1, RAMP),
         ("steady", "CUSTOMLOAD", True, "replicas", 3, "random", 1, SHORT)]


@pytest.fixture(scope="module")
def local_table():
    return study(SMALL)  # the default: a local process pool


def test_the_same_table_from_a_process_pool_and_a_thread_pool(local_table):
    assert len(local_table) == 4 + 4 + 5 + 4 and local_table.columns == COLUMNS
    assert [r["method"] for r in local_table.rows[::4]][:2] == ["LEASTCONNECTION", "LEASTCONNECTION"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        assert study(SMALL, executor=pool) == local_table
        assert pool.submit(lambda: 7).result() == 7  # left running


def test_the_same_table_from_a_dask_local_cluster(local_table, dask_cluster):
    from dask.distributed import Client

    with Client(dask_cluster) as client:
        assert study(SMALL, executor=client.get_executor()) == local_table


def test_the_study_cells_and_summary():
    todo = cells(variants=[("LEASTCONNECTION", False)], replicas=[2], spreaders=["random"], seeds=[0, 1],
                 model=SHORT)
    assert [(c[0], c[3], c[4], c[6]) for c in todo] == [
        ("steady", "global", 1, 0), ("steady", "replicas", 2, 0), ("steady", "global", 1, 1),
        ("steady", "replicas", 2, 1), ("slow-start", "global", 1, 0), ("slow-start", "replicas", 2, 0),
        ("slow-start", "global", 1, 1), ("slow-start", "replicas", 2, 1)]
    rows = [row for cell in todo for row in run_cell(*cell)]
    lines = summary(rows, SHORT)
    assert [(x.replicas, x.seeds) for x in lines] == [(None, 2), (2, 2)]
    assert lines[0].error == 0.0 and lines[1].error > 0
    assert lines[0].overshoot == pytest.approx(1.0) and lines[1].overshoot == pytest.approx(2.0)
    b4 = [r["share"] for r in rows if (r["scenario"], r["mode"], r["backend"]) == ("steady", "global", "b4")]
    assert lines[0].slow_share == pytest.approx(sum(b4) / 2)
    text = replicas.summary_text(lines, SHORT)
    assert text.splitlines()[0].startswith("| method | reports | R | spreader | b4 share % |")
    assert len(text.splitlines()) == 4


@pytest.mark.parametrize("args, error, message", [
    (("steady", "FASTEST", False, "global", 1, "random", 0), ValueError, "method must be one of LEASTCONNECTION"),
    (("steady", "CUSTOMLOAD", False, "global", 1, "random", 0), ValueError,
     "reports must be True for method CUSTOMLOAD"),
    (("steady", "ROUNDROBIN", 1, "global", 1, "random", 0), TypeError, "reports must be a bool, got 1"),
    (("steady", "ROUNDROBIN", False, "shared", 1, "random", 0), ValueError,
     "mode must be one of replicas, global, got 'shared'"),
    (("steady", "ROUNDROBIN", False, "replicas", 0, "random", 0), ValueError,
     "replicas must be an int in 1..1024, got 0"),
    (("steady", "ROUNDROBIN", False, "replicas", 2.0, "random", 0), ValueError,
     "replicas must be an int in 1..1024, got 2.0"),
    (("steady", "ROUNDROBIN", False, "replicas", 2, "hash", 0), ValueError,
     "spreader must be one of random, client-hash, got 'hash'"),
    (("steady", "ROUNDROBIN", False, "replicas", 2, "random", -1), ValueError, "seed must be an int >= 0, got -1"),
    (("warm", "ROUNDROBIN", False, "replicas", 2, "random", 0), ValueError,
     "scenario must be one of steady, slow-start, got 'warm'"),
    (("steady", "ROUNDROBIN", False, "replicas", 2, "random", 0, {"load": 1}), TypeError,
     "model must be a leastload.sim.replicas.Model, got dict"),
])
def test_bad_cells(args, error, message):
    with pytest.raises(error) as info:
        simulate(*args)
    assert message in str(info.value)


@pytest.mark.parametrize("make, error, message", [
    (lambda: Backend("b", 0, 0.1), ValueError, "servers must be an int in 1..10000, got 0"),
    (lambda: Backend("b", 2, float("nan")), ValueError, "mean_service must be a finite number above 0, got nan"),
    (lambda: Model(load=0), ValueError, "load must be a finite number above 0, got 0"),
    (lambda: Model(warmup=60, duration=60), ValueError, "warmup must be an int in 0..59, got 60"),
    (lambda: Model(backends=[Backend("b", 1, 1.0)]), TypeError, "backends must be a non-empty tuple of Backend"),
    (lambda: Model(new_backend=Backend("b1", 1, 1.0)), ValueError, "backends and new_backend must have distinct names"),
    (lambda: cells(replicas=[]), ValueError, "variants, replicas, spreaders and seeds must each be non-empty"),
    (lambda: cells(replicas=[2000]), ValueError, "replicas must be an int in 1..1024, got 2000"),
])
def test_bad_models(make, error, message):
    with pytest.raises(error) as info:
        make()
    assert message in str(info.value)


def command(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "leastload.sim.replicas", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_the_command_prints_the_table_and_writes_the_rows_and_the_chart(tmp_path):
    args = ["--seeds", "1", "--replicas", "2", "--duration", "20", "--warmup", "10", "--csv", tmp_path / "rows.csv"]
    plot = _has_matplotlib()
    if plot:
        args += ["--out", tmp_path / "chart.png"]
    done = command(*args)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("| method | reports | R |") and len(lines) == 2 + 9 * 3
    rows = (tmp_path / "rows.csv").read_text().splitlines()
    assert rows[0] == ",".join(COLUMNS)
    assert len(rows) == 1 + 27 * 4 + 27 * 5  # 9 variants x 3 cells; steady: 4 backends, slow-start: 5, a cell
    if plot:
        assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_on_a_dask_scheduler(tmp_path, dask_cluster):
    args = ["--seeds", "1", "--replicas", "3", "--duration", "12", "--warmup", "4"]
    local = command(*args, "--csv", tmp_path / "local.csv")
    remote = command(*args, "--scheduler", dask_cluster.scheduler_address, "--csv", tmp_path / "dask.csv")
    assert (local.returncode, remote.returncode) == (0, 0), remote.stderr
    assert remote.stdout == local.stdout
    assert (tmp_path / "dask.csv").read_text() == (tmp_path / "local.csv").read_text()


def _has_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("args, message", [
    (("--replicas", "0"), "--replicas must be ints 1..1024 separated by commas, got '0'"),
    (("--replicas", "2,x"), "--replicas must be ints 1..1024 separated by commas, got '2,x'"),
    (("--seeds", "0"), "--seeds must be an int >= 1, got 0"),
    (("--warmup", "30", "--duration", "30"), "warmup must be an int in 0..29, got 30"),
])
def test_bad_flags(args, message):
    done = command(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"python -m leastload.sim.replicas: {message}\n"
