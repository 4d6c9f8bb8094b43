"""The leastload proxy beside HAProxy, in one run, on this machine's loopback.

What it measures. Three toy backends (`python -m leastload.cli.backends`, one
process each: by default fast1 and fast2 answer in 2 ms, slow in 60 ms, with
1 KB bodies) sit behind four proxies in turn: `leastload proxy` with 1 and
with 2 workers, and HAProxy with nbthread 1 and 2, all balancing with the
same method (LEASTCONNECTION / HAProxy's leastconn by default), without health
checks, keeping connections to the backends alive, each adding X-Forwarded-For
and X-Forwarded-Proto to the requests it forwards (leastload's default; HAProxy's
`option forwardfor` and a `set-header`). For each proxy and each
number of client connections (32 and 256) wrk runs a short warm-up, then a
measured run, and the script records:

- requests per second, p50 and p99 latency, wrk's errors (non-2xx responses,
  socket errors);
- the split between the backends: each backend's `GET /__stats` before and
  after the measured run, as percentages of the requests they served;
- the proxy's CPU per request: user + system time from /proc of the proxy
  process and all its descendants (the workers), divided by the requests the
  backends served in the measured run, and its two parts: user time (the
  process's own code) and system time (the kernel's work for it: system
  calls, the loopback TCP stack, scheduling);
- what the same requests cost the rest of the machine, in the same turns:
  the backends' CPU (/proc, as the proxy's) and how many times their
  threads went to sleep (voluntary context switches: each a wake-up that a
  write paid for), wrk's own CPU (its rusage), and the sum with the proxy's;
- the engine's share of that CPU: the engine calls the proxy makes for one
  request, made as it makes them (acquire, a record of the request's bytes
  and one of the response's, finish, positional; the TCP_INFO record after
  every answer for LEASTPACKETS, after one in 16 otherwise), on a 3-service C
  VirtualServer with outlier_failures=5, timed with timeit in the same run
  (best of its repeats, before the runs and again after them: the best of
  the two) and divided by the CPU per request of the 1-worker leastload proxy
  at 32 connections. The goal is under 2 %;
- the leastload proxy's own CPU per request by stage (benchmarks/proxy_stages.py
  says what each stage holds and the limits): parse (the client side's
  RequestReader taking wrk's request), pick (the engine's acquire), forward
  (encode_request for the backend, the ResponseReader taking the backend's
  answer for the client) and account (the engine's records and finish, the
  proxy's counters), each timed with timeit on the proxy's real objects before
  any server starts, like the engine's share; and the whole per-request path
  without sockets (one request through a started Proxy whose transports drop
  the bytes). "Other work of the path" is the whole path less the four stages;
  "event loop, system calls, kernel" is the measured CPU per request of the
  1-worker proxy (the same row as the engine's share) less the whole path.
  HAProxy cannot be split this way: the split is of leastload's figure only.

How to run it (needs Linux, wrk and haproxy; as root it installs both with
apt-get when missing):

    python -m benchmarks.proxy_vs_haproxy                # 2 x 4 runs of 2 s warm-up + 10 s: about 2-3 minutes
    python -m benchmarks.proxy_vs_haproxy --quick        # 2 s runs, 32 connections only: about 30 s
    python -m benchmarks.proxy_vs_haproxy --json out.json --method ROUNDROBIN
    python -m benchmarks.proxy_vs_haproxy --proxies leastload-1 --before OTHER/bin/python --rounds 6
    python -m benchmarks.proxy_vs_haproxy --pin --proxies leastload-1,haproxy-1 --rounds 3
    python -m benchmarks.proxy_vs_haproxy --slices 5 --rounds 3   # each pair in 2 s turns

With --pin the proxy runs on a core of its own (the last CPU; every worker or
thread on it) and wrk and the backends on the others. Its CPU a request is
then not shared with theirs on one core's caches and scheduler, and moves
far less from run to run than without it; the 2-worker rows then measure
two workers on one core.

Runs of the same N (workers or threads) follow each other: leastload-1 right
before or after haproxy-1, so each ratio compares two runs about 15 s apart.
With --rounds N every run is made N times, and the proxies at each connection
count take turns to go first (round 1 in the paired order, round 2 reversed,
...), so that neither side always meets the machine in the same state; the
ratios are then printed per round and as their medians. On a shared machine,
where one build's own figure moves by 10-30 % between runs, a comparison
within a few percent needs the medians of several rounds.

With --slices K the proxies of the same N run at the same time (started
together, each warmed up), and the measured time is cut into K turns of
duration/K seconds: leastload-1 for one turn, haproxy-1 for the next, and so
on, the order reversed at every other turn. A slower stretch of the machine
then falls on both sides of a ratio instead of on one side's whole run. Each
row sums its turns (requests, CPU, the backends' counts); req/s is the
requests over wrk's own elapsed times; p50 and p99 come from the turns'
latency distributions merged, each turn's given by its 0.1 %, 0.2 %, ...,
99.9 % quantiles (wrk's Lua API gives percentiles, not its histogram: a
`done()` script prints them), weighted by the turn's requests. The waiting
proxy is idle (no health checks, no traffic) but keeps its pooled
connections to the backends open.

Under --slices each ratio is also given with what its turns say of it: turn
i of one proxy and turn i of the other were measured in the same pass of
the turns (one right after the other when two proxies take turns), so their
ratio is one sample of the ratio at one moment of the machine. The
geometric mean of the K turns' ratios and its 95 % interval (Student's t
on their logarithms) follow the medians, and the JSON keeps every turn's
req/s (wrk's Requests/sec, "turn_requests_per_s") and each ratio's
interval ("turns"). An interval that holds 1.0 is a round whose turns cannot tell
the two proxies apart; its ratio lands above or below 1.0 by the moments it
met.

It is not part of CI or of the pytest suites (its name does not start with
test_ and it defines no tests): a person runs it, and its numbers depend on
the machine. On a 2-core machine wrk, the backends and the proxy share the
cores, so compare the rows of one run with each other, not with another
machine's.

How to read the table. One row per (connections, proxy): `leastload-1w` is
the leastload proxy with 1 worker process, `haproxy-2t` HAProxy with 2
threads. req/s is wrk's Requests/sec; "vs HAProxy", on the leastload rows,
is that req/s divided by HAProxy's at the same connections with as many
threads as leastload has workers (1.00 is parity, below 1 leastload is
slower); p50 and p99 are wrk's latency distribution;
the backend columns say which share of the requests each backend served
(with LEASTCONNECTION the slow backend should get far fewer); CPU us/req is
the proxy's own CPU time per request (lower is cheaper); errors are wrk's
non-2xx responses and socket errors (connect, read, write, timeout). Under
the table: the engine's ns per request and its share of the 1-worker
proxy's CPU per request. Then the stage table: us per request of each stage
and its % of that same measured CPU per request (without a leastload-1w row,
the figures alone and the whole path). Its heading says which per-request
path was measured: "compiled" (the Cython-built modules, `_http1` a .so) or
"python" (the .py files: under LEASTLOAD_IMPLEMENTATION=python, or when a
compiled module is missing), and which engine. The stages are called from
Python here, where the compiled proxy calls them from C: in the compiled
build each stage's figure includes some calling the proxy does not pay (the
counters most, whose fields Python reads and writes as objects), so read the
stages as upper bounds and "other work" as a lower one. After the medians:
each proxy's CPU per request split into user + system time, the medians of
the rounds. The JSON (--json)
also has each run's request counts per backend, the proxy's CPU in cores
(CPU seconds / wall seconds) and, under "stages", every stage's ns per
request with its parts.
"""

