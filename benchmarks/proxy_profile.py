"""Where a request's CPU goes inside `leastload proxy`: a profile under load.

The setup of proxy_vs_haproxy.py (three toy backends, two answering in 2 ms and
one in 60 ms, 1 KB bodies; wrk -t2 on 127.0.0.1; one proxy worker, no health
checks), then three measured wrk runs at the same connection count:

1. plain: requests per second and the proxy's CPU per request (user + system
   time from /proc, divided by the requests the backends served);
2. under `perf record` (cpu-clock, the proxy process): the CPU split by
   shared object: the interpreter running the proxy's Python code, the
   kernel (system calls, the TCP stack), uvloop/libuv, httptools, the
   compiled HTTP/1.1 layer, the engine, libc; and, from the call graphs, the
   kernel's part by what it was doing (`KERNEL_PARTS`: the TCP send path
   with the receiver's side it runs on loopback, waking the receiving
   process, reads, epoll, TCP_INFO);
3. under `py-spy record --nonblocking`: the split by the proxy's own Python
   code, each sample charged to the innermost frame of leastload's code
   (module and function; a C call's time goes to the Python function that
   made it);
4. under `strace -c`: the system calls a request, by name.

Each share times the CPU per request of run 1 gives microseconds a request.
Samplers slow the process they sample, so runs 2 and 3 only split the cost;
the cost itself is run 1's.

Needs Linux, wrk, perf (linux-perf), py-spy (pip install py-spy) and strace; a part
whose tool is missing is skipped with a message. Not part of CI (it defines
no tests; its numbers depend on the machine):

    python -m benchmarks.proxy_profile                    # 256 connections, 10 s runs: about a minute
    python -m benchmarks.proxy_profile --connections 32 --duration 5 --json out.json
    python -m benchmarks.proxy_profile --proxy haproxy    # the same split for HAProxy (no Python part)
"""

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from leastload_testkit.backends import start_backends

from . import proxy_vs_haproxy as pvh  # the shared setup: proxies, wrk

# perf's shared objects, by what they are to a request (first match wins)
DSO_PARTS = (
    ("engine (leastload's C core)", re.compile(r"^_engine\.")),
    ("compiled HTTP/1.1 layer", re.compile(r"^_(http1|response|scan)\.")),
    ("httptools (HTTP parser)", re.compile(r"^(parser|url_parser)\.cpython")),
    ("uvloop / libuv (event loop)", re.compile(r"^loop\.cpython")),
    ("kernel (system calls, TCP)", re.compile(r"kernel|vmlinux")),
    ("interpreter (Python code)", re.compile(r"libpython|^python3")),
    ("libc (malloc, memcpy, ...)", re.compile(r"^libc[.-]|^libm[.-]")),
)
# kernel functions whose time with their callees' (perf's "children") says what a
# request's system calls cost; the rows overlap (waking is part of sending)
KERNEL_PARTS = (
    ("all system calls", "do_syscall_64"),
    ("sending (tcp_sendmsg; on loopback the receiver's TCP work too)", "tcp_sendmsg"),
    ("  of which waking the receiving process (sock_def_readable)", "sock_def_readable"),
    ("reading (tcp_recvmsg)", "tcp_recvmsg"),
    ("waiting for events (do_epoll_wait)", "do_epoll_wait"),
    ("TCP_INFO (getsockopt)", "__x64_sys_getsockopt"),
)
LEASTLOAD_FRAME = re.compile(r"\((?:.*/)?(leastload/[\w/]+)\.py:\d+\)")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Profile leastload proxy under wrk load: where a request's CPU goes.")
    p.add_argument("--connections", type=int, default=256, help="wrk connections (default 256)")
    p.add_argument("--duration", type=int, default=10, help="whole seconds of each measured run (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="whole seconds of warm-up (default 2)")
    p.add_argument("--method", default="LEASTCONNECTION", choices=pvh.METHODS)
    p.add_argument("--proxy", default="leastload", choices=("leastload", "haproxy"),
                   help="the proxy profiled (default leastload; haproxy: nbthread 1, its balance for the method)")
    p.add_argument("--rate", type=int, default=250, help="samples per second of perf and py-spy (default 250)")
    p.add_argument("--top", type=int, default=15, help="rows of the by-function table (default 15)")
    p.add_argument("--json", metavar="PATH", help="also write every number to PATH as JSON")
    args = p.parse_args(argv)
    if args.duration < 1 or args.warmup < 1 or args.connections < 1 or args.rate < 1:
        p.error("--duration, --warmup, --connections and --rate must be at least 1")
    return args


def served(backends, run):
    before = pvh.all_stats(backends)
    result = run()
    counts, _ = pvh.split(before, pvh.all_stats(backends))
    return result, sum(counts.values())


def plain_run(proxy, port, args, backends):
    def run():
        cpu0 = pvh.process_tree_cpu(proxy.pid)
        wrk = pvh.run_wrk(port, args.connections, args.duration)
        return wrk, pvh.process_tree_cpu(proxy.pid) - cpu0
    (wrk, cpu), requests = served(backends, run)
    return {"requests_per_s": wrk["requests_per_s"], "p50_ms": wrk["p50_ms"], "p99_ms": wrk["p99_ms"],
            "requests": requests, "cpu_s": cpu, "cpu_us_per_request": 1e6 * cpu / max(requests, 1)}


def sampled_run(cmd, port, args, backends):
    """wrk at the same load while `cmd` samples the proxy; the sampler stops after wrk.
    Returns (its exit code, its stderr, the requests the backends served)."""
    requests = 0
    sampler = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)  # attached before the load starts
        _, requests = served(backends, lambda: pvh.run_wrk(port, args.connections, args.duration))
    finally:
        sampler.send_signal(signal.SIGINT)
        try:
            _, err = sampler.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            sampler.kill()
            _, err = sampler.communicate()
    return sampler.returncode, err.decode(errors="replace"), requests


