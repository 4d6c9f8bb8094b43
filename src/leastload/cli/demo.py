"""`leastload demo`: the vendor's worked examples, replayed by the engine.

Each table is built from scratch on a virtual clock, the engine picks every
request, and the rows print like the vendor's own tables (service chosen,
its N or Nw before, after). Then the two slow-start tables, simulated.
"""

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Optional

from leastload.sim.simulate import Simulation, simulate

SERVICES = ("Service-HTTP-1", "Service-HTTP-2", "Service-HTTP-3")

# (title, method, weights); every table starts from the vendor example state
TABLES = (
    ("Least bandwidth (bytes in the last 14 s), 1 unit per request", "LEASTBANDWIDTH", (1, 1, 1)),
    ("Least bandwidth, weights 2, 3, 4: Nw = N * 10000 / weight", "LEASTBANDWIDTH", (2, 3, 4)),
    ("Least packets, weights 2, 3, 4", "LEASTPACKETS", (2, 3, 4)),
    ("Least response time: N = active transactions x TTFB", "LEASTRESPONSETIME", (1, 1, 1)),
    ("Least response time, weights 2, 3, 4", "LEASTRESPONSETIME", (2, 3, 4)),
)


def _vserver(impl: ModuleType, method: str, weights: tuple[int, ...]) -> Any:
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer(method, clock=clock)
    for name, weight in zip(SERVICES, weights):
        vs.bind(name, weight=weight)
    if method == "LEASTRESPONSETIME":
        # 3 active x TTFB 2 s, 7 x 1 s, 0 x 2 s, as in the vendor's example
        for name, ttfb, active in zip(SERVICES, (2.0, 1.0, 2.0), (3, 7, 0)):
            vs.begin(name)
            vs.finish(name, ttfb=ttfb, status=200)
            for _ in range(active):
                vs.begin(name)
    else:
        field = "bytes" if method == "LEASTBANDWIDTH" else "packets"
        for name, n in zip(SERVICES, (3, 5, 2)):
            vs.record(name, **{field: n})
    return vs


def _table(impl: ModuleType, title: str, method: str, weights: tuple[int, ...], requests: int = 8) -> str:
    vs = _vserver(impl, method, weights)
    weighted = weights != (1, 1, 1)
    value = vs.score if weighted else vs.load
    label = "Nw" if weighted else "N"
    lines = [title, f"  {'Request':<10} {'Service selected':<18} {label + ' before':>12} {label + ' after':>12}"]
    field = "bytes" if method == "LEASTBANDWIDTH" else "packets"
    for r in range(1, requests + 1):
        before = {name: value(name) for name in SERVICES}
        chosen = vs.select()
        if method in ("LEASTBANDWIDTH", "LEASTPACKETS"):
            vs.record(chosen, **{field: 1})
        lines.append(f"  Request-{r:<2} {chosen:<18} {_fmt(before[chosen]):>12} {_fmt(value(chosen)):>12}")
    return "\n".join(lines)


def _fmt(x: object) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if isinstance(x, float) else str(x)


AUTOMATED_SECONDS = 60


def automated(impl: ModuleType, seconds: int = AUTOMATED_SECONDS) -> Simulation:
    """The vendor's automated slow-start scenario: 100 req/s round robin over four
    services; Service5 bound at t = 0 with +4 req/s every 10 s."""
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer("ROUNDROBIN", clock=clock)
    for i in range(1, 5):
        vs.bind(f"Service{i}")
    vs.set(new_service_request=4, new_service_request_unit="PER_SECOND", new_service_request_increment_interval=10)
    return simulate(vs, clock, rate=100, duration=seconds, events=[(0, "bind", "Service5")])


def write_chart(impl: ModuleType, path: str) -> Any:
    """The automated scenario as a PNG (the README's figure; needs the plot extra)."""
    from leastload.sim.plot import Panel, save

    sim = automated(impl)
    series = {name: [int(c) for c in sim.of(name)] for name in sim.services}
    panel = Panel(title="100 requests/s round robin; Service5 bound at t = 0, "
                        "-newServiceRequest 4 PER_SECOND every 10 s",
                  start=sim.start, series=series, events=((0.0, "bind Service5"),))
    return save([panel], path, title="Automated slow start: requests per second per service")


def _slow_start(impl: ModuleType) -> str:
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer("ROUNDROBIN", clock=clock)
    vs.bind("Service1")
    vs.bind("Service2")
    manual = simulate(vs, clock, rate=240, duration=4, events=[
        (0, "set", {"new_service_request": 10}), (0, "bind", "Service3"),
        (1, "set", {"new_service_request": 20}),
        (2, "set", {"new_service_request": 40}), (2, "bind", "Service4"),
        (3, "set", {"new_service_request": 0})])
    auto = automated(impl, 51)
    rows = [auto.at(t) for t in range(0, 51, 10)]
    auto_lines = ["  t (s)  " + "".join(f"{t:>6}" for t in range(0, 51, 10))]
    for name in auto.services:
        auto_lines.append(f"  {name:<8}" + "".join(f"{row.get(name, 0):>6}" for row in rows))
    return ("Slow start, manual: 240 req/s round robin; rate 10, 20, 40 (Service4 bound), 0\n"
            + "\n".join("  " + line for line in manual.table().splitlines())
            + "\n\nSlow start, automated: 100 req/s, Service5 bound at t = 0, +4 req/s every 10 s\n"
            + "\n".join(auto_lines))


def main(argv: Optional[Sequence[str]] = None) -> int:
    from ..cmdline import OneLineParser, UserError

    parser = OneLineParser(prog="leastload demo", description=__doc__.splitlines()[0])
    parser.add_argument("--implementation", choices=("c", "python"), default="c",
                        help="the C engine (default) or the pure-Python reference")
    parser.add_argument("--plot", metavar="OUT.png",
                        help="also draw the automated slow-start scenario as a PNG (extra: plot)")
    args = parser.parse_args(argv)
    if args.plot is not None:
        import os

        from leastload.sim.plot import require_matplotlib

        require_matplotlib()
        if os.path.isdir(args.plot) or not os.path.isdir(os.path.dirname(os.path.abspath(args.plot))):
            raise UserError(f"--plot: must be a file in an existing directory, got {args.plot}")
    impl = importlib.import_module("leastload.engine.reference" if args.implementation == "python"
                                   else "leastload.engine.native")
    print(f"leastload demo, {args.implementation} engine\n")
    for title, method, weights in TABLES:
        print(_table(impl, title, method, weights))
        print()
    print(_slow_start(impl))
    if args.plot is not None:
        write_chart(impl, args.plot)
        print(f"\nThe automated scenario, drawn: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