import argparse
import http.client
import json
import math
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from leastload_testkit.backends import backend_stats, start_backends
from leastload_testkit.ports import HOST, free_port
from leastload_testkit.processes import Server, children, stat_fields

from .proxy_stages import describe, engine_ns_per_request, stage_table, stages_ns_per_request

START_TIMEOUT = 30.0   # seconds for a server to say it is ready
HTTP_TIMEOUT = 5.0     # one GET /__stats
INSTALL_TIMEOUT = 600  # apt-get update, apt-get install
PROXY_KINDS = ("leastload", "private", "haproxy", "before")  # before: another build of leastload (--before); private: --private-engines
HAPROXY_BALANCE = {"LEASTCONNECTION": "leastconn", "ROUNDROBIN": "roundrobin"}
METHODS = ("LEASTCONNECTION", "ROUNDROBIN", "LEASTRESPONSETIME", "LEASTBANDWIDTH", "LEASTPACKETS")
SHARE_GOAL_PERCENT = 2.0
# Student's t for a two-sided 95 % interval, by degrees of freedom 1-30 (above 30, 1.96: at most 4 %
# narrower than t's own value)
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
       2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
       2.045, 2.042)
MAXCONN = 4096         # HAProxy's; it needs about twice as many file descriptors
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---- the tools ---------------------------------------------------------------------------

def ensure_tools(names=("haproxy", "wrk")):
    """Installs missing tools with apt-get as root; otherwise says what is missing and exits 2."""
    missing = [name for name in names if shutil.which(name) is None]
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(f"missing: {', '.join(missing)}\n"
              f"install them, e.g. on Debian or Ubuntu: sudo apt-get install -y {' '.join(missing)}",
              file=sys.stderr)
        sys.exit(2)
    print(f"installing {', '.join(missing)} with apt-get ...", file=sys.stderr, flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *missing]):
        done = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=INSTALL_TIMEOUT)
        if done.returncode != 0:
            print(done.stdout[-3000:], file=sys.stderr)
            sys.exit(f"{' '.join(cmd)} failed (exit {done.returncode})")
    still = [name for name in names if shutil.which(name) is None]
    if still:
        sys.exit(f"still missing after apt-get install: {', '.join(still)}")


def ensure_leastload_proxy():
    """Exits 2 when this Python's leastload has no `proxy` command."""
    cmd = [sys.executable, "-m", "leastload", "proxy", "--help"]
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        sys.exit(f"{' '.join(cmd)} did not answer in 60 s")
    if done.returncode != 0:
        print(f"`python -m leastload proxy` is not available in {sys.executable}:\n"
              f"{(done.stderr or done.stdout).strip()[-2000:]}\n"
              f"install leastload with the proxy, or measure HAProxy alone with --proxies haproxy-1,haproxy-2",
              file=sys.stderr)
        sys.exit(2)


# ---- /proc CPU time --------------------------------------------------------------------------

# ---- --pin: the proxy on a core of its own ------------------------------------------------------

# (proxy's CPUs, everyone else's) while --pin is on, else None; set by main()
PINNED = None


def pin_sets(cpus):
    """The last of the CPUs for the proxy, the rest for wrk and the backends (None: fewer than 2)."""
    cpus = sorted(cpus)
    return None if len(cpus) < 2 else ({cpus[-1]}, set(cpus[:-1]))


def pin_tree(pid, cpus):
    """Every thread of pid and of its children onto cpus (a thread's mask is its own)."""
    for p in [pid, *sorted(children(pid))]:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{p}/task")]
        except OSError:
            tids = [p]
        for tid in tids:
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:  # it exited meanwhile
                pass


def _on_other_cpus():
    """wrk's preexec_fn under --pin: off the proxy's CPU."""
    os.sched_setaffinity(0, PINNED[1])


def process_tree_cpu(pid):
    """CPU seconds (user + system) of pid and all its descendants, including their waited-for children."""
    return sum(process_tree_cpu_split(pid))


def process_tree_cpu_split(pid):
    """(user, system) CPU seconds of pid and all its descendants, including their waited-for children."""
    user, system, todo, seen = 0, 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            f = stat_fields(p)
        except OSError:
            continue  # exited meanwhile
        # utime, stime, cutime, cstime are fields 14-17 of stat: 11-14 here
        user += int(f[11]) + int(f[13])
        system += int(f[12]) + int(f[14])
        todo.extend(children(p))
    return user / CLK_TCK, system / CLK_TCK


