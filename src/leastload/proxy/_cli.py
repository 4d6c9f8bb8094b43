"""`leastload proxy`: the command line, and `--workers N` as N processes on one port.

With `--workers N` the command starts N copies of itself, each listening on
the same port with SO_REUSEPORT and each with its own engine; the kernel
spreads new client connections over them. The parent prints
`listening on HOST:PORT` once every worker listens, forwards SIGTERM/SIGINT,
and exits when they have. With `--admin HOST:PORT`, worker i answers on
PORT + i (each worker reports its own engine).
"""

import argparse
import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
from types import FrameType
from typing import Any, Callable, Coroutine, List, Optional, Sequence, Tuple, Union

from .._methods import METHODS
from ..upstream import parse_host_port
from . import _health
from ._proxy import Proxy

log = logging.getLogger("leastload.proxy")
WORKER_START_TIMEOUT = 60.0


def _host_port(text: str) -> Tuple[str, int]:
    try:
        return parse_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(kind: Callable[[str], Union[int, float]]) -> Callable[[str], Union[int, float]]:
    def convert(text: str) -> Union[int, float]:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
        return value
    return convert


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="leastload proxy",
        description="An asyncio HTTP/1.1 reverse proxy: every request picks its backend through the engine.",
        epilog="example:\n  leastload proxy --listen 127.0.0.1:8080 --method LEASTRESPONSETIME \\\n"
               "      --backend app1=127.0.0.1:9001 --backend app2=127.0.0.1:9002:2",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", type=_host_port, default=("127.0.0.1", 8080), metavar="HOST:PORT",
                   help="where clients connect (default 127.0.0.1:8080; port 0: any free port)")
    p.add_argument("--method", default="LEASTCONNECTION", choices=METHODS, metavar="METHOD",
                   help="load-balancing method: " + ", ".join(METHODS) + " (default LEASTCONNECTION)")
    p.add_argument("--backend", action="append", required=True, metavar="NAME=HOST:PORT[:WEIGHT]",
                   help="a backend (repeat for each); weight 1..100, default 1")
    g = p.add_argument_group("hash methods (each request's key: docs/proxy.md)")
    g.add_argument("--token-header", metavar="NAME",
                   help="TOKEN: the request header whose value is the token (needed with --method TOKEN; "
                        "a request without it hashes its client's address)")
    g.add_argument("--hash-length", type=int, metavar="N",
                   help="URLHASH, DOMAINHASH: bytes of the URL or domain hashed (1..4096, default 80)")
    g.add_argument("--netmask", metavar="MASK",
                   help="IP hash methods: IPv4 addresses masked with this first (default 255.255.255.255)")
    g.add_argument("--v6-netmask-length", type=int, metavar="BITS",
                   help="IP hash methods: IPv6 prefix length kept (0..128, default 128)")
    g.add_argument("--hash-seed", type=int, metavar="N",
                   help="seed of every hash method: another seed, another mapping (default 0)")
    g = p.add_argument_group("requests")
    g.add_argument("--retries", type=int, default=2,
                   help="tries on other backends after a refused or reset connection (default 2)")
    g.add_argument("--connect-timeout", type=_positive(float), default=3.0, metavar="SECONDS")
    g.add_argument("--timeout", type=_positive(float), default=30.0, metavar="SECONDS",
                   help="for the first response byte, and between response bytes (default 30): 504 after")
    g.add_argument("--client-timeout", type=_positive(float), default=60.0, metavar="SECONDS",
                   help="idle keep-alive client connections close after this (default 60)")
    g.add_argument("--max-body", type=int, default=16 << 20, metavar="BYTES",
                   help="largest request body accepted (default 16 MiB; bodies are buffered so they can be retried)")
    g.add_argument("--pool-size", type=int, default=256, help="idle keep-alive connections kept per backend (default 256)")
    g = p.add_argument_group("health monitors")
    g.add_argument("--health-check", choices=_health.KINDS, default="tcp",
                   help="probe per backend: tcp (connect), http (GET, 2xx/3xx) or none (default tcp)")
    g.add_argument("--health-path", default="/", help="path of the http probe (default /)")
    g.add_argument("--health-interval", type=_positive(float), default=5.0, metavar="SECONDS", help="default 5")
    g.add_argument("--health-timeout", type=_positive(float), default=2.0, metavar="SECONDS", help="default 2")
    g.add_argument("--health-fall", type=int, default=3, metavar="N", help="failed probes in a row for DOWN (default 3)")
    g.add_argument("--health-rise", type=int, default=1, metavar="N", help="passed probes in a row for UP (default 1)")
    g = p.add_argument_group("passive ejection")
    g.add_argument("--outlier-failures", type=int, default=5, metavar="K",
                   help="failures in a row that eject a backend (default 5; 0: off)")
    g.add_argument("--outlier-ejection-time", type=float, default=30, metavar="SECONDS",
                   help="ejection length, times the ejection count, capped at 300 (default 30)")
    g.add_argument("--outlier-max-ejection-percent", type=int, default=50, metavar="P",
                   help="at most this share of the backends ejected at once (default 50)")
    g = p.add_argument_group("slow start (a backend that comes back UP after DOWN)")
    g.add_argument("--new-service-request", type=int, default=0, metavar="N",
                   help="requests (per second, or percent) a new backend gets (default 0: off)")
    g.add_argument("--new-service-request-unit", choices=("PER_SECOND", "PERCENT"), default="PER_SECOND")
    g.add_argument("--new-service-request-increment-interval", type=int, default=0, metavar="SECONDS",
                   help="0: manual slow start; else the automated ramp's step (default 0)")
    g.add_argument("--startup-rr-factor", type=int, default=0, metavar="N")
    g = p.add_argument_group("running")
    g.add_argument("--admin", type=_host_port, default=None, metavar="HOST:PORT",
                   help="serve GET /leastload/status here (default: off)")
    g.add_argument("--workers", type=int, default=1, metavar="N",
                   help="processes sharing the port (SO_REUSEPORT), each with its own engine (default 1)")
    g.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto",
                   help="event loop: uvloop when installed (auto), or asyncio's own")
    g.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    p.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # set for the workers
    return p


