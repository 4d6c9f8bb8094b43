"""nginx with the leastload module beside nginx's own least_conn and HAProxy's leastconn.

What it measures. Three toy backends (`python -m leastload.cli.backends`: fast1
and fast2 answer in 2 ms, slow in 60 ms, 1 KB bodies) behind four proxies:
Debian's nginx with ngx_http_upstream_leastload_module (`leastload
LEASTCONNECTION`, and `leastload LEASTBANDWIDTH`), the same nginx with
`least_conn`, and HAProxy with `balance leastconn`; every nginx keeps 64
connections to the backends alive and adds X-Forwarded-For and -Proto, as
HAProxy does here (`option forwardfor`, http-reuse). For 1 and 2 nginx workers
(HAProxy: nbthread) and wrk at 32 and 256 connections, each proxy is measured
in turn, the order reversed at every other round; each row is the median over
the rounds of: requests per second, the proxy's CPU per request (user + system
of its process tree over the requests the backends served), p99 latency, and
the split between the backends. The ratios are nginx+leastload's to nginx
least_conn's, per round and their medians. Optional proxies: nginx round
robin (`nginx-round_robin`: the even split that LEASTBANDWIDTH makes with
equal answers) and `least_conn` with a shared `zone` (`nginx-least_conn-zone`:
nginx's own balance shared by the workers, as the module's is). With
--counts, `perf stat` on the proxy's processes counts system calls, upstream
connects (connect(2)) and context switches a request, and the module's
proxies the locks of their shared vserver a request: counts, which a busy
machine moves far less than CPU time. perf's tracepoints add to every system
call's cost, so judge CPU per request on a run without --counts. With
--instructions (instead of the comparison) each nginx proxy runs as one
process under callgrind and the user-space instructions a request are
counted over --duration s of wrk at 32 connections.

The last lines say, per number of workers, whether issue 47's targets at 256
connections hold on this run (`# Done-when: PASS` or `MISS`, with the median
ratio and each round's): LEASTCONNECTION req/s >= 0.95x least_conn's and CPU
per request <= 1.1x; LEASTBANDWIDTH req/s >= 0.9x, with the reason it misses
on this workload and round robin's ratio beside it. The run for them:

    bash nginx/build.sh /tmp/m && python -m benchmarks.nginx_compare \
        --module /tmp/m/ngx_http_upstream_leastload_module.so --connections 256 \
        --proxies leastload-lc,leastload-lb,nginx-least_conn,nginx-round_robin,nginx-least_conn-zone

    python -m benchmarks.nginx_compare                   # 3 rounds of 1 s warm-up + 4 s: about 4 minutes
    python -m benchmarks.nginx_compare --quick           # 1 round of 2 s, 32 connections
    python -m benchmarks.nginx_compare --rounds 5 --duration 6 --json out.json --counts

Needs Linux, nginx, nginx-dev, wrk and haproxy (installed with apt-get as root
when missing); the module is built with nginx/build.sh unless --module names one.
The machinery (processes, wrk, CPU from /proc) is benchmarks/proxy_vs_haproxy.py's.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

from leastload_testkit.backends import start_backends
from leastload_testkit.nginx_conf import nginx_conf, upstream_block
from leastload_testkit.ports import HOST, free_port
from leastload_testkit.processes import Server

from . import proxy_vs_haproxy as pvh  # the benchmark beside this one

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROXIES = ("leastload-lc", "leastload-lb", "nginx-least_conn", "haproxy")
# nginx-round_robin (not measured by default): nginx's own round robin, which splits the requests
# evenly as LEASTBANDWIDTH does here (equal answers), to tell the method's split from the module's cost
# nginx-least_conn-zone: least_conn with its state in a shared zone (one balance for all workers, as
# the module's), to tell the cost of a shared balance from the module's own
OPTIONAL = ("nginx-round_robin", "nginx-least_conn-zone")
BALANCERS = {"leastload-lc": ("leastload LEASTCONNECTION",), "leastload-lb": ("leastload LEASTBANDWIDTH",),
             "nginx-least_conn": ("least_conn",), "nginx-round_robin": (),
             "nginx-least_conn-zone": ("least_conn", "zone pool 1m")}
BASELINE = "nginx-least_conn"
KEEPALIVE = [64]  # idle connections each nginx worker keeps to the backends (--keepalive)

def build_module(workdir):
    out = os.path.join(workdir, "module")
    run = subprocess.run(["bash", os.path.join(ROOT, "nginx", "build.sh"), out], capture_output=True, text=True,
                         timeout=900)
    if run.returncode != 0:
        sys.exit(f"nginx/build.sh failed:\n{run.stderr[-3000:]}")
    return os.path.join(out, "ngx_http_upstream_leastload_module.so")


def shared_name(name, workers):
    return f"bench.{os.getpid()}.{name}.{workers}"


def config_text(name, workers, backends, module, where, port, master_process=True):
    """The nginx.conf of proxy `name` (leastload_testkit.nginx_conf, the tests' writer too)."""
    leastload = name.startswith("leastload")
    lines = list(BALANCERS[name])
    if leastload:
        lines.append(f"leastload_shared {shared_name(name, workers)}")
    lines.append(f"keepalive {KEEPALIVE[0]}")  # after the method, as nginx wants it
    upstream = upstream_block("pool", [f"{HOST}:{p}" for p in backends.values()], *lines)
    return nginx_conf(where, port, "pool", upstream, workers=workers, module=module if leastload else None,
                      error_level="warn", worker_connections=4096, rlimit_nofile=16384, listen=" backlog=4096",
                      location=("proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for",
                                "proxy_set_header X-Forwarded-Proto http"), master_process=master_process)


def start_nginx(name, workers, backends, module, workdir):
    where = os.path.join(workdir, f"{name}-{workers}w")
    os.makedirs(where, exist_ok=True)
    port = free_port()
    conf = config_text(name, workers, backends, module, where, port)
    path = os.path.join(where, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    server = Server(f"{name}-{workers}w", ["nginx", "-p", where, "-c", path, "-e", f"{where}/error.log"],
                    workdir)
    try:
        server.wait_port(port)
    except BaseException:
        server.stop()
        raise
    return server, port


def start(name, workers, backends, module, workdir):
    if name == "haproxy":
        config = os.path.join(workdir, f"haproxy-{workers}t.cfg")
        port = free_port()
        with open(config, "w") as f:
            f.write(pvh.haproxy_config(port, workers, backends, "leastconn"))
        server = Server(f"haproxy-{workers}t", ["haproxy", "-db", "-f", config], workdir)
        server.wait_port(port)
        return server, port
    return start_nginx(name, workers, backends, module, workdir)


COUNTED = {"raw_syscalls:sys_enter": "syscalls", "syscalls:sys_enter_connect": "connects",
           "context-switches": "switches"}
SHOWN = (*COUNTED.values(), "locks")  # and the module's locks of its shared vserver


def counts_unavailable():
    """None when `perf stat` can count the system calls of a process here, else why not."""
    if shutil.which("perf") is None:
        return "perf is not installed (apt-get install linux-perf)"
    run = subprocess.run(["perf", "stat", "-x", ",", "-e", ",".join(COUNTED), "true"], capture_output=True,
                         text=True, timeout=60)
    if run.returncode != 0 or "<not" in run.stderr:
        return "perf stat cannot count system calls here: " + (run.stderr.strip().splitlines() or ["?"])[-1]
    return None


def open_segment(name):
    """The shared vserver `name`, attached from here: its ._shared_stats()["sequence"] counts
    the locks taken so far (each read takes one); leave it with ._close_shared()."""
    from leastload.engine._engine import Engine  # the C engine: only with --counts

    engine = Engine()
    engine._open_shared(name, 1, b"")
    return engine


def tree_pids(pid):
    """pid and its descendants (nginx: the master and its workers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(pvh.children(p))
    return out


def start_counts(pid, workdir):
    """`perf stat` on the proxy's processes, until stop_counts(): system calls, upstream connects
    (connect(2): a connection to a backend that no kept-alive one could serve) and context
    switches. Counts, not times: a busy machine moves them far less than CPU seconds."""
    out = os.path.join(workdir, "perf-stat.csv")
    proc = subprocess.Popen(["perf", "stat", "-x", ",", "-e", ",".join(COUNTED), "-o", out, "-p",
                             ",".join(str(p) for p in tree_pids(pid))], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    return proc, out


def stop_counts(started):
    proc, out = started
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    counts = {}
    with open(out) as f:
        for line in f:
            fields = line.strip().split(",")
            if len(fields) > 2 and fields[2] in COUNTED and fields[0].replace(".", "", 1).isdigit():
                counts[COUNTED[fields[2]]] = float(fields[0])
    return counts


def measure(server, port, connections, args, backends, workdir, segment=None):
    pvh.run_wrk(port, connections, args.warmup)
    counting = start_counts(server.pid, workdir) if args.counts else None
    reader = open_segment(segment) if counting and segment else None
    locks0 = reader._shared_stats()["sequence"] if reader else None
    before = pvh.all_stats(backends)
    user0, sys0 = pvh.process_tree_cpu_split(server.pid)
    wrk = pvh.run_wrk(port, connections, args.duration)
    user1, sys1 = pvh.process_tree_cpu_split(server.pid)
    served, percent = pvh.split(before, pvh.all_stats(backends))
    counts = stop_counts(counting) if counting else {}
    if reader:  # the module's locks of the segment (each worker's picks, ends and sweeps)
        counts["locks"] = reader._shared_stats()["sequence"] - locks0 - 1  # less this read's own lock
        reader._close_shared()
    requests = sum(served.values()) or wrk["requests"]
    errors = wrk["non_2xx_3xx"] + sum(wrk["socket_errors"].values())
    row = {"requests_per_s": wrk["requests_per_s"], "p99_ms": wrk["p99_ms"], "errors": errors,
           "cpu_us_per_request": 1e6 * ((user1 - user0) + (sys1 - sys0)) / requests, "percent": percent}
    row.update({f"{k}_per_request": v / requests for k, v in counts.items()})
    return row


def run(args, module, workdir):
    servers = []
    rows = []  # one per (workers, connections, proxy, round)
    try:
        backends = start_backends([("fast1", 0.002), ("fast2", 0.002), ("slow", 0.060)], 1024, workdir,
                                      servers)
        for workers in args.workers:
            running = {}
            try:
                for name in args.proxies:
                    running[name] = start(name, workers, backends, module, workdir)
                for r in range(args.rounds):
                    for connections in args.connections:
                        order = list(args.proxies) if r % 2 == 0 else list(args.proxies)[::-1]
                        for name in order:
                            server, port = running[name]
                            segment = shared_name(name, workers) if name.startswith("leastload") else None
                            row = measure(server, port, connections, args, backends, workdir, segment)
                            row.update(proxy=name, workers=workers, connections=connections, round=r)
                            rows.append(row)
                            counted = "".join(f" {row[f'{k}_per_request']:.3f} {k}/req" for k in SHOWN
                                              if f"{k}_per_request" in row)
                            print(f"round {r + 1} {workers}w {connections:>3}c {name:<21} "
                                  f"{row['requests_per_s']:8.0f} req/s {row['cpu_us_per_request']:6.1f} us/req "
                                  f"p99 {row['p99_ms']:7.2f} ms errors {row['errors']}{counted}", file=sys.stderr,
                                  flush=True)
            finally:
                for server, _ in running.values():
                    server.stop()
    finally:
        for server in servers:
            server.stop()
    return rows


def instructions(name, backends, module, workdir, seconds):
    """(requests, user-space instructions a request) of nginx proxy `name` as one process
    (master_process off) under callgrind: its counters zeroed after a 2 s warm-up, dumped after
    `seconds` of wrk at 32 connections. A count: the machine's load does not move it; the
    kernel's work (system calls, TCP) is not in it."""
    where = os.path.join(workdir, f"callgrind-{name}")
    os.makedirs(where, exist_ok=True)
    port = free_port()
    path = os.path.join(where, "nginx.conf")
    with open(path, "w") as f:
        f.write(config_text(name, 1, backends, module, where, port, master_process=False))
    out = os.path.join(where, "callgrind.out")
    server = Server(f"callgrind-{name}", ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "nginx",
                                          "-p", where, "-c", path, "-e", f"{where}/error.log"], workdir)
    try:
        server.wait_port(port, timeout=120)
        pvh.run_wrk(port, 32, 2)
        subprocess.run(["callgrind_control", "-z", str(server.pid)], check=True, capture_output=True, timeout=120)
        before = pvh.all_stats(backends)
        pvh.run_wrk(port, 32, seconds)
        served, _ = pvh.split(before, pvh.all_stats(backends))
        subprocess.run(["callgrind_control", "-d", str(server.pid)], check=True, capture_output=True, timeout=120)
        with open(out + ".1") as f:  # the first dump: what ran since the zeroing
            summary = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
    finally:
        server.stop()
    requests = sum(served.values())
    return requests, summary / requests


def run_instructions(args, module, workdir):
    rows = {}
    servers = []
    try:
        backends = start_backends([("fast1", 0.002), ("fast2", 0.002), ("slow", 0.060)], 1024, workdir, servers)
        for name in args.proxies:
            if name != "haproxy":
                rows[name] = instructions(name, backends, module, workdir, args.duration)
                print(f"{name:<21} {rows[name][0]:7d} requests {rows[name][1]:9.0f} instructions/request",
                      file=sys.stderr, flush=True)
    finally:
        for server in servers:
            server.stop()
    print(f"user-space instructions a request, one nginx process under callgrind, wrk at 32 connections "
          f"for {args.duration} s")
    for name, (requests, ir) in rows.items():
        ratio = f"  x{ir / rows[BASELINE][1]:.3f} of {BASELINE}'s" if BASELINE in rows and name != BASELINE else ""
        print(f"  {name:<21} {ir:9.0f}{ratio}  ({requests} requests)")
    return 0


def summarize(rows, args):
    """Medians per (workers, connections, proxy), and the ratios to nginx least_conn per round."""
    table, ratios = [], []
    for workers in args.workers:
        for connections in args.connections:
            def of(name):
                return [r for r in rows if (r["workers"], r["connections"], r["proxy"]) == (workers, connections, name)]
            for name in args.proxies:
                mine = of(name)
                split = {k: statistics.median(r["percent"][k] for r in mine) for k in mine[0]["percent"]}
                counted = [f"{k}_per_request" for k in SHOWN if all(f"{k}_per_request" in r for r in mine)]
                table.append({"workers": workers, "connections": connections, "proxy": name,
                              **{k: statistics.median(r[k] for r in mine)
                                 for k in ("requests_per_s", "cpu_us_per_request", "p99_ms", *counted)},
                              "errors": sum(r["errors"] for r in mine), "percent": split})
            if BASELINE not in args.proxies:
                continue
            base = {r["round"]: r for r in of(BASELINE)}
            for name in args.proxies:
                if name == BASELINE:
                    continue
                rps = [r["requests_per_s"] / base[r["round"]]["requests_per_s"] for r in of(name)]
                cpu = [r["cpu_us_per_request"] / base[r["round"]]["cpu_us_per_request"] for r in of(name)]
                ratios.append({"workers": workers, "connections": connections, "proxy": name,
                               "rps_ratio_median": statistics.median(rps), "rps_ratios": rps,
                               "cpu_ratio_median": statistics.median(cpu), "cpu_ratios": cpu})
    return table, ratios


def print_report(table, ratios, args):
    print(f"backends fast1/fast2 2 ms, slow 60 ms, 1 KB; wrk -t2, {args.rounds} rounds of {args.duration} s "
          f"(medians); CPU per request = the proxy's process tree")
    counted = [k for k in SHOWN if any(f"{k}_per_request" in t for t in table)]
    heads = "".join(f"{k + '/req':>13}" for k in counted)
    print(f"{'workers':>7} {'conns':>5}  {'proxy':<21} {'req/s':>8} {'us/req':>7} {'p99 ms':>7}  {heads}  "
          f"split fast1/fast2/slow %")
    for t in table:
        split = "/".join(f"{t['percent'][k]:.1f}" for k in ("fast1", "fast2", "slow"))
        errors = f"  errors {t['errors']}" if t["errors"] else ""
        extra = "".join(f"{t[f'{k}_per_request']:13.3f}" if f"{k}_per_request" in t else f"{'-':>13}"
                        for k in counted)
        print(f"{t['workers']:>7} {t['connections']:>5}  {t['proxy']:<21} {t['requests_per_s']:8.0f} "
              f"{t['cpu_us_per_request']:7.1f} {t['p99_ms']:7.2f}  {extra}  {split}{errors}")
    print(f"\nratios to {BASELINE} (median of the rounds' ratios; each round's in brackets)")
    for q in ratios:
        rps = ", ".join(f"{x:.3f}" for x in q["rps_ratios"])
        cpu = ", ".join(f"{x:.3f}" for x in q["cpu_ratios"])
        print(f"  {q['workers']}w {q['connections']:>3}c {q['proxy']:<21} req/s x{q['rps_ratio_median']:.3f} "
              f"[{rps}]  CPU/request x{q['cpu_ratio_median']:.3f} [{cpu}]")
    print()
    for line in done_when(ratios, args):
        print(line)


LB_REASON = ("by the method's definition on this workload: every answer has the same size, so equal bytes mean "
             "equal request counts and LEASTBANDWIDTH splits evenly, which gives the 60 ms backend a third of "
             "the requests")


def done_when(ratios, args):
    """Issue 47's Done-when at 256 connections, one line per target and number of workers:
    PASS or MISS with the medians of the per-round ratios (each round's in brackets)."""
    lines = []
    for workers in args.workers:
        where = f"{workers} worker{'s' if workers > 1 else ''}, 256 connections"
        got = {q["proxy"]: q for q in ratios if q["workers"] == workers and q["connections"] == 256}

        def figure(name, key):
            q = got[name]
            rounds = ", ".join(f"{x:.3f}" for x in q[key.replace("_median", "s")])
            return q[key], f"x{q[key]:.3f} [{rounds}]"
        if "leastload-lc" in got:
            rps, text = figure("leastload-lc", "rps_ratio_median")
            lines.append(f"# Done-when: {'PASS' if rps >= 0.95 else 'MISS'}: {where}: LEASTCONNECTION req/s "
                         f"{text} of least_conn's (target >= 0.95x)")
            cpu, text = figure("leastload-lc", "cpu_ratio_median")
            lines.append(f"# Done-when: {'PASS' if cpu <= 1.1 else 'MISS'}: {where}: LEASTCONNECTION CPU/request "
                         f"{text} of least_conn's (target <= 1.1x)")
            if "nginx-least_conn-zone" in got:  # nginx's own balance shared by all workers, beside the module's
                lines.append(f"#   beside them, nginx least_conn with a shared zone: req/s "
                             f"{figure('nginx-least_conn-zone', 'rps_ratio_median')[1]}, CPU/request "
                             f"{figure('nginx-least_conn-zone', 'cpu_ratio_median')[1]}")
        else:
            lines.append(f"# Done-when: not judged: {where}: LEASTCONNECTION (needs leastload-lc and "
                         f"{BASELINE} in --proxies, 256 in --connections)")
        if "leastload-lb" in got:
            rps, text = figure("leastload-lb", "rps_ratio_median")
            why = "" if rps >= 0.9 else f"; {LB_REASON}"
            if rps < 0.9 and "nginx-round_robin" in got:
                even = figure("nginx-round_robin", "rps_ratio_median")[1]
                why += f"; nginx round robin (the even split, no module) {even}"
            elif rps < 0.9:
                why += " (add nginx-round_robin to --proxies for the even split's own ratio)"
            lines.append(f"# Done-when: {'PASS' if rps >= 0.9 else 'MISS'}: {where}: LEASTBANDWIDTH req/s {text} of "
                         f"least_conn's (target >= 0.9x){why}")
        else:
            lines.append(f"# Done-when: not judged: {where}: LEASTBANDWIDTH (needs leastload-lb and {BASELINE} in "
                         f"--proxies, 256 in --connections)")
    return lines


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=int, default=4, help="seconds of each measured wrk run (4)")
    p.add_argument("--warmup", type=int, default=1, help="seconds of wrk before each measured run (1)")
    p.add_argument("--workers", default="1,2", help="nginx workers / HAProxy threads (1,2)")
    p.add_argument("--connections", default="32,256", help="wrk connections (32,256)")
    p.add_argument("--proxies", default=",".join(PROXIES), help=f"some of {','.join(PROXIES + OPTIONAL)}")
    p.add_argument("--keepalive", type=int, default=64, help="nginx's keepalive to the backends (64)")
    p.add_argument("--module", help="a built ngx_http_upstream_leastload_module.so (default: build it)")
    p.add_argument("--quick", action="store_true", help="1 round of 2 s at 32 connections, 1 worker")
    p.add_argument("--json", metavar="PATH", help="write the rows, medians and ratios as JSON")
    p.add_argument("--instructions", action="store_true",
                   help="instead of the comparison: each nginx proxy's user-space instructions a request, "
                        "as one process under callgrind (needs valgrind; --duration s of wrk each)")
    p.add_argument("--counts", action="store_true",
                   help="count each proxy's system calls, upstream connects and context switches a request "
                        "(perf stat on its processes; needs perf with tracepoints), and the module's locks of its "
                        "shared vserver a request; the tracepoints add to the CPU times")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.warmup, args.connections, args.workers = 1, 2, 1, "32", "1"
    args.workers = [int(x) for x in args.workers.split(",")]
    args.connections = [int(x) for x in args.connections.split(",")]
    args.proxies = [x for x in args.proxies.split(",") if x]
    unknown = [x for x in args.proxies if x not in PROXIES + OPTIONAL]
    if unknown or args.rounds < 1 or args.duration < 1:
        p.error(f"--proxies: unknown {unknown}" if unknown else "--rounds and --duration must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    KEEPALIVE[0] = args.keepalive
    pvh.ensure_tools(("wrk", "haproxy") if "haproxy" in args.proxies else ("wrk",))
    if args.counts:
        why = counts_unavailable()
        if why:
            sys.exit(f"--counts: {why}")
    with tempfile.TemporaryDirectory(prefix="leastload-nginx-bench-") as workdir:
        module = args.module or build_module(workdir)
        if args.instructions:
            if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
                sys.exit("--instructions needs valgrind (apt-get install valgrind)")
            return run_instructions(args, module, workdir)
        rows = run(args, module, workdir)
    table, ratios = summarize(rows, args)
    print_report(table, ratios, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "medians": table, "ratios": ratios, "rounds": args.rounds,
                       "duration_s": args.duration}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
