"""Hostile clients and misbehaving backends against a reverse proxy: leastload, and HAProxy beside it.

What is attacked. Every attack is an async function of a `Target` (a proxy
process on 127.0.0.1, with its backends) that returns an `Answer`: what the
proxy answered (status, closed or not, when) and where that differs from
the specification the leastload proxy is built to (its docs: the defaults
--max-request-line 8192 -> 414, --max-header-size 32768 and --max-headers 100
-> 431, --max-body 16 MiB -> 413, --header-timeout 10 -> 408, ...). The
groups:

- process death: clients that reset mid-response; a backend killed while a
  15 MiB request body is being written to it (SIGPIPE must not kill);
- memory before a complete head: an endless header block, endless trailers,
  an endless request line (refused, then reset past the linger's byte bound), 30,000 tiny headers, 200,000 pipelined GETs
  written without reading, 8 pipelined 15 MiB POSTs;
- slow clients: 200 connections sending a byte a second, the same past the
  proxy's file-descriptor limit (RLIMIT_NOFILE 256, and issue 45's 1,100
  connections at 1024 for 15 s; health probes on, a GET every 0.5 s with a
  2 s timeout that must be answered), 15 clients that never read a large
  answer, a request body that stops;
- backend misbehaviour (leastload_testkit/rogue_backend.py): bytes after a complete
  answer, a body on 204/304/HEAD, an invalid Content-Length, a pipelined
  `Expect: 100-continue` while an earlier answer streams, 100 Continue for a
  body that will get 413, a chunked body past --max-body, a body sent on
  after its 413 (the answer must survive: a lingering close);
- header hygiene: trailers, Host, absolute-form targets, Connection,
  X-Forwarded-For, response hop-by-hop headers, HTTP/1.0 and chunked, request
  lines without a version, the request framing that must stay strict;
- the admin port: a 40 MiB request line, a slow client.

While an attack runs (`run_attack`), a thread sends normal GETs on fresh
connections (at least 10, one every 20 ms) and another samples the RSS of
every proxy process; afterwards the harness checks the "done when" of every
attack: >= 99 % of the normal GETs answered 200, no proxy process grew more
than 64 MiB over its idle RSS, every process is alive, and the transactions
in flight went back to 0 (leastload: its admin port's /leastload/status;
HAProxy: its stats socket).

How it is bounded. Only 127.0.0.1. Every attack has a time bound (a few
seconds, or the proxy's timeouts plus a few seconds) and a byte bound (at
most 64 MiB written by an endless attack, 8 x 15 MiB by the pipelined POSTs,
200,000 GETs); every connection it opened is aborted when it ends, and every
process started is stopped (SIGTERM, then SIGKILL, to its process group).

The tests (tests/proxy/test_proxy_hostile.py) import this module and run each attack against the leastload proxy with 1 and with 2 workers, with
short timeouts (2 s). Run as a script, it runs them against leastload and
HAProxy 2.6 (`balance leastconn`, `timeout http-request`, `option
forwardfor`, the same backends; as root it installs haproxy with apt-get when
missing) and prints a side-by-side table:

    python -m benchmarks.proxy_attacks                    # every attack, both proxies: about 5 minutes
    python -m benchmarks.proxy_attacks --quick            # 2 s timeouts: about 2 minutes
    python -m benchmarks.proxy_attacks --only slow --proxies haproxy --workers 2

It is not part of CI. How to read the table: one row per attack; for each
proxy, what it answered, its processes' RSS idle -> peak (MiB), the share of
the normal GETs answered 200 during the attack, whether every process is
still alive, and "spec": ok, or what differs from leastload's specification
(HAProxy is not built to it: its differences are information, not faults).
"""

import argparse
import asyncio
import dataclasses
import http.client
import importlib.util
import json
import os
import re
import resource
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Tuple

from leastload_testkit.backends import start_backends
from leastload_testkit.ports import HOST, free_port, free_ports
from leastload_testkit.processes import Server, get_json, is_alive, process_tree
from leastload_testkit.rogue_backend import RogueProcess
from leastload_testkit.waits import wait_until

from . import proxy_vs_haproxy as pvh  # its start_backends, ensure_tools, MAXCONN

MiB = 1 << 20
RSS_BUDGET_MIB = 64          # a proxy process may grow this much over its idle RSS during an attack
GETS_GOAL = 0.99             # share of the normal GETs answered 200 during an attack
GET_TIMEOUT = 15.0           # one normal GET (it may wait in the accept queue while the proxy is full)
GETS_MIN, GETS_MAX, GETS_PACE, GETS_GRACE = 10, 3000, 0.02, 20.0
ATTACK_LIMIT = 120.0         # no attack coroutine runs longer than this, whatever it does
SETTLE_MARGIN = 8.0          # seconds (over the backend timeout) for the transactions to end afterwards
CONNECT_TIMEOUT = 10.0
KEEP = 32 * MiB              # bytes of the answers a client connection keeps (it counts them all)
UPLOAD = 15 * MiB
HYGIENE_HOST = "hygiene.example"


# ---- settings --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Settings:
    """The proxy settings the attacks rely on; the defaults are the specification's."""
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    timeout: float = 30.0               # backend silence; also a client that does not read
    max_body: int = 16 * MiB
    xff: str = "append"
    nofile: Optional[int] = None        # RLIMIT_NOFILE of the proxy process
    health: bool = False                # tcp probes every 0.2 s, 2 failures -> DOWN
    implementation: str = "c"           # leastload's per-request path: "c" (compiled) or "python"
    overload_timeout: Optional[float] = None  # leastload's --overload-timeout (None: its default, 2 s)
    tunnel_timeout: float = 3600.0      # leastload's --tunnel-timeout: a tunnel's idle time (an upgrade's)

    def only(self, names: Iterable[str]) -> "Settings":
        """These settings for `names`, the defaults for the rest (an attack sets what it relies on)."""
        names = set(names)
        return Settings(**{f.name: getattr(self, f.name) if f.name in names else f.default
                           for f in dataclasses.fields(self)})


DEFAULTS = Settings()
LEASTLOAD_FLAGS = {"header_timeout": "--header-timeout", "body_timeout": "--body-timeout",
                   "overload_timeout": "--overload-timeout", "tunnel_timeout": "--tunnel-timeout",
                   "timeout": "--timeout", "max_body": "--max-body", "xff": "--xff"}
MAX_REQUEST_LINE, MAX_HEADER_SIZE, MAX_HEADERS = 8192, 32768, 100  # the specification's limits


# ---- processes --------------------------------------------------------------------------------------


def proc_status(pid: int) -> Dict[str, str]:
    """/proc/PID/status as a dict ({} when the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    except OSError:
        return {}


def rss_mib(pid: int, field: str = "VmRSS") -> Optional[float]:
    value = proc_status(pid).get(field)
    return int(value.split()[0]) / 1024 if value else None


# The proxy runs through this: RLIMIT_NOFILE set, environment variables set, then exec (the same pid).
_EXEC = ("import os, resource, sys\n"
         "n = int(sys.argv[1]); args = sys.argv[2:]\n"
         "if n: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))\n"
         "while args[0] != '--':\n"
         "    key, _, value = args.pop(0).partition('='); os.environ[key] = value\n"
         "os.execvp(args[1], args[1:])\n")


def exec_wrapper(nofile: Optional[int], env: Dict[str, str]) -> List[str]:
    return [sys.executable, "-c", _EXEC, str(nofile or 0), *(f"{k}={v}" for k, v in env.items()), "--"]


def raise_own_fd_limit(needed: int) -> None:
    """This process's soft RLIMIT_NOFILE raised towards `needed` (up to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


# ---- targets: a proxy process and how to read its state --------------------------------------------


class Target:
    """A running proxy: where it listens, its processes, and its backends' state.

    `status()` gives, per backend, {"active", "failures", "down", "ejected"}
    summed over the workers; `victim` is the backend an attack may kill.
    """

    def __init__(self, kind: str, label: str, server: Any, port: int, admin_ports: List[int],
                 settings: Settings, workers: int, status: Callable[[], Dict[str, Dict[str, Any]]],
                 victim: Any = None) -> None:
        self.kind, self.label, self.server, self.port = kind, label, server, port
        self.admin_ports, self.settings, self.workers = admin_ports, settings, workers
        self._status, self.victim = status, victim

    def pids(self) -> List[int]:
        return process_tree(self.server.pid)

    def status(self) -> Dict[str, Dict[str, Any]]:
        return self._status()

    def stop(self) -> None:
        self.server.stop()

    def diagnosis(self) -> str:
        return self.server.diagnosis()


def leastload_status(admin_ports: List[int]) -> Dict[str, Dict[str, Any]]:
    """The backends' state from every worker's GET /leastload/status, summed over the workers."""
    merged: Dict[str, Dict[str, Any]] = {}
    for port in admin_ports:
        for name, b in get_json(port, "/leastload/status")["backends"].items():
            m = merged.setdefault(name, {"active": 0, "failures": 0, "down": False, "ejected": False})
            engine = b.get("engine") or {}
            m["active"] += engine.get("active", 0)
            m["failures"] += b.get("failures", 0)
            m["down"] = m["down"] or engine.get("state") == "DOWN"
            m["ejected"] = m["ejected"] or bool(engine.get("ejected")) or b.get("ejection") is not None
    return merged


