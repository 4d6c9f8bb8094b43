"""The supervisor of `leastload proxy --workers N`: N copies of the command on one port.

Each worker listens on the same port with SO_REUSEPORT; the kernel spreads new
client connections over them. They balance with one engine in shared memory
(VirtualServer(shared=...), a segment named after the listening address,
removed when the supervisor exits); worker 0 alone runs the health probes.
--private-engines (and --config, for now) gives each worker an engine of its
own instead. The supervisor prints `listening on HOST:PORT` once every worker
listens, restarts a worker that dies (with a backoff), gives up (exit 1) when a
worker keeps dying before it listens, and on SIGTERM/SIGINT stops them all and
exits 0; SIGHUP is passed on to every worker (a --config reload). With
`--admin HOST:PORT` it serves the admin port itself (_fanout.py: /metrics
merged over the workers, status as a list, commands and reloads sent to every
worker) and worker i answers on PORT + 1 + i (a restarted worker gets its
index's port again).
"""

import argparse
import logging
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from typing import List, Optional, Sequence

from . import _fanout
from ._gateway import Gateway

log = logging.getLogger("leastload.proxy")
WORKER_START_TIMEOUT = 60.0  # a worker not listening by then is killed (a failed start)
RESTART_FIRST, RESTART_MAX = 0.1, 10.0  # a dead worker's restart delay: doubling from the first to the max
STABLE_AFTER = 10.0  # a worker that listened this long before dying restarts after RESTART_FIRST again
START_FAILURES = 5  # a worker dying before it listens this many times in a row: the supervisor gives up


def unlink_shared(name: str) -> bool:
    """Removes the shared engine's segment `name` (the C engine's; imported when a run needs it)."""
    from ..engine._engine import unlink_shared as unlink

    return bool(unlink(name))


class _Worker:
    """Worker i of --workers N: its process, and when to start it again after it died."""

    def __init__(self, index: int, cmd: List[str]) -> None:
        self.index, self.cmd = index, cmd
        self.proc: "Optional[subprocess.Popen[str]]" = None
        self.started = 0.0
        self.listening_since: Optional[float] = None
        self.failures = 0  # deaths before listening, in a row
        self.delay = RESTART_FIRST
        self.restart_at = 0.0  # when proc is None
        self.exit_code = 0  # its last exit code (negative: the signal that ended it)
        self.admin_port = 0  # where its admin port answers (0: none, or not known yet)

    def start(self, now: float) -> "subprocess.Popen[str]":
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, text=True)
        self.started, self.listening_since = now, None
        return self.proc

    def died(self, now: float) -> str:
        """Reaps the process (its stdout has ended); returns how it ended, and sets the restart time."""
        assert self.proc is not None and self.proc.stdout is not None
        self.proc.stdout.close()
        code = self.exit_code = _reap(self.proc)
        self.proc = None
        if self.listening_since is None:
            self.failures += 1
        elif now - self.listening_since >= STABLE_AFTER:
            self.delay = RESTART_FIRST
        self.restart_at = now + self.delay
        self.delay = min(self.delay * 2, RESTART_MAX)
        if code >= 0:
            return f"exited with code {code}"
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:  # a signal without a name (real-time)
            return f"killed by signal {-code}"


def run_workers(args: argparse.Namespace, argv: List[str], gateway: Optional[Gateway] = None) -> int:
    """The parent of --workers N: starts them on one port and restarts the ones that die;
    SIGTERM/SIGINT stop them all, SIGHUP is passed on to each (a --config reload). Exits 1
    (2 for the workers' own exit 2) when a worker keeps dying before it listens."""
    holder: Optional[socket.socket] = None
    if gateway is not None and len(gateway.proxies) > 1:  # the config's addresses, in every worker
        listen: List[str] = []
        where = ", ".join(f"{p.listen[0]}:{p.listen[1]}" for p in gateway.plans.values())
    else:
        host, port = args.listen if gateway is None else next(iter(gateway.plans.values())).listen
        if port == 0:  # every worker, restarted ones too, must get the same port: reserve one, held throughout
            holder = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            holder.bind((host, port))
            port = holder.getsockname()[1]
        listen, where = ["--listen", f"{host}:{port}"], f"{host}:{port}"
    # the options given last win: a worker never gets the parent's --workers, even abbreviated
    base = [sys.executable, "-m", "leastload", "proxy", *_without(argv, ("--workers", "--listen", "--admin")),
            "--workers", "1", *listen, "--reuse-port"]
    segment = None
    if gateway is None and not args.private_engines:  # one engine for all: a segment named after the port
        segment = shared_segment_name(where)
        unlink_shared(segment)  # a crashed run's is not this run's engine
        base += ["--shared-engine", segment]
    workers: List[_Worker] = []
    fanout: Optional[_fanout.Fanout] = None
    if args.admin is not None:  # the admin port is the supervisor's; worker i answers on PORT + 1 + i
        admin_host, admin_port = args.admin
        try:
            fanout = _fanout.start_fanout(admin_host, admin_port, lambda: [w.admin_port for w in workers],
                                          args.admin_token, shared_engine=segment is not None)
        except OSError as exc:
            print(f"leastload proxy: cannot listen: {exc}", file=sys.stderr)
            if holder is not None:
                holder.close()
            return 2
    for i in range(args.workers):
        if args.admin is None:
            admin: List[str] = []
        else:
            port_i = args.admin[1] + 1 + i if args.admin[1] else 0
            admin = ["--admin", f"{args.admin[0]}:{port_i}"]
        probes = ["--no-probes"] if segment is not None and i > 0 else []  # one set of probes for the engine
        workers.append(_Worker(i, base + admin + probes))
        workers[-1].admin_port = int(admin[1].rsplit(":", 1)[1]) if admin else 0
    # signals only wake the loop below (through the wakeup fd); it does the stopping
    stopping: List[int] = []
    hangups: List[int] = []
    wake_r, wake_w = socket.socketpair()
    wake_w.setblocking(False)
    old_wakeup = signal.set_wakeup_fd(wake_w.fileno())
    old_handlers = {sig: signal.signal(sig, lambda signum, frame: stopping.append(signum))
                    for sig in (signal.SIGTERM, signal.SIGINT)}
    old_handlers[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda signum, frame: hangups.append(signum))
    sel = selectors.DefaultSelector()
    sel.register(wake_r, selectors.EVENT_READ, None)
    admin_line = None
    if fanout is not None:
        fan_host, fan_port = fanout.address[:2]
        admin_line = f"admin on http://{fan_host}:{fan_port}/leastload/status"
        log.info("admin: GET http://%s:%d/leastload/status (and /metrics, /healthz), for all %d workers",
                 fan_host, fan_port, len(workers))
    try:
        return _supervise(workers, sel, stopping, where, hangups, admin_line)
    finally:
        if fanout is not None:
            fanout.close()
        signal.set_wakeup_fd(old_wakeup)
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
        sel.close()
        for w in workers:
            if w.proc is not None and w.proc.poll() is None:
                w.proc.terminate()
        for w in workers:
            if w.proc is not None:
                _reap(w.proc)
                if w.proc.stdout is not None:
                    w.proc.stdout.close()
        for closing in (wake_r, wake_w, holder):
            if closing is not None:
                closing.close()
        if segment is not None:
            unlink_shared(segment)