def perf_split(pid, port, args, backends, workdir):
    """(shares by shared object, shares of KERNEL_PARTS) in per cent of the samples, or
    (None, None) and a message."""
    data = os.path.join(workdir, "perf.data")
    cmd = ["perf", "record", "-e", "cpu-clock", "-F", str(args.rate), "-g", "-p", str(pid), "-o", data]
    rc, err, _ = sampled_run(cmd, port, args, backends)
    if not os.path.exists(data):
        return None, None, f"perf record failed ({rc}): {err.strip()[-300:]}"

    def report(*how):
        return subprocess.run(["perf", "report", "-i", data, "--stdio", "-q", "--percent-limit", "0", "-g", "none",
                               *how], capture_output=True, text=True, timeout=300).stdout

    shares = collections.Counter()
    for line in report("--no-children", "--sort", "dso").splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(.+?)\s*$", line)
        if not m:
            continue
        dso = m[2]
        part = next((name for name, rx in DSO_PARTS if rx.search(dso)), f"other ({dso})")
        shares[part] += float(m[1])
    with_callees = {}
    for line in report("--children", "--sort", "sym").splitlines():
        m = re.match(r"\s*([\d.]+)%\s+[\d.]+%\s+\[k\]\s+(\S+)", line)
        if m:
            with_callees[m[2]] = float(m[1])
    kernel = {label: with_callees.get(symbol, 0.0) for label, symbol in KERNEL_PARTS}
    return dict(shares.most_common()), kernel, None


def pyspy_split(pid, port, args, backends, workdir):
    out = os.path.join(workdir, "pyspy.txt")
    # Python frames only (--native cannot be had without pausing the process at each
    # sample): time in a C call is charged to the Python function that made it
    cmd = ["py-spy", "record", "--pid", str(pid), "--rate", str(args.rate), "--nonblocking",
           "--format", "raw", "-o", out]
    rc, err, _ = sampled_run(cmd, port, args, backends)
    if not os.path.exists(out):
        return None, f"py-spy record failed ({rc}): {err.strip()[-300:]}"
    by_function, by_module = collections.Counter(), collections.Counter()
    total = 0
    with open(out) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = stack.split(";")
            mine = [fr for fr in frames if LEASTLOAD_FRAME.search(fr)]
            if not mine:
                by_module["outside leastload (event loop, interpreter start-up)"] += n
                by_function["outside leastload"] += n
                continue
            inner = mine[-1]  # raw stacks run outermost first
            module = LEASTLOAD_FRAME.search(inner)[1]
            function = inner.split(" (", 1)[0]
            by_module[module] += n
            by_function[f"{module}:{function}"] += n
    if not total:
        return None, "py-spy took no samples"
    pct = lambda c: {k: 100.0 * v / total for k, v in c.most_common()}  # noqa: E731
    return {"samples": total, "by_module": pct(by_module), "by_function": pct(by_function)}, None