def sleeps(pids):
    """How many times the threads of these processes have gone to sleep waiting for something
    (voluntary context switches, /proc/PID/task/TID/status): each is a wake-up that someone, here
    mostly a proxy's write, paid for. Threads that exited meanwhile are not counted."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches:"):
                            total += int(line.split()[1])
                            break
            except OSError:
                continue
    return total


# ---- backends --------------------------------------------------------------------------------

def all_stats(backends):
    return {name: backend_stats(port) for name, port in backends.items()}


def split(before, after):
    """Requests per backend in between, and their percentages of the total."""
    served = {name: after[name]["requests"] - before[name]["requests"] for name in before}
    total = sum(served.values())
    percent = {name: (100.0 * n / total if total else 0.0) for name, n in served.items()}
    return served, percent


# ---- the proxies ------------------------------------------------------------------------------

def haproxy_config(port, threads, backends, balance):
    """HAProxy doing the job leastload proxy does with its defaults: a request reaches its
    backend with X-Forwarded-For and X-Forwarded-Proto added (leastload's `--xff append`),
    the same bytes but for the names' case. Without them HAProxy forwarded wrk's request
    as it came and leastload built a longer one for its backends to read."""
    return haproxy_text(threads, f"{HOST}:{port}", "http", backends, balance)


def haproxy_text(threads, bind, proto, backends, balance, global_lines=()):
    """The HAProxy configuration the comparisons run (this one, proxy_tls_vs_haproxy): `bind`
    is the frontend's bind line's arguments, `proto` the X-Forwarded-Proto it sets,
    `global_lines` more lines for its global section."""
    servers = "\n".join(f"    server {name} {HOST}:{p}" for name, p in backends.items())
    extra = "".join(f"    {line}\n" for line in global_lines)
    return f"""\
global
    nbthread {threads}
    maxconn {MAXCONN}
{extra}
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    timeout http-request 10s
    timeout http-keep-alive 30s
    timeout queue 30s
    maxconn {MAXCONN}

frontend bench
    bind {bind}
    option forwardfor
    http-request set-header X-Forwarded-Proto {proto}
    default_backend pool

backend pool
    balance {balance}
{servers}
"""


def start_proxy(kind, n, backends, method, workdir, admin_port=None, before_python=None):
    """Starts one proxy (n workers or threads) on a free port; returns (Server, port)."""
    port = free_port()
    if kind in ("leastload", "before", "private"):
        python = before_python if kind == "before" else sys.executable
        cmd = [python, "-m", "leastload", "proxy", "--listen", f"{HOST}:{port}", "--method", method,
               "--workers", str(n), "--health-check", "none"]
        if kind == "private":  # each worker an engine of its own (the default shares one)
            cmd += ["--private-engines"]
        if admin_port is not None:
            cmd += ["--admin", f"{HOST}:{admin_port}"]
        for name, p in backends.items():
            cmd += ["--backend", f"{name}={HOST}:{p}"]
        server = Server(label(kind, n), cmd, workdir)
        try:
            server.wait_listening()  # with workers: once every worker listens
        except BaseException:
            server.stop()
            raise
        return server, port
    config = os.path.join(workdir, f"haproxy-{n}t.cfg")
    with open(config, "w") as f:
        f.write(haproxy_config(port, n, backends, HAPROXY_BALANCE.get(method, "leastconn")))
    server = Server(f"haproxy-{n}t", ["haproxy", "-db", "-f", config], workdir)
    try:
        server.wait_port(port)
    except BaseException:
        server.stop()
        raise
    return server, port


# ---- wrk ---------------------------------------------------------------------------------------

_UNITS_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def to_ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text.strip())
    if not m:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(m[1]) * _UNITS_MS[m[2]]


def parse_wrk(out):
    """requests/sec, p50/p99 in ms, requests, non-2xx and socket errors from `wrk --latency` output."""
    def number(pattern, default=None):
        m = re.search(pattern, out)
        if m is None:
            if default is None:
                raise ValueError(f"wrk output has no {pattern!r}:\n{out}")
            return default
        return m[1]

    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    socket_errors = dict(zip(("connect", "read", "write", "timeout"),
                             (int(x) for x in sockets.groups()) if sockets else (0, 0, 0, 0)))
    return {
        "requests_per_s": float(number(r"Requests/sec:\s+([\d.]+)")),
        "requests": int(number(r"(\d+) requests in ")),
        "elapsed_s": to_ms(number(r"\d+ requests in ([\d.]+(?:us|ms|s|m|h)),")) / 1e3,
        "p50_ms": to_ms(number(r"\n\s*50(?:\.0+)?%\s+(\S+)")),
        "p99_ms": to_ms(number(r"\n\s*99(?:\.0+)?%\s+(\S+)")),
        "non_2xx_3xx": int(number(r"Non-2xx or 3xx responses:\s+(\d+)", "0")),
        "socket_errors": socket_errors,
        "quantiles_us": [float(x) for x in number(r"\nquantiles_us: ([^\n]*)", "").split()],
    }


# wrk's Lua API gives a run's latency percentiles, not its histogram: a sliced run (--slices) merges
# its slices' distributions from these, each slice's 0.1 %, 0.2 %, ..., 99.9 % quantiles (in us)
QUANTILE_STEPS = 999
QUANTILES_LUA = """\
done = function(summary, latency, requests)
  local q = {}
  for i = 1, %d do q[i] = latency:percentile(i / 10) end
  io.write("\\nquantiles_us: " .. table.concat(q, " ") .. "\\n")
end
""" % QUANTILE_STEPS


def merged_percentile(slices, p):
    """The p-th percentile (ms) of the slices' latencies taken together: each slice's quantiles stand
    for equal shares of its requests (slices: (requests, quantiles_us) pairs)."""
    weighted = sorted((q, n / len(qs)) for n, qs in slices for q in qs)
    total = sum(w for _, w in weighted)
    if not weighted or total <= 0:
        return None
    rank, seen = p / 100.0 * total, 0.0
    for q, w in weighted:
        seen += w
        if seen >= rank - 1e-9 * total:
            return q / 1e3
    return weighted[-1][0] / 1e3


def run_wrk(port, connections, seconds, script=None):
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", f"http://{HOST}:{port}/"]
    if script is not None:
        cmd[1:1] = ["-s", script]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=seconds + 30, preexec_fn=None if PINNED is None else _on_other_cpus)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # (the proxies and backends are not waited for yet)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {done.returncode}:\n{done.stdout}{done.stderr}")
    result = parse_wrk(done.stdout)
    result["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result


# ---- one measured run ----------------------------------------------------------------------------

def measure_group(group, connections, args, backends, workdir, peers=()):
    """The proxies of one group (without --slices, one proxy; with it, those of the same N, in the
    order given) all started and each warmed up, then measured in --slices turns of duration/slices
    seconds each, the order reversed at every other turn, so that the machine's moments are shared
    out between them instead of falling on one side's 10 s run; then stopped. Returns a row per
    proxy: its turns summed (requests, CPU, each backend's share), req/s the requests over wrk's
    own elapsed times (wrk's Requests/sec for one turn), p50 and p99 of the turns' latencies merged
    (merged_percentile: wrk's own figures for one turn), engine_window read at the end. `peers`: the
    backends' PIDs, whose CPU and sleeps in each turn go to the proxy measured in it, as wrk's own
    CPU does: what a request through that proxy cost the rest of the machine."""
    script = os.path.join(workdir, "quantiles.lua")
    with open(script, "w") as f:
        f.write(QUANTILES_LUA)
    seconds = args.duration // args.slices
    started = []  # (label, kind, n, Server, port, admin_port)
    try:
        for kind, n in group:
            admin_port = free_port() if kind in ("leastload", "before") and n == 1 else None
            proxy, port = start_proxy(kind, n, backends, args.method, workdir, admin_port, args.before)
            started.append((label(kind, n), kind, n, proxy, port, admin_port))
            if PINNED is not None:
                pin_tree(proxy.pid, PINNED[0])
        for _, _, _, _, port, _ in started:
            run_wrk(port, connections, args.warmup)
        sums = {name: {"requests": 0, "elapsed_s": 0.0, "non_2xx_3xx": 0, "cpu": [0.0, 0.0], "wall_s": 0.0,
                       "socket_errors": {}, "served": {}, "quantiles": [], "turns": [],
                       "backends_cpu": 0.0, "backends_sleeps": 0, "wrk_cpu": 0.0} for name, *_ in started}
        for turn in range(args.slices):
            for name, _, _, proxy, port, _ in (started if turn % 2 == 0 else started[::-1]):
                acc = sums[name]
                before = all_stats(backends)
                peers0, sleeps0 = sum(map(process_tree_cpu, peers)), sleeps(peers)
                (user0, sys0), t0 = process_tree_cpu_split(proxy.pid), time.monotonic()
                wrk = run_wrk(port, connections, seconds, script)
                (user1, sys1), t1 = process_tree_cpu_split(proxy.pid), time.monotonic()
                acc["backends_cpu"] += sum(map(process_tree_cpu, peers)) - peers0
                acc["backends_sleeps"] += sleeps(peers) - sleeps0
                acc["wrk_cpu"] += wrk["cpu_s"]
                served, _ = split(before, all_stats(backends))
                for key in ("requests", "elapsed_s", "non_2xx_3xx"):
                    acc[key] += wrk[key]
                acc["cpu"][0] += user1 - user0
                acc["cpu"][1] += sys1 - sys0
                acc["wall_s"] += t1 - t0
                for key, value in wrk["socket_errors"].items():
                    acc["socket_errors"][key] = acc["socket_errors"].get(key, 0) + value
                for key, value in served.items():
                    acc["served"][key] = acc["served"].get(key, 0) + value
                acc["quantiles"].append((wrk["requests"], wrk["quantiles_us"]))
                acc["turns"].append(wrk["requests_per_s"])
        rows = []
        for name, kind, n, proxy, _, admin_port in started:
            acc = sums[name]
            window = engine_window(admin_port) if admin_port is not None else None
            problem = None if proxy.alive() else f"the proxy exited during the run\n{proxy.diagnosis()}"
            total = sum(acc["served"].values())
            requests = total or acc["requests"]
            user, system = acc["cpu"]
            def per_request(amount):  # None when nothing was served
                return amount / requests if requests else None
            rows.append({
                "proxy": name, "kind": kind, "workers_or_threads": n, "connections": connections,
                "requests_per_s": acc["requests"] / acc["elapsed_s"] if acc["elapsed_s"] else None,
                "requests": acc["requests"], "elapsed_s": acc["elapsed_s"],
                "turn_requests_per_s": acc["turns"],  # each turn's, in the order measured
                "p50_ms": merged_percentile(acc["quantiles"], 50), "p99_ms": merged_percentile(acc["quantiles"], 99),
                "non_2xx_3xx": acc["non_2xx_3xx"], "socket_errors": acc["socket_errors"],
                "backend_requests": acc["served"],
                "backend_percent": {k: (100.0 * v / total if total else 0.0) for k, v in acc["served"].items()},
                "proxy_cpu_s": user + system, "wall_s": acc["wall_s"],
                "proxy_cpu_cores": (user + system) / acc["wall_s"],
                "cpu_us_per_request": per_request(1e6 * (user + system)),
                "cpu_user_us_per_request": per_request(1e6 * user),
                "cpu_system_us_per_request": per_request(1e6 * system),
                # the rest of the machine in the same turns: the backends' processes and wrk
                "backends_cpu_us_per_request": per_request(1e6 * acc["backends_cpu"]),
                "backends_sleeps_per_request": per_request(acc["backends_sleeps"]) if peers else None,
                "wrk_cpu_us_per_request": per_request(1e6 * acc["wrk_cpu"]),
                "machine_cpu_us_per_request": per_request(1e6 * (user + system + acc["backends_cpu"] + acc["wrk_cpu"])),
                "engine_window": window, "problem": problem, "slices": args.slices,
            })
        return rows
    finally:
        for _, _, _, proxy, _, _ in started:
            proxy.stop()


def groups_of(runs):
    """The runs cut into groups measured together under --slices: consecutive runs of the same round,
    connections and N (schedule() puts them next to each other), in their order."""
    groups = []
    for run in runs:
        if groups and groups[-1][0][:2] == run[:2] and groups[-1][0][3] == run[3]:
            groups[-1].append(run)
        else:
            groups.append([run])
    return groups


def engine_window(admin_port):
    """Per backend, what the proxy's engine holds: bytes and packets of its 14 s window, selections."""
    conn = http.client.HTTPConnection(HOST, admin_port, timeout=HTTP_TIMEOUT)
    try:
        conn.request("GET", "/leastload/status")
        status = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    return {name: {k: b["engine"][k] for k in ("bytes", "packets", "selected")}
            for name, b in status["backends"].items() if "engine" in b}


def failed_row(label, kind, n, connections, problem):
    """A row for a run that could not be measured (the proxy did not start, wrk failed, ...)."""
    return {"proxy": label, "kind": kind, "workers_or_threads": n, "connections": connections,
            "requests_per_s": None, "requests": None, "p50_ms": None, "p99_ms": None, "non_2xx_3xx": None,
            "socket_errors": None, "backend_requests": None, "backend_percent": None, "proxy_cpu_s": None,
            "wall_s": None, "proxy_cpu_cores": None, "cpu_us_per_request": None,
            "cpu_user_us_per_request": None, "cpu_system_us_per_request": None,
            "backends_cpu_us_per_request": None, "backends_sleeps_per_request": None,
            "wrk_cpu_us_per_request": None, "machine_cpu_us_per_request": None, "engine_window": None,
            "problem": problem}


# ---- the engine's share ---------------------------------------------------------------------------

# ---- output ----------------------------------------------------------------------------------------

def fmt_ms(ms):
    return f"{ms * 1000:.0f} us" if ms < 1 else f"{ms:.2f} ms" if ms < 100 else f"{ms:.0f} ms"


def fmt_errors(row):
    sock = sum(row["socket_errors"].values())
    if not row["non_2xx_3xx"] and not sock:
        text = "0"
    else:
        parts = [f"non-2xx {row['non_2xx_3xx']}"] if row["non_2xx_3xx"] else []
        parts += [f"{k} {v}" for k, v in row["socket_errors"].items() if v]
        text = ", ".join(parts)
    return text + (" (proxy died)" if row["problem"] else "")


def results_table(rows, names, pairs):
    """One markdown row per run; leastload rows also give their req/s over HAProxy's at the same
    connections and threads = workers."""
    ratio = {(p["round"], p["connections"], p["workers_or_threads"]): p["ratio"] for p in pairs}
    rounds = max((r["round"] for r in rows), default=1) > 1
    head = [*(["round"] if rounds else []), "conns", "proxy", "req/s", "vs HAProxy", "p50", "p99", *(f"{n} %" for n in names),
            "CPU us/req", "errors"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        first = [str(r["round"])] if rounds else []
        if r["requests_per_s"] is None:
            cells = [*first, str(r["connections"]), r["proxy"], *["-"] * (len(head) - 3 - len(first)),
                     "failed (see above)"]
            lines.append("| " + " | ".join(cells) + " |")
            continue
        key = (r["round"], r["connections"], r["workers_or_threads"])
        versus = f"{ratio[key]:.2f}" if r["kind"] == "leastload" and key in ratio else ""
        cpu = "n/a" if r["cpu_us_per_request"] is None else f"{r['cpu_us_per_request']:.1f}"
        cells = [*first, str(r["connections"]), r["proxy"], f"{r['requests_per_s']:,.0f}", versus, fmt_ms(r["p50_ms"]),
                 fmt_ms(r["p99_ms"]), *(f"{r['backend_percent'][n]:.1f}" for n in names), cpu, fmt_errors(r)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def turn_interval(mine, theirs):
    """What paired turns say of a ratio (--slices): turn i of each side was measured in the same
    pass of the turns (right after the other's when two proxies take turns), so the turns' ratios
    mine[i]/theirs[i] are K samples of it, each taken at one moment of the machine. Returns
    (geometric mean of those ratios, low, high): a 95 % interval from Student's t on their
    logarithms; None with fewer than two pairs or a turn of no requests."""
    if len(mine) != len(theirs) or len(mine) < 2 or min(*mine, *theirs) <= 0:
        return None
    logs = [math.log(a / b) for a, b in zip(mine, theirs)]
    mean, df = statistics.fmean(logs), len(logs) - 1
    half = (T95[df - 1] if df <= len(T95) else 1.96) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def ratios(rows, other="haproxy"):
    """leastload / HAProxy (or / the --before build: other="before") for each (round, connections,
    workers = threads) measured on both sides: req/s, CPU per request where both have it, and
    with --slices the paired turns' interval (turn_interval)."""
    by = {(r["round"], r["kind"], r["workers_or_threads"], r["connections"]): r for r in rows}
    kinds = ("leastload", "private") if other == "haproxy" else ("leastload",)
    out = []
    for (rnd, kind, n, c), r in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][3], kv[0][2])):
        h = by.get((rnd, other, n, c))
        if kind in kinds and r["requests_per_s"] and h and h["requests_per_s"]:
            cpu = (r["cpu_us_per_request"] / h["cpu_us_per_request"]
                   if r["cpu_us_per_request"] and h["cpu_us_per_request"] else None)
            turns = turn_interval(r.get("turn_requests_per_s", []), h.get("turn_requests_per_s", []))
            out.append({"round": rnd, "connections": c, "workers_or_threads": n, "kind": kind,
                        "leastload_rps": r["requests_per_s"], f"{other}_rps": h["requests_per_s"],
                        "ratio": r["requests_per_s"] / h["requests_per_s"], "cpu_ratio": cpu,
                        "turns": None if turns is None else dict(zip(("geometric_mean", "low_95", "high_95"), turns))})
    return out


def print_medians(pairs, against):
    """With several rounds: the median of each (kind, connections, workers) ratio over the rounds."""
    groups = {}
    for p in pairs:
        groups.setdefault((p["kind"], p["connections"], p["workers_or_threads"]), []).append(p)
    lines = []
    for (kind, c, n), ps in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        if len(ps) < 2:
            continue
        rps = [p["ratio"] for p in ps]
        cpus = [p["cpu_ratio"] for p in ps if p["cpu_ratio"] is not None]
        cpu = (f"; CPU/req median {statistics.median(cpus):.3f}x ({', '.join(f'{x:.3f}' for x in cpus)})" if cpus else "")
        lines.append(f"  {kind}, {c} connections, {n} worker(s): req/s median {statistics.median(rps):.3f}x "
                     f"({', '.join(f'{x:.3f}' for x in rps)}){cpu}")
    if lines:
        print(f"\nmedians over the rounds, against {against}:")
        print("\n".join(lines))


def print_turn_intervals(pairs, against):
    """With --slices: each ratio beside what its paired turns say of it (turn_interval), so that
    a round's miss or pass can be told from the spread of the machine's moments."""
    lines = []
    for p in pairs:
        t = p.get("turns")
        if t is None:
            continue
        where = ("1.0 inside" if t["low_95"] <= 1.0 <= t["high_95"]
                 else "above 1.0" if t["low_95"] > 1.0 else "below 1.0")
        lines.append(f"  round {p['round']}, {p['kind']}, {p['connections']} connections, {p['workers_or_threads']} "
                     f"worker(s): {p['ratio']:.3f}x; its turns {t['geometric_mean']:.3f}x, 95 % interval "
                     f"{t['low_95']:.3f}-{t['high_95']:.3f} ({where})")
    if lines:
        print(f"\neach ratio against {against} and the 95 % interval of its paired turns (--slices; "
              f"a turn's ratio is one moment of the machine):")
        print("\n".join(lines))


def engine_share(rows, engine_ns):
    """The engine's ns per request as a percentage of the 1-worker leastload proxy's CPU per request
    (32 connections if measured, else the fewest connections measured)."""
    ones = [r for r in rows if r["kind"] == "leastload" and r["workers_or_threads"] == 1
            and r["cpu_us_per_request"]]
    if not ones:
        return None
    base = min(ones, key=lambda r: (r["connections"] != 32, r["connections"]))
    return {"connections": base["connections"], "proxy_cpu_us_per_request": base["cpu_us_per_request"],
            "engine_ns_per_request": engine_ns,
            "percent": 100.0 * engine_ns / (base["cpu_us_per_request"] * 1000.0)}


# ---- the command line ----------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="The leastload proxy beside HAProxy on 127.0.0.1: req/s, latency, backend split, "
                    "proxy CPU per request, and the engine's share of it.",
        epilog="Run time: about 2-3 minutes with the defaults (8 runs of a 2 s warm-up and a 10 s measured "
               "run, plus start-up); about 30 s with --quick. Needs wrk and haproxy (installed with apt-get "
               "when running as root).")
    p.add_argument("--duration", type=float, default=10.0, help="seconds of each measured wrk run (default 10)")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of the warm-up run before each (default 2)")
    p.add_argument("--connections", default="32,256", help="wrk connection counts, comma-separated (default 32,256)")
    p.add_argument("--method", default="LEASTCONNECTION", choices=METHODS,
                   help="balancing method (default LEASTCONNECTION; HAProxy: leastconn, or roundrobin for "
                        "ROUNDROBIN; it has no other of these and runs leastconn for them)")
    p.add_argument("--proxies", default="leastload-1,leastload-2,haproxy-1,haproxy-2",
                   help="which proxies, KIND-N (N workers or threads), comma-separated (default: all four; "
                        "private-N: leastload with --private-engines, an engine per worker)")
    p.add_argument("--fast-delay", type=float, default=0.002, help="fast1 and fast2 answer after this many s (0.002)")
    p.add_argument("--slow-delay", type=float, default=0.060, help="slow answers after this many s (0.060)")
    p.add_argument("--size", type=int, default=1024, help="response body bytes (default 1024)")
    p.add_argument("--quick", action="store_true", help="2 s runs, 1 s warm-up, 32 connections only")
    p.add_argument("--json", metavar="PATH", help="also write every number to PATH as JSON")
    p.add_argument("--rounds", type=int, default=1,
                   help="make every run N times, the proxies taking turns to go first; ratios per round and "
                        "their medians (default 1)")
    p.add_argument("--slices", type=int, default=1, metavar="K",
                   help="measure the proxies of the same N together, each in K turns of duration/K s, taking "
                        "turns (default 1: one run each, one after the other)")
    p.add_argument("--pin", action="store_true",
                   help="the proxy (every worker or thread) on the last CPU, wrk and the backends on the "
                        "others: its CPU a request measured without them on its core (Linux, 2+ CPUs)")
    p.add_argument("--before", metavar="PYTHON",
                   help="the Python of another leastload build (a venv of an earlier commit): its proxy runs "
                        "too, as before-N, in the same run; leastload rows then say how they compare")
    args = p.parse_args(argv)
    if args.quick:
        args.duration, args.warmup, args.connections = 2.0, 1.0, "32"
    try:
        args.connections = [int(c) for c in args.connections.split(",")]
        args.proxies = [parse_proxy(text) for text in args.proxies.split(",")]
    except ValueError as exc:
        p.error(str(exc))
    if args.before:
        # interleaved: each build right after the other at the same setting
        args.proxies = [pair for kind, n in args.proxies
                        for pair in ([(kind, n), ("before", n)] if kind == "leastload" else [(kind, n)])]
    elif any(kind == "before" for kind, _ in args.proxies):
        p.error("--proxies before-N needs --before PYTHON")
    if min(args.connections) < 2:
        p.error("--connections: wrk -t2 needs at least 2 connections")
    if args.rounds < 1:
        p.error(f"--rounds: at least 1, got {args.rounds}")
    if args.duration < 1 or args.warmup < 1:
        p.error("--duration and --warmup must be at least 1 s (wrk counts whole seconds)")
    if min(args.fast_delay, args.slow_delay) < 0 or args.size < 0:
        p.error("delays and --size must not be negative")
    args.duration, args.warmup = int(round(args.duration)), int(round(args.warmup))
    if args.slices < 1 or args.duration // args.slices < 1:
        p.error(f"--slices: from 1 to --duration ({args.duration}: turns of whole seconds), got {args.slices}")
    args.duration = args.duration // args.slices * args.slices  # what is measured: whole turns
    return args


def parse_proxy(text):
    kind, _, n = text.strip().partition("-")
    if kind not in PROXY_KINDS or not n.isdigit() or int(n) < 1:
        raise ValueError(f"--proxies: each must be leastload-N, private-N, haproxy-N or before-N, got {text!r}")
    return kind, int(n)


def label(kind, n):
    return f"{kind}-{n}{'t' if kind == 'haproxy' else 'w'}"


def paired(proxies):
    """The proxies with the same N next to each other (leastload-1, haproxy-1, leastload-2, ...), in
    the order given otherwise: each ratio then compares two runs made one right after the other,
    not runs half a round apart, between which a shared machine's speed can move."""
    order = list(dict.fromkeys(n for _, n in proxies))
    return sorted(proxies, key=lambda proxy: order.index(proxy[1]))


def schedule(proxies, connections, rounds):
    """(round, connections, kind, n) for every run: each round measures every proxy at each connection
    count, paired by N, in that order in odd rounds and reversed in even ones."""
    proxies = paired(proxies)
    return [(r, c, kind, n) for r in range(1, rounds + 1) for c in connections
            for kind, n in (proxies if r % 2 else proxies[::-1])]


def raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def measure_engine(args):
    """The engine's calls for one request, timed while no server runs: before the runs and
    again after them (main() keeps the best of the two)."""
    req_bytes, resp_bytes = 40, args.size + 80  # wrk's GET / with its Host; status line, headers and body
    number, repeat = (50_000, 5) if args.quick else (200_000, 7)
    ns, impl, stmt = engine_ns_per_request(args.method, number, repeat, req_bytes, resp_bytes, packets=4)
    return {"implementation": impl, "statement": stmt, "ns_per_request": ns, "number": number, "repeat": repeat}


def measure_stages(args, engine):
    """The leastload proxy's own work per request by stage (benchmarks/proxy_stages.py), timed
    before any server starts, with the engine's figure of measure_engine."""
    number, repeat = (5_000, 5) if args.quick else (20_000, 7)
    return stages_ns_per_request(args.method, args.size, number, repeat, engine_ns=engine["ns_per_request"])


def run_all(args, specs, runs):
    """Starts the backends, measures every run (round, connections, kind, n); returns the rows. Stops
    every process it started."""
    rows, servers = [], []
    with tempfile.TemporaryDirectory(prefix="proxy-bench-") as workdir:
        try:
            backends = start_backends(specs, args.size, workdir, servers)
            if PINNED is not None:
                for server in servers:
                    pin_tree(server.pid, PINNED[1])
            done = 0
            for group in (groups_of(runs) if args.slices > 1 else [[run] for run in runs]):
                rnd, c, _, n = group[0]
                names = [label(kind, n) for _, _, kind, _ in group]
                done += len(group)
                print(f"[{done}/{len(runs)}] {', '.join(names)}, {c} connections"
                      + (f", {args.slices} turns each" if args.slices > 1 else "") + " ...",
                      end=" ", file=sys.stderr, flush=True)
                try:
                    measured = measure_group([(kind, n) for _, _, kind, n in group], c, args, backends, workdir,
                                             [server.pid for server in servers])
                except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as exc:
                    measured = [failed_row(name, kind, n, c, f"{type(exc).__name__}: {exc}")
                                for name, (_, _, kind, _) in zip(names, group)]
                for row in measured:
                    row["round"] = rnd
                    rows.append(row)
                print(", ".join("failed" if row["requests_per_s"] is None else f"{row['requests_per_s']:,.0f} req/s"
                                for row in measured)
                      + (" (see below)" if any(row["problem"] for row in measured) else ""),
                      file=sys.stderr, flush=True)
                for row in measured:
                    if row["problem"]:
                        print(row["problem"], file=sys.stderr)
                dead = [s for s in servers if not s.alive()]
                if dead:
                    raise RuntimeError("a backend exited:\n" + "\n".join(s.diagnosis() for s in dead))
        finally:
            for server in servers:
                server.stop()
    return rows


def print_report(args, specs, rows, engine, pairs, share, stages=None):
    balance = HAPROXY_BALANCE.get(args.method, "leastconn")
    print(f"\nleastload proxy vs HAProxy: method {args.method} (HAProxy balance {balance}), backends "
          f"fast1/fast2 {args.fast_delay * 1000:g} ms, slow {args.slow_delay * 1000:g} ms, {args.size} B bodies; "
          f"wrk -t2, {args.duration} s per run"
          + (f" in {args.slices} turns of {args.duration // args.slices} s, the proxies of the same N taking turns"
             if args.slices > 1 else "")
          + (f"; the proxy alone on CPU {sorted(PINNED[0])}" if PINNED else "") + "\n")
    print(results_table(rows, [name for name, _ in specs], pairs))
    print(f"\nengine calls per request ({engine['implementation']}, 3 services, outlier_failures=5): "
          f"{engine['ns_per_request']:.0f} ns")
    if share:
        verdict = "met" if share["percent"] < SHARE_GOAL_PERCENT else "missed"
        print(f"engine share of the leastload proxy's CPU per request (1 worker, {share['connections']} "
              f"connections, {share['proxy_cpu_us_per_request']:.1f} us): {share['percent']:.2f} % "
              f"(goal < {SHARE_GOAL_PERCENT:g} %: {verdict})")
    if stages:
        measured = (f"% of the 1-worker proxy's measured CPU per request at {share['connections']} connections"
                    if share else "no leastload-1w row measured: no % column")
        print(f"\nthe leastload proxy's CPU per request by stage (benchmarks/proxy_stages.py: in-process, "
              f"no sockets; {measured})")
        print(f"measured: {describe(stages)}")
        print(stage_table(stages, share["proxy_cpu_us_per_request"] if share else None))


def print_cpu_split(rows):
    """Each proxy's CPU per request as user + system time (the medians over the rounds): where a
    difference in CPU per request lies, the process's own code or the kernel's work for it. Then
    what the same requests cost the rest of the machine in the same turns: the backends' CPU and
    how often their threads slept (each sleep a wake-up to pay for), wrk's CPU, and the sum of
    all four. Near parity, a proxy whose writes wake its peers more often costs them CPU that is
    not in its own figure."""
    groups = {}
    for r in rows:
        if r["cpu_user_us_per_request"] is not None:
            groups.setdefault((r["connections"], r["proxy"]), []).append(r)
    if not groups:
        return
    print("\nCPU per request (us; medians over the rounds): the proxy's user + system; the backends' "
          "(their sleeps a request), wrk's, and the machine's, all four together:")
    for (c, name), rs in sorted(groups.items()):
        def median(key):
            values = [r[key] for r in rs if r.get(key) is not None]
            return statistics.median(values) if values else math.nan
        print(f"  {c:>4} connections  {name:<13} {median('cpu_user_us_per_request'):6.1f} + "
              f"{median('cpu_system_us_per_request'):6.1f}   backends {median('backends_cpu_us_per_request'):6.1f} "
              f"({median('backends_sleeps_per_request'):.3f})   wrk {median('wrk_cpu_us_per_request'):5.1f}   "
              f"all {median('machine_cpu_us_per_request'):6.1f}")


def print_before(pairs):
    """leastload against the --before build, same round, connections and workers."""
    rounds = len({p["round"] for p in pairs}) > 1
    lines = []
    for p in pairs:
        cpu = f", CPU/req {p['cpu_ratio']:.3f}x" if p["cpu_ratio"] is not None else ""
        lines.append(f"  {'round %d, ' % p['round'] if rounds else ''}{p['connections']} connections, "
                     f"{p['workers_or_threads']} worker(s): {p['leastload_rps']:,.0f} vs {p['before_rps']:,.0f} "
                     f"req/s ({p['ratio']:.3f}x){cpu}")
    if lines:
        print("\nthis build against the --before build (same run):")
        print("\n".join(lines))


def print_packets(rows, window_s):
    """TCP_INFO packets against bytes, as the 1-worker leastload proxy's engine counted them."""
    for row in rows:
        window = row.get("engine_window")
        if not window or row["round"] != 1:
            continue
        print(f"\nTCP_INFO packets vs bytes in the engine's 14 s window (leastload-1w, {row['connections']} "
              f"connections{'' if window_s <= 13 else '; the run is longer than the window: per-request figures are low'}):")
        for name, w in window.items():
            per_req = (f"{w['packets'] / w['selected']:.2f} packets and {w['bytes'] / w['selected']:,.0f} bytes "
                       f"per request, " if w["selected"] else "")
            bpp = f"{w['bytes'] / w['packets']:,.0f} bytes per packet" if w["packets"] else "no packets"
            print(f"  {name:<6} {w['packets']:>9,} packets {w['bytes']:>13,} bytes: {per_req}{bpp}")


def stages_json(stages, share):
    """The stages' ns per request, with the measured CPU per request and what is left of it beyond
    the whole path (the event loop, system calls, kernel) when the 1-worker proxy was measured."""
    if not stages:
        return None
    proxy_ns = share["proxy_cpu_us_per_request"] * 1000.0 if share else None
    return {**stages, "unit": "ns per request", "proxy_cpu_ns_per_request": proxy_ns,
            "connections": share["connections"] if share else None,
            "event_loop_syscalls_kernel": proxy_ns - stages["whole"] if share else None}


def write_json(path, args, specs, rows, engine, pairs, to_before, share, stages=None):
    settings = {"method": args.method, "haproxy_balance": HAPROXY_BALANCE.get(args.method, "leastconn"),
                "duration_s": args.duration, "warmup_s": args.warmup, "connections": args.connections,
                "backend_delays_s": dict(specs), "body_bytes": args.size, "wrk_threads": 2,
                "cpu_count": os.cpu_count(), "rounds": args.rounds,
                "pinned": None if PINNED is None else {"proxy_cpus": sorted(PINNED[0]),
                                                       "other_cpus": sorted(PINNED[1])}}
    with open(path, "w") as f:
        json.dump({"settings": settings, "engine": engine, "results": rows, "ratios": pairs,
                   "ratios_to_before": to_before,
                   "engine_share": share, "stages": stages_json(stages, share)}, f, indent=2)
    print(f"\nwrote {path}", file=sys.stderr)


def main(argv=None):
    args = parse_args(argv)
    if not sys.platform.startswith("linux"):
        sys.exit("this benchmark reads /proc: Linux only")
    kinds = {kind for kind, _ in args.proxies}
    ensure_tools(["wrk"] + (["haproxy"] if "haproxy" in kinds else []))
    if "leastload" in kinds:
        ensure_leastload_proxy()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with SIGINT ignored
    signal.signal(signal.SIGTERM, raise_interrupt)
    signal.signal(signal.SIGHUP, raise_interrupt)
    if args.pin:
        global PINNED
        PINNED = pin_sets(os.sched_getaffinity(0))
        if PINNED is None:
            sys.exit("--pin needs at least 2 CPUs")
        print(f"pinned: the proxy on CPU {sorted(PINNED[0])}, wrk and the backends on CPUs {sorted(PINNED[1])}",
              file=sys.stderr)

    specs = [("fast1", args.fast_delay), ("fast2", args.fast_delay), ("slow", args.slow_delay)]
    runs = schedule(args.proxies, args.connections, args.rounds)
    estimate = len(runs) * (args.duration + args.warmup + 2) + 5
    print(f"{len(runs)} runs ({args.rounds} round(s)) of {args.warmup} s warm-up + {args.duration} s, method {args.method}: "
          f"about {estimate} s", file=sys.stderr, flush=True)
    try:
        engine = measure_engine(args)
        stages = measure_stages(args, engine)
        rows = run_all(args, specs, runs)
        # timed again once every server has stopped: the best of the two is the figure. On a
        # shared machine all of one moment's repeats can be slow (842 ns against 370-520 ns
        # in a run of 2026-12-03); timeit's best-of-N only answers noise within a moment
        again = measure_engine(args)
        engine["ns_per_request_each"] = [engine["ns_per_request"], again["ns_per_request"]]
        engine["ns_per_request"] = min(engine["ns_per_request_each"])
    except KeyboardInterrupt:
        print("\ninterrupted: every process started is stopped", file=sys.stderr)
        return 130
    pairs, share = ratios(rows), engine_share(rows, engine["ns_per_request"])
    print_report(args, specs, rows, engine, pairs, share, stages)
    print_medians(pairs, "HAProxy")
    print_turn_intervals(pairs, "HAProxy")
    print_cpu_split(rows)
    against_before = ratios(rows, other="before")
    print_before(against_before)
    print_medians(against_before, "the --before build")
    print_turn_intervals(against_before, "the --before build")
    print_packets(rows, args.warmup + args.duration)
    if args.json:
        write_json(args.json, args, specs, rows, engine, pairs, against_before, share, stages)
    return 1 if any(r["problem"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
