"""`leastload proxy` as a process: SIGPIPE, the supervised `--workers N`, and the flags.

The proxies here are real `python -m leastload proxy` processes (the command line
under test) in front of `leastload.cli.backends` processes on 127.0.0.1. Worker pids are
read from /proc (Linux only). Every wait is bounded.
"""

import inspect
import os
import re
import signal
import socket
import struct
import sys
import time
import urllib.request

import pytest

from leastload.proxy import Proxy, _cli, _supervisor
from leastload_testkit.backends import start_backend
from leastload_testkit.ports import free_ports
from leastload_testkit.processes import children as kit_children, is_alive
from leastload_testkit.proxy_process import ProxyProcess
from leastload_testkit.waits import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads worker pids from /proc")


@pytest.fixture
def backend():
    started = []

    def start(size=1024):
        started.append(start_backend(0.0, size))
        return started[-1]
    yield start
    for b in started:
        b.stop()


def get(port, path="/?size=100", timeout=10):
    """A plain GET on a new connection: (status, body length)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.status, len(r.read())


def children(pid):
    """The live child processes of `pid`."""
    return sorted(p for p in kit_children(pid) if is_alive(p))


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode().split("\0")


# ---- SIGPIPE ----------------------------------------------------------------------------------


def test_clients_resetting_mid_response_do_not_kill_the_cli_proxy_under_uvloop(tmp_path, backend):
    """The attack that killed `leastload proxy` with SIGPIPE (exit -13): a client reads a
    little of a large response, stops reading until the proxy's writes back up, then resets
    the connection (SO_LINGER 0). Under uvloop the proxy reads the reset, then flushes its
    queued write to the dead socket: EPIPE, which must be an error, not a signal. Without
    the fix the first attack killed it in every run tried; the later ones vary the timing."""
    pytest.importorskip("uvloop")
    big = backend(size=20_000_000)
    cli = ProxyProcess(["--listen", "127.0.0.1:0", "--loop", "uvloop", "--health-check", "none",
                        "--backend", f"a={big.address}"])
    try:
        deadline = time.monotonic() + 6.0
        for attack in range(12):
            with socket.create_connection(("127.0.0.1", cli.port), timeout=5) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                got = 0
                while got < 100_000:
                    piece = s.recv(65536)
                    assert piece, "the proxy closed the connection first"
                    got += len(piece)
                time.sleep((0.02, 0, 0.01, 0.03, 0.005, 0.015)[attack % 6])  # unread: the proxy's writes queue up
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            time.sleep(0.01)
            assert cli.proc.poll() is None, f"the proxy died ({cli.proc.returncode}) at attack {attack}"
            if time.monotonic() > deadline:
                break
        assert get(cli.port) == (200, 100)
    finally:
        code = cli.stop()
    assert code == 0, cli.err()
    assert "Traceback" not in cli.err()


# ---- --workers N, supervised ------------------------------------------------------------------


def test_a_killed_worker_is_restarted_with_its_flags_and_admin_port(tmp_path, backend):
    b = backend()
    admin = free_ports(3)  # the supervisor's admin port, then worker 0's and worker 1's
    cli = ProxyProcess(["--listen", "127.0.0.1:0", "--workers", "2", "--health-check", "none",
                        "--admin", f"127.0.0.1:{admin}", "--max-headers", "50", "--xff", "replace", "--via",
                        "--backend", f"a={b.address}"])
    try:
        workers = wait_for(lambda: len(children(cli.proc.pid)) == 2 and children(cli.proc.pid), 10, "2 workers")
        by_admin = {cmdline(pid)[cmdline(pid).index("--admin") + 1]: pid for pid in workers}
        assert set(by_admin) == {f"127.0.0.1:{admin + 1}", f"127.0.0.1:{admin + 2}"}
        for pid in workers:  # the new flags reach the workers; none of them supervises in turn
            args = cmdline(pid)
            assert args[args.index("--max-headers") + 1] == "50" and "--via" in args
            assert args[args.index("--xff") + 1] == "replace"
            last = max(i for i, arg in enumerate(args) if arg == "--workers")
            assert args[last + 1] == "1"
        victim = by_admin[f"127.0.0.1:{admin + 2}"]
        os.kill(victim, signal.SIGKILL)
        now = wait_for(lambda: (lambda pids: len(pids) == 2 and victim not in pids and pids)(children(cli.proc.pid)),
                       20, "a new worker in place of the killed one")
        (new,) = set(now) - set(workers)
        assert cmdline(new)[cmdline(new).index("--admin") + 1] == f"127.0.0.1:{admin + 2}"

        def admin_answers():
            try:
                return get(admin + 2, "/leastload/status", timeout=2)[0] == 200
            except OSError:
                return False
        wait_for(admin_answers, 20, "the restarted worker's admin port")
        assert [get(cli.port)[0] for _ in range(10)] == [200] * 10
        assert cli.proc.poll() is None
    finally:
        code = cli.stop()
    assert code == 0, cli.err()
    assert f"worker 1 (pid {victim}) killed by SIGKILL; restarting" in cli.err()
    assert "Traceback" not in cli.err()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_supervisor_stops_every_worker_and_exits_0(tmp_path, backend, sig):
    b = backend()
    cli = ProxyProcess(["--listen", "127.0.0.1:0", "--workers", "2", "--health-check", "none",
                        "--backend", f"a={b.address}"])
    try:
        workers = wait_for(lambda: len(children(cli.proc.pid)) == 2 and children(cli.proc.pid), 10, "2 workers")
        assert get(cli.port) == (200, 100)
    finally:
        code = cli.stop(sig)
    assert code == 0, cli.err()
    wait_for(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in workers), 10, "no worker left")
    assert "Traceback" not in cli.err()


def test_workers_that_die_at_start_make_the_supervisor_give_up(tmp_path, backend):
    b = backend()
    admin = free_ports(3)
    with socket.socket() as taken:  # the admin port of worker 0 (PORT + 1): it cannot listen, every time
        taken.bind(("127.0.0.1", admin + 1))
        taken.listen()
        cli = ProxyProcess(["--listen", "127.0.0.1:0", "--workers", "2", "--health-check", "none",
                            "--admin", f"127.0.0.1:{admin}", "--backend", f"a={b.address}"], ready=False)
        try:
            cli.proc.wait(timeout=30)  # it gives up by itself (a hang fails here)
        finally:
            code = cli.stop()
    assert code == 2, cli.err()  # the workers' own exit code for a port in use
    # worker 0 cannot listen; worker 1 (PORT + 2) may also find its port taken by some other
    # socket on a busy machine, and whichever reaches the limit first makes the supervisor stop
    assert re.search(rf"worker [01] died {_supervisor.START_FAILURES} times in a row before listening", cli.err()), cli.err()
    assert "giving up" in cli.err() and "Traceback" not in cli.err()


# ---- the flags --------------------------------------------------------------------------------

NEW_FLAGS = {  # keyword of Proxy: (flag and value given, the value Proxy gets)
    "max_request_line": (["--max-request-line", "4096"], 4096),
    "max_header_size": (["--max-header-size", "16384"], 16384),
    "max_headers": (["--max-headers", "20"], 20),
    "max_body": (["--max-body", "1000"], 1000),
    "header_timeout": (["--header-timeout", "2.5"], 2.5),
    "body_timeout": (["--body-timeout", "7"], 7.0),
    "client_timeout": (["--client-timeout", "9"], 9.0),
    "tunnel_timeout": (["--tunnel-timeout", "90"], 90.0),
    "max_connections": (["--max-connections", "500"], 500),
    "overload_connections": (["--overload-connections", "400"], 400),
    "overload_timeout": (["--overload-timeout", "1.5"], 1.5),
    "linger_bytes": (["--linger-bytes", "65536"], 65536),
    "xff": (["--xff", "replace"], "replace"),
    "forwarded": (["--forwarded"], True),
    "via": (["--via"], True),
}


def proxy_keywords(monkeypatch, *argv):
    """The keywords `leastload proxy ARGV` gives Proxy(...)."""
    seen = {}
    monkeypatch.setattr(_cli, "Proxy", lambda *args, **kwargs: seen.update(kwargs))
    _cli._proxy_from(_cli._parser().parse_args(["--backend", "a=127.0.0.1:1", *argv]))
    return seen


def test_the_client_limit_and_forwarding_flags_reach_proxy(monkeypatch):
    argv = [arg for flag, _ in NEW_FLAGS.values() for arg in flag]
    given = proxy_keywords(monkeypatch, *argv)
    assert {k: given[k] for k in NEW_FLAGS} == {k: value for k, (_, value) in NEW_FLAGS.items()}
    # without the flags, Proxy gets its own defaults (max_connections None: from the fd limit)
    defaults = proxy_keywords(monkeypatch)
    signature = inspect.signature(Proxy.__init__)
    assert {k: defaults[k] for k in NEW_FLAGS} == {k: signature.parameters[k].default for k in NEW_FLAGS}
    monkeypatch.undo()  # and the real Proxy takes them all
    assert isinstance(_cli._proxy_from(_cli._parser().parse_args(["--backend", "a=127.0.0.1:1", *argv])), Proxy)


@pytest.mark.parametrize("flag, value", [
    ("--max-request-line", "10"), ("--max-header-size", "big"), ("--max-headers", "0"),
    ("--max-body", "-1"), ("--header-timeout", "0"), ("--body-timeout", "nan"),
    ("--client-timeout", "1e9"), ("--max-connections", "-5"), ("--xff", "drop"),
    ("--overload-connections", "0"), ("--overload-timeout", "-2"), ("--linger-bytes", "-1"),
    ("--load-metric", "gpu=1"), ("--load-metric", "cpu_utilization=0:5"),
])
def test_a_bad_flag_value_is_one_line_naming_the_flag_and_exit_2(capsys, flag, value):
    from leastload.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["proxy", "--backend", "a=127.0.0.1:1", flag, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("leastload proxy: ") and flag in err, err
    assert repr(value) in err
