"""`leastload proxy`: the command line, and `--workers N` as N supervised processes on one port.

With `--workers N` the command starts N copies of itself, each listening on
the same port with SO_REUSEPORT; the kernel spreads new client connections
over them. They balance with one engine in shared memory (VirtualServer(shared=...),
a segment named after the listening address, removed when the supervisor
exits): one set of counts, one slow start, one ejection policy; worker 0 alone
runs the health probes. --private-engines (and --config, for now) gives each
worker an engine of its own instead. The parent supervises them: it
prints `listening on HOST:PORT` once every worker listens, restarts a worker
that dies (with a backoff), gives up (exit 1) when a worker keeps dying before
it listens, and on SIGTERM/SIGINT stops them all and exits 0; SIGHUP is passed
on to every worker (a --config reload). With `--admin HOST:PORT` the supervisor
serves the admin port itself (_fanout.py: /metrics merged over the workers,
status as a list, commands and reloads sent to every worker) and worker i
answers on PORT + 1 + i (its own view; a restarted worker gets its index's
port again).
"""

import argparse
import asyncio
import datetime
import logging
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Coroutine, Dict, List, Optional, Sequence, Set, Tuple

from .. import unlink_shared
from ..engine.methods import METHODS
from ..engine.settings import HANDOVERS, SETTING, SETTINGS, UNITS, flag_dest
from ..net import orca
from ..net.upstream import parse_host_port
from ..config import ConfigError
from ..cli.ctl import read_token
from ..config import load as load_config
from . import _admin, _fanout, _health
from ._accesslog import FORMATS, AccessLog
from ._gateway import Gateway
from ._proxy import XFF_MODES, Proxy

log = logging.getLogger("leastload.proxy")
WORKER_START_TIMEOUT = 60.0  # a worker not listening by then is killed (a failed start)
RESTART_FIRST, RESTART_MAX = 0.1, 10.0  # a dead worker's restart delay: doubling from the first to the max
STABLE_AFTER = 10.0  # a worker that listened this long before dying restarts after RESTART_FIRST again
START_FAILURES = 5  # a worker dying before it listens this many times in a row: the supervisor gives up


def _host_port(text: str) -> Tuple[str, int]:
    try:
        return parse_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _admin_address(text: str) -> Tuple[str, int]:
    """--admin HOST:PORT, or a bare PORT: on loopback (127.0.0.1)."""
    return _host_port(f"127.0.0.1:{text}" if text.isdigit() else text)


def _integer(low: int, high: int) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer in {low}..{high}, got {text!r}")
        return value
    return convert


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value <= 86400:  # Proxy's own bound; also rejects NaN
        raise argparse.ArgumentTypeError(f"expected seconds in (0, 86400], got {text!r}")
    return value


def _load_metric(text: str) -> Tuple[str, Tuple[int, int]]:
    """--load-metric NAME=WEIGHT[:THRESHOLD] -> (NAME, (WEIGHT, THRESHOLD))."""
    name, eq, rest = text.partition("=")
    weight, _, threshold = rest.partition(":")
    try:
        spec = (int(weight), int(threshold) if threshold else orca.NO_THRESHOLD)
        return name, orca.check_metric_table({name: spec})[name]
    except (ValueError, TypeError) as exc:
        raise argparse.ArgumentTypeError(f"NAME=WEIGHT[:THRESHOLD], got {text!r}: {exc}") from None