def haproxy_status(sock_path: str) -> Dict[str, Dict[str, Any]]:
    """The servers' state from HAProxy's stats socket (`show stat`): scur, econ + eresp, status."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(sock_path)
        s.sendall(b"show stat\n")
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    lines = b"".join(chunks).decode().splitlines()
    fields = lines[0].lstrip("# ").split(",")
    out = {}
    for line in lines[1:]:
        row = dict(zip(fields, line.split(",")))
        if row.get("pxname") == "pool" and row.get("svname") not in ("FRONTEND", "BACKEND", None):
            out[row["svname"]] = {"active": int(row["scur"] or 0),
                                  "failures": int(row["econ"] or 0) + int(row["eresp"] or 0),
                                  "down": row["status"].startswith("DOWN"), "ejected": False}
    return out


def leastload_command(backends: Dict[str, int], settings: Settings, workers: int, admin: int) -> List[str]:
    cmd = exec_wrapper(settings.nofile, {"LEASTLOAD_IMPLEMENTATION": settings.implementation})
    cmd += [sys.executable, "-m", "leastload", "proxy", "--listen", f"{HOST}:0", "--admin", f"{HOST}:{admin}"]
    if workers > 1:
        cmd += ["--workers", str(workers)]
        if settings.implementation == "python":
            cmd += ["--private-engines"]  # the pure-Python engine shares no vserver between processes
    if settings.health:
        cmd += ["--health-check", "tcp", "--health-interval", "0.2", "--health-fall", "2", "--health-rise", "1"]
    else:
        cmd += ["--health-check", "none"]
    for name, flag in LEASTLOAD_FLAGS.items():
        value = getattr(settings, name)
        if value != getattr(DEFAULTS, name):  # only what differs: a flag the proxy lacks fails loudly
            cmd += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    for name, port in backends.items():
        cmd += ["--backend", f"{name}={HOST}:{port}"]
    return cmd


def start_leastload(backends: Dict[str, int], settings: Settings, workers: int, workdir: str,
                    victim: Any = None) -> Target:
    """`python -m leastload proxy --listen 127.0.0.1:0 ...` (with --workers N the supervisor's admin
    port is PORT and worker i's PORT + 1 + i: each worker's own status is read)."""
    admin = free_ports(workers + 1 if workers > 1 else 1)
    label = f"leastload-{workers}w" + ("-python" if settings.implementation == "python" else "")
    server = Server(label, leastload_command(backends, settings, workers, admin), workdir)
    try:
        port = server.wait_listening()[1]
        admin_ports = [admin] if workers == 1 else [admin + 1 + i for i in range(workers)]
        target = Target("leastload", label, server, port, admin_ports, settings, workers,
                        lambda: leastload_status(admin_ports), victim)
        wait_until(lambda: _answers(target.status), 10)
    except BaseException:
        server.stop()
        raise
    return target


def _answers(fn: Callable[[], Any]) -> bool:
    try:
        fn()
        return True
    except (OSError, ValueError, RuntimeError, http.client.HTTPException):
        return False


def haproxy_config(port: int, admin: int, sock: str, threads: int, backends: Dict[str, int],
                   settings: Settings) -> str:
    check = " check inter 200ms fall 2 rise 1" if settings.health else ""
    servers = "\n".join(f"    server {name} {HOST}:{p}{check}" for name, p in backends.items())
    limits = f"    ulimit-n {settings.nofile}" if settings.nofile else f"    maxconn {pvh.MAXCONN}"
    replace = "    http-request del-header X-Forwarded-For\n" if settings.xff == "replace" else ""
    return f"""\
global
    nbthread {threads}
{limits}
    stats socket {sock} mode 600 level admin

defaults
    mode http
    option http-keep-alive
    option forwardfor
    timeout connect 5s
    timeout client {min(settings.timeout, settings.body_timeout):g}s
    timeout server {settings.timeout:g}s
    timeout http-request {settings.header_timeout:g}s
    timeout http-keep-alive 60s

frontend attacks
    bind {HOST}:{port}
    http-request deny deny_status 413 if {{ req.hdr_val(content-length) gt {settings.max_body} }}
{replace}    http-request set-header X-Forwarded-Proto http
    default_backend pool

backend pool
    balance leastconn
    option redispatch
    retries 2
{servers}

listen admin
    bind {HOST}:{admin}
    stats enable
    stats uri /leastload/status
"""


def start_haproxy(backends: Dict[str, int], settings: Settings, threads: int, workdir: str,
                  victim: Any = None) -> Target:
    """HAProxy in the foreground (-db) on a free port; its stats page is the "admin port"."""
    port, admin = free_port(), free_port()
    label = f"haproxy-{threads}t"
    sock = os.path.join(workdir, f"{label}-{port}.sock")
    config = os.path.join(workdir, f"{label}-{port}.cfg")
    with open(config, "w") as f:
        f.write(haproxy_config(port, admin, sock, threads, backends, settings))
    cmd = exec_wrapper(settings.nofile, {}) + ["haproxy", "-db", "-f", config]
    server = Server(label, cmd, workdir)
    try:
        server.wait_port(port)
        target = Target("haproxy", label, server, port, [admin], settings, threads,
                        lambda: haproxy_status(sock), victim)
        wait_until(lambda: _answers(target.status), 10)
    except BaseException:
        server.stop()
        raise
    return target


# ---- what the harness watches: normal GETs, RSS -----------------------------------------------------


def one_get(port: int, path: str = "/") -> Tuple[bool, str]:
    """A GET on a fresh connection: (answered 200 with its whole body, what happened)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=GET_TIMEOUT)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        length = response.getheader("Content-Length")
        if response.status != 200:
            return False, f"status {response.status}"
        if length is not None and len(body) != int(length):
            return False, f"{len(body)} of {length} body bytes"
        return True, "200"
    except (OSError, http.client.HTTPException) as exc:
        return False, type(exc).__name__
    finally:
        conn.close()


