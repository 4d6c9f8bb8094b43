"""VirtualServer(shared="NAME"): one vserver in shared memory for every process that names it.

The differential discipline across processes: workers run mixed operations on one
shared vserver, each logging its operations with the global sequence number its
call took under the segment's lock; replaying that order on one private vserver
gives the same result for every operation and the same final snapshot. Then the
crash cases: a worker killed with transactions open, and one killed while it holds
the lock. C engine only (the reference keeps its state in one process).
"""
import multiprocessing
import gc
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import leastload
from leastload.engine import native

FORK = multiprocessing.get_context("fork")
# the differential test's operations per worker: small in CI; LEASTLOAD_SHARED_OPS=1000000 for the long run
OPS = int(os.environ.get("LEASTLOAD_SHARED_OPS", "3000"))
WORKERS = int(os.environ.get("LEASTLOAD_SHARED_WORKERS", "4"))
SECONDS_PER_CALL = 0.002  # the clock of the differential test: 500 calls a second
RECLAIM_BOUND = 1.0       # seconds: survivors see a dead worker's transactions ended within this


@pytest.fixture
def name():
    """A fresh segment name, removed after the test."""
    n = "test-" + uuid.uuid4().hex[:12]
    yield n
    leastload.unlink_shared(n)


class SequenceClock:
    """The time is the global sequence number of the call that reads it, so that a
    replay in that order reads the same times."""

    def __init__(self):
        self.vs = None

    def now(self):
        return 0.0 if self.vs is None else self.vs._shared_sequence() * SECONDS_PER_CALL


def shared_vs(c_impl, name, method="LEASTCONNECTION", **kw):
    clock = SequenceClock()
    vs = c_impl.VirtualServer(method, clock, shared=name, **kw)
    clock.vs = vs
    return vs


def outcome(call, *args, **kw):
    try:
        result = call(*args, **kw)
    except (leastload.NoServiceAvailable, leastload.UnknownService, leastload.DuplicateService,
            leastload.TransactionEnded) as exc:
        return type(exc).__name__
    return result


def ending_outcome(call, *args, **kw):
    """A call that ends a transaction: finish(name) of a select(), or a transaction's own
    finish() or fail(). Another process may have unbound the service since, or ended its
    transactions (set_state, unbind and bind again); and a finish(name) of a select() made
    before an unbind and a bind ends one of the new binding's transactions (a name carries
    no binding), so a transaction of that service can find none left open. What it raises
    is logged, and the replay must raise the same."""
    try:
        return outcome(call, *args, **kw)
    except ValueError as exc:
        return str(exc)


# ---- one process at a time ---------------------------------------------------------------------


def test_attached_processes_see_one_vserver(c_impl, name):
    a = c_impl.VirtualServer(shared=name)
    for s in ("s1", "s2", "s3"):
        a.bind(s)
    b = c_impl.VirtualServer(shared=name)
    assert b.services == ("s1", "s2", "s3")
    picks = [a.select(), b.select(), a.select()]
    assert picks == ["s1", "s2", "s3"]  # one cursor, one set of counts
    assert [b.active(s) for s in b.services] == [1, 1, 1]
    b.unbind("s2")
    assert a.services == ("s1", "s3")
    stats = a._shared_stats()
    assert stats["processes"] == [os.getpid(), os.getpid()] and stats["capacity"] == 1024


def test_handles_taking_turns_keep_their_own_transactions(c_impl, name):
    """Two handles of one process lock in turns: a lock after the other handle's sets
    this handle's ledger row again, so closing one ends its own open transactions only."""
    a = c_impl.VirtualServer(shared=name)
    for s in ("s1", "s2", "s3"):
        a.bind(s)
    b = c_impl.VirtualServer(shared=name)
    mine, theirs = [], []
    for _ in range(4):
        mine.append(a.select())
        theirs += [b.select(), b.select()]
    assert sum(a.active(s) for s in a.services) == 12
    del b
    gc.collect()  # the handle closes: its transactions end with no outcome
    assert {s: a.active(s) for s in a.services} == {s: mine.count(s) for s in a.services}
    assert a._shared_stats()["processes"] == [os.getpid()]


@pytest.mark.parametrize("setting, value", [("method", "ROUNDROBIN"), ("window_seconds", 20),
                                            ("shared_capacity", 8), ("hash_seed", 7), ("startup_rr_factor", 2)])