def _supervise(workers: List[_Worker], sel: selectors.BaseSelector, stopping: List[int], where: str,
               hangups: Optional[List[int]] = None, admin_line: Optional[str] = None) -> int:
    announced = False
    while not stopping:
        while hangups:  # SIGHUP: every running worker rereads the config
            hangups.pop()
            for w in workers:
                if w.proc is not None and w.proc.poll() is None:
                    w.proc.send_signal(signal.SIGHUP)
        now = time.monotonic()
        deadlines = []
        for w in workers:
            if w.proc is None:
                if w.restart_at <= now:
                    proc = w.start(now)
                    assert proc.stdout is not None  # started with stdout=PIPE
                    sel.register(proc.stdout, selectors.EVENT_READ, w)
                else:
                    deadlines.append(w.restart_at)
            elif w.listening_since is None:
                if now - w.started > WORKER_START_TIMEOUT:
                    log.error("worker %d (pid %d): not listening after %.0f s, killed",
                              w.index, w.proc.pid, WORKER_START_TIMEOUT)
                    w.proc.kill()  # its stdout ends: handled below as a failed start
                else:
                    deadlines.append(w.started + WORKER_START_TIMEOUT)
        if not announced and all(w.listening_since is not None for w in workers):
            print(f"listening on {where}", flush=True)
            if admin_line is not None:  # after it, as a single process prints them
                print(admin_line, flush=True)
            log.warning("%d workers on %s", len(workers), where)
            announced = True
        timeout = max(0.0, min(deadlines) - now) if deadlines else None
        for key, _ in sel.select(timeout):
            w = key.data
            if w is None:  # a signal: drain the wakeup bytes; `stopping` says which
                os.read(key.fd, 512)
                continue
            assert w.proc is not None and w.proc.stdout is not None
            line = w.proc.stdout.readline()
            if line.startswith("listening on "):
                w.listening_since, w.failures = time.monotonic(), 0
            elif line.startswith("admin on "):  # its admin port: where the supervisor's fans out to
                address = line.split("://", 1)[-1].split("/", 1)[0]
                w.admin_port = int(address.rsplit(":", 1)[1])
                log.info("worker %d: %s", w.index, line.rstrip())
            elif line:
                log.warning("worker %d: %s", w.index, line.rstrip())
            elif not stopping:  # end of its stdout: it exited
                sel.unregister(w.proc.stdout)
                pid, how = w.proc.pid, w.died(time.monotonic())
                if w.failures >= START_FAILURES:
                    print(f"leastload proxy: worker {w.index} died {w.failures} times in a row before listening "
                          f"(last: {how}); giving up", file=sys.stderr)
                    return 2 if w.exit_code == 2 else 1  # 2: what the workers said (a port in use, say)
                log.error("worker %d (pid %d) %s; restarting in %.1f s",
                          w.index, pid, how, w.restart_at - time.monotonic())
    return 0


def _reap(proc: "subprocess.Popen[str]") -> int:
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def shared_segment_name(where: str) -> str:
    """The shared engine of the workers listening on `where` (HOST:PORT): one per address,
    so that the next run on it replaces what a crashed run left."""
    return "proxy-" + re.sub(r"[^A-Za-z0-9._-]", "_", where)


def _without(argv: Sequence[str], options: Sequence[str]) -> List[str]:
    """argv without the given options and their values (both `--opt V` and `--opt=V`)."""
    out: List[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in options:
            skip = True
        elif arg.split("=", 1)[0] not in options:
            out.append(arg)
    return out