class NormalGets(threading.Thread):
    """Sequential GETs on fresh connections, one every GETS_PACE s, until stopped: at most GETS_MAX,
    and after the stop until GETS_MIN were sent (for at most GETS_GRACE s more)."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.stopping = threading.Event()
        self.stopped_at = 0.0
        self.ok = 0
        self.failed: Counter = Counter()

    @property
    def total(self) -> int:
        return self.ok + sum(self.failed.values())

    def _more(self) -> bool:
        if self.total >= GETS_MAX:
            return False
        if not self.stopping.is_set():
            return True
        return self.total < GETS_MIN and time.monotonic() - self.stopped_at < GETS_GRACE

    def run(self) -> None:
        while self._more():
            ok, why = one_get(self.port)
            if ok:
                self.ok += 1
            else:
                self.failed[why] += 1
            time.sleep(GETS_PACE)

    def finish(self) -> None:
        self.stopped_at = time.monotonic()
        self.stopping.set()
        self.join(GETS_GRACE + GET_TIMEOUT + 5)


class RssWatch(threading.Thread):
    """The peak VmRSS (MiB) of each process, sampled every 50 ms, and VmHWM before and after."""

    def __init__(self, pids: List[int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.idle = {pid: rss_mib(pid) or 0.0 for pid in pids}
        self.hwm_before = {pid: rss_mib(pid, "VmHWM") or 0.0 for pid in pids}
        self.peak = dict(self.idle)
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.05):
            self._sample()

    def _sample(self) -> None:
        for pid in self.pids:
            rss = rss_mib(pid)
            if rss is not None and rss > self.peak[pid]:
                self.peak[pid] = rss

    def finish(self) -> None:
        self.stopping.set()
        self.join(5)
        self._sample()
        for pid in self.pids:  # a peak between two samples still raised the high-water mark
            hwm = rss_mib(pid, "VmHWM")
            if hwm is not None and hwm > self.hwm_before[pid]:
                self.peak[pid] = max(self.peak[pid], hwm)

    def growth(self) -> float:
        return max((self.peak[p] - self.idle[p] for p in self.pids), default=0.0)


# ---- a client connection -------------------------------------------------------------------------------

_open_conns: "set" = set()  # every connection an attack opened: aborted when the attack ends


class Conn:
    """One client connection that writes and (unless told not to) reads everything, noting when.

    A plain non-blocking socket driven by the loop's sock_* calls: a failed
    write (the proxy closed and reset us) does not throw away what the proxy
    said before, which can still be read. `data` keeps the first `keep` bytes
    received, `received` counts them all; `first_at` and `end_at` are seconds
    since the connection was made (end: EOF or reset, `reset` telling which).
    """

    def __init__(self, sock: socket.socket, keep: int) -> None:
        self.sock, self.keep = sock, keep
        self.loop = asyncio.get_running_loop()
        self.started = time.monotonic()
        self.data = bytearray()
        self.received = 0
        self.sent = 0
        self.broken = False  # a write failed
        self.first_at: Optional[float] = None
        self.end_at: Optional[float] = None
        self.reset = False
        self.changed = asyncio.Event()
        self.task: "Optional[asyncio.Task[None]]" = None
        self.pouring: "List[asyncio.Future[int]]" = []
        _open_conns.add(self)

    @classmethod
    async def open(cls, port: int, read: bool = True, keep: int = KEEP,
                   timeout: float = CONNECT_TIMEOUT) -> "Conn":
        sock = socket.socket()
        sock.setblocking(False)
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (HOST, port)), timeout)
        except BaseException:
            sock.close()
            raise
        conn = cls(sock, keep)
        if read:
            conn.start_reading()
        return conn

    def start_reading(self) -> None:
        if self.task is None:
            self.task = asyncio.ensure_future(self._read_all())

    async def _read_all(self) -> None:
        try:
            while True:
                chunk = await self.loop.sock_recv(self.sock, 262144)
                if not chunk:
                    break
                if self.first_at is None:
                    self.first_at = self.elapsed()
                self.received += len(chunk)
                if len(self.data) < self.keep:
                    self.data += chunk[:self.keep - len(self.data)]
                self.changed.set()
        except OSError:
            self.reset = True
        self.end_at = self.elapsed()
        self.changed.set()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def ended(self) -> bool:
        return self.end_at is not None

    async def send(self, data: bytes, timeout: float = 10.0) -> bool:
        """Writes data (waiting at most timeout); False if it could not all be written."""
        return await self.pour([data], time.monotonic() + timeout) == len(data)

    async def pour(self, pieces: Iterable[bytes], until: float, max_bytes: Optional[int] = None,
                   past_eof: bool = False) -> int:
        """Writes pieces until they run out, `until` (monotonic) passes, max_bytes, or the connection
        breaks (or the proxy's side ends, unless `past_eof`: an attacker that does not listen);
        returns the bytes written (a piece cut off by the time bound does not count)."""
        sent = 0
        for piece in pieces:
            if (self.ended and not past_eof) or self.broken or time.monotonic() >= until:
                break
            if max_bytes is not None and sent >= max_bytes:
                break
            try:
                await asyncio.wait_for(self.loop.sock_sendall(self.sock, piece), max(0.001, until - time.monotonic()))
            except asyncio.TimeoutError:
                break  # the proxy stopped reading us
            except OSError:
                self.broken = True
                break
            sent += len(piece)
        self.sent += sent
        return sent

    def pour_behind(self, pieces: Iterable[bytes], until: float) -> None:
        """pour() in a task of its own, while the caller reads."""
        self.pouring.append(asyncio.ensure_future(self.pour(pieces, until)))

    async def wait_for(self, predicate: Callable[["Conn"], Any], timeout: float) -> bool:
        """Waits until predicate(self) holds or the connection ends (at most timeout s); the predicate's value."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if self.ended or time.monotonic() >= deadline:
                return bool(predicate(self))
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                pass
        return True

    async def wait_end(self, timeout: float) -> bool:
        return await self.wait_for(lambda c: c.ended, timeout)

    def status(self) -> Optional[int]:
        """The status of the first final (non-1xx) answer received, None if none."""
        for m in re.finditer(rb"HTTP/1\.[01] (\d{3}) ", bytes(self.data[:65536])):
            if not 100 <= int(m[1]) < 200:
                return int(m[1])
        return None

    def responses(self, heads: Iterable[int] = ()) -> Tuple[List["Response"], bytes]:
        return parse_responses(bytes(self.data), set(heads), eof=self.ended)

    def describe(self) -> str:
        status = self.status()
        what = f"{status}" if status else "no answer"
        if self.ended:
            how = "reset" if self.reset else "closed"
            return f"{what}, {how} at {self.end_at:.2f} s"
        return f"{what}, still open at {self.elapsed():.1f} s"

    def reset_close(self) -> None:
        """Closes with SO_LINGER 0: the proxy gets a RST."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.abort()

    def abort(self) -> None:
        """Closes the socket once the reads and writes pending on it are cancelled (and unregistered)."""
        for task in [self.task, *self.pouring]:
            if task is not None:
                task.cancel()
        _open_conns.discard(self)
        if self.sock.fileno() >= 0:
            self.loop.call_soon(self.sock.close)  # after the cancelled calls have let go of the descriptor


def batches(pieces: Iterable[bytes], size: int = 65536) -> Iterable[bytes]:
    """The pieces joined into writes of about `size` bytes."""
    buf: List[bytes] = []
    n = 0
    for piece in pieces:
        buf.append(piece)
        n += len(piece)
        if n >= size:
            yield b"".join(buf)
            buf, n = [], 0
    if buf:
        yield b"".join(buf)


def forever(make: Callable[[int], bytes]) -> Iterable[bytes]:
    i = 0
    while True:
        yield make(i)
        i += 1


# ---- reading answers -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Response:
    status: int
    headers: List[Tuple[str, str]]
    body: bytes

    def values(self, name: str) -> List[str]:
        return [v for n, v in self.headers if n.lower() == name]

    def json(self) -> Any:
        return json.loads(self.body)


def _dechunk(data: bytes, pos: int) -> Optional[Tuple[bytes, int]]:
    """(body, end) of the chunked body starting at pos (trailers skipped); None if incomplete or garbled."""
    body = []
    while True:
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            return None
        try:
            size = int(data[pos:eol].split(b";")[0], 16)
        except ValueError:
            return None
        if size == 0:
            end = data.find(b"\r\n\r\n", eol)
            if data[eol:eol + 4] == b"\r\n\r\n":
                return b"".join(body), eol + 4
            return (b"".join(body), end + 4) if end >= 0 else None
        if len(data) < eol + 2 + size + 2:
            return None
        body.append(data[eol + 2:eol + 2 + size])
        pos = eol + 2 + size + 2


def parse_responses(data: bytes, heads: "set" = frozenset(), eof: bool = False) -> Tuple[List[Response], bytes]:
    """The complete answers in data, and what is left (an incomplete answer, or bytes that are none).

    `heads`: the indexes (among final answers) of answers to HEAD (no body);
    `eof`: the connection ended, so an answer without framing ends here.
    """
    out: List[Response] = []
    pos, final = 0, 0
    while True:
        end = data.find(b"\r\n\r\n", pos)
        if end < 0 or not data.startswith(b"HTTP/1.", pos):
            break
        lines = data[pos:end].decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ")[1])
        except (IndexError, ValueError):
            break
        headers = [(n.strip(), v.strip()) for n, _, v in (line.partition(":") for line in lines[1:])]
        response = Response(status, headers, b"")
        start = end + 4
        if 100 <= status < 200:
            out.append(response)
            pos = start
            continue
        no_body = final in heads or status in (204, 304)
        final += 1
        if no_body:
            pos = start
        elif any("chunked" in v.lower() for v in response.values("transfer-encoding")):
            got = _dechunk(data, start)
            if got is None:
                break
            response.body, pos = got
        elif response.values("content-length"):
            try:
                length = int(response.values("content-length")[0])
            except ValueError:
                break
            if len(data) < start + length:
                break
            response.body, pos = data[start:start + length], start + length
        elif eof:
            response.body, pos = data[start:], len(data)
        else:
            break
        out.append(response)
    return out, data[pos:]


def finals(responses: List[Response]) -> List[Response]:
    return [r for r in responses if not 100 <= r.status < 200]


# ---- the attacks ------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Answer:
    """What the proxy answered (for the table) and where it differs from the specification."""
    text: str
    problems: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Attack:
    name: str
    group: str
    run: Callable[[Target], Awaitable[Answer]]
    topology: str = "backends"   # "backends": two leastload backends; "rogue": the rogue alone;
                                 # "victim": a leastload backend and a rogue the attack kills
    uses: Tuple[str, ...] = ()   # the run's settings it relies on (the others stay at their defaults)
    needs: Dict[str, Any] = dataclasses.field(default_factory=dict)  # settings it fixes itself
    watch: bool = True           # normal GETs and RSS watched (the header-hygiene checks are not)

    def settings(self, base: Settings) -> Settings:
        return dataclasses.replace(base.only(self.uses), implementation=base.implementation, **self.needs)


ATTACKS: Dict[str, Attack] = {}


def attack(name: str, group: str, **options: Any) -> Callable[[Callable[[Target], Awaitable[Answer]]], Any]:
    def register(fn: Callable[[Target], Awaitable[Answer]]) -> Callable[[Target], Awaitable[Answer]]:
        ATTACKS[name] = Attack(name, group, fn, **options)
        return fn
    return register


def status_problem(conn: Conn, expected: int, what: str, within: float) -> List[str]:
    """[] if the first answer is `expected` and the proxy closed within `within` s; else why not."""
    problems = []
    if conn.status() != expected:
        problems.append(f"{what}: expected {expected} and close, got {conn.describe()}")
    elif not conn.ended or conn.end_at > within:
        problems.append(f"{what}: {expected} but not closed within {within:g} s ({conn.describe()})")
    return problems


# ---- process death

@attack("client resets mid-response (x40)", "process death")
async def client_resets(t: Target) -> Answer:
    """40 clients (4 at a time) ask for 64 MB, read 64 KiB to 1 MiB of it while the proxy writes
    as fast as it can, and close with SO_LINGER 0: the proxy's next write meets the reset."""
    async def one(i: int) -> Optional[int]:
        c = await Conn.open(t.port)
        await c.send(b"GET /?size=64000000 HTTP/1.1\r\nHost: attack\r\n\r\n")
        await c.wait_for(lambda c: c.received >= (64 << i % 5) * 1024, 10)
        status = c.status()
        c.reset_close()
        return status
    statuses: Counter = Counter()
    for batch in range(10):
        statuses.update(await asyncio.gather(*(one(4 * batch + k) for k in range(4))))
    problems = [f"{n} of 40 answers were {s} before the reset" for s, n in statuses.items() if s != 200]
    return Answer(f"{dict(statuses)}, then RST", problems)


def victim_stats(t: Target) -> Dict[str, int]:
    """The victim's counters (stalled: POSTs it stopped reading; delayed: requests with ?delay=)."""
    try:
        return get_json(t.victim.port, "/__stats", timeout=2)
    except (OSError, ValueError, RuntimeError, http.client.HTTPException):
        return {"stalled": -1, "delayed": -1}


async def park_on_other(t: Target) -> List[Conn]:
    """Slow GETs (3 s) parked until the other backend has more of them than the victim, so that a
    least-connection pick sends the next request to the victim (at most 4)."""
    parked, on_victim = [], 0
    while len(parked) - on_victim <= on_victim and len(parked) < 4:
        before = victim_stats(t)["delayed"]
        c = await Conn.open(t.port)
        await c.send(b"GET /?delay=3&size=10 HTTP/1.1\r\nHost: attack\r\n\r\n")
        parked.append(c)
        await asyncio.sleep(0.15)
        on_victim += victim_stats(t)["delayed"] > before
    return parked


@attack("backend killed mid-upload (15 MiB)", "process death", topology="victim")
async def backend_killed_mid_upload(t: Target) -> Answer:
    """A POST reaches the rogue victim, which never reads its body; the victim is SIGKILLed while
    the proxy writes the body to it. Nothing was answered: a 502, and no retry of the POST."""
    body = b"x" * UPLOAD
    head = b"POST /rogue/stall HTTP/1.1\r\nHost: attack\r\nContent-Length: %d\r\n\r\n" % len(body)
    for attempt in range(1, 11):
        parked = await park_on_other(t)
        before = victim_stats(t)["stalled"]
        c = await Conn.open(t.port)
        c.pour_behind(batches([head, body], MiB), time.monotonic() + 15)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not c.data and not c.ended and victim_stats(t)["stalled"] <= before:
            await asyncio.sleep(0.05)
        for p in parked:
            p.abort()
        if victim_stats(t)["stalled"] > before:
            await asyncio.sleep(0.3)  # the proxy is writing the body into the victim's full buffers
            t.victim.kill()
            await c.wait_for(lambda c: c.status() or c.ended, 10)
            await c.wait_end(3)
            problems = [] if c.status() == 502 else [f"the POST cut off by the kill: expected 502, got {c.describe()}"]
            return Answer(f"killed at try {attempt}: {c.describe()}", problems)
        if not c.data:
            return Answer(f"try {attempt}: {c.describe()} before reaching a backend",
                          [f"the POST was not taken: {c.describe()}"])
        c.abort()
    return Answer("the POST never reached the victim", ["10 POSTs went to the other backend: nothing was tested"])


# ---- memory before a complete head

# what an endless head may send in all before the proxy's reset: the head limit, the linger's byte
# bound after a 414/431 (64 KiB by default), and what the kernel's buffers at both ends take in
ENDLESS_BOUND = 16 * MiB


async def endless(t: Target, start: bytes, piece: Callable[[int], bytes], expected: int) -> Answer:
    """start, then pieces forever (at most 64 MiB or 5 s), reading all along and sending on after the
    proxy's answer and FIN, as an attacker would; the proxy must refuse, and end the connection once
    the linger's byte bound is passed (a reset may come before the client reads the refusal: then no
    status is seen, as with HAProxy)."""
    c = await Conn.open(t.port)
    await c.send(start)
    t0 = time.monotonic()
    await c.pour(batches(forever(piece)), t0 + 5, max_bytes=64 * MiB, past_eof=True)
    poured = time.monotonic() - t0
    await c.wait_end(3)
    text = f"{c.describe()}; {c.sent / 1024:,.0f} KiB sent in {poured:.2f} s" + (", then a reset" if c.broken else "")
    problems = []
    if c.status() not in (expected, None) or not c.ended or (c.status() is None and not c.reset):
        problems += status_problem(c, expected, "the endless head", c.end_at or 9e9)
    if c.sent > ENDLESS_BOUND or not c.broken:
        problems.append(f"the endless head: {c.sent / MiB:.1f} MiB taken in {poured:.1f} s without a reset "
                        f"(at most {ENDLESS_BOUND / MiB:g} MiB expected)")
    return Answer(text, problems)


@attack("endless header block", "memory before a complete head")
async def endless_header_block(t: Target) -> Answer:
    return await endless(t, b"GET / HTTP/1.1\r\nHost: attack\r\n",
                         lambda i: b"X-Filler-%d: %s\r\n" % (i, b"a" * 100), 431)


@attack("endless trailers", "memory before a complete head")
async def endless_trailers(t: Target) -> Answer:
    return await endless(t, b"POST / HTTP/1.1\r\nHost: attack\r\nTransfer-Encoding: chunked\r\n\r\n"
                            b"5\r\nhello\r\n0\r\n",
                         lambda i: b"X-Trailer-%d: %s\r\n" % (i, b"a" * 100), 431)


@attack("endless request line", "memory before a complete head")
async def endless_request_line(t: Target) -> Answer:
    return await endless(t, b"GET /", lambda i: b"a" * 65536, 414)


@attack("30,000 tiny headers", "memory before a complete head")
async def tiny_headers(t: Target) -> Answer:
    c = await Conn.open(t.port)
    await c.send(b"GET / HTTP/1.1\r\nHost: attack\r\n" + b"a: b\r\n" * 30000 + b"\r\n")
    await c.wait_end(5)
    return Answer(c.describe(), status_problem(c, 431, "30,000 headers", 5))


def tcp_queues(local: Tuple[str, int], remote: Tuple[str, int]) -> Optional[Tuple[int, int]]:
    """(tx_queue, rx_queue) of the IPv4 TCP socket local -> remote, from /proc/net/tcp (None if absent)."""
    def hexed(address: Tuple[str, int]) -> str:
        return "%08X:%04X" % (struct.unpack("=I", socket.inet_aton(address[0]))[0], address[1])
    want = (hexed(local), hexed(remote))
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if (fields[1], fields[2]) == want:
                tx, rx = fields[4].split(":")
                return int(tx, 16), int(rx, 16)
    return None


def consumed_by_proxy(c: Conn, t: Target) -> Optional[int]:
    """Bytes of what we sent that the proxy has read: sent, less what waits in our send queue and in
    the proxy's receive queue."""
    ours = c.sock.getsockname()[:2]
    mine, theirs = tcp_queues(ours, (HOST, t.port)), tcp_queues((HOST, t.port), ours)
    if mine is None or theirs is None:
        return None
    return max(0, c.sent - mine[0] - theirs[1])  # the three are not read at one instant


READ_AHEAD_LIMIT = MiB  # what a proxy that stops reading a client with an answer pending may have read


@attack("200,000 pipelined GETs, unread", "memory before a complete head")
async def pipelined_gets(t: Target) -> Answer:
    """Written as fast as the proxy takes them (at most 3 s) without reading; each asks for a 64 KiB
    answer, so that a proxy which stops reading a client while an answer is pending (at most one
    more head read ahead) has read little of them: the kernel's queues hold the rest (read from
    /proc/net/tcp). Then 2 s of reading: the answers in order (each size 65536 + i % 13)."""
    n = 200000
    c = await Conn.open(t.port, read=False)
    t0 = time.monotonic()
    requests = (b"GET /?size=%d HTTP/1.1\r\nHost: attack\r\n\r\n" % (65536 + i % 13) for i in range(n))
    sent = await c.pour(batches(requests), t0 + 3)
    write_s = time.monotonic() - t0
    consumed = consumed_by_proxy(c, t)
    c.start_reading()
    await asyncio.sleep(2)
    responses = finals(c.responses()[0])
    sizes = [len(r.body) for r in responses]
    problems = []
    if consumed is not None and consumed > READ_AHEAD_LIMIT:
        problems.append(f"the proxy read {consumed / MiB:.1f} MiB of requests ahead of its answers "
                        f"(at most {READ_AHEAD_LIMIT / MiB:g} MiB expected)")
    if not responses:
        problems.append(f"no answer in 2 s of reading ({c.describe()})")
    bad = Counter(r.status for r in responses if r.status != 200)
    if bad:
        problems.append(f"answers other than 200: {dict(bad)}")
    if sizes != [65536 + i % 13 for i in range(len(sizes))]:
        problems.append("answers out of order")
    read = "?" if consumed is None else f"{consumed / 1024:,.0f} KiB"
    return Answer(f"took {sent / MiB:.1f} MiB in {write_s:.1f} s, read {read} of it before we read; "
                  f"{len(responses):,} answers in 2 s{', in order' if not problems else ''}", problems)


@attack("8 pipelined 15 MiB POSTs", "memory before a complete head")
async def pipelined_posts(t: Target) -> Answer:
    body = b"x" * UPLOAD
    heads = [b"POST /?size=%d HTTP/1.1\r\nHost: attack\r\nContent-Length: %d\r\n\r\n" % (100 + i, len(body))
             for i in range(8)]
    c = await Conn.open(t.port)
    t0 = time.monotonic()
    c.pour_behind(batches((p for h in heads for p in (h, body)), MiB), t0 + 40)
    await c.wait_for(lambda c: len(finals(c.responses()[0])) >= 8, 40)
    answers = finals(c.responses()[0])
    got = [(r.status, len(r.body)) for r in answers]
    want = [(200, 100 + i) for i in range(8)]
    problems = [] if got == want else [f"expected 8 x 200 in order, got {got} ({c.describe()})"]
    return Answer(f"{len(answers)} answers {dict(Counter(r.status for r in answers))} in "
                  f"{time.monotonic() - t0:.1f} s", problems)


# ---- slow clients

SLOW_HEAD = b"GET / HTTP/1.1\r\nHost: attack\r\nX-Slow: " + b"a" * 1000


async def trickle(port: int, bound: float) -> Conn:
    """Sends SLOW_HEAD a byte a second until the proxy answers or closes, at most `bound` s."""
    try:
        c = await Conn.open(port, timeout=bound)
    except (OSError, asyncio.TimeoutError):
        raise ConnectionError(f"could not connect within {bound:g} s")
    i = 0
    while not c.ended and c.elapsed() < bound:
        if not c.data and i < len(SLOW_HEAD):
            await c.send(SLOW_HEAD[i:i + 1], 1)
            i += 1
        await c.wait_for(lambda c: c.ended, min(1.0, max(0.0, bound - c.elapsed())))
    return c


def slow_summary(conns: List[Conn]) -> str:
    ends = [c.end_at for c in conns if c.ended]
    text = f"{len(conns)} conns: {dict(Counter(c.status() for c in conns))}"
    if ends:
        text += f", closed at {min(ends):.1f}-{max(ends):.1f} s"
    if len(ends) < len(conns):
        text += f", {len(conns) - len(ends)} still open"
    return text


async def open_many_slow(port: int, n: int, bound: float) -> Tuple[List[Conn], List[str]]:
    results = await asyncio.gather(*(trickle(port, bound) for _ in range(n)), return_exceptions=True)
    conns = [r for r in results if isinstance(r, Conn)]
    errors = [str(r) for r in results if not isinstance(r, Conn)]
    return conns, errors


@attack("200 slow headers (1 byte/s)", "slow clients", uses=("header_timeout",))
async def slow_headers(t: Target) -> Answer:
    h = t.settings.header_timeout
    conns, errors = await open_many_slow(t.port, 200, h + 6)
    problems = [f"{len(errors)} connections failed: {errors[:3]}"] if errors else []
    late = [c for c in conns if c.status() != 408 or not c.ended or not 0.75 * h <= c.end_at <= h + 3]
    if late:
        problems.append(f"{len(late)} of 200 not answered 408 and closed at {0.75 * h:g}-{h + 3:g} s: "
                        f"e.g. {late[0].describe()}")
    return Answer(slow_summary(conns), problems)


class StatusPoller(threading.Thread):
    """Polls target.status() every 0.1 s: which backends were ever DOWN, ejected or charged a failure."""

    def __init__(self, target: Target) -> None:
        super().__init__(daemon=True)
        self.target = target
        self.stopping = threading.Event()
        self.down: set = set()
        self.ejected: set = set()
        self.unanswered = 0

    def run(self) -> None:
        while not self.stopping.wait(0.1):
            try:
                status = self.target.status()
            except (OSError, ValueError, RuntimeError, http.client.HTTPException):
                self.unanswered += 1  # the admin port may wait its turn while the proxy is full
                continue
            self.down.update(n for n, b in status.items() if b["down"])
            self.ejected.update(n for n, b in status.items() if b["ejected"])

    def finish(self) -> None:
        self.stopping.set()
        self.join(10)


def total_failures(t: Target) -> int:
    return sum(b["failures"] for b in t.status().values())


def backend_harm(t: Target, failures_before: int, poller: Optional[StatusPoller] = None) -> List[str]:
    """[] if no backend is DOWN, ejected or charged a failure since `failures_before`."""
    status = t.status()
    problems = []
    down = {n for n, b in status.items() if b["down"]} | (poller.down if poller else set())
    ejected = {n for n, b in status.items() if b["ejected"]} | (poller.ejected if poller else set())
    charged = sum(b["failures"] for b in status.values()) - failures_before
    if down:
        problems.append(f"backends marked DOWN: {sorted(down)}")
    if ejected:
        problems.append(f"backends ejected: {sorted(ejected)}")
    if charged:
        problems.append(f"backends charged {charged} failure(s)")
    return problems


async def paced_gets(port: int, until: float, pace: float = 0.5, timeout: float = 2.0) -> Tuple[int, Counter]:
    """A GET on a fresh connection every `pace` s until `until` (monotonic), each given `timeout` s:
    (how many were sent, what they got: "200" or why not)."""
    async def one() -> str:
        try:
            c = await Conn.open(port, timeout=timeout)
        except (OSError, asyncio.TimeoutError):
            return "no connection"
        try:
            await c.send(b"GET / HTTP/1.1\r\nHost: attack\r\n\r\n", timeout)
            await c.wait_for(lambda c: finals(c.responses()[0]), max(0.0, timeout - c.elapsed()))
            answers = finals(c.responses()[0])
            return str(answers[0].status) if answers else f"no answer in {timeout:g} s"
        finally:
            c.abort()
    tasks = []
    while time.monotonic() < until:
        tasks.append(asyncio.ensure_future(one()))
        await asyncio.sleep(pace)
    return len(tasks), Counter(await asyncio.gather(*tasks))


async def slow_at_the_limit(t: Target, n: int, bound: float) -> Answer:
    """n slow connections (a partial head, then a byte a second, for at most `bound` s), health
    probes every 0.2 s, and a GET every 0.5 s with a 2 s timeout: every GET must be answered 200
    (the proxy takes new connections in place of slow ones), every slow connection closed with
    408, no backend harmed."""
    raise_own_fd_limit(n + 256)
    failures_before = total_failures(t)
    poller = StatusPoller(t)
    poller.start()
    try:
        slow = asyncio.ensure_future(open_many_slow(t.port, n, bound))
        await asyncio.sleep(0.5)  # the slow ones are in: the proxy is at its limit
        sent, gets = await paced_gets(t.port, time.monotonic() + bound - 0.5)
        conns, errors = await slow
    finally:
        await asyncio.get_running_loop().run_in_executor(None, poller.finish)
    problems = [f"{len(errors)} connections failed: {errors[:3]}"] if errors else []
    unanswered = [c for c in conns if not c.ended or c.status() != 408]
    if unanswered:
        problems.append(f"{len(unanswered)} of {n} slow connections not closed with 408: "
                        f"e.g. {unanswered[0].describe()}")
    if gets["200"] != sent:
        problems.append(f"GETs every 0.5 s (2 s timeout): {gets['200']} of {sent} answered 200 ({dict(gets)})")
    problems += backend_harm(t, failures_before, poller)
    return Answer(f"{slow_summary(conns)}; GETs every 0.5 s: {gets['200']}/{sent} answered 200", problems)


@attack("slow connections past the fd limit (nofile 256)", "slow clients", uses=("header_timeout",),
        needs={"nofile": 256, "health": True, "overload_timeout": 1.0})
async def fd_exhaustion(t: Target) -> Answer:
    """More slow connections than the proxy has descriptors for, for 3 s: at the limit the header
    timeout shrinks to 1 s (--overload-timeout), so each is answered well within that."""
    return await slow_at_the_limit(t, t.settings.nofile * t.workers + 100, 3.0)


@attack("1,100 slow connections at nofile 1024 (15 s)", "slow clients", uses=("header_timeout",),
        needs={"nofile": 1024, "health": True})
async def fd_exhaustion_1024(t: Target) -> Answer:
    """Issue 45's case: 1,100 slow connections for 15 s against RLIMIT_NOFILE 1024 (benchmark only)."""
    return await slow_at_the_limit(t, 1100, 15.0)


@attack("15 clients never read a large answer", "slow clients", uses=("timeout",))
async def slow_readers(t: Target) -> Answer:
    """Each asks for 256 MB and reads nothing for timeout + 2 s; then we read what is left: the
    proxy must have closed them, as a client failure (no backend charged or ejected)."""
    failures_before = total_failures(t)
    conns = [await Conn.open(t.port, read=False, keep=0) for _ in range(15)]
    for c in conns:
        await c.send(b"GET /?size=256000000 HTTP/1.1\r\nHost: attack\r\n\r\n")
    await asyncio.sleep(t.settings.timeout + 2)
    for c in conns:
        c.start_reading()
    await asyncio.gather(*(c.wait_end(2) for c in conns))
    for c in conns:
        c.abort()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, settle, t, SETTLE_MARGIN)
    closed = sum(c.ended for c in conns)
    problems = [] if closed == 15 else [f"{15 - closed} of 15 still open {t.settings.timeout + 2:g} s later"]
    problems += backend_harm(t, failures_before)
    return Answer(f"{closed}/15 closed by the proxy", problems)