def _proxy_from(args: argparse.Namespace) -> Proxy:
    hashing = {setting: value for setting, value in (
        ("hashlength", args.hash_length), ("netmask", args.netmask), ("v6netmasklen", args.v6_netmask_length),
        ("hash_seed", args.hash_seed)) if value is not None}
    return Proxy(
        args.backend, args.method, listen=args.listen, retries=args.retries,
        connect_timeout=args.connect_timeout, timeout=args.timeout, client_timeout=args.client_timeout,
        max_body=args.max_body, pool_size=args.pool_size, health_check=args.health_check,
        health_path=args.health_path, health_interval=args.health_interval,
        health_timeout=args.health_timeout, health_fall=args.health_fall, health_rise=args.health_rise,
        admin=args.admin, reuse_port=args.reuse_port, outlier_failures=args.outlier_failures,
        outlier_ejection_time=args.outlier_ejection_time,
        outlier_max_ejection_percent=args.outlier_max_ejection_percent,
        new_service_request=args.new_service_request, new_service_request_unit=args.new_service_request_unit,
        new_service_request_increment_interval=args.new_service_request_increment_interval,
        startup_rr_factor=args.startup_rr_factor, token_header=args.token_header, **hashing)


async def _serve(proxy: Proxy) -> None:
    await proxy.start()
    host, port = proxy.address
    print(f"listening on {host}:{port}", flush=True)
    admin = proxy.admin_address
    if admin is not None:
        log.warning("admin: GET http://%s:%d/leastload/status", *admin)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await proxy.close()


def _run_loop(kind: str, coro: Coroutine[Any, Any, None]) -> None:
    if kind != "asyncio":
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                raise SystemExit("leastload proxy: --loop uvloop, but uvloop is not installed "
                                 "(pip install leastload[proxy])") from None
        else:
            uvloop.run(coro)
            return
    asyncio.run(coro)


def _run_workers(args: argparse.Namespace, argv: List[str]) -> int:
    """The parent of --workers N: start them on one port, wait for them, pass signals on."""
    host, port = args.listen
    holder: Optional[socket.socket] = None
    if port == 0:  # every worker must get the same port: reserve one, held until they listen
        holder = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind((host, 0))
        port = holder.getsockname()[1]
    base = _without(argv, ("--workers", "--listen", "--admin"))
    children: "List[subprocess.Popen[str]]" = []
    stopping: List[int] = []

    def stop(signum: int, frame: Optional[FrameType]) -> None:  # set before the first worker starts: none is left behind
        stopping.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        for i in range(args.workers):
            if stopping:
                return 0
            cmd = [sys.executable, "-m", "leastload", "proxy", *base, "--listen", f"{host}:{port}", "--reuse-port"]
            if args.admin is not None:
                cmd += ["--admin", f"{args.admin[0]}:{args.admin[1] + i if args.admin[1] else 0}"]
            children.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
        for child in children:
            line = _first_line(child, WORKER_START_TIMEOUT)
            if not line.startswith("listening on "):
                if stopping:
                    return 0
                raise SystemExit(f"leastload proxy: a worker did not start ({line or 'no output'})")
        print(f"listening on {host}:{port}", flush=True)
        log.warning("%d workers on %s:%d", args.workers, host, port)
        if holder is not None:
            holder.close()
            holder = None
        codes = [child.wait() for child in children]
        return 0 if stopping or not any(codes) else 1
    finally:
        if holder is not None:
            holder.close()
        for child in children:
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
            if child.stdout is not None:
                child.stdout.close()


def _first_line(child: "subprocess.Popen[str]", timeout: float) -> str:
    import selectors
    assert child.stdout is not None  # started with stdout=PIPE
    with selectors.DefaultSelector() as sel:
        sel.register(child.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            return ""
        return child.stdout.readline().strip()


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


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(name)s[%(process)d] %(levelname)s %(message)s")
    if args.workers < 1 or args.workers > 256:
        parser.error(f"--workers must be in 1..256, got {args.workers}")
    if args.method == "TOKEN" and args.token_header is None:
        parser.error("--method TOKEN needs --token-header NAME (the request header whose value is the token)")
    if args.token_header is not None and args.method != "TOKEN":
        parser.error(f"--token-header: only with --method TOKEN, got --method {args.method}")
    if args.workers > 1:
        if not hasattr(socket, "SO_REUSEPORT"):
            parser.error("--workers above 1 needs SO_REUSEPORT, which this system does not have")
        return _run_workers(args, argv)
    try:
        proxy = _proxy_from(args)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    try:
        _run_loop(args.loop, _serve(proxy))
    except OSError as exc:
        print(f"leastload proxy: cannot listen: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
