"""`leastload proxy`: the command line (its flags, a --config's [proxy] table, serving one
proxy or a config's vservers in this process); `--workers N` hands over to _supervisor.py.
The proxy's own flags come from its settings table (config/proxy_settings.py), the
vserver's from the engine's (engine/settings.py).
"""

import argparse
import asyncio
import datetime
import logging
import signal
import socket
import sys
from typing import Any, Callable, Dict, Optional, Sequence, Set, Tuple

from ..engine.methods import METHODS
from ..engine.settings import HANDOVERS, SETTING, SETTINGS, UNITS, flag_dest
from ..net import orca
from ..net.upstream import parse_host_port
from ..config import ConfigError, proxy_settings
from ..cmdline import UserError, ignore_sigpipe, read_token, serve_until_stopped
from ..config import load as load_config
from . import _admin, _supervisor
from ._accesslog import AccessLog
from ._gateway import Gateway
from ._proxy import Proxy

log = logging.getLogger("leastload.proxy")


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


def _header_name(text: str) -> str:
    if not proxy_settings.is_header_name(text):
        raise argparse.ArgumentTypeError(f"expected a header name (letters, digits and -), got {text!r}")
    return text


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value <= proxy_settings.SECONDS_MAX:  # the table's bound; also rejects NaN
        raise argparse.ArgumentTypeError(f"expected seconds in (0, {proxy_settings.SECONDS_MAX}], got {text!r}")
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


