"""TLS termination side by side: `leastload proxy --tls-cert/--tls-key` and HAProxy (`bind ... ssl
crt`) with the same certificate (a P-256 key made here with openssl), one worker / one thread
each, in front of the same two backends, wrk over HTTPS with keep-alive connections (the
handshakes happen once per connection; what is measured is the records' encryption and the
proxying). Each round measures both proxies in turn (the order alternating), and prints
requests a second and the proxy's CPU a request (its process tree's user + system time over
the requests wrk counted); the ratios are leastload's over HAProxy's, one per round, so the
machine's changing load falls on both sides of each.

    python -m benchmarks.proxy_tls_vs_haproxy                 # 256 connections, 3 rounds of 10 s
    python -m benchmarks.proxy_tls_vs_haproxy --connections 64 --rounds 5 --duration 5

Needs Linux, wrk, haproxy and openssl. Not part of CI: a person runs it.
"""

import argparse
import os
import subprocess
import sys
import tempfile

from . import proxy_vs_haproxy as pvh  # the same backends, process handling, wrk parsing and HAProxy config

HOST = pvh.HOST


def make_certificate(workdir):
    cert, key = os.path.join(workdir, "bench.crt"), os.path.join(workdir, "bench.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=bench.test",
                    "-addext", "subjectAltName=DNS:bench.test"], check=True, capture_output=True, timeout=60)
    both = os.path.join(workdir, "bench.pem")  # HAProxy's form: the certificate and its key in one file
    with open(both, "w") as f:
        f.write(open(cert).read() + open(key).read())
    return cert, key, both


def haproxy_tls_config(port, backends, pem):
    return pvh.haproxy_text(1, f"{HOST}:{port} ssl crt {pem} alpn http/1.1", "https", backends, "leastconn",
                            global_lines=["ssl-default-bind-options ssl-min-ver TLSv1.2"])


def start(kind, backends, workdir, cert, key, pem):
    port = pvh.free_port()
    if kind == "leastload":
        cmd = [sys.executable, "-m", "leastload", "proxy", "--listen", f"{HOST}:{port}", "--health-check", "none",
               "--tls-cert", cert, "--tls-key", key]
        for name, p in backends.items():
            cmd += ["--backend", f"{name}={HOST}:{p}"]
        server = pvh.Server("leastload-tls", cmd, workdir)
        server.wait_listening()
        return server, port
    config = os.path.join(workdir, "haproxy-tls.cfg")
    with open(config, "w") as f:
        f.write(haproxy_tls_config(port, backends, pem))
    server = pvh.Server("haproxy-tls", ["haproxy", "-db", "-f", config], workdir)
    server.wait_port(port)
    return server, port


def wrk(port, connections, seconds):
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency", f"https://{HOST}:{port}/"]
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {done.returncode}:\n{done.stdout}{done.stderr}")
    return pvh.parse_wrk(done.stdout)


def measure(kind, backends, workdir, certs, args):
    server, port = start(kind, backends, workdir, *certs)
    try:
        wrk(port, args.connections, args.warmup)
        before = pvh.process_tree_cpu(server.pid)
        result = wrk(port, args.connections, args.duration)
        cpu = pvh.process_tree_cpu(server.pid) - before
    finally:
        server.stop()
    requests = result["requests"]
    return {"rps": result["requests_per_s"], "cpu_us": 1e6 * cpu / requests if requests else float("nan"),
            "errors": result["non_2xx_3xx"] + sum(result["socket_errors"].values())}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--connections", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=float, default=10.0, help="seconds of each measured wrk run (default 10)")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--delay", type=float, default=0.002, help="the backends answer after this many s (0.002)")
    args = p.parse_args(argv)
    pvh.ensure_tools()
    with tempfile.TemporaryDirectory(prefix="ll-tls-bench-") as workdir:
        certs = make_certificate(workdir)
        servers = []
        try:
            backends = pvh.start_backends([("fast1", args.delay), ("fast2", args.delay)], 1024, workdir, servers)
            print(f"TLS 1.3, {args.connections} keep-alive connections, {args.duration:g} s a run, 1 worker / "
                  "1 thread each")
            print(f"{'round':>5} {'proxy':<10} {'req/s':>9} {'CPU us/req':>11} {'errors':>7}")
            ratios = []
            for r in range(args.rounds):
                order = ("leastload", "haproxy") if r % 2 == 0 else ("haproxy", "leastload")
                got = {}
                for kind in order:
                    got[kind] = row = measure(kind, backends, workdir, certs, args)
                    print(f"{r + 1:>5} {kind:<10} {row['rps']:>9.0f} {row['cpu_us']:>11.1f} {row['errors']:>7}",
                          flush=True)
                ratios.append((got["leastload"]["rps"] / got["haproxy"]["rps"],
                               got["leastload"]["cpu_us"] / got["haproxy"]["cpu_us"]))
            for r, (rps, cpu) in enumerate(ratios, 1):
                print(f"round {r}: leastload / HAProxy  req/s {rps:.3f}x  CPU a request {cpu:.3f}x")
        finally:
            for s in servers:
                s.stop()


if __name__ == "__main__":
    main()