def _setting_flag(group: Any, name: str, **kw: Any) -> None:
    """The flag of the vserver setting `name`: its flag, default and help from the settings table;
    `kw`: this command's type, metavar, choices, or another default (None: the engine's)."""
    setting = SETTING[name]
    kw.setdefault("default", setting.default)
    if setting.flag_help is not None:
        kw["help"] = setting.flag_help.format(default=setting.default if kw["default"] is None else kw["default"])
    assert setting.flag is not None
    group.add_argument(setting.flag, **kw)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="leastload proxy",
        description="An asyncio HTTP/1.1 reverse proxy: every request picks its backend through the engine.",
        epilog="example:\n  leastload proxy --listen 127.0.0.1:8080 --method LEASTRESPONSETIME \\\n"
               "      --backend app1=127.0.0.1:9001 --backend app2=127.0.0.1:9002:2",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", type=_host_port, default=("127.0.0.1", 8080), metavar="HOST:PORT",
                   help="where clients connect (default 127.0.0.1:8080; port 0: any free port)")
    _setting_flag(p, "method", choices=METHODS, metavar="METHOD")
    p.add_argument("--backend", action="append", metavar="NAME=HOST:PORT[:WEIGHT]",
                   help="a backend (repeat for each); weight 1..100, default 1")
    p.add_argument("--config", metavar="FILE",
                   help="serve the HTTP lb vservers of a config (NetScaler lines, or TOML for a .toml name): "
                        "their addresses, services, methods, slow start and monitors; SIGHUP rereads it "
                        "(instead of --backend; docs/proxy.md, Operations)")
    g = p.add_argument_group("hash methods (each request's key: docs/proxy.md)")
    g.add_argument("--token-header", metavar="NAME",
                   help="TOKEN: the request header whose value is the token (needed with --method TOKEN; "
                        "a request without it hashes its client's address)")
    # the hash flags default to None: not given, the engine's default (the help shows it)
    _setting_flag(g, "hashlength", type=int, metavar="N", default=None)
    _setting_flag(g, "netmask", metavar="MASK", default=None)
    _setting_flag(g, "v6netmasklen", type=int, metavar="BITS", default=None)
    _setting_flag(g, "hash_seed", type=int, metavar="N", default=None)
    g = p.add_argument_group("requests")
    g.add_argument("--retries", type=int, default=2,
                   help="tries on other backends after a refused or reset connection (default 2)")
    g.add_argument("--connect-timeout", type=_seconds, default=3.0, metavar="SECONDS",
                   help="for the connection to a backend (default 3)")
    g.add_argument("--timeout", type=_seconds, default=30.0, metavar="SECONDS",
                   help="for the first response byte, and between response bytes (default 30): 504 after")
    g.add_argument("--pool-size", type=int, default=256, help="idle keep-alive connections kept per backend (default 256)")
    g = p.add_argument_group("client limits (what one client may send, and how slowly)")
    g.add_argument("--max-request-line", type=_integer(64, 1 << 20), default=8 << 10, metavar="BYTES",
                   help="longest request line (default 8192): 414 over it")
    g.add_argument("--max-header-size", type=_integer(256, 1 << 24), default=32 << 10, metavar="BYTES",
                   help="largest request head, request line and headers together (default 32768): 431 over it")
    g.add_argument("--max-headers", type=_integer(1, 10000), default=100, metavar="N",
                   help="most header fields in a request (default 100): 431 over it")
    g.add_argument("--max-body", type=_integer(0, 1 << 40), default=16 << 20, metavar="BYTES",
                   help="largest request body accepted (default 16 MiB; bodies are buffered so they can be retried)")
    g.add_argument("--header-timeout", type=_seconds, default=10.0, metavar="SECONDS",
                   help="a request's whole head must arrive within this (default 10): 408 after")
    g.add_argument("--body-timeout", type=_seconds, default=60.0, metavar="SECONDS",
                   help="a request's body must arrive within this once its head is in (default 60): 408 after")
    g.add_argument("--client-timeout", type=_seconds, default=60.0, metavar="SECONDS",
                   help="idle keep-alive client connections close after this (default 60)")
    g.add_argument("--max-connections", type=_integer(1, 1 << 20), default=None, metavar="N",
                   help="most client connections open at once (default: derived from the file-descriptor limit); "
                        "at the limit a new one is taken in place of the one waiting longest for its head")
    g.add_argument("--overload-connections", type=_integer(1, 1 << 20), default=None, metavar="N",
                   help="open client connections past which the header and idle timeouts shrink, linearly "
                        "to --overload-timeout at --max-connections (default: three quarters of it)")
    g.add_argument("--overload-timeout", type=_seconds, default=2.0, metavar="SECONDS",
                   help="what the header and idle timeouts shrink to at --max-connections (default 2)")
    g.add_argument("--linger-bytes", type=_integer(0, 1 << 30), default=256 << 10, metavar="BYTES",
                   help="after a last answer (413, 414, 431, a close), what the client may still send before "
                        "the connection is reset (default 262144; a quarter of it after 414 or 431; after 413, "
                        "the declared body too, up to 4 x --max-body)")
    g = p.add_argument_group("forwarding headers")
    g.add_argument("--xff", choices=XFF_MODES, default="append",
                   help="X-Forwarded-For: append the client's address to what the client sent, or replace "
                        "what it sent (for an edge proxy) (default append)")
    g.add_argument("--forwarded", action="store_true",
                   help="also add an RFC 7239 Forwarded header (default: off)")
    g.add_argument("--via", action="store_true", help="add a Via header (default: off)")
    g = p.add_argument_group("health monitors")
    g.add_argument("--health-check", choices=_health.KINDS, default="tcp",
                   help="probe per backend: tcp (connect), http (GET, 2xx/3xx) or none (default tcp)")
    g.add_argument("--health-path", default="/", help="path of the http probe (default /)")
    g.add_argument("--health-interval", type=_seconds, default=5.0, metavar="SECONDS", help="default 5")
    g.add_argument("--health-timeout", type=_seconds, default=2.0, metavar="SECONDS", help="default 2")
    g.add_argument("--health-fall", type=int, default=3, metavar="N", help="failed probes in a row for DOWN (default 3)")
    g.add_argument("--health-rise", type=int, default=1, metavar="N", help="passed probes in a row for UP (default 1)")
    g = p.add_argument_group("passive ejection")
    _setting_flag(g, "outlier_failures", type=int, default=5, metavar="K")  # the proxy ejects by default
    _setting_flag(g, "outlier_ejection_time", type=float, metavar="SECONDS")
    _setting_flag(g, "outlier_max_ejection_percent", type=int, metavar="P")
    g.add_argument("--outlier-keep-on-health", action="store_true",
                   help="an ejection lasts its whole time even when the backend's health probe passes "
                        "(default: a passed probe of an UP backend ends its ejection)")
    g = p.add_argument_group("slow start (a backend that comes back UP after DOWN)")
    _setting_flag(g, "new_service_request", type=int, metavar="N")
    _setting_flag(g, "new_service_request_unit", choices=UNITS)
    _setting_flag(g, "new_service_request_increment_interval", type=int, metavar="SECONDS")
    _setting_flag(g, "slow_start_handover", choices=HANDOVERS)
    _setting_flag(g, "slow_start_guard", type=float, metavar="FACTOR")
    _setting_flag(g, "startup_rr_factor", type=int, metavar="N")
    g = p.add_argument_group("load reported by the backends (ORCA's endpoint-load-metrics)")
    _setting_flag(g, "weights_from_utilization", action="store_true")
    g.add_argument("--load-metric", action="append", type=_load_metric, default=None, metavar="NAME=WEIGHT[:THRESHOLD]",
                   help="a CUSTOMLOAD metric from the reports (repeat for each): a field (cpu_utilization, "
                        "mem_utilization, application_utilization in percent; rps_fractional, eps) or "
                        "named_metrics.NAME, its weight 1..100 and the value at which a backend is left out")
    g = p.add_argument_group("running")
    g.add_argument("--admin", type=_admin_address, default=None, metavar="[HOST:]PORT",
                   help="the admin port: status, /metrics, /healthz, the runtime API (default: off; a bare "
                        "PORT is on 127.0.0.1; another address than loopback needs --admin-token-file)")
    g.add_argument("--admin-token-file", metavar="FILE",
                   help="the token the admin port's writes need (its first line); without it the admin "
                        "port is read-only")
    g.add_argument("--workers", type=int, default=1, metavar="N",
                   help="processes sharing the port (SO_REUSEPORT) and one engine in shared memory (default 1)")
    g.add_argument("--private-engines", action="store_true",
                   help="with --workers N: each worker balances with an engine of its own (its share of the "
                        "traffic only), as before shared engines; always so with --config")
    g.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto",
                   help="event loop: uvloop when installed (auto), or asyncio's own")
    g.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    g.add_argument("--access-log", default=None, metavar="FILE|-",
                   help="one line per request, appended to FILE ('-': standard output; default: none)")
    g.add_argument("--log-format", choices=FORMATS, default="combined",
                   help="the access log's format: Apache's combined with backend, ttfb, total and "
                        "retries appended, or one JSON object per line (default combined)")
    p.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # set for the workers
    # the workers' engine, in the shared segment the supervisor names; only worker 0 probes
    p.add_argument("--shared-engine", default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-probes", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(admin_token=None)  # read from --admin-token-file by main()
    return p


# what a config file says for a vserver: the flags that would say it too are refused beside --config
FILE_FLAGS = tuple(s.flag for s in SETTINGS if s.netscaler and s.flag)
# the TOML form's [proxy] keys that are flags of their own (the file's value unless the flag is given)
PROXY_TABLE_FLAGS = ("retries", "connect_timeout", "timeout", "client_timeout", "header_timeout", "body_timeout",
                     "max_body", "max_request_line", "max_header_size", "max_headers", "max_connections",
                     "overload_connections", "overload_timeout", "linger_bytes", "pool_size", "xff", "forwarded", "via", "admin", "access_log", "log_format", "log_level",
                     "workers")


def _given(parser: argparse.ArgumentParser, argv: Sequence[str]) -> Set[str]:
    """The dests of the options argv gives explicitly (`--opt V`, `--opt=V`, unambiguous prefixes)."""
    words = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    given = set()
    for action in parser._actions:
        for option in action.option_strings:
            if option in words or any(len(w) > 2 and option.startswith(w) for w in words):
                given.add(action.dest)
    return given


def _apply_proxy_table(args: argparse.Namespace, table: Dict[str, object], given: Set[str]) -> None:
    """The TOML form's [proxy] settings, where no flag gave the same setting."""
    for key, value in table.items():
        if key not in given and key in PROXY_TABLE_FLAGS:
            setattr(args, key, _admin_address(str(value)) if key == "admin" else value)


def _proxy_settings(args: argparse.Namespace) -> Dict[str, Any]:
    """Every Proxy keyword the flags give, but the backends, the method and the listen address."""
    flags = {s.name: getattr(args, flag_dest(s)) for s in SETTINGS if s.flag and s.name != "method"}
    return dict(
        retries=args.retries,
        connect_timeout=args.connect_timeout, timeout=args.timeout, client_timeout=args.client_timeout,
        max_body=args.max_body, max_request_line=args.max_request_line, max_header_size=args.max_header_size,
        max_headers=args.max_headers, header_timeout=args.header_timeout, body_timeout=args.body_timeout,
        max_connections=args.max_connections, overload_connections=args.overload_connections,
        overload_timeout=args.overload_timeout, linger_bytes=args.linger_bytes, xff=args.xff, forwarded=args.forwarded, via=args.via,
        pool_size=args.pool_size, health_check=args.health_check,
        health_path=args.health_path, health_interval=args.health_interval,
        health_timeout=args.health_timeout, health_fall=args.health_fall, health_rise=args.health_rise,
        health_ends_ejection=not args.outlier_keep_on_health,
        admin=args.admin, admin_token=args.admin_token, reuse_port=args.reuse_port,
        token_header=args.token_header, health_probes=not args.no_probes,
        load_metrics=None if args.load_metric is None else dict(args.load_metric),
        **({} if args.shared_engine is None else {"shared": args.shared_engine}),
        **{name: value for name, value in flags.items() if value is not None})  # None: a hash flag not given


def _proxy_from(args: argparse.Namespace) -> Proxy:
    return Proxy(args.backend, args.method, listen=args.listen, **_proxy_settings(args))


def _gateway_from(args: argparse.Namespace, listen: Optional[Tuple[str, int]]) -> Gateway:
    """The config's vservers, with the flags' settings but the vserver's own (method, slow start,
    hash options: the file's); the admin port is the gateway's, not one vserver's."""
    settings = _proxy_settings(args)
    for key in ("admin", "admin_token", *(s.name for s in SETTINGS if s.netscaler)):
        settings.pop(key, None)
    return Gateway(args.config, listen=listen, settings=settings)


async def _serve_logged(args: argparse.Namespace, proxy: Proxy) -> None:
    """Serves with the access log the flags ask for, opened in the serving process."""
    if args.access_log is not None:
        proxy.access_log = AccessLog.open(args.access_log, args.log_format)
    try:
        await _serve(proxy)
    finally:
        if proxy.access_log is not None:
            proxy.access_log.close()


async def _serve(proxy: Proxy) -> None:
    await proxy.start()
    host, port = proxy.address
    print(f"listening on {host}:{port}", flush=True)
    admin = proxy.admin_address
    if admin is not None:
        print(f"admin on http://{admin[0]}:{admin[1]}/leastload/status", flush=True)
        log.info("admin: GET http://%s:%d/leastload/status (and /metrics, /healthz)", *admin)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await proxy.close()


async def _serve_gateway(args: argparse.Namespace, gateway: Gateway) -> None:
    """The config's vservers: `listening on` per vserver, SIGHUP rereads the file."""
    access_log = AccessLog.open(args.access_log, args.log_format) if args.access_log is not None else None
    for proxy in gateway.proxies.values():
        proxy.access_log = access_log
    try:
        await gateway.start()
        # one line, as the supervisor of --workers prints it: every vserver's address
        print("listening on " + ", ".join(f"{p.address[0]}:{p.address[1]}" for p in gateway.proxies.values()),
              flush=True)
        for name, proxy in gateway.proxies.items():
            log.info("lb vserver %s on %s:%d", name, *proxy.address)
        admin_server = None
        if args.admin is not None:
            site = _admin.Site(gateway.proxies, args.admin_token, gateway.reload_and_log)
            admin_server = await _admin.start_site(site, *args.admin)
            host, port = admin_server.sockets[0].getsockname()[:2]
            print(f"admin on http://{host}:{port}/leastload/status", flush=True)
            log.info("admin: GET http://%s:%d/leastload/status (and /metrics, /healthz)", host, port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGHUP, gateway.reload_logged)
        try:
            await stop.wait()
        finally:
            if admin_server is not None:
                admin_server.close()
            await gateway.close()
    finally:
        if access_log is not None:
            access_log.close()


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


class _IsoFormatter(logging.Formatter):
    """Log times as ISO 8601 wall-clock times with their UTC offset (2026-12-02T01:40:00.123+00:00)."""

    def formatTime(self, record: logging.LogRecord, datefmt: Optional[str] = None) -> str:
        when = datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc).astimezone()
        return when.isoformat(timespec="milliseconds")


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