def test_a_second_opener_with_another_setting_is_told_which(c_impl, name, setting, value):
    a = c_impl.VirtualServer(shared=name)
    a.bind("s1")
    with pytest.raises(ValueError, match=f"^shared vserver '{name}' exists with {setting}=.*; this one asks for "
                                         f"{setting}={value!r}$"):
        c_impl.VirtualServer(**{setting: value, "shared": name})
    assert a._shared_stats()["processes"] == [os.getpid()]  # the refused opener left the segment
    assert a.select() == "s1"


def test_the_reference_does_not_share(ref_impl, name):
    with pytest.raises(ValueError, match="only the C engine shares a vserver"):
        ref_impl.VirtualServer(shared=name)


@pytest.mark.parametrize("kw, error, text", [
    ({"shared": 3}, TypeError, "shared must be None or a str, got int 3"),
    ({"shared": ""}, ValueError, "shared must be 1 to 180 of the characters"),
    ({"shared": "a/b"}, ValueError, "shared must be 1 to 180 of the characters"),
    ({"shared": "x", "shared_capacity": 0}, ValueError, "shared_capacity must be an int in 1..1048576, got 0"),
    ({"shared": "x", "shared_capacity": 1.5}, TypeError, "shared_capacity must be an int, got float 1.5"),
])
def test_bad_arguments_are_named(c_impl, kw, error, text):
    with pytest.raises(error, match="^" + text):
        c_impl.VirtualServer(**kw)


def test_set_reaches_every_process_and_the_method_stays(c_impl, name):
    a = c_impl.VirtualServer("URLHASH", shared=name)
    b = c_impl.VirtualServer("URLHASH", shared=name)
    for s in ("s1", "s2", "s3"):
        a.bind(s)
    a.set(hash_seed=3, hashlength=4, outlier_failures=2, new_service_request=10, window_seconds=20)
    assert (b.hash_seed, b.hashlength, b.outlier_failures, b.new_service_request, b.window_seconds) == \
        (3, 4, 2, 10, 20)
    assert b.select(key="/abcd-one") == a.select(key="/abcd-two")  # the same key for both: 4 bytes hashed
    b.fail(b.select(key="/x"))
    assert b.active("s1") + b.active("s2") + b.active("s3") == 2
    with pytest.raises(ValueError, match=r"^set\(method=...\): a shared vserver's settings are fixed"):
        b.set(method="ROUNDROBIN")
    with pytest.raises(ValueError, match=r"^set_method\(\): a shared vserver's settings are fixed"):
        b.set_method("ROUNDROBIN")
    assert a.method == b.method == "URLHASH"
    # a new opener compares with the settings the segment was made with, and reads today's
    c = c_impl.VirtualServer("URLHASH", shared=name)
    assert (c.hash_seed, c.hashlength, c.outlier_failures) == (3, 4, 2)


def test_a_full_segment_refuses_the_next_bind_and_changes_nothing(c_impl, name):
    vs = c_impl.VirtualServer(shared=name, shared_capacity=2)
    vs.bind("s1")
    vs.bind("s2")
    before = vs.snapshot()
    with pytest.raises(ValueError, match=f"^shared vserver '{name}' is full: its segment holds 2 slots"):
        vs.bind("s3")
    with pytest.raises(ValueError, match="is full"):
        vs.reserve(3)
    assert vs.snapshot() == before and vs.services == ("s1", "s2")


def test_replay_runs_on_a_private_vserver_only(c_impl, name):
    np = pytest.importorskip("numpy", reason="a trace (leastload.sim) needs numpy")
    from leastload.sim.replay import replay
    from leastload.sim.workloads import make_trace
    clock = c_impl.ManualClock(0.0)
    vs = c_impl.VirtualServer("LEASTCONNECTION", clock, shared=name)
    trace = make_trace(3, 100, rate=100.0, seed=0)
    with pytest.raises(ValueError, match=r"^replay runs on a private vserver; this one is shared"):
        replay(vs, clock, trace)
    assert vs.services == () and np is not None