def syscalls_per_request(pid, port, args, backends, workdir):
    """strace -c over one run: system calls a request (strace slows the proxy; the counts
    per request do not depend on that)."""
    out = os.path.join(workdir, "strace.txt")
    _, _, requests = sampled_run(["strace", "-c", "-f", "-p", str(pid), "-o", out], port, args, backends)
    if not os.path.exists(out) or not requests:
        return None, "strace recorded nothing"
    calls = {}
    with open(out) as f:
        for line in f:
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
            if m and m[2] != "total":
                calls[m[2]] = int(m[1]) / requests
    return dict(sorted(calls.items(), key=lambda kv: -kv[1])), None


def table(title, shares, cpu_us, limit=None):
    rows = list(shares.items())[:limit] if limit else list(shares.items())
    width = max([len(k) for k, _ in rows] + [len(title)])
    lines = [f"{title:<{width}}  {'share':>7}  {'us/req':>7}", "-" * (width + 18)]
    lines += [f"{k:<{width}}  {v:6.1f}%  {v * cpu_us / 100:7.2f}" for k, v in rows]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    pvh.ensure_tools(("wrk", "haproxy") if args.proxy == "haproxy" else ("wrk",))
    if args.proxy == "leastload":
        pvh.ensure_leastload_proxy()
    results = {"args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="leastload-profile-") as workdir:
        servers = []
        try:
            backends = start_backends((("fast1", 0.002), ("fast2", 0.002), ("slow", 0.060)), 1024,
                                          workdir, servers)
            proxy, port = pvh.start_proxy(args.proxy, 1, backends, args.method, workdir)
            servers.append(proxy)
            pvh.run_wrk(port, args.connections, args.warmup)
            plain = results["plain"] = plain_run(proxy, port, args, backends)
            print(f"{args.proxy}, {args.connections} connections, {args.method}: {plain['requests_per_s']:,.0f} req/s, "
                  f"p50 {plain['p50_ms']:.1f} ms, p99 {plain['p99_ms']:.1f} ms, "
                  f"proxy CPU {plain['cpu_us_per_request']:.1f} us a request")
            cpu_us = plain["cpu_us_per_request"]
            if shutil.which("perf"):
                results["perf"], results["perf_kernel"], problem = perf_split(proxy.pid, port, args, backends,
                                                                              workdir)
                print(problem or "\n" + table("by shared object (perf)", results["perf"], cpu_us) + "\n\n"
                      + table("the kernel, by what it did (perf, with callees)", results["perf_kernel"], cpu_us))
            else:
                print("perf not found (Debian: linux-perf): no split by shared object")
            if args.proxy != "leastload":
                pass  # no Python code to split
            elif shutil.which("py-spy"):
                spy, problem = pyspy_split(proxy.pid, port, args, backends, workdir)
                results["py-spy"] = spy
                if problem:
                    print(problem)
                else:
                    print("\n" + table("by leastload module (py-spy)", spy["by_module"], cpu_us))
                    print("\n" + table("by innermost leastload function (py-spy)", spy["by_function"], cpu_us,
                                       args.top))
                    print(f"\n{spy['samples']} samples; the engine's calls (Cython) have no Python frame of "
                          "their own: its share is perf's row")
            else:
                print("py-spy not found (pip install py-spy): no split by Python code")
            if shutil.which("strace"):
                calls, problem = syscalls_per_request(proxy.pid, port, args, backends, workdir)
                results["syscalls_per_request"] = calls
                if problem:
                    print(problem)
                else:
                    print("\nsystem calls a request (strace -c): "
                          + ", ".join(f"{name} {n:.2f}" for name, n in calls.items() if n >= 0.01))
            else:
                print("strace not found: no count of system calls")
        finally:
            for server in reversed(servers):
                server.stop()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