@attack("a request body that stops", "slow clients", uses=("body_timeout",))
async def stalled_body(t: Target) -> Answer:
    b = t.settings.body_timeout
    c = await Conn.open(t.port)
    await c.send(b"POST / HTTP/1.1\r\nHost: attack\r\nContent-Length: 1000\r\n\r\n0123456789")
    await c.wait_end(b + 5)
    problems = []
    if not c.ended or not 0.75 * b <= c.end_at <= b + 3:
        problems.append(f"expected a close at {0.75 * b:g}-{b + 3:g} s, got {c.describe()}")
    if c.status() not in (None, 408):
        problems.append(f"expected 408 or no answer, got {c.status()}")
    return Answer(c.describe(), problems)


# ---- backend misbehaviour (the rogue)

CLEAN_BODY = b"x" * 1024


async def get_once(port: int, path: str = "/") -> Optional[Response]:
    c = await Conn.open(port)
    await c.send(b"GET %s HTTP/1.1\r\nHost: attack\r\n\r\n" % path.encode())
    await c.wait_for(lambda c: finals(c.responses()[0]), 10)
    c.abort()
    answers = finals(c.responses()[0])
    return answers[0] if answers else None


def clean(r: Optional[Response]) -> bool:
    return r is not None and r.status == 200 and r.body == CLEAN_BODY


