"""WebSocket echo side by side: `leastload proxy` and HAProxy (`mode http`, which tunnels a
WebSocket after the backend's 101), one worker / one thread each, in front of the same
WebSocket echo backend (leastload_testkit.ws_backend, the `websockets` package). N clients
(asyncio, the `websockets` client, in this process) each open one WebSocket through the proxy
and send M messages of S bytes, BATCH at a time, each echo read back; the row is the messages
a second (round trips, all clients together) and the proxy's CPU a message (its process tree's
user + system time over the messages). Each round measures both proxies in turn, the order
alternating; the ratios are leastload's over HAProxy's per round, and their medians.

    python -m benchmarks.proxy_ws_vs_haproxy                 # 16 clients x 2000 messages, 3 rounds
    python -m benchmarks.proxy_ws_vs_haproxy --clients 64 --messages 500 --rounds 5
    python -m benchmarks.proxy_ws_vs_haproxy --quick         # 4 clients x 200 messages, 1 round

A run sends its N x M messages again until the proxy has used MIN_CPU_TICKS clock ticks of
CPU (CPU time is counted in ticks), so a small run's CPU a message is still resolved.
Bounded: a run that has not reached that within RUN_LIMIT seconds is reported as failed.
Needs Linux and haproxy (installed with apt-get when missing, as root); the clients share
the machine with the proxies, so the CPU a message is the steadier figure of the two.
"""

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository (testkit)
from benchmarks import proxy_vs_haproxy as pvh  # noqa: E402 (the proxies' start, process handling, CPU)

RUN_LIMIT = 120.0  # seconds a run may take at most
BATCH = 20         # messages a client sends before it reads their echoes
# CPU time is read in clock ticks (10 ms here): a run repeats its N x M messages until the
# proxy has used at least this many, so that its CPU a message is resolved to about 5 %
# (the quick mode's 800 messages took some 20 ms, and HAProxy's CPU read as 0 ticks)
MIN_CPU_TICKS = 20


async def one_client(uri, messages, size):
    from websockets.asyncio.client import connect

    payload = b"m" * size
    async with connect(uri, compression=None, max_size=1 << 20) as ws:
        left = messages
        while left:
            n = min(BATCH, left)
            for _ in range(n):
                await ws.send(payload)
            for _ in range(n):
                if await ws.recv() != payload:
                    raise RuntimeError("an echo differs from the message sent")
            left -= n
    return messages


async def drive(port, clients, messages, size):
    uri = f"ws://{pvh.HOST}:{port}/echo"
    return sum(await asyncio.wait_for(
        asyncio.gather(*(one_client(uri, messages, size) for _ in range(clients))), RUN_LIMIT))


def measure(kind, backend_port, workdir, args, clients, messages):
    server, port = pvh.start_proxy(kind, 1, {"ws": backend_port}, "LEASTCONNECTION", workdir)
    try:
        asyncio.run(drive(port, min(clients, 2), max(1, messages // 10), args.size))  # warm-up
        before = pvh.process_tree_cpu(server.pid)
        started = time.monotonic()
        done, cpu = 0, 0.0
        while cpu < MIN_CPU_TICKS / pvh.CLK_TCK:
            if time.monotonic() - started > RUN_LIMIT:
                raise RuntimeError(f"{kind}: {done} messages in {RUN_LIMIT:g} s used {cpu:.3f} s of CPU, "
                                   f"under the {MIN_CPU_TICKS} clock ticks a figure needs")
            done += asyncio.run(drive(port, clients, messages, args.size))
            cpu = pvh.process_tree_cpu(server.pid) - before
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    return {"messages": done, "mps": done / elapsed, "cpu_us": 1e6 * cpu / done}


def run(args):
    """The rounds: {"rows": [...], "ratios": [(mps, cpu), ...], "medians": (mps, cpu)}."""
    from leastload_testkit.ws_backend import WsBackend

    pvh.ensure_tools(("haproxy",))
    rows, ratios = [], []
    with tempfile.TemporaryDirectory(prefix="ll-ws-bench-") as workdir:
        backend = WsBackend(workdir=workdir)
        try:
            for r in range(args.rounds):
                order = ("leastload", "haproxy") if r % 2 == 0 else ("haproxy", "leastload")
                got = {}
                for kind in order:
                    got[kind] = row = measure(kind, backend.port, workdir, args, args.clients, args.messages)
                    rows.append({"round": r + 1, "proxy": kind, **row})
                    print(f"{r + 1:>5} {kind:<10} {row['mps']:>10.0f} {row['cpu_us']:>12.1f}", flush=True)
                ratios.append((got["leastload"]["mps"] / got["haproxy"]["mps"],
                               got["leastload"]["cpu_us"] / got["haproxy"]["cpu_us"]))
        finally:
            backend.stop()
    medians = (statistics.median(m for m, _ in ratios), statistics.median(c for _, c in ratios))
    return {"rows": rows, "ratios": ratios, "medians": medians}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--messages", type=int, default=2000, help="messages each client sends (default 2000)")
    p.add_argument("--size", type=int, default=64, help="bytes a message (default 64)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="4 clients x 200 messages, 1 round")
    args = p.parse_args(argv)
    if args.quick:
        args.clients, args.messages, args.rounds = 4, 200, 1
    for name in ("clients", "messages", "size", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    print(f"WebSocket echo: {args.clients} clients x {args.messages} messages of {args.size} bytes, "
          f"{args.rounds} round(s), 1 worker / 1 thread each")
    print(f"{'round':>5} {'proxy':<10} {'messages/s':>10} {'CPU us/msg':>12}")
    result = run(args)
    for r, (mps, cpu) in enumerate(result["ratios"], 1):
        print(f"round {r}: leastload / HAProxy  messages/s {mps:.3f}x  CPU a message {cpu:.3f}x")
    mps, cpu = result["medians"]
    print(f"medians: leastload / HAProxy  messages/s {mps:.3f}x  CPU a message {cpu:.3f}x")
    return result


if __name__ == "__main__":
    main()