def test_a_service_name_must_fit_the_segment(c_impl, name):
    vs = c_impl.VirtualServer(shared=name)
    with pytest.raises(ValueError, match="^name must be at most 240 bytes of UTF-8 in a shared vserver"):
        vs.bind("é" * 121)
    vs.bind("é" * 120)
    assert c_impl.VirtualServer(shared=name).services == ("é" * 120,)


def test_unlink_and_the_leftover_of_a_crash(c_impl, name):
    assert leastload.unlink_shared(name) is False
    child = FORK.Process(target=_bind_and_die, args=(name,))
    child.start()
    child.join()
    assert child.exitcode == 0
    # nobody alive has it open: a leftover, replaced (its method differs, yet no error)
    vs = c_impl.VirtualServer("ROUNDROBIN", shared=name)
    assert vs.services == () and vs.method == "ROUNDROBIN"
    assert leastload.unlink_shared(name) is True
    assert c_impl.VirtualServer("LEASTBANDWIDTH", shared=name).method == "LEASTBANDWIDTH"  # a new one


def _bind_and_die(name):
    vs = native.VirtualServer("LEASTCONNECTION", shared=name)
    vs.bind("old")
    vs.acquire()
    os._exit(0)  # no goodbye: the segment is left as a crash leaves it


def test_a_forked_child_takes_a_place_of_its_own(c_impl, name):
    vs = c_impl.VirtualServer(shared=name)
    vs.bind("s1")
    child = FORK.Process(target=_acquire_in_child, args=(vs,))
    child.start()
    child.join()
    assert child.exitcode == 0
    # the child's transaction was its own: gone with it, not charged to this process
    deadline = time.monotonic() + RECLAIM_BOUND
    while vs.active("s1") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert vs.active("s1") == 0 and vs._shared_stats()["reclaimed"] == 1


def _acquire_in_child(vs):
    vs.acquire()
    os._exit(0)


# ---- the differential test across processes -----------------------------------------------------

POOL = ["s%d" % i for i in range(8)]


