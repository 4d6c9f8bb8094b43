"""User-space instructions per proxied request, on real sockets, counted by valgrind.

proxy_vs_haproxy.py times the proxies, and on a shared 2-core machine its
CPU figures move by 10-30 % from run to run. This script counts instead: each
proxy runs under `valgrind --tool=callgrind` (one worker, one thread) in front
of the same three backends as there; after a warm-up the counters are zeroed
(`callgrind_control -z`), a fixed number of GETs is sent over a few keep-alive
connections, and the counters are dumped (`callgrind_control -d`). Every
instruction the proxy process ran in user space for those requests is in the
figure (the interpreter, uvloop, httptools, the compiled modules, the engine,
libc; HAProxy's binary and libc), none of the kernel's: system calls and the
loopback TCP stack are the same work for every proxy and are timed by
proxy_vs_haproxy.py and proxy_profile.py. The counts repeat to within a
fraction of a percent.

    python -m benchmarks.proxy_instructions                        # this build and HAProxy
    python -m benchmarks.proxy_instructions --before OTHER/bin/python   # and another build

Needs Linux, valgrind (with callgrind_control) and, for its row, haproxy.
Not part of CI: a person runs it.
"""

import argparse
import glob
import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from leastload_testkit.backends import start_backends

from . import proxy_vs_haproxy as pvh  # the same proxies and configs

STARTUP_TIMEOUT = 120.0  # a proxy under valgrind starts 20-50 times slower
REQUEST_TIMEOUT = 60.0


def send(port, n, connections):
    """n GETs over `connections` keep-alive connections; returns the number answered 200."""
    counts = [0] * connections
    next_one = iter(range(n))
    lock = threading.Lock()

    def worker(i):
        conn = http.client.HTTPConnection(pvh.HOST, port, timeout=REQUEST_TIMEOUT)
        try:
            while True:
                with lock:
                    if next(next_one, None) is None:
                        return
                conn.request("GET", "/")
                response = conn.getresponse()
                response.read()
                counts[i] += response.status == 200
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts)


def callgrind(pid, flag):
    subprocess.run(["callgrind_control", flag, str(pid)], check=True, capture_output=True, timeout=60)


def dumped_total(workdir, before):
    """Instructions in the newest callgrind dump that was not there before."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        new = sorted(set(glob.glob(os.path.join(workdir, "callgrind.out*"))) - before, key=os.path.getmtime)
        for path in reversed(new):
            with open(path) as f:
                for line in f:
                    if line.startswith(("summary:", "totals:")):
                        return int(line.split()[1])
        time.sleep(0.2)
    raise RuntimeError("callgrind wrote no dump")


def measure(kind, backends, args, workdir):
    """Instructions per request of one proxy under callgrind."""
    server, port = pvh.start_proxy(kind, 1, backends, args.method, workdir, before_python=args.before)
    server.stop()  # its command line is what we need: started again under valgrind below
    out = os.path.join(workdir, f"callgrind.out.{kind}.%p")
    # one process serves (one worker runs in the command's own process, HAProxy with nbthread 1)
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *server.cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            try:
                socket.create_connection((pvh.HOST, port), timeout=5).close()
                break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{kind} did not start under valgrind")
            time.sleep(0.5)
        send(port, args.warmup, args.connections)
        callgrind(proc.pid, "-z")
        ok = send(port, args.requests, args.connections)
        before = set(glob.glob(os.path.join(workdir, "callgrind.out*")))
        callgrind(proc.pid, "-d")
        total = dumped_total(workdir, before)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if ok != args.requests:
        raise RuntimeError(f"{kind}: {ok} of {args.requests} requests answered 200")
    return total / args.requests


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=2000, help="GETs counted (default 2000)")
    p.add_argument("--warmup", type=int, default=300, help="GETs before the counters are zeroed (default 300)")
    p.add_argument("--connections", type=int, default=8, help="keep-alive client connections (default 8)")
    p.add_argument("--method", default="LEASTCONNECTION", choices=pvh.METHODS)
    p.add_argument("--before", metavar="PYTHON", help="the Python of another leastload build: counted too")
    p.add_argument("--no-haproxy", action="store_true", help="leave HAProxy out")
    p.add_argument("--keep", metavar="DIR", help="copy callgrind's dumps there (callgrind_annotate reads them)")
    args = p.parse_args(argv)
    if args.requests < 1 or args.warmup < 1 or args.connections < 1:
        p.error("--requests, --warmup and --connections must be at least 1")
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (Debian: valgrind)")
    kinds = ["leastload"] + (["before"] if args.before else []) + ([] if args.no_haproxy else ["haproxy"])
    if "haproxy" in kinds:
        pvh.ensure_tools(("haproxy",))
    rows = {}
    with tempfile.TemporaryDirectory(prefix="leastload-instructions-") as workdir:
        servers = []
        try:
            # fast backends only: the figure is per request, and a slow one only stretches the run
            backends = start_backends((("fast1", 0.0), ("fast2", 0.0), ("fast3", 0.0)), 1024, workdir, servers)
            for kind in kinds:
                rows[kind] = measure(kind, backends, args, workdir)
                print(f"{kind:10s} {rows[kind]:10,.0f} instructions a request", flush=True)
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                for path in glob.glob(os.path.join(workdir, "callgrind.out*")):
                    shutil.copy(path, args.keep)
        finally:
            for server in servers:
                server.stop()
    base = rows.get("haproxy")
    for kind in ("leastload", "before"):
        if kind in rows and base:
            print(f"{kind} / haproxy: {rows[kind] / base:.2f}x")
    if "before" in rows:
        print(f"leastload / before: {rows['leastload'] / rows['before']:.3f}x")


if __name__ == "__main__":
    main()