def _run_workers(args: argparse.Namespace, argv: List[str], gateway: Optional[Gateway] = None) -> int:
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


def _ignore_sigpipe() -> None:
    """A write to a connection the peer has reset fails with EPIPE (a connection error)
    instead of killing the process. `leastload`'s entry point sets SIGPIPE to SIG_DFL (for
    `leastload ... | head`). Under uvloop, a reset that arrives while a write is queued is
    read first, then libuv flushes the queue with write(2) to the dead socket: SIGPIPE. So
    each long-running command ignores it again once its arguments are parsed (--help still
    ends quietly in a pipe); the workers are such commands too."""
    if hasattr(signal, "SIGPIPE") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    args = parser.parse_args(argv)
    given = _given(parser, argv)
    config_table: Dict[str, object] = {}
    if args.config is not None:
        if args.backend:
            parser.error("--backend and --config: the backends of a config are its bound services")
        file_flags = sorted(f for f in FILE_FLAGS if f[2:].replace("-", "_") in given)
        if file_flags:
            parser.error(f"{', '.join(file_flags)} and --config: the config file sets that "
                         "(set lb vserver NAME -lbMethod, -newServiceRequest, -hashLength, -netmask)")
        try:
            config_table = dict(load_config(args.config).proxy)
        except ConfigError as exc:
            print(f"leastload proxy: {exc}", file=sys.stderr)
            return 2
        _apply_proxy_table(args, config_table, given)
    elif not args.backend:
        parser.error("one of --backend NAME=HOST:PORT (repeat for each) or --config FILE is needed")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_IsoFormatter("%(asctime)s %(name)s[%(process)d] %(levelname)s %(message)s"))
    logging.basicConfig(level=args.log_level, handlers=[handler])
    if args.workers < 1 or args.workers > 256:
        parser.error(f"--workers must be in 1..256, got {args.workers}")
    if args.config is None and args.method == "TOKEN" and args.token_header is None:
        parser.error("--method TOKEN needs --token-header NAME (the request header whose value is the token)")
    if args.config is None and args.token_header is not None and args.method != "TOKEN":
        parser.error(f"--token-header: only with --method TOKEN, got --method {args.method}")
    if args.workers > 1 and not hasattr(socket, "SO_REUSEPORT"):
        parser.error("--workers above 1 needs SO_REUSEPORT, which this system does not have")
    if args.admin_token_file is not None:
        try:
            args.admin_token = read_token(args.admin_token_file)
        except OSError as exc:
            parser.error(f"--admin-token-file: cannot read {args.admin_token_file!r}: {exc.strerror}")
        if not args.admin_token:
            parser.error(f"--admin-token-file: {args.admin_token_file!r} has no token on its first line")
    gateway: Optional[Gateway] = None
    try:
        # with --workers, only to check the settings before any worker starts
        if args.config is not None:
            gateway = _gateway_from(args, args.listen if "listen" in given else None)
            for warning in gateway.warnings:
                log.warning("%s", warning)
        else:
            proxy = _proxy_from(args)
    except ConfigError as exc:
        print(f"leastload proxy: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    if args.access_log not in (None, "-"):
        try:  # refused now, once, rather than by every worker
            open(args.access_log, "a", encoding="utf-8").close()
        except OSError as exc:
            parser.error(f"--access-log: cannot open {args.access_log!r} for appending: {exc.strerror}")
    _ignore_sigpipe()
    if args.workers > 1:
        return _run_workers(args, argv, gateway)
    try:
        _run_loop(args.loop, _serve_gateway(args, gateway) if gateway is not None else _serve_logged(args, proxy))
    except OSError as exc:  # a port in use, an address not here: the operator's to fix, as a usage error
        print(f"leastload proxy: cannot listen: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