def _table_flags(group: Any, name: str) -> None:
    """The flags of the proxy's settings in group `name`, each from its row of the table
    (config/proxy_settings.py): its type and bounds, default, dest (the setting's name) and help."""
    for s in proxy_settings.SETTINGS:
        if s.group != name or s.flag is None:
            continue
        kw: Dict[str, Any] = {"dest": s.name, "default": s.default}
        if s.kind == "bool":
            kw["action"] = "store_false" if s.negated else "store_true"
        elif s.kind == "int":
            assert s.low is not None and s.high is not None
            kw["type"] = _integer(s.low, s.high)
        elif s.kind == "seconds":
            kw["type"] = _seconds
        elif s.kind == "choice":
            kw["choices"] = s.choices
        elif s.kind == "address":
            kw["type"] = _admin_address
        elif s.kind == "files":
            kw["action"], kw["default"] = "append", None  # repeated: None when not given
        elif s.kind == "header":
            kw["type"] = _header_name
        if s.metavar is not None:
            kw["metavar"] = s.metavar
        kw["help"] = s.help.format(default=s.default) if s.default is not None else s.help
        group.add_argument(s.flag, **kw)


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
    for group in (proxy_settings.GROUPS[:4]):  # requests, client limits, forwarding headers, health monitors
        _table_flags(p.add_argument_group(group), group)
    g = p.add_argument_group("passive ejection")
    _setting_flag(g, "outlier_failures", type=int, default=5, metavar="K")  # the proxy ejects by default
    _setting_flag(g, "outlier_ejection_time", type=float, metavar="SECONDS")
    _setting_flag(g, "outlier_max_ejection_percent", type=int, metavar="P")
    _table_flags(g, "passive ejection")
    g = p.add_argument_group("slow start (a backend newly bound, or back UP after DOWN)")
    _setting_flag(g, "new_service_request", type=int, metavar="N")
    _setting_flag(g, "new_service_request_unit", choices=UNITS)
    _setting_flag(g, "new_service_request_increment_interval", type=int, metavar="SECONDS")
    _setting_flag(g, "slow_start_handover", choices=HANDOVERS)
    _setting_flag(g, "slow_start_guard", type=float, metavar="FACTOR")
    _setting_flag(g, "startup_rr_factor", type=int, metavar="N",  # the engine's table has no help for it
                  help="the first N picks after the method is set (or changed) go round robin, while "
                       "the method's counters are still empty (default 0: none)")
    g = p.add_argument_group("load reported by the backends (ORCA's endpoint-load-metrics)")
    _setting_flag(g, "weights_from_utilization", action="store_true")
    g.add_argument("--load-metric", action="append", type=_load_metric, default=None, metavar="NAME=WEIGHT[:THRESHOLD]",
                   help="a CUSTOMLOAD metric from the reports (repeat for each): a field (cpu_utilization, "
                        "mem_utilization, application_utilization in percent; rps_fractional, eps) or "
                        "named_metrics.NAME, its weight 1..100 and the value at which a backend is left out")
    edge = proxy_settings.GROUPS[6]  # TLS, the PROXY protocol
    _table_flags(p.add_argument_group(edge), edge)
    g = p.add_argument_group("running")
    _table_flags(g, "running")
    g.add_argument("--admin-token-file", metavar="FILE",
                   help="the token the admin port's writes need (its first line); without it the admin "
                        "port is read-only")
    g.add_argument("--private-engines", action="store_true",
                   help="with --workers N: each worker balances with an engine of its own, which sees only "
                        "the traffic of its worker (by default the workers share one engine; --config "
                        "always gives each worker its own)")
    g.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto",
                   help="event loop: uvloop when installed (auto), or asyncio's own")
    p.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # set for the workers
    # the workers' engine, in the shared segment the supervisor names; only worker 0 probes
    p.add_argument("--shared-engine", default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-probes", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(admin_token=None)  # read from --admin-token-file by main()
    return p


# what a config file says for a vserver: the flags that would say it too are refused beside --config
FILE_FLAGS = tuple(s.flag for s in SETTINGS if s.netscaler and s.flag)
# the TOML form's [proxy] keys that are flags of their own (the file's value unless the flag is given)
PROXY_TABLE_FLAGS = tuple(s.name for s in proxy_settings.SETTINGS if s.toml is not None and s.flag is not None)


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
    table = {s.name: getattr(args, s.name) for s in proxy_settings.SETTINGS if s.keyword and s.flag is not None}
    for s in proxy_settings.SETTINGS:  # a repeated flag not given: the table's default
        if s.kind == "files" and table.get(s.name) is None:
            table[s.name] = s.default
    return dict(
        **table,
        admin_token=args.admin_token, reuse_port=args.reuse_port,
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
    # the handlers before the `listening on` line: whoever waits for it may signal at once
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, proxy.reload_certificates)  # TLS: the files read again
    host, port = proxy.address
    print(f"listening on {host}:{port}", flush=True)
    admin = proxy.admin_address
    if admin is not None:
        print(f"admin on http://{admin[0]}:{admin[1]}/leastload/status", flush=True)
        log.info("admin: GET http://%s:%d/leastload/status (and /metrics, /healthz)", *admin)
    await stop.wait()
    await proxy.close()


async def _serve_gateway(args: argparse.Namespace, gateway: Gateway) -> None:
    """The config's vservers: `listening on` per vserver, SIGHUP rereads the file."""
    access_log = AccessLog.open(args.access_log, args.log_format) if args.access_log is not None else None
    for proxy in gateway.proxies.values():
        proxy.access_log = access_log
    try:
        await gateway.start()
        # the handlers before the `listening on` line: whoever waits for it may signal at once
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGHUP, gateway.reload_logged)
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
        try:
            await stop.wait()
        finally:
            if admin_server is not None:
                admin_server.close()
            await gateway.close()
    finally:
        if access_log is not None:
            access_log.close()


class _IsoFormatter(logging.Formatter):
    """Log times as ISO 8601 wall-clock times with their UTC offset (2026-12-02T01:40:00.123+00:00)."""

    def formatTime(self, record: logging.LogRecord, datefmt: Optional[str] = None) -> str:
        when = datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc).astimezone()
        return when.isoformat(timespec="milliseconds")


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
    except (ConfigError, UserError) as exc:  # a bad certificate or key among them: one line
        print(f"leastload proxy: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    if args.access_log not in (None, "-"):
        try:  # refused now, once, rather than by every worker
            open(args.access_log, "a", encoding="utf-8").close()
        except OSError as exc:
            parser.error(f"--access-log: cannot open {args.access_log!r} for appending: {exc.strerror}")
    ignore_sigpipe()  # the workers are such commands too: each calls it
    if args.workers > 1:
        return _supervisor.run_workers(args, argv, gateway)
    return serve_until_stopped("leastload proxy", _serve_gateway(args, gateway) if gateway is not None
                               else _serve_logged(args, proxy), args.loop)


if __name__ == "__main__":
    sys.exit(main())