async def misframed(t: Target, requests: List[bytes], expected: int, expected_body: Optional[bytes] = None,
                    head: bool = False) -> Answer:
    """Each request (in turn, 4 rounds) on a fresh connection: its answer must be `expected` (with
    `expected_body` unless None), well framed, with nothing after it; then the same connection (if
    the proxy kept it: same worker, the poisoned backend connection reused first) and 2 fresh ones
    ask GET /: each a clean 200 (not the rogue's leftovers, not a 502), none charged to the backend."""
    problems: List[str] = []
    seen: Counter = Counter()
    loop = asyncio.get_running_loop()
    for i in range(4):
        c = await Conn.open(t.port)
        await c.send(requests[i % len(requests)])
        await c.wait_for(lambda c: finals(c.responses({0} if head else ())[0]) or c.ended, 10)
        await asyncio.sleep(0.3)  # anything after the answer, and any late bytes at the rogue, arrive
        answers, rest = c.responses({0} if head else ())
        first = answers[0] if answers else None
        seen[first.status if first else c.describe()] += 1
        if first is None or first.status != expected or expected_body not in (None, first.body):
            problems.append(f"round {i}: expected {expected} {expected_body!r}, got "
                            f"{(first.status, first.body[:60]) if first else c.describe()}")
        if len(answers) > 1 or rest:
            problems.append(f"round {i}: bytes after the answer reached the client: "
                            f"{bytes(c.data)[-80:]!r}")
        mark = await loop.run_in_executor(None, total_failures, t)
        if not c.ended:  # the same client connection, if the proxy kept it
            c.data.clear()
            await c.send(b"GET / HTTP/1.1\r\nHost: attack\r\n\r\n")
            await c.wait_for(lambda c: finals(c.responses()[0]), 10)
            after = finals(c.responses()[0])
            if (after or not c.ended) and not (after and clean(after[0])):
                problems.append(f"round {i}: the next GET on that connection got "
                                f"{(after[0].status, after[0].body[:60]) if after else c.describe()}")
        c.abort()
        for _ in range(2):
            r = await get_once(t.port)
            if not clean(r):
                problems.append(f"round {i}: an unrelated client got {(r.status, r.body[:60]) if r else 'nothing'}")
        charged = await loop.run_in_executor(None, total_failures, t) - mark
        if charged:
            problems.append(f"round {i}: the clean requests after it were charged {charged} failure(s)")
    return Answer(f"{dict(seen)}; the unrelated GETs after: {'clean' if not problems else 'see problems'}",
                  problems[:6])


