"""The proxy's Listener (stops accepting at max_connections, survives EMFILE) and its
health probes' local errors (never a backend's failure). Real sockets on 127.0.0.1,
every wait bounded; each Listener test runs under asyncio's loop and uvloop."""

import asyncio
import errno
import logging
import os
import socket
import subprocess
import sys
import time
import types

import pytest

from leastload.proxy import _health, _listen
from leastload.net.upstream import Backend, make_vserver
from leastload_testkit.ports import free_port
from leastload_testkit.waits import first_line
from servers import LOOPS, new_loop

TIMEOUT = 20.0


def run(kind, coro):
    """Runs coro on a new loop of `kind`, bounded; any error the loop reports fails the test."""
    loop = new_loop(kind)
    errors = []
    loop.set_exception_handler(lambda loop, context: errors.append(context))
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, TIMEOUT))
    finally:
        loop.close()
        assert not errors, errors


async def until(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


class Counting(asyncio.Protocol):
    """Records connection_made; tells the listener when its connection is lost."""

    def __init__(self, listener_box, made):
        self.listener_box, self.made = listener_box, made

    def connection_made(self, transport):
        self.made.append(transport)
        transport.write(b"hi")

    def connection_lost(self, exc):
        self.listener_box[0].connection_closed()


def greeted_by(client):
    """True once the server said hi on this client socket (it was accepted)."""
    client.setblocking(False)
    try:
        return client.recv(2) == b"hi"
    except BlockingIOError:
        return False


def start_listener(max_connections):
    made, box = [], []
    listener = _listen.Listener(asyncio.get_running_loop(), "127.0.0.1", 0,
                                lambda: Counting(box, made), max_connections)
    box.append(listener)
    return listener.start(), made


@pytest.mark.parametrize("kind", LOOPS)
def test_it_stops_accepting_at_max_connections_and_goes_on_when_one_closes(kind):
    async def main():
        listener, made = start_listener(3)
        port = listener.sockname[1]
        # all five connect (the kernel's backlog); only three are accepted
        clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(5)]
        await until(lambda: len(made) == 3)
        await asyncio.sleep(0.2)
        assert (len(made), listener.active, listener.paused) == (3, 3, True)
        greeted = [c for c in clients if greeted_by(c)]
        assert len(greeted) == 3
        greeted[0].close()
        await until(lambda: len(made) == 4)
        await asyncio.sleep(0.1)
        assert (len(made), listener.active, listener.accepted, listener.paused) == (4, 3, 4, True)
        for c in clients:
            c.close()
        await until(lambda: len(made) == 5 and listener.active == 0)
        assert not listener.paused
        listener.close()
        assert listener.paused and listener.sock.fileno() == -1
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
    run(kind, main())


@pytest.mark.parametrize("kind", LOOPS)
def test_emfile_from_accept_backs_off_logs_once_and_accepting_resumes(kind, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="leastload.proxy")
    monkeypatch.setattr(_listen, "RETRY_DELAY", 0.02)
    real_accept = socket.socket.accept
    failures = []

    def accept(sock):
        if len(failures) < 5:
            failures.append(1)
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real_accept(sock)

    async def main():
        listener, made = start_listener(10)
        monkeypatch.setattr(socket.socket, "accept", accept)
        clients = [await asyncio.open_connection("127.0.0.1", listener.sockname[1]) for _ in range(3)]
        await until(lambda: len(made) == 3)
        assert listener.shortages == 5 and not listener.paused
        for _, writer in clients:
            writer.close()
        await until(lambda: listener.active == 0)
        listener.close()
    run(kind, main())
    messages = [r.getMessage() for r in caplog.records]
    assert sum(m.startswith("cannot accept connections") for m in messages) == 1, messages
    assert sum(m.startswith("accepting connections again") for m in messages) == 1, messages


