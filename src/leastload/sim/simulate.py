"""`leastload simulate` (main below): a config's vservers under a workload on a
virtual clock. The simulation itself (`simulate`, `Simulation`) is in steady.py,
below the runs (runs.py) and the report (report.py) this command puts together;
both names are importable from here as before (steady.py shows their use).
"""
import math
from collections.abc import Sequence
from typing import Any, Optional

from .steady import Simulation, simulate

__all__ = ["Simulation", "simulate", "main"]


USAGE_NOTE = """CONFIG is NetScaler CLI lines (or TOML when it ends in .toml); without one, a
vserver "vserver" with services S1..Sn (--services, --method, --slow-start,
--new). Events: --event T:ACTION:SERVICE, ACTION one of bind, unbind, down,
up, out_of_service (as many as needed). docs/cli.md has the details."""


def _number(flag: str, text: Optional[str], default: float, **check: Any) -> float:
    from ..cmdline import parse_number

    return default if text is None else parse_number(flag, text, **check)


def _default_config(args: Any, duration: int, events: list[Any]) -> Any:
    """The vserver of the flags when there is no CONFIG: S1..Sn, --method, --slow-start, --new."""
    from ..cmdline import UserError
    from ..engine.methods import METHODS
    from ..config import Binding, Config, Service, VServer
    from ..config.model import MAX_INCREMENT_INTERVAL, UNITS
    from .workload_file import Event

    n = int(_number("--services", args.services, 4, integer=True, low=1, high=10_000, low_inclusive=True))
    method = (args.method or "ROUNDROBIN").upper()
    if method not in METHODS:
        raise UserError(f"--method: must be one of {', '.join(METHODS)}, got {args.method}")
    config = Config(source="<flags>")
    vs = VServer(name="vserver", service_type="HTTP", lb_method=method)
    for i in range(1, n + 1):
        config.services.append(Service(name=f"S{i}", host=f"10.0.{i // 250}.{i % 250 + 1}",
                                       service_type="HTTP", port=80))
        vs.bindings.append(Binding(service=f"S{i}"))
    if args.slow_start:
        rate_text, unit_text, interval_text = args.slow_start
        unit = unit_text.upper()
        if unit not in UNITS:
            raise UserError(f"--slow-start: UNIT must be one of {', '.join(UNITS)}, got {unit_text}")
        vs.new_service_request = int(_number("--slow-start", rate_text, 0, integer=True, low=0,
                                             high=100 if unit == "PERCENT" else 0xFFFFFFFE, low_inclusive=True))
        vs.new_service_request_unit = unit
        vs.new_service_request_increment_interval = int(_number(
            "--slow-start", interval_text, 0, integer=True, low=0, high=MAX_INCREMENT_INTERVAL, low_inclusive=True))
    if args.new is not None:
        at = _number("--new", args.new, 0.0, integer=False, low=0, low_inclusive=True)
        if not at < duration:
            raise UserError(f"--new: must be before the end of the run (--duration {duration}), got {args.new}")
        config.services.append(Service(name="new", host="10.0.255.1", service_type="HTTP", port=80))
        events.append(Event(at, "bind", "new", f"--event {args.new}:bind:new"))
    config.vservers.append(vs)
    return config


def _parse_event(text: str) -> Any:
    from ..cmdline import UserError
    from .workload_file import ACTIONS, parse_event

    when, sep, rest = text.partition(":")
    try:
        at = float(when)
        if not (math.isfinite(at) and at >= 0):
            raise ValueError
    except ValueError:
        raise UserError(f"--event: must be T:ACTION:SERVICE with T seconds >= 0, got {text}") from None
    try:
        return parse_event(rest, at, f"--event {text}")
    except ValueError:
        raise UserError(f"--event: must be T:ACTION:SERVICE with ACTION one of {', '.join(ACTIONS)}, "
                        f"got {text}") from None


def _sweep(args: Any) -> int:
    """`--sweep FILE`: the cells of FILE, the summary printed, every row to --csv."""
    from ..cmdline import UserError
    from . import report, sweep_file

    if args.sweep is None:
        raise UserError(f"--scheduler: only with --sweep FILE, got {args.scheduler}")
    if args.config is not None:
        raise UserError(f"CONFIG: not with --sweep (the sweep file names its configs), got {args.config}")
    for flag in ("workload", "duration", "rate", "event", "vserver", "plot", "json", "every", "seed", "keys",
                 "key_skew", "method", "services", "slow_start", "new"):
        value = getattr(args, flag)
        if value not in (None, [], _flag_default(flag)):
            shown = " ".join(value) if isinstance(value, list) else value
            raise UserError(f"--{flag.replace('_', '-')}: not with --sweep (the sweep file sets the runs), "
                            f"got {shown}")
    if args.implementation != "c":
        raise UserError(f"--implementation: a sweep runs the C engine, got {args.implementation}")
    _check_output("--csv", args.csv)
    table = sweep_file.run(args.sweep, args.scheduler)
    print(sweep_file.summary(table))
    if args.csv is not None:
        report.write_atomically(args.csv, table.to_csv())
    return 0