def req(method: str, target: str, extra: str = "") -> bytes:
    return f"{method} {target} HTTP/1.1\r\nHost: attack\r\n{extra}\r\n".encode()


@attack("rogue: bytes after a complete answer", "backend misbehaviour", topology="rogue")
async def extra_bytes(t: Target) -> Answer:
    return await misframed(t, [req("GET", "/rogue/extra"), req("GET", "/rogue/extra?late=1")], 200, b"hello")


@attack("rogue: a 204/304 with a body", "backend misbehaviour", topology="rogue")
async def body_on_204(t: Target) -> Answer:
    answer204 = await misframed(t, [req("GET", "/rogue/204-body")], 204, b"")
    answer304 = await misframed(t, [req("GET", "/rogue/304-body")], 304, b"")
    return Answer(f"204: {answer204.text}; 304: {answer304.text}", answer204.problems + answer304.problems)


@attack("rogue: a body after HEAD", "backend misbehaviour", topology="rogue")
async def body_after_head(t: Target) -> Answer:
    return await misframed(t, [req("HEAD", "/rogue/head-body")], 200, b"", head=True)


@attack("rogue: an invalid Content-Length", "backend misbehaviour", topology="rogue")
async def bad_content_length(t: Target) -> Answer:
    # nothing was sent yet: the proxy's own 502, whose body is its own
    return await misframed(t, [req("GET", "/rogue/bad-length"), req("GET", "/rogue/bad-length?kind=junk")], 502)


@attack("pipelined Expect: 100-continue while an answer streams", "backend misbehaviour", topology="rogue")
async def expect_while_streaming(t: Target) -> Answer:
    """GET a 1 MiB answer the rogue streams over about 0.3 s, and pipeline a POST with Expect behind
    it: a 100 Continue may only come after the GET's answer; the body is sent after the GET's answer
    and a 100 (or 1.5 s without one, as curl does)."""
    size = 1 << 20
    c = await Conn.open(t.port)
    await c.send(req("GET", f"/rogue/slow?size={size}&pace=0.02")
                 + req("POST", "/rogue/echo", "Content-Length: 10\r\nExpect: 100-continue\r\n"))
    await c.wait_for(lambda c: finals(c.responses()[0]), 10)
    await c.wait_for(lambda c: len(c.responses()[0]) >= 2, 1.5)
    await c.send(b"0123456789")
    await c.wait_for(lambda c: len(finals(c.responses()[0])) >= 2, 10)
    answers, rest = c.responses()
    kinds = [r.status for r in answers]
    problems = []
    final = finals(answers)
    if not final or final[0].status != 200 or final[0].body != b"x" * size:
        problems.append("the GET's answer is not 1 MiB of x" + (" (a 100 Continue inside it)"
                        if b"HTTP/1.1 100" in bytes(c.data[:size + 4096]) else f": {kinds} {c.describe()}"))
    if answers and 100 <= answers[0].status < 200:
        problems.append("a 1xx came before the GET's answer")
    if len(final) < 2 or final[1].status != 200 or final[1].json().get("body_length") != 10:
        problems.append(f"the POST was not answered 200 with its 10 bytes: {kinds} {c.describe()}")
    return Answer(f"answers {kinds}", problems)


@attack("413 before 100 Continue", "backend misbehaviour")
async def expect_413(t: Target) -> Answer:
    """Content-Length over --max-body with Expect: 100-continue and no body: 413 at once, no 100."""
    c = await Conn.open(t.port)
    await c.send(req("POST", "/", f"Content-Length: {t.settings.max_body + 1}\r\nExpect: 100-continue\r\n"))
    await c.wait_for(lambda c: c.status() or c.ended, 3)
    await c.wait_end(3)
    answers = c.responses()[0]
    problems = status_problem(c, 413, "Content-Length over --max-body", 5)
    if c.first_at is not None and c.first_at > 2:
        problems.append(f"the 413 took {c.first_at:.1f} s")
    if answers and answers[0].status == 100:
        problems.append("100 Continue was sent for a body that gets 413")
    return Answer(f"{[r.status for r in answers]}, {c.describe()}", problems)


@attack("chunked body past --max-body", "backend misbehaviour")
async def chunked_too_large(t: Target) -> Answer:
    """1 MiB chunks without an end (at most max-body + 4 MiB, 20 s): 413 while it arrives, and close."""
    c = await Conn.open(t.port)
    await c.send(req("POST", "/", "Transfer-Encoding: chunked\r\n"))
    chunk = b"100000\r\n" + b"x" * MiB + b"\r\n"
    await c.pour(forever(lambda i: chunk), time.monotonic() + 20, max_bytes=t.settings.max_body + 4 * MiB)
    await c.wait_end(3)
    text = f"{c.describe()} after {c.sent / MiB:.0f} MiB"
    return Answer(text, status_problem(c, 413, "a chunked body past --max-body", 25))


@attack("a body sent on after its 413", "backend misbehaviour")
async def body_after_413(t: Target) -> Answer:
    """A Content-Length 8 MiB past --max-body, and the whole body written anyway before reading (as
    an upload client does). The 413 must reach the client whole: a proxy that closes with the body
    unread makes the kernel reset the connection, which can take the answer with it."""
    size = t.settings.max_body + 8 * MiB
    c = await Conn.open(t.port, read=False)
    await c.send(req("POST", "/", f"Content-Length: {size}\r\n"))
    piece = b"x" * 65536
    await c.pour(forever(lambda i: piece), time.monotonic() + 20, max_bytes=size)
    c.start_reading()
    await c.wait_end(5)
    text = f"{c.describe()} after {c.sent / MiB:.1f} of {size / MiB:.0f} MiB written"
    problems = status_problem(c, 413, "a body sent on after its 413", 25)
    if c.broken or c.reset:
        problems.append(f"the upload was reset ({text})")
    return Answer(text, problems)


# ---- header hygiene (the rogue echoes what it got)

async def ask(t: Target, raw: bytes, n: int = 1, head: bool = False, timeout: float = 5) -> Tuple[List[Response], Conn]:
    """raw on a fresh connection; the final answers (waiting for n of them, or the close)."""
    c = await Conn.open(t.port)
    await c.send(raw)
    heads = {0} if head else set()
    await c.wait_for(lambda c: len(finals(c.responses(heads)[0])) >= n, timeout)
    return finals(c.responses(heads)[0]), c


def hreq(method: str, target: str, headers: str = "", version: str = "HTTP/1.1", host: bool = True) -> bytes:
    host_line = f"Host: {HYGIENE_HOST}\r\n" if host else ""
    return f"{method} {target} {version}\r\n{host_line}{headers}\r\n".encode()


async def echo(t: Target, raw: bytes) -> Tuple[Optional[Dict[str, Any]], str]:
    """What the rogue received for raw (None if no 200), and a description of the answer."""
    answers, c = await ask(t, raw)
    c.abort()
    if not answers or answers[0].status != 200:
        return None, f"no 200: {[r.status for r in answers]} {c.describe()}"
    try:
        return answers[0].json(), "200"
    except ValueError:
        return None, f"200, but not the rogue's echo: {answers[0].body[:60]!r}"


def header_values(seen: Dict[str, Any], name: str) -> List[str]:
    return [v for n, v in seen["headers"] if n.lower() == name]


def hygiene(name: str, **options: Any) -> Callable[[Callable[[Target], Awaitable[Answer]]], Any]:
    return attack(name, "header hygiene", topology="rogue", watch=False, **options)


async def refused(t: Target, raw: bytes, expected: int, what: str, within: float = 2.0) -> List[str]:
    _, c = await ask(t, raw, timeout=within)
    await c.wait_end(within)
    c.abort()
    return status_problem(c, expected, what, within)


@hygiene("trailer Host never becomes a header")
async def trailer_host(t: Target) -> Answer:
    seen, text = await echo(t, hreq("POST", "/rogue/echo", "Transfer-Encoding: chunked\r\n")
                            + b"5\r\nhello\r\n0\r\nHost: evil.example\r\nX-Trailer: 1\r\n\r\n")
    if seen is None:
        return Answer(text, [f"the chunked POST with trailers: {text}"])
    problems = []
    if header_values(seen, "host") != [HYGIENE_HOST]:
        problems.append(f"the backend got Host {header_values(seen, 'host')}")
    if header_values(seen, "x-trailer"):
        problems.append("a trailer reached the backend as a header")
    if seen["body_length"] != 5:
        problems.append(f"body of {seen['body_length']} bytes, not 5")
    return Answer(f"Host {header_values(seen, 'host')}, trailers at the backend {seen['trailers']}", problems)