def _worker(name, method, settings, seed, ops, out_path, done, reopen_every=0):
    """Mixed operations on the shared vserver; each logged with its call's global
    sequence number. A transaction is known by the index of the acquire that opened it.
    With `reopen_every`, the worker also ends every transaction it has open (its
    select()s included, by name) and closes and opens its handle again every that many
    operations: other processes attach while this one runs, and it attaches while they do."""
    rng = random.Random(seed)
    vs = shared_vs(native, name, method, **settings)
    log = []
    open_tx = []
    selected = []  # with reopen_every: the select()s to end before the handle closes
    for i in range(ops):
        if reopen_every and i and i % reopen_every == 0:
            vs = _end_everything_and_reopen(vs, name, method, settings, log, open_tx, selected)
        r = rng.random()
        if r < 0.30:
            op, args = "select", ()
            result = outcome(vs.select)
            if reopen_every and result in POOL:
                selected.append(result)
        elif r < 0.55:
            op, args = "acquire", (i,)
            tx = outcome(vs.acquire)
            result = tx if isinstance(tx, str) else tx.service
            if not isinstance(tx, str):
                open_tx.append((i, tx))
        elif r < 0.78 and open_tx:
            tx_id, tx = open_tx.pop(rng.randrange(len(open_tx)))
            size = rng.randrange(1, 5000)
            tx.record(bytes=size, packets=1 + size // 1500)
            log.append((vs._shared_sequence(), "tx_record", (tx_id, size, 1 + size // 1500), None))
            status = rng.choice((200, 200, 200, 503))
            op, args = "finish", (tx_id, rng.randrange(1, 5000) / 1e5, status)
            result = ending_outcome(tx.finish, ttfb=args[1], status=status)
        elif r < 0.82 and open_tx:
            tx_id, tx = open_tx.pop(rng.randrange(len(open_tx)))
            op, args = "fail", (tx_id,)
            result = ending_outcome(tx.fail)
        elif r < 0.87:
            op, args = "record", (rng.choice(POOL), rng.randrange(1, 20000))
            result = outcome(vs.record, args[0], bytes=args[1], packets=1)
        elif r < 0.91:
            op, args = "bind", (rng.choice(POOL), rng.randrange(1, 5))
            result = outcome(vs.bind, *args)
        elif r < 0.93:
            op, args = "unbind", (rng.choice(POOL),)
            result = outcome(vs.unbind, *args)
        elif r < 0.95:
            op, args = "drain", (rng.choice(POOL),)
            result = outcome(vs.drain, *args)
        else:
            op, args = "set_state", (rng.choice(POOL), rng.choice(("UP", "UP", "DOWN", "OUT_OF_SERVICE")))
            result = outcome(vs.set_state, *args)
        log.append((vs._shared_sequence(), op, args, result))
    for tx_id, tx in open_tx:  # nothing left open: a worker's exit changes nothing
        result = ending_outcome(tx.finish)
        log.append((vs._shared_sequence(), "finish", (tx_id, None, 200), result))
    Path(out_path).write_bytes(pickle.dumps(log))
    done.wait(600)  # every worker stays until all logs are written: no exit while others run
    os._exit(0)


def _end_everything_and_reopen(vs, name, method, settings, log, open_tx, selected):
    """Ends what this handle has open (so that closing it changes nothing), closes it and
    attaches again by name: a new handle, a new row of the ledger."""
    for tx_id, tx in open_tx:
        result = ending_outcome(tx.finish)
        log.append((vs._shared_sequence(), "finish", (tx_id, None, 200), result))
    open_tx.clear()
    for service in selected:
        result = ending_outcome(vs.finish, service)
        log.append((vs._shared_sequence(), "finish_name", (service,), result))
    selected.clear()
    del vs
    gc.collect()
    return shared_vs(native, name, method, **settings)


def replay_in_order(c_impl, method, settings, logs):
    """The logged calls, in their global order, on one private vserver; asserts each result."""
    clock = c_impl.ManualClock(0.0)
    vs = c_impl.VirtualServer(method, clock, **settings)
    txs = {}
    entries = sorted((seq, str(worker), op, args, result)
                     for worker, log in logs.items() for seq, op, args, result in log)
    for seq, worker, op, args, result in entries:
        clock.set(seq * SECONDS_PER_CALL)
        if op == "acquire":
            tx = outcome(vs.acquire)
            got = tx if isinstance(tx, str) else tx.service
            if not isinstance(tx, str):
                txs[worker, args[0]] = tx
        elif op == "tx_record":
            got = txs[worker, args[0]].record(bytes=args[1], packets=args[2])
        elif op == "finish":
            got = ending_outcome(txs.pop((worker, args[0])).finish, ttfb=args[1], status=args[2])
        elif op == "fail":
            got = ending_outcome(txs.pop((worker, args[0])).fail)
        elif op == "finish_name":
            got = ending_outcome(vs.finish, args[0])
        elif op == "record":
            got = outcome(vs.record, args[0], bytes=args[1], packets=1)
        else:
            got = outcome(getattr(vs, op), *args)
        assert got == result, (seq, worker, op, args)
    assert not txs
    return vs, len(entries)


SLOW_START_AND_EJECTION = {"new_service_request": 3, "new_service_request_increment_interval": 1,
                           "outlier_failures": 3, "outlier_ejection_time": 2}
PERCENT_RAMP = {"new_service_request": 25, "new_service_request_unit": "PERCENT",
                "new_service_request_increment_interval": 2, "outlier_failures": 2, "outlier_ejection_time": 1}


@pytest.mark.parametrize("method, settings", [
    ("LEASTCONNECTION", {}), ("LEASTBANDWIDTH", {}), ("ROUNDROBIN", {}),
    ("LEASTCONNECTION", SLOW_START_AND_EJECTION), ("LEASTBANDWIDTH", PERCENT_RAMP),
], ids=["LC", "LB", "RR", "LC-slow-start-ejection", "LB-percent-ramp-ejection"])
def test_workers_on_one_shared_vserver_agree_with_one_private_replay(c_impl, name, method, settings, tmp_path):
    run_workers_and_replay(c_impl, name, method, settings, tmp_path, FORK, OPS)


# Processes started both ways attach by name after the creator bound services, while the
# others run: with spawn (as with exec, or a program in another language) each has the
# library, and maybe the segment, at an address of its own, which forked workers never do.
# The lock must lay the vserver out for whichever process takes it, every time.
STRESS_OPS = int(os.environ.get("LEASTLOAD_SHARED_STRESS_OPS", "1200"))
REOPEN_EVERY = 100


@pytest.mark.parametrize("start", ["spawn", "fork"])
@pytest.mark.parametrize("method, settings", [("LEASTBANDWIDTH", {}), ("LEASTCONNECTION", SLOW_START_AND_EJECTION)],
                         ids=["LB", "LC-slow-start-ejection"])
def test_processes_attaching_and_leaving_while_others_run_agree_with_one_private_replay(
        c_impl, name, method, settings, start, tmp_path):
    run_workers_and_replay(c_impl, name, method, settings, tmp_path, multiprocessing.get_context(start),
                           STRESS_OPS, reopen_every=REOPEN_EVERY)


def _attach_and_leave(name, method, settings, stop, limit):
    """Opens the vserver by name and closes it again, over and over, until `stop`: each
    attach happens between two calls of the running workers."""
    for _ in range(limit):
        if stop.is_set():
            break
        vs = shared_vs(native, name, method, **settings)
        del vs
        gc.collect()
    os._exit(0)


def run_workers_and_replay(c_impl, name, method, settings, tmp_path, context, ops, reopen_every=0):
    """WORKERS processes of `context` run _worker on the vserver the parent created and bound;
    their logs, replayed in the global order on one private vserver, give every result they
    saw and the parent's final snapshot. With `reopen_every`, one more process attaches and
    leaves (changing nothing) as often as it can while they run."""
    parent = shared_vs(c_impl, name, method, **settings)
    logs = {"parent": []}
    for s in POOL[:4]:
        parent.bind(s)
        logs["parent"].append((parent._shared_sequence(), "bind", (s, 1), None))
    done = context.Event()
    paths = [tmp_path / f"w{w}" for w in range(WORKERS)]
    procs = [context.Process(target=_worker, args=(name, method, settings, 1000 + w, ops, paths[w], done,
                                                   reopen_every))
             for w in range(WORKERS)]
    stop = context.Event()
    if reopen_every:
        procs.append(context.Process(target=_attach_and_leave, args=(name, method, settings, stop, 100_000)))
    for p in procs:
        p.start()
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and len(logs) < WORKERS + 1:
            logs.update({w: pickle.loads(paths[w].read_bytes()) for w in range(WORKERS)
                         if w not in logs and paths[w].exists() and _complete(paths[w])})
            dead = [p.exitcode for p in procs if p.exitcode is not None]
            assert not dead, f"a worker died before writing its log: exit codes {dead}"
            time.sleep(0.05)
        assert len(logs) == WORKERS + 1, "a worker did not finish"
        stop.set()
        # compared while the workers live on: a dead one's select()s would be reclaimed
        seqs = [e[0] for log in logs.values() for e in log if e[1] != "tx_record"]
        assert len(seqs) == len(set(seqs))  # each call has a place of its own in the global order
        replayed, n = replay_in_order(c_impl, method, settings, logs)
        assert n >= WORKERS * ops
        with parent.atomic():
            assert parent.snapshot() == replayed.snapshot()
            # the policy ran once for all: the same ramps and ejections (the shared lists keep the newest)
            assert parent.slow_start_exits == replayed.slow_start_exits[-len(parent.slow_start_exits):]
            assert parent.outlier_events == replayed.outlier_events[-len(parent.outlier_events):]
            assert [parent.slow_start(s) for s in parent.services] == \
                [replayed.slow_start(s) for s in replayed.services]
            assert [parent.ejection(s) for s in parent.services] == [replayed.ejection(s) for s in replayed.services]
        if settings:
            assert replayed.outlier_events and replayed.slow_start_exits  # the policy had work to do
    finally:
        stop.set()
        done.set()
        for p in procs:
            p.join(60)
    assert [p.exitcode for p in procs] == [0] * len(procs)


def _complete(path):
    try:
        pickle.loads(path.read_bytes())
    except Exception:  # still being written
        return False
    return True


# ---- a worker killed ---------------------------------------------------------------------------


def _hold_transactions(name, ready, in_lock):
    vs = native.VirtualServer(shared=name)
    if in_lock:
        with vs.atomic():  # parks inside the critical section: the segment's lock is held
            vs.acquire()
            vs.acquire()
            ready.set()
            time.sleep(600)
    for _ in range(5):
        vs.acquire()
    ready.set()
    time.sleep(600)


def _kill_and_wait_for_reclaim(c_impl, name, in_lock):
    vs = c_impl.VirtualServer(shared=name)
    for s in ("s1", "s2", "s3"):
        vs.bind(s)
    mine = [vs.acquire() for _ in range(2)]  # this process's own stay open throughout
    ready = FORK.Event()
    worker = FORK.Process(target=_hold_transactions, args=(name, ready, in_lock))
    worker.start()
    try:
        assert ready.wait(30)
        if not in_lock:
            assert sum(vs.active(s) for s in vs.services) == 7
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(30)
        assert worker.exitcode == -signal.SIGKILL
        killed = time.monotonic()
        reclaimed_at = None
        picks = 0
        while time.monotonic() - killed < RECLAIM_BOUND:
            vs.select()  # survivors carry on: no call waits for the dead
            picks += 1
            stats = vs._shared_stats()
            if stats["reclaimed"] and reclaimed_at is None:
                reclaimed_at = time.monotonic() - killed
                break
            time.sleep(0.005)
        assert reclaimed_at is not None, f"not reclaimed within {RECLAIM_BOUND} s"
        return vs, mine, stats, picks
    finally:
        if worker.exitcode is None:
            worker.kill()
            worker.join(30)


def test_a_killed_worker_s_transactions_are_reclaimed(c_impl, name):
    vs, mine, stats, picks = _kill_and_wait_for_reclaim(c_impl, name, in_lock=False)
    assert stats["reclaimed"] == 5 and stats["repairs"] == 0
    assert stats["processes"] == [os.getpid()]
    # what is left open is this process's: its two, and its picks since
    assert sum(vs.active(s) for s in vs.services) == 2 + picks
    for tx in mine:
        tx.finish()


def test_a_worker_killed_holding_the_lock_leaves_it_usable_and_repaired(c_impl, name):
    vs, mine, stats, picks = _kill_and_wait_for_reclaim(c_impl, name, in_lock=True)
    assert stats["reclaimed"] == 2 and stats["repairs"] == 1
    assert sum(vs.active(s) for s in vs.services) == 2 + picks
    for tx in mine:
        tx.finish()
    assert sum(vs.active(s) for s in vs.services) == picks


# ---- the C API: another program attaches ---------------------------------------------------------

def _build_c_program(tmp_path, program="shared_attach", lock="robust"):
    """tests/engine/c/PROGRAM.c built with the whole core; lock "owner" builds the owner-word
    lock (LL_SHARED_LOCK_PORTABLE) where the robust mutex is the default, as the process
    it attaches to was built (its _shared_stats()["lock"]): kinds never mix in one segment."""
    root = Path(__file__).resolve().parents[2]
    csrc = root / "csrc"
    cc = shutil.which("cc") or shutil.which("gcc")
    if not (csrc / "ll_shared.c").exists() or cc is None:
        pytest.skip("the C test program needs the source tree's csrc/ and a C compiler")
    exe = tmp_path / f"{program}-{lock}"
    sources = sorted(map(str, csrc.glob("*.c"))) + sorted(map(str, (csrc / "methods").glob("*.c")))
    defines = ["-DLL_SHARED_LOCK_PORTABLE"] if lock == "owner" else []
    subprocess.run([cc, "-std=c11", "-O1", *defines, "-I", str(csrc), str(Path(__file__).parent / "c" / f"{program}.c"),
                    *sources, "-o", str(exe), "-lm", "-lpthread"], check=True, timeout=300)
    return exe


def _build_attach_program(tmp_path, vs=None):
    return _build_c_program(tmp_path, lock="robust" if vs is None else vs._shared_stats()["lock"])


def test_a_c_program_attaches_and_picks(c_impl, name, tmp_path):
    vs = c_impl.VirtualServer(shared=name)
    exe = _build_attach_program(tmp_path, vs)
    for s in ("alpha", "beta", "gamma"):
        vs.bind(s)
    held = [vs.acquire(), vs.acquire()]  # alpha and beta busy: least connection picks gamma first
    run = subprocess.run([str(exe), name, "3"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["gamma", "alpha", "beta"]
    assert [vs._selections(s)[0] for s in vs.services] == [2, 2, 1]  # its picks were charged here
    # it closed its handle: its three transactions ended with it, this process's two stay
    assert [vs.active(s) for s in vs.services] == [1, 1, 0]
    assert vs._shared_stats()["reclaimed"] == 3
    for tx in held:
        tx.finish()


def _call_around_an_attach(name, called, go, picks):
    vs = native.VirtualServer(shared=name)
    picks.put(vs.select())  # this process locked last
    called.set()
    assert go.wait(60)
    picks.put(vs.select())  # the first call after another program attached
    picks.close()
    picks.join_thread()
    os._exit(0)


def test_a_call_after_another_program_attached_uses_its_own_process_s_layout(c_impl, name, tmp_path):
    """A spawned process calls, a C program attaches (and takes no lock after), the process
    calls again: its call must not run on what the attach laid out for the program (its
    method table sits at another address there). Before every lock laid the vserver out
    for its process, this call jumped into the other program's address space."""
    vs = c_impl.VirtualServer(shared=name)
    exe = _build_attach_program(tmp_path, vs)
    for s in ("alpha", "beta"):
        vs.bind(s)
    spawn = multiprocessing.get_context("spawn")
    called, go, picks = spawn.Event(), spawn.Event(), spawn.Queue()
    child = spawn.Process(target=_call_around_an_attach, args=(name, called, go, picks))
    child.start()
    program = None
    try:
        assert called.wait(60)
        program = subprocess.Popen([str(exe), name, "0", "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True)
        assert program.stdout.readline() == "attached\n"
        go.set()
        child.join(60)
        assert child.exitcode == 0
        assert [picks.get(timeout=10), picks.get(timeout=10)] == ["alpha", "beta"]
    finally:
        go.set()
        if program is not None:
            program.communicate(timeout=60)
        if child.exitcode is None:
            child.kill()
            child.join(30)


def test_the_c_program_says_when_there_is_no_segment(tmp_path, name):
    exe = _build_attach_program(tmp_path)
    run = subprocess.run([str(exe), name, "1"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "no shared vserver" in run.stderr
    assert leastload.unlink_shared(name) is False  # it left nothing behind


@pytest.mark.parametrize("lock, kind", [("robust", 1), ("owner", 2)])
def test_a_c_program_recovers_the_lock_from_a_holder_killed_in_it(tmp_path, name, lock, kind):
    """Both POSIX locks, whatever this build takes: a forked holder killed by SIGKILL, and
    the next lock repairs (tests/engine/c/shared_crash.c says what it checks). On macOS
    both builds take the owner word."""
    exe = _build_c_program(tmp_path, "shared_crash", lock)
    run = subprocess.run([str(exe), name], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == f"lock: {2 if sys.platform == 'darwin' else kind}"
    assert len(lines) == 10 and all(line.startswith("ok: ") for line in lines[1:]), run.stdout


def test_this_build_s_lock_is_named(c_impl, name):
    lock = c_impl.VirtualServer(shared=name)._shared_stats()["lock"]
    expected = {"linux": "robust", "darwin": "owner", "win32": "windows"}.get(sys.platform)
    if os.environ.get("LEASTLOAD_EXPECT_SHARED_LOCK"):  # the portable build's CI stage says which
        expected = os.environ["LEASTLOAD_EXPECT_SHARED_LOCK"]
    assert lock == expected


def _select_and_wait(name, ready):
    vs = native.VirtualServer(shared=name, new_service_request=5, new_service_request_increment_interval=1)
    vs.select()  # a transaction with no handle: only its process could end it
    ready.set()
    time.sleep(600)


def test_a_draining_service_left_idle_by_a_reclaim_is_unbound(c_impl, name):
    vs = c_impl.VirtualServer(shared=name, new_service_request=5, new_service_request_increment_interval=1)
    vs.bind("s1")
    vs.bind("s2")
    ready = FORK.Event()
    worker = FORK.Process(target=_select_and_wait, args=(name, ready))
    worker.start()
    try:
        assert ready.wait(30)
        vs.drain("s1")  # its one transaction is the worker's
        assert vs.services == ("s1", "s2") and vs.active("s1") == 1
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(30)
        deadline = time.monotonic() + RECLAIM_BOUND
        while "s1" in vs.services and time.monotonic() < deadline:
            time.sleep(0.005)
        assert vs.services == ("s2",)  # unbound through the facade: its slow start record went with it
        assert vs.slow_start("s2") is None
    finally:
        if worker.exitcode is None:
            worker.kill()
            worker.join(30)
