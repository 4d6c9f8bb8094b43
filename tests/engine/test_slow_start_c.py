"""The vendor's automated PER_SECOND slow-start table through the C API alone
(tests/engine/c/slow_start_table.c): on a private vserver, and on a shared one
made from Python, where the C program binds the new service and sends the
traffic while this process, attached to the same segment, sees the core's caps
and exits. The policy is the core's: neither side computes a ramp.
"""
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

import leastload

# docs/slow-start.md: S1..S4 each, then S5, at t = 0, 10, ..., 50 (S5 leaves at 50)
VENDOR_ROWS = {0: (25, 0), 10: (24, 4), 20: (23, 8), 30: (22, 12), 40: (21, 16), 50: (20, 20)}
FAIR_SHARE = "the cap reached the fair share"


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    root = Path(__file__).resolve().parents[2]
    csrc = root / "csrc"
    cc = shutil.which("cc") or shutil.which("gcc")
    if not (csrc / "ll_policy.c").exists() or cc is None:
        pytest.skip("the C test program needs the source tree's csrc/ and a C compiler")
    exe = tmp_path_factory.mktemp("c") / "slow_start_table"
    sources = sorted(map(str, csrc.glob("*.c"))) + sorted(map(str, (csrc / "methods").glob("*.c")))
    # the lock the installed build took (CI's portable-lock stage says so): a segment refuses another kind
    lock = ["-DLL_SHARED_LOCK_PORTABLE"] if os.environ.get("LEASTLOAD_EXPECT_SHARED_LOCK") == "owner" else []
    subprocess.run([cc, "-std=c11", "-O1", *lock, "-I", str(csrc), str(Path(__file__).parent / "c" / "slow_start_table.c"),
                    *sources, "-o", str(exe), "-lm", "-lpthread"], check=True, timeout=300)
    return exe


def run(program, *args):
    done = subprocess.run([str(program), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows, exits = {}, []
    for line in done.stdout.splitlines():
        word = line.split()
        if word[0] == "exit":
            exits.append((float(word[1]), word[2], word[3]))
        else:
            rows[int(word[0])] = tuple(map(int, word[1:]))
    return rows, exits


def test_the_c_api_reproduces_the_automated_table(program):
    rows, exits = run(program, "-")
    for t, (each, new) in VENDOR_ROWS.items():
        assert rows[t] == (each, each, each, each, new), t
    assert exits == [(50.0, "S5", "fair-share")]


def test_a_c_program_ramps_a_shared_vserver_and_python_sees_the_same_caps(c_impl, program):
    name = "test-" + uuid.uuid4().hex[:12]
    base = 1000.0
    clock = c_impl.ManualClock(base)
    vs = c_impl.VirtualServer("ROUNDROBIN", clock=clock, shared=name)
    try:
        for s in ("S1", "S2", "S3", "S4"):
            vs.bind(s)
        vs.set(new_service_request=4, new_service_request_unit="PER_SECOND", new_service_request_increment_interval=10)
        rows, exits = run(program, name, base, 0, 35)  # binds S5 at `base`, sends seconds 0..34
        for t in (0, 10, 20, 30):
            each, new = VENDOR_ROWS[t]
            assert rows[t] == (each, each, each, each, new), t
        assert exits == []
        # this process sees the ramp the C program's calls drove: the core's cap and increments
        assert vs.services == ("S1", "S2", "S3", "S4", "S5")
        ramp = vs.slow_start("S5")
        assert (ramp["cap"], ramp["increments"], ramp["since"], ramp["mode"]) == (12, 3, base, "automated")
        rows, exits = run(program, name, base, 35, 60)
        for t in (40, 50):
            each, new = VENDOR_ROWS[t]
            assert rows[t] == (each, each, each, each, new), t
        assert exits == [(50.0, "S5", "fair-share")]
        assert vs.slow_start("S5") is None
        assert vs.slow_start_exits == [(base + 50, "S5", FAIR_SHARE)]
    finally:
        del vs
        leastload.unlink_shared(name)