def _flag_default(flag: str) -> Any:
    """A flag's value when not given (the workload's is a name, not None)."""
    from . import runs

    return runs.STEADY if flag == "workload" else None


def _check_output(flag: str, path: Optional[str]) -> None:
    import os

    from ..cmdline import UserError

    if path is None:
        return
    if os.path.isdir(path):
        raise UserError(f"{flag}: is a directory, got {path}")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UserError(f"{flag}: no such directory {os.path.dirname(path) or '.'}, got {path}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`leastload simulate`: a config's vservers under a workload on a virtual clock."""
    import argparse
    import os
    import sys

    from ..cmdline import OneLineParser, UserError
    from ..config import check_supported, load
    from . import report, runs, workload_file
    from .progress import Progress

    p = OneLineParser(prog="leastload simulate", description=main.__doc__, epilog=USAGE_NOTE,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", nargs="?", metavar="CONFIG", help="NetScaler CLI lines, or TOML (.toml)")
    p.add_argument("--workload", default=runs.STEADY, metavar="NAME|FILE",
                   help=f"{', '.join(runs.WORKLOADS)} (default {runs.STEADY}), or a .csv/.json workload file")
    p.add_argument("--duration", metavar="S", help="whole seconds to run (default 60; a file: up to its last row)")
    p.add_argument("--rate", metavar="R", help="requests per second (default 100; not with a workload file)")
    p.add_argument("--event", action="append", default=[], metavar="T:ACTION:SERVICE",
                   help="bind, unbind, down, up or out_of_service a service at time T (repeatable)")
    p.add_argument("--vserver", action="append", metavar="NAME", help="simulate only this vserver (repeatable)")
    p.add_argument("--plot", metavar="OUT.png", help="requests per second per service, as a PNG (extra: plot)")
    p.add_argument("--csv", metavar="OUT.csv", help="requests per service per second, as CSV")
    p.add_argument("--json", metavar="OUT.json", help="everything, as JSON")
    p.add_argument("--every", metavar="N", help="also print the per-second table, every Nth second")
    p.add_argument("--seed", metavar="N", help="seed of a generated workload and of its keys (default 0)")
    p.add_argument("--keys", metavar="N",
                   help="hash methods: distinct request keys generated (default 1000; not with a workload file)")
    p.add_argument("--key-skew", metavar="S",
                   help="hash methods: Zipf exponent of the generated keys' popularity (default 1; 0: uniform)")
    p.add_argument("--strict", action="store_true", help="config lines leastload does not model are errors")
    p.add_argument("--implementation", choices=("c", "python"), default="c",
                   help="the C engine (default) or the pure-Python reference")
    sweeps = p.add_argument_group("a sweep: configs x workloads x seeds (leastload.sim.sweep)")
    sweeps.add_argument("--sweep", metavar="FILE.toml",
                        help="run the sweep FILE describes instead of one CONFIG (docs/cli.md); with --csv")
    sweeps.add_argument("--scheduler", metavar="ADDRESS",
                        help="a Dask scheduler (tcp://HOST:PORT) whose workers run the cells (extra: sweep)")
    flags = p.add_argument_group("without a CONFIG")
    flags.add_argument("--method", help="the vserver's method (default ROUNDROBIN)")
    flags.add_argument("--services", metavar="N", help="services S1..SN bound at t = 0 (default 4)")
    flags.add_argument("--slow-start", nargs=3, metavar=("RATE", "UNIT", "INTERVAL"),
                       help="newServiceRequest, its unit (PER_SECOND or PERCENT), the increment interval")
    flags.add_argument("--new", metavar="T", help="bind one more service, 'new', at time T")
    args = p.parse_args(argv)

    if args.sweep is not None or args.scheduler is not None:
        return _sweep(args)
    if args.config is not None:
        for flag in ("method", "services", "slow_start", "new"):
            if getattr(args, flag) is not None:
                name = "--" + flag.replace("_", "-")
                value = getattr(args, flag)
                shown = " ".join(value) if isinstance(value, list) else value
                raise UserError(f"{name}: not with a CONFIG (the config sets the vserver), got {shown}")
    every = int(_number("--every", args.every, 0, integer=True, low=1, low_inclusive=True))
    seed = int(_number("--seed", args.seed, 0, integer=True, low=0, high=2**63 - 1, low_inclusive=True))
    is_file = args.workload not in runs.WORKLOADS
    from .keys import DEFAULT_DISTINCT, DEFAULT_SKEW, HASHED, MAX_DISTINCT

    for flag, value in (("--keys", args.keys), ("--key-skew", args.key_skew)):
        if is_file and value is not None:
            raise UserError(f"{flag}: not with a workload file (its key column gives the keys), got {value}")
    key_options = runs.KeyOptions(
        int(_number("--keys", args.keys, DEFAULT_DISTINCT, integer=True, low=1, high=MAX_DISTINCT,
                    low_inclusive=True)),
        _number("--key-skew", args.key_skew, DEFAULT_SKEW, integer=False, low=0, high=10, low_inclusive=True),
        seed)
    if is_file and not args.workload.lower().endswith((".csv", ".json")):
        raise UserError(f"--workload: must be one of {', '.join(runs.WORKLOADS)} or a .csv or .json file, "
                        f"got {args.workload}")
    if is_file and args.rate is not None:
        raise UserError(f"--rate: not with a workload file (its rows are the requests), got {args.rate}")
    rate = _number("--rate", args.rate, 100, integer=False, low=0, high=10**7)
    if args.workload == runs.STEADY and rate != int(rate):
        raise UserError(f"--rate: must be a whole number of requests per second for the steady workload, "
                        f"got {args.rate}")
    for flag in ("--plot", "--csv", "--json"):
        _check_output(flag, getattr(args, flag[2:]))
    if args.plot is not None:
        from .plot import require_matplotlib

        require_matplotlib()  # before any work: nothing half-done
    events = [_parse_event(text) for text in args.event]
    workload = workload_file.read(args.workload) if is_file else None
    if workload is not None:
        events += workload.events
    if args.duration is not None:
        duration = int(_number("--duration", args.duration, 60, integer=True, low=1, high=10**7,
                               low_inclusive=True))
    else:
        duration = 60 if workload is None else max(1, math.floor(workload.end) + 1)
    limit = runs.MAX_STEADY_REQUESTS if args.workload == runs.STEADY else runs.MAX_TRACE_REQUESTS
    if workload is None and rate * duration > limit:
        raise UserError(f"--rate: --rate x --duration must be at most {limit} requests for the {args.workload} "
                        f"workload, got {rate:g} x {duration}")
    if workload is not None and workload.time and not workload.time[-1] < duration:
        raise UserError(f"--duration: the workload file has requests until {workload.time[-1]:g} s, "
                        f"past the end of the run, got {duration}")
    if args.config is None:
        config = _default_config(args, duration, events)
    else:
        config = load(args.config, strict=args.strict)
    for warning in config.warnings:
        print(warning, file=sys.stderr)
    chosen = config.vservers
    if args.vserver:
        missing = [n for n in args.vserver if config.vserver(n) is None]
        if missing:
            raise UserError(f"--vserver: no lb vserver named {missing[0]!r} in {config.source}")
        chosen = [v for v in config.vservers if v.name in args.vserver]
    if not chosen:
        raise UserError(f"CONFIG: {config.source} has no lb vserver to simulate")
    for vs in chosen:  # every check before the first run
        check_supported(config, vs)
        if vs.lb_method in HASHED and workload is None and rate * duration > runs.MAX_TRACE_REQUESTS:
            # a key and a pick kept per request: the generated traces' limit
            raise UserError(f"--rate: --rate x --duration must be at most {runs.MAX_TRACE_REQUESTS} requests "
                            f"for a hash method (lb vserver {vs.name!r}), got {rate:g} x {duration}")
        if workload is not None:
            runs.file_keys(vs, workload)  # the key column, checked for this vserver's method
        runs.check_events(config, vs, events, duration)
        if not vs.bindings and not any(e.action == "bind" for e in events):
            raise UserError(f"CONFIG: lb vserver {vs.name!r} has no service bound and no --event binds one")
    import importlib

    impl = importlib.import_module("leastload.engine.reference" if args.implementation == "python"
                                   else "leastload.engine.native")
    progress = Progress(duration * len(chosen), "simulate")
    results = []
    for k, vs in enumerate(chosen):
        if args.workload == runs.STEADY:
            done = k * duration
            results.append(runs.run_steady(config, vs, impl, int(rate), duration, events,
                                           on_second=lambda i: progress.update(done + i), key_options=key_options))
        else:
            results.append(runs.run_trace(config, vs, impl, duration, events,
                                          None if is_file else args.workload, rate, seed, workload, key_options))
            progress.update((k + 1) * duration)
    progress.close()

    what = (f"workload {args.workload}" if is_file
            else f"{args.workload} workload, {rate:g} requests/s")
    for run in results:
        if every:
            print(report.table(run, every))
        print(report.summary(run, f"lb vserver {run.vserver} ({run.method}), {what}, {duration} s"))
    settings = {"config": args.config, "workload": args.workload, "duration": duration,
                "rate": None if is_file else rate, "seed": seed, "implementation": args.implementation}
    if args.csv is not None:
        report.write_atomically(args.csv, report.csv_text(results))
    if args.json is not None:
        report.write_atomically(args.json, report.json_text(results, settings))
    if args.plot is not None:
        from .plot import Panel, save

        panels = [Panel(title=f"lb vserver {r.vserver} ({r.method})", start=r.start, series=r.series(),
                        events=tuple((e.time, f"{e.action} {e.service}") for e in r.events)) for r in results]
        save(panels, args.plot, title=f"{os.path.basename(args.config or 'leastload simulate')}: {what}")
    return 0