@hygiene("two Host headers / none")
async def host_count(t: Target) -> Answer:
    problems = await refused(t, hreq("GET", "/rogue/echo", "Host: evil.example\r\n"), 400, "two Host")
    problems += await refused(t, hreq("GET", "/rogue/echo", host=False), 400, "no Host (HTTP/1.1)")
    return Answer("400, 400" if not problems else "; ".join(problems), problems)


@hygiene("absolute-form target")
async def absolute_form(t: Target) -> Answer:
    problems = await refused(t, hreq("GET", "http://evil.example/rogue/echo"), 400, "absolute-form, other Host")
    for raw, what in ((hreq("GET", f"http://{HYGIENE_HOST}/rogue/echo"), "same Host"),
                      (hreq("GET", f"http://{HYGIENE_HOST}/rogue/echo", version="HTTP/1.0", host=False),
                       "HTTP/1.0, no Host")):
        seen, text = await echo(t, raw)
        if seen is None:
            problems.append(f"absolute-form, {what}: {text}")
        elif seen["target"] != "/rogue/echo" or header_values(seen, "host") != [HYGIENE_HOST]:
            problems.append(f"absolute-form, {what}: forwarded as {seen['target']!r} with Host "
                            f"{header_values(seen, 'host')}")
    return Answer("other Host 400; same / none forwarded in origin-form" if not problems else
                  "; ".join(problems), problems)


@hygiene("Connection naming Host / Content-Length / Transfer-Encoding")
async def connection_names_framing(t: Target) -> Answer:
    problems = []
    seen, text = await echo(t, hreq("GET", "/rogue/echo", "Connection: host\r\n"))
    if seen is None or header_values(seen, "host") != [HYGIENE_HOST]:
        problems.append(f"Connection: host -> Host {header_values(seen, 'host') if seen else text}")
    for headers, body in (("Content-Length: 5\r\nConnection: content-length\r\n", b"hello"),
                          ("Transfer-Encoding: chunked\r\nConnection: transfer-encoding\r\n",
                           b"5\r\nhello\r\n0\r\n\r\n")):
        seen, text = await echo(t, hreq("POST", "/rogue/echo", headers) + body)
        if seen is None or seen["body_length"] != 5:
            problems.append(f"{headers.splitlines()[1]} -> {seen['body_length'] if seen else text} body bytes")
    return Answer("Host and the body kept" if not problems else "; ".join(problems), problems)


@hygiene("two Connection headers both honoured")
async def two_connection_headers(t: Target) -> Answer:
    seen, text = await echo(t, hreq("GET", "/rogue/echo", "Connection: x-a\r\nConnection: x-b\r\n"
                                    "X-A: 1\r\nX-B: 1\r\nX-C: 1\r\n"))
    if seen is None:
        return Answer(text, [text])
    got = sorted({n.lower() for n, _ in seen["headers"]} & {"x-a", "x-b", "x-c"})
    problems = [] if got == ["x-c"] else [f"the backend got {got} (expected only x-c)"]
    return Answer(f"the backend got {got}", problems)


def xff_chain(seen: Dict[str, Any]) -> List[str]:
    return [part.strip() for v in header_values(seen, "x-forwarded-for") for part in v.split(",")]


@hygiene("two X-Forwarded-For kept in order")
async def two_xff(t: Target) -> Answer:
    seen, text = await echo(t, hreq("GET", "/rogue/echo", "X-Forwarded-For: 1.1.1.1\r\n"
                                    "X-Forwarded-For: 2.2.2.2\r\n"))
    if seen is None:
        return Answer(text, [text])
    chain, proto = xff_chain(seen), header_values(seen, "x-forwarded-proto")
    problems = [] if chain == ["1.1.1.1", "2.2.2.2", HOST] else [f"X-Forwarded-For chain {chain}"]
    if proto != ["http"]:
        problems.append(f"X-Forwarded-Proto {proto}")
    return Answer(f"XFF {chain}, proto {proto}", problems)


@hygiene("--xff replace", needs={"xff": "replace"})
async def xff_replace(t: Target) -> Answer:
    seen, text = await echo(t, hreq("GET", "/rogue/echo", "X-Forwarded-For: 1.1.1.1\r\n"))
    if seen is None:
        return Answer(text, [text])
    chain = xff_chain(seen)
    return Answer(f"XFF {chain}", [] if chain == [HOST] else [f"X-Forwarded-For chain {chain}"])


@hygiene("response hop-by-hop headers stripped")
async def response_hop_headers(t: Target) -> Answer:
    answers, c = await ask(t, hreq("GET", "/rogue/hop"))
    c.abort()
    if not answers or answers[0].status != 200:
        return Answer(c.describe(), [f"GET /rogue/hop: {c.describe()}"])
    r = answers[0]
    names = {n.lower() for n, _ in r.headers}
    connection = " ".join(r.values("connection")).lower()
    problems = [f"{name} reached the client" for name in ("keep-alive", "x-secret") if name in names]
    if "x-secret" in connection:
        problems.append(f"Connection: {connection} reached the client")
    if "x-public" not in names:
        problems.append("X-Public (an end-to-end header) was dropped")
    return Answer(f"headers {sorted(names)}", problems)


async def http10_get(t: Target, target: str) -> Tuple[Optional[Response], Conn]:
    """GET target as an HTTP/1.0 client (the answer ends with the connection)."""
    c = await Conn.open(t.port)
    await c.send(hreq("GET", target, version="HTTP/1.0"))
    await c.wait_end(5)
    c.abort()
    answers = finals(c.responses()[0])
    return (answers[0] if answers else None), c


@hygiene("HTTP/1.0 clients: answered, never chunked")
async def http10_no_chunked(t: Target) -> Answer:
    """4 rounds of: an HTTP/1.1 GET (its backend connection pooled), then HTTP/1.0 GETs of a
    Content-Length answer and of a chunked one, on the backend connections left in the pool: each
    answered, never in chunks."""
    problems, seen = [], Counter()
    for i in range(4):
        await get_once(t.port)
        for target in ("/rogue/echo", "/rogue/chunked"):
            r, c = await http10_get(t, target)
            seen[r.status if r else "no answer"] += 1
            if r is None or r.status != 200:
                problems.append(f"round {i}: GET {target} HTTP/1.0 got "
                                f"{f'{r.status} {r.body[:40]!r}' if r else 'no answer'} ({c.describe()})")
            elif any("chunked" in v.lower() for v in r.values("transfer-encoding")):
                problems.append(f"round {i}: Transfer-Encoding: chunked sent to an HTTP/1.0 client")
            elif target == "/rogue/chunked" and r.body != b"hello chunked world":
                problems.append(f"round {i}: body {r.body[:80]!r}")
    return Answer(f"{dict(seen)}" + ("; never chunked" if not problems else ""), problems[:4])


@hygiene("request line without HTTP/1.x")
async def no_version(t: Target) -> Answer:
    """Request lines that are not METHOD SP TARGET SP HTTP/1.x, alone (no empty line after them):
    a 400 and a close at once, not at the header timeout."""
    problems, took = [], []
    for raw, what in ((b"GET /a\r\n", "GET /a"), (b"GET / HTTP/2.0\r\n", "HTTP/2.0"),
                      (b"GET /\r\n\r\n", "GET / and an empty line")):
        c = await Conn.open(t.port)
        await c.send(raw)
        await c.wait_end(2.0)
        c.abort()
        problems += status_problem(c, 400, what, 1.0)
        took.append(c.end_at or 9e9)
    return Answer(f"400 and closed within {max(took):.3f} s" if not problems else "; ".join(problems), problems)


_SMUGGLED = b"GPOST / HTTP/1.1\r\nHost: a\r\nContent-Length: 15\r\n\r\nx=1"
SMUGGLING = {
    "CL.TE": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG",
    "TE.CL": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"
             b"%x\r\n%s\r\n0\r\n\r\n" % (len(_SMUGGLED), _SMUGGLED),
    "two Content-Length": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "bad chunk size": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    "obs-fold": b"GET / HTTP/1.1\r\nHost: a\r\nX-A: a\r\n b\r\n\r\n",
    "bare LF": b"GET / HTTP/1.1\nHost: a\n\n",
}


@hygiene("strict request framing (CL.TE, TE.CL, ...)")
async def strict_framing(t: Target) -> Answer:
    problems = []
    for what, raw in SMUGGLING.items():
        problems += await refused(t, raw, 400, what)
    return Answer(f"{len(SMUGGLING) - len(problems)}/{len(SMUGGLING)} refused 400 and closed", problems)


@hygiene("head limits at their edges")
async def limits_at_edges(t: Target) -> Answer:
    problems = await refused(t, hreq("GET", "/" + "a" * (MAX_REQUEST_LINE + 100)), 414, "a 8292-byte request line")
    problems += await refused(t, hreq("GET", "/", "".join(f"X-H{i}: 1\r\n" for i in range(MAX_HEADERS + 1))),
                              431, "101 headers")
    seen, text = await echo(t, hreq("GET", "/rogue/echo?" + "a" * (MAX_REQUEST_LINE - 100)))
    if seen is None:
        problems.append(f"an 8092-byte request line: {text}")
    return Answer("414, 431; 8 KiB - 100 accepted" if not problems else "; ".join(problems), problems)


# ---- the admin port

@attack("admin: 40 MiB request line", "admin port")
async def admin_long_line(t: Target) -> Answer:
    c = await Conn.open(t.admin_ports[0])
    await c.send(b"GET /leastload/status")
    await c.pour(forever(lambda i: b"a" * 65536), time.monotonic() + 10, max_bytes=40 * MiB)
    await c.wait_end(3)
    text = f"{c.describe()} after {c.sent / MiB:.1f} MiB"
    problems = status_problem(c, 414, "a 40 MiB request line", 15)
    if c.sent >= 40 * MiB:
        problems.append("all 40 MiB were taken before any refusal")
    return Answer(text, problems)