@pytest.mark.parametrize("kind", LOOPS)
def test_a_protocol_factory_that_raises_costs_that_connection_only(kind, caplog):
    async def main():
        made, box, calls = [], [], []

        def factory():
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("factory bug")
            return Counting(box, made)
        listener = _listen.Listener(asyncio.get_running_loop(), "127.0.0.1", 0, factory, 1).start()
        box.append(listener)
        first = socket.create_connection(listener.sockname, timeout=5)
        second = socket.create_connection(listener.sockname, timeout=5)
        await until(lambda: len(made) == 1)
        assert listener.active == 1 and listener.accepted == 2
        first.settimeout(5)
        assert first.recv(2) == b""  # closed without a word
        for c in (first, second):
            c.close()
        await until(lambda: listener.active == 0)
        listener.close()
    run(kind, main())
    assert any("cannot take a client connection" in r.getMessage() for r in caplog.records)


# A child with few descriptors left: accept() fails with EMFILE for real; the parent's
# clients wait, and are all accepted as the accepted ones close.
CHILD = r"""
import asyncio, os, resource, sys
from leastload.proxy import _listen
_listen.RETRY_DELAY = 0.02

async def main():
    loop = asyncio.get_running_loop()
    made, box = [], []

    class P(asyncio.Protocol):
        def connection_made(self, transport):
            made.append(1)
            transport.write(b"hi")

        def connection_lost(self, exc):
            box[0].connection_closed()
    listener = _listen.Listener(loop, "127.0.0.1", 0, P, 1000).start()
    box.append(listener)
    fds = [int(fd) for fd in os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd")]
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(fds) + 4, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    print(listener.sockname[1], flush=True)
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line.strip():
            return
        print(len(made), listener.active, listener.shortages, flush=True)

if sys.argv[1] == "uvloop":
    import uvloop
    uvloop.install()
asyncio.run(main())
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
@pytest.mark.parametrize("kind", LOOPS)
def test_real_emfile_the_loop_survives_and_the_waiting_clients_are_accepted_later(kind):
    if kind == "uvloop":
        pytest.importorskip("uvloop")
    n = 16
    child = subprocess.Popen([sys.executable, "-c", CHILD, kind], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    clients = []
    try:
        port = int(first_line(child.stdout, 60))

        def report():
            child.stdin.write("report\n")
            child.stdin.flush()
            return [int(x) for x in first_line(child.stdout, 10).split()]

        clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(n)]
        deadline = time.monotonic() + TIMEOUT
        while report()[2] == 0:  # shortages: accept() has failed with EMFILE
            assert time.monotonic() < deadline
            time.sleep(0.02)
        made, active, _ = report()
        assert 0 < made < n and active == made
        # close the accepted clients as they are greeted: their descriptors free the next ones'
        while clients:
            assert time.monotonic() < deadline, report()
            for c in [c for c in clients if greeted_by(c)]:
                c.close()
                clients.remove(c)
            time.sleep(0.02)
        while report()[:2] != [n, 0]:
            assert time.monotonic() < deadline, report()
            time.sleep(0.02)
    finally:
        for c in clients:
            c.close()
        child.stdin.close()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)
    err = child.stderr.read()
    assert child.returncode == 0, err
    assert "Traceback" not in err, err
    assert "cannot accept connections ([Errno 24]" in err, err  # the child's warning, once per episode


def test_default_max_connections_follows_rlimit_nofile(monkeypatch):
    resource = pytest.importorskip("resource")
    for soft, expected in ((1024, 480), (100, 18), (65, 1), (10, 1), (1 << 20, 10_000),
                           (resource.RLIM_INFINITY, 10_000)):
        monkeypatch.setattr(resource, "getrlimit", lambda which, soft=soft: (soft, resource.RLIM_INFINITY))
        assert _listen.default_max_connections() == expected, soft
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 1024))
    assert _listen.default_max_connections(reserve=24) == 500


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
def test_default_max_connections_under_a_real_lowered_limit():
    code = ("import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit("
            "resource.RLIMIT_NOFILE)[1])); from leastload.proxy import _listen; "
            "print(_listen.default_max_connections())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "96", out.stderr


def test_listener_arguments():
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(ValueError, match="max_connections"):
            _listen.Listener(loop, "127.0.0.1", 0, asyncio.Protocol, 0)
        listener = _listen.Listener(loop, "::1", 0, asyncio.Protocol, 1)
        try:
            listener.start()
        except OSError:
            pytest.skip("no IPv6 loopback")
        host, port = listener.sockname
        assert host == "::1" and port > 0
        listener.close()
        listener.close()  # twice is fine
    finally:
        loop.close()


# ---- health probes: the proxy's own trouble is not the backend's ------------------------------------


def test_is_local_error():
    for code in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.EADDRNOTAVAIL):
        assert _health.is_local_error(OSError(code, os.strerror(code)))
    assert not _health.is_local_error(ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert not _health.is_local_error(OSError("no errno"))
    assert not _health.is_local_error(asyncio.TimeoutError())


def monitor_for(port, fall=2):
    backend = Backend("b", "127.0.0.1", port)
    proxy = types.SimpleNamespace(vserver=make_vserver([backend]), loop=asyncio.get_running_loop())
    return proxy, _health.HealthMonitor(proxy.loop, proxy.vserver, backend, "tcp", "/", 0.002, 1.0, fall, 1)


def test_a_probe_failing_for_emfile_never_marks_the_backend_down_a_refused_one_does(monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="leastload.proxy")

    async def emfile(host, port, **kwargs):
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    async def main():
        proxy, monitor = monitor_for(free_port())  # nothing listens there: a real probe is refused
        monkeypatch.setattr(asyncio, "open_connection", emfile)
        monitor.start()
        await until(lambda: monitor.probes >= 30)
        status = monitor.status()
        assert proxy.vserver.state("b") == "UP"
        assert status["failures_in_row"] == 0 and status["local_errors"] == status["probes"] >= 30
        assert status["unprobed_in_row"] == status["local_errors"]
        assert "Too many open files" in status["last_local_error"]
        monkeypatch.undo()  # the real connect: refused
        await until(lambda: proxy.vserver.state("b") == "DOWN")
        status = monitor.status()
        monitor.stop()
        assert status["failures_in_row"] >= 2 and status["unprobed_in_row"] == 0
        assert "ConnectionRefusedError" in status["last_error"]
    run("asyncio", main())
    messages = [r.getMessage() for r in caplog.records]
    assert sum("cannot be probed for the proxy's own trouble" in m for m in messages) == 1, messages
    assert sum("can be probed again" in m for m in messages) == 1, messages
    assert any("is DOWN" in m for m in messages), messages


def test_local_errors_leave_the_run_of_failures_as_it_was(monkeypatch):
    async def main():
        proxy, monitor = monitor_for(free_port(), fall=3)
        monitor._judge(False, "refused")
        monitor._judge(False, "refused")
        for _ in range(10):
            monitor._judge(None, "OSError: EMFILE")
        assert proxy.vserver.state("b") == "UP" and monitor.failures == 2
        monitor._judge(False, "refused")  # the third failure in a row
        assert proxy.vserver.state("b") == "DOWN"
    run("asyncio", main())


def test_a_stopped_monitor_probes_no_more_even_if_its_cancel_is_lost(monkeypatch):
    """Python 3.11's asyncio.wait_for can swallow a cancel that arrives as the probe's connection
    completes; the monitor's own flag ends its loop all the same (modelled here by a stop() whose
    cancel reaches nothing: the running task is not the one it cancels)."""
    async def main():
        proxy, monitor = monitor_for(free_port())
        monitor.start()
        await until(lambda: monitor.probes >= 3)
        running, monitor.task = monitor.task, None  # the cancel is lost
        monitor.stop()
        await asyncio.wait_for(running, 5)  # it ends by itself
        probes = monitor.probes
        await asyncio.sleep(0.05)  # 25 intervals
        assert monitor.probes == probes and running.done() and not running.cancelled()
    run("asyncio", main())