@attack("admin: slow client", "admin port", uses=("header_timeout",))
async def admin_slow(t: Target) -> Answer:
    h = t.settings.header_timeout
    conns = await asyncio.gather(*(trickle(port, h + 6) for port in t.admin_ports))
    problems = [f"admin port {port}: expected a close at {0.75 * h:g}-{h + 3:g} s, got {c.describe()}"
                for port, c in zip(t.admin_ports, conns) if not c.ended or not 0.75 * h <= c.end_at <= h + 3]
    return Answer(slow_summary(conns), problems)


# ---- the harness ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Result:
    attack: str
    target: str
    answer: str
    problems: List[str]
    seconds: float
    idle_mib: Optional[float] = None      # summed over the proxy's processes
    peak_mib: Optional[float] = None
    growth_mib: Optional[float] = None    # the largest growth of one process
    gets_ok: Optional[int] = None
    gets_total: Optional[int] = None
    alive: bool = True
    diagnosis: str = ""                   # the proxy's output, kept when there are problems

    @property
    def gets_percent(self) -> Optional[float]:
        return 100.0 * self.gets_ok / self.gets_total if self.gets_total else None

    def summary(self) -> str:
        lines = [f"{self.attack} on {self.target}: {self.answer} ({self.seconds:.1f} s)"]
        if self.idle_mib is not None:
            lines.append(f"  RSS {self.idle_mib:.0f} -> {self.peak_mib:.0f} MiB; normal GETs "
                         f"{self.gets_ok}/{self.gets_total} answered 200")
        lines += [f"  problem: {p}" for p in self.problems]
        return "\n".join(lines)


async def _bounded(a: Attack, target: Target) -> Answer:
    try:
        return await asyncio.wait_for(a.run(target), ATTACK_LIMIT)
    finally:
        for conn in list(_open_conns):
            conn.abort()
        for _ in range(3):
            await asyncio.sleep(0)  # the aborted sockets close


def warm_up(target: Target) -> None:
    for _ in range(10):
        one_get(target.port)


def settle(target: Target, margin: float) -> Optional[int]:
    """Waits until no transaction is in flight (bounded); the number still active, None if unknown."""
    def active() -> Optional[int]:
        try:
            return sum(b["active"] for b in target.status().values())
        except (OSError, ValueError, RuntimeError, http.client.HTTPException):
            return None
    left = wait_until(lambda: active() == 0, target.settings.timeout + margin, step=0.1)
    return 0 if left else active()


def run_attack(a: Attack, target: Target) -> Result:
    """Runs one attack against a started target and checks its "done when"; never raises for the proxy's faults."""
    pids = target.pids()
    watch = gets = None
    if a.watch:
        warm_up(target)
        time.sleep(0.2)
        watch, gets = RssWatch(pids), NormalGets(target.port)
        watch.start()
        gets.start()
    t0 = time.monotonic()
    try:
        answer = asyncio.run(_bounded(a, target))
    except Exception as exc:  # the attack could not go on: the proxy refused, vanished, ...
        answer = Answer(f"the attack broke off: {type(exc).__name__}: {exc}",
                        [f"the attack broke off: {type(exc).__name__}: {exc}"])
    finally:
        if gets is not None:
            gets.finish()
        if watch is not None:
            watch.finish()
    result = Result(a.name, target.label, answer.text, list(answer.problems), time.monotonic() - t0)
    left = settle(target, SETTLE_MARGIN) if all(is_alive(pid) for pid in pids) else None
    dead = [pid for pid in pids if not is_alive(pid)]  # also a death while the attack's connections closed
    result.alive = not dead
    if dead:
        result.problems.append(f"proxy processes died: {dead}")
    elif left != 0:
        result.problems.append(f"transactions still active afterwards: {left if left is not None else 'unknown'}")
    if watch is not None and gets is not None:
        result.idle_mib, result.peak_mib = sum(watch.idle.values()), sum(watch.peak.values())
        result.growth_mib = watch.growth()
        if result.growth_mib > RSS_BUDGET_MIB:
            result.problems.append(f"RSS grew {result.growth_mib:.0f} MiB over idle (budget {RSS_BUDGET_MIB})")
        result.gets_ok, result.gets_total = gets.ok, gets.total
        if gets.total and gets.ok < GETS_GOAL * gets.total:
            result.problems.append(f"normal GETs: {gets.ok}/{gets.total} answered 200 ({dict(gets.failed)})")
    return result


# ---- the benchmark: both proxies, one table -------------------------------------------------------------------


def start_rogue(name: str, workdir: str) -> RogueProcess:
    return RogueProcess(name=name, workdir=workdir)


def bench_one(a: Attack, kind: str, n: int, base: Settings, ports: Dict[str, int], workdir: str) -> Result:
    """Starts the proxy (and a victim if the attack kills one), runs the attack, stops them."""
    victim = None
    backends = {"a": ports["a"], "b": ports["b"]}
    if a.topology == "rogue":
        backends = {"rogue": ports["rogue"]}
    elif a.topology == "victim":
        victim = start_rogue("victim", workdir)
        backends = {"a": ports["a"], "victim": victim.port}
    start = start_leastload if kind == "leastload" else start_haproxy
    try:
        try:
            target = start(backends, a.settings(base), n, workdir, victim)
        except (RuntimeError, OSError) as exc:
            return Result(a.name, f"{kind}-{n}", "did not start", [str(exc).splitlines()[0]], 0.0, alive=False)
        try:
            return run_attack(a, target)
        finally:
            target.stop()
    finally:
        if victim is not None:
            victim.stop()


def cell(r: Optional[Result]) -> List[str]:
    if r is None:
        return ["-"] * 5
    rss = "-" if r.idle_mib is None else f"{r.idle_mib:.0f} -> {r.peak_mib:.0f}"
    gets = "-" if r.gets_percent is None else f"{r.gets_percent:.0f} % of {r.gets_total}"
    spec = "ok" if not r.problems else "; ".join(r.problems)
    return [r.answer.replace("|", "/"), rss, gets, "yes" if r.alive else "NO", spec.replace("|", "/")]


def table(rows: List[Tuple[Attack, Dict[str, Result]]], kinds: List[str]) -> str:
    head = ["attack"] + [f"{k} {c}" for k in kinds for c in ("answered", "RSS MiB", "GETs 200", "alive", "spec")]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for a, results in rows:
        cells = [a.name] + [x for k in kinds for x in cell(results.get(k))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Hostile clients and misbehaving backends against leastload proxy "
                                            "and HAProxy on 127.0.0.1 (see the module docstring).")
    p.add_argument("--proxies", default="leastload,haproxy", help="comma-separated: leastload, haproxy")
    p.add_argument("--workers", type=int, default=1, help="leastload workers and HAProxy threads (default 1)")
    p.add_argument("--only", default="", help="run the attacks whose name or group contains this text")
    p.add_argument("--header-timeout", type=float, default=10.0, help="both proxies (default 10 s)")
    p.add_argument("--timeout", type=float, default=10.0, help="backend / unread-client timeout (default 10 s)")
    p.add_argument("--body-timeout", type=float, default=10.0, help="leastload's --body-timeout (default 10 s)")
    p.add_argument("--quick", action="store_true", help="2 s timeouts")
    p.add_argument("--implementation", choices=("c", "python"), default="c",
                   help="leastload's per-request path: compiled (c, the default) or the pure-Python one")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.header_timeout = args.timeout = args.body_timeout = 2.0
    args.proxies = [k.strip() for k in args.proxies.split(",") if k.strip()]
    if not set(args.proxies) <= {"leastload", "haproxy"} or not args.proxies:
        p.error("--proxies: leastload, haproxy or both")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if not sys.platform.startswith("linux"):
        sys.exit("this benchmark reads /proc: Linux only")
    if "haproxy" in args.proxies:
        pvh.ensure_tools(["haproxy"])
    if "leastload" in args.proxies:
        pvh.ensure_leastload_proxy()
    signal.signal(signal.SIGTERM, pvh.raise_interrupt)
    base = Settings(header_timeout=args.header_timeout, body_timeout=args.body_timeout, timeout=args.timeout,
                    implementation=args.implementation)
    attacks = [a for a in ATTACKS.values() if args.only.lower() in (a.name + " " + a.group).lower()]
    rows: List[Tuple[Attack, Dict[str, Result]]] = []
    servers: List[Any] = []
    with tempfile.TemporaryDirectory(prefix="proxy-attacks-") as workdir:
        try:
            ports = start_backends([("a", 0.0), ("b", 0.0)], 1024, workdir, servers)
            rogue = start_rogue("rogue", workdir)
            servers.append(rogue)
            ports["rogue"] = rogue.port
            for i, a in enumerate(attacks, 1):
                results = {}
                for kind in args.proxies:
                    print(f"[{i}/{len(attacks)}] {a.name} on {kind} ...", end=" ", file=sys.stderr, flush=True)
                    results[kind] = r = bench_one(a, kind, args.workers, base, ports, workdir)
                    print(f"{r.answer} ({r.seconds:.1f} s)", file=sys.stderr, flush=True)
                rows.append((a, results))
        except KeyboardInterrupt:
            print("\ninterrupted: every process started is stopped", file=sys.stderr)
            return 130
        finally:
            for server in servers:
                server.stop()
    print(f"\nattacks on 127.0.0.1: {', '.join(args.proxies)}, {args.workers} worker(s)/thread(s); header "
          f"timeout {args.header_timeout:g} s, timeout {args.timeout:g} s, body timeout {args.body_timeout:g} s\n")
    print(table(rows, args.proxies))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"attack": a.name, **{k: dataclasses.asdict(r) for k, r in res.items()}}
                       for a, res in rows], f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
