"""The replica study (docs/replicas.md): its cells on any executor, a summary, a chart.

    python -m leastload.sim.replicas --out docs/images/replicas.png > table.md

The simulation of one cell is `leastload.sim.replica_sim` (its names are
re-exported here: `Model`, `Backend`, `simulate`, `run_cell`, `COLUMNS`, ...).
The cells run through `leastload.sim.sweep.run_cells`: a local process pool, or
any `concurrent.futures.Executor` (Dask's `Client.get_executor()` too).
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .replica_sim import (COLUMNS, IMPLEMENTATIONS, MAX_REPLICAS, METHODS, MODES, SCENARIOS, SPREADERS, Backend,
                          Model, Run, _check_cell, run_cell, simulate)

__all__ = ["COLUMNS", "IMPLEMENTATIONS", "MAX_REPLICAS", "METHODS", "MODES", "SCENARIOS", "SPREADERS", "Backend",
           "Model", "Run", "run_cell", "simulate", "cells", "study", "Line", "summary", "summary_text", "figure",
           "save_figure", "main"]

STUDY_METHODS = (("LEASTCONNECTION", False), ("LEASTCONNECTION", True), ("ROUNDROBIN", False), ("ROUNDROBIN", True),
                 ("LEASTRESPONSETIME", False), ("LEASTRESPONSETIME", True), ("LEASTBANDWIDTH", False),
                 ("LEASTBANDWIDTH", True), ("CUSTOMLOAD", True))
STUDY_REPLICAS = (2, 4, 8, 16)
STUDY_SEEDS = 5
STUDY_MODEL = Model(duration=120, warmup=40)

Cell = Tuple[str, str, bool, str, int, str, int, Model]


def cells(variants: Sequence[Tuple[str, bool]] = STUDY_METHODS, replicas: Sequence[int] = STUDY_REPLICAS,
          spreaders: Sequence[str] = SPREADERS, seeds: Sequence[int] = tuple(range(STUDY_SEEDS)),
          model: Model = STUDY_MODEL) -> List[Cell]:
    """The study's cells: per scenario, (method, reports) variant and seed, the global
    engine once and then R replicas for each R and spreader. R = 1 is left to the global
    engine: one replica makes its picks exactly (tests/sim/test_replicas.py)."""
    if not variants or not replicas or not spreaders or not seeds:
        raise ValueError("variants, replicas, spreaders and seeds must each be non-empty, got "
                         f"{len(variants)}, {len(replicas)}, {len(spreaders)}, {len(seeds)} items")
    out: List[Cell] = []
    for scenario in SCENARIOS:
        for method, reports in variants:
            for seed in seeds:
                out.append((scenario, method, reports, "global", 1, "random", seed, model))
                out.extend((scenario, method, reports, "replicas", r, s, seed, model)
                           for r in replicas for s in spreaders)
    for cell in out:  # every argument checked before anything runs
        _check_cell(*cell, "c")
    return out


def study(cell_list: Optional[Sequence[Cell]] = None, *, executor: Any = None,
          on_done: Optional[Any] = None) -> Any:
    """The rows of every cell (default: `cells()`) as a `leastload.sim.sweep.Table` with
    COLUMNS, in cell order, run through `leastload.sim.sweep.run_cells`: a local process
    pool when executor is None, else any concurrent.futures.Executor (Dask's
    `Client.get_executor()` too). `on_done(n)`: called as the n-th cell finishes."""
    from .sweep import Table, run_cells

    todo = cells() if cell_list is None else list(cell_list)
    rows: List[Dict[str, Any]] = []
    for cell_rows in run_cells(run_cell, todo, executor, on_done):
        rows.extend(cell_rows)
    return Table(rows, COLUMNS)


@dataclass(frozen=True)
class Line:
    """One line of the summary: a (method, reports, R, spreader) over the seeds, means."""

    method: str
    reports: bool
    replicas: Optional[int]  # None: the global engine
    spreader: str
    seeds: int
    slow_share: float        # the slowest backend's share of the requests (steady)
    error: float
    p50: float
    p99: float
    offered: float           # the highest backend's offered utilization
    overshoot: float


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def summary(rows: Sequence[Dict[str, Any]], model: Model = STUDY_MODEL) -> List[Line]:
    """The rows averaged over the seeds, in the order of their first cell."""
    slow = min(model.backends, key=lambda b: b.capacity).name
    groups: Dict[Tuple[str, bool, Optional[int], str], Dict[str, List[float]]] = {}
    for r in rows:
        key = (r["method"], r["reports"], None if r["mode"] == "global" else r["replicas"],
               "" if r["mode"] == "global" else r["spreader"])
        g = groups.setdefault(key, {})
        if r["scenario"] == "slow-start":
            if r["backend"] == model.new_backend.name:
                g.setdefault("overshoot", []).append(r["overshoot"])
            continue
        g.setdefault("offered:" + str(r["seed"]), []).append(r["offered"])
        if r["backend"] == slow:  # one row a cell and seed: the cell-wide numbers once
            for name in ("share", "error", "p50", "p99"):
                g.setdefault(name, []).append(r[name])
    lines = []
    for (method, reports, replicas, spreader), g in groups.items():
        offered = [max(v) for k, v in g.items() if k.startswith("offered:")]
        lines.append(Line(method, reports, replicas, spreader, len(g.get("share", g.get("overshoot", []))),
                          _mean(g.get("share", [])), _mean(g.get("error", [])), _mean(g.get("p50", [])),
                          _mean(g.get("p99", [])), _mean(offered), _mean(g.get("overshoot", []))))
    return lines


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds < 1:
        return f"{1000 * seconds:.0f} ms"
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def summary_text(lines: Sequence[Line], model: Model = STUDY_MODEL) -> str:
    """The summary as a Markdown table (what docs/replicas.md shows)."""
    slow = min(model.backends, key=lambda b: b.capacity).name
    head = ("method", "reports", "R", "spreader", f"{slow} share %", "active error", "p50", "p99",
            "max offered", "slow-start overshoot")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * 4 + "---:|" * 6]
    for x in lines:
        cells_ = (x.method, "yes" if x.reports else "no", "global" if x.replicas is None else str(x.replicas),
                  x.spreader or "-", f"{100 * x.slow_share:.1f}", f"{x.error:.2f}", _duration(x.p50), _duration(x.p99),
                  f"{x.offered:.2f}", f"{x.overshoot:.2f}")
        out.append("| " + " | ".join(cells_) + " |")
    return "\n".join(out)


def _axis_points(lines: Sequence[Line], method: str, reports: bool, spreader: str) -> List[Line]:
    """The global engine (at R = 1) and then R replicas with this spreader, by R."""
    mine = [x for x in lines if (x.method, x.reports) == (method, reports)]
    first = [x for x in mine if x.replicas is None]
    return first + sorted((x for x in mine if x.replicas is not None and x.spreader == spreader),
                          key=lambda x: x.replicas or 1)


def figure(lines: Sequence[Line], model: Model = STUDY_MODEL, spreader: str = "random") -> Any:
    """A 2 x 2 matplotlib Figure against R (R = 1: the global engine), one line per method
    and reports (dashed: with backend-reported load)."""
    from .plot import require_matplotlib

    require_matplotlib()
    from matplotlib.figure import Figure

    slow = min(model.backends, key=lambda b: b.capacity).name
    panels = (("p99", "p99 response time (s, log)"), ("error", "active-transaction error"),
              ("overshoot", "slow-start overshoot (x one engine)"), ("slow_share", f"share of the slow backend {slow}"))
    fig = Figure(figsize=(10, 7.6), dpi=80, layout="constrained")
    axes = fig.subplots(2, 2).ravel()
    colours = {m: f"C{i}" for i, m in enumerate(METHODS)}
    for ax, (attr, title) in zip(axes, panels):
        for method, reports in dict.fromkeys((x.method, x.reports) for x in lines):
            points = _axis_points(lines, method, reports, spreader)
            xs = [1 if x.replicas is None else x.replicas for x in points]
            ax.plot(xs, [getattr(x, attr) for x in points], marker="o", markersize=3, linewidth=1.4,
                    color=colours[method], linestyle="--" if reports else "-",
                    label=method + (" + reports" if reports else ""))
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 4, 8, 16], labels=["1 (global)", "2", "4", "8", "16"])
        if attr == "p99":
            ax.set_yscale("log")
        if attr == "overshoot":  # R: what R replicas each allowing ramp_rate a second give
            ax.set_yscale("log", base=2)
            ax.set_yticks([1, 2, 4, 8, 16], labels=["1", "2", "4", "8", "16"])
            ax.plot([1, 2, 4, 8, 16], [1, 2, 4, 8, 16], color="0.5", linestyle=":", linewidth=1, label="_R")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(f"replicas R ({spreader} spreader)")
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8)
    return fig


def save_figure(lines: Sequence[Line], path: str, model: Model = STUDY_MODEL) -> None:
    """The figure as a PNG at `path`, written whole or not at all."""
    from ..cmdline import write_file

    fig = figure(lines, model)
    write_file(path, lambda fh: fig.savefig(fh, format="png"))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m leastload.sim.replicas",
                                description="The replica study (docs/replicas.md): prints its table as Markdown.")
    p.add_argument("--seeds", type=int, default=STUDY_SEEDS, help=f"seeds 0..N-1 (default {STUDY_SEEDS})")
    p.add_argument("--duration", type=int, default=STUDY_MODEL.duration,
                   help=f"seconds of arrivals in the steady scenario (default {STUDY_MODEL.duration})")
    p.add_argument("--warmup", type=int, default=STUDY_MODEL.warmup,
                   help=f"seconds not measured (default {STUDY_MODEL.warmup})")
    p.add_argument("--replicas", default=",".join(map(str, STUDY_REPLICAS)), metavar="R,R,...",
                   help="replica counts besides the global engine (default 2,4,8,16)")
    p.add_argument("--out", metavar="PNG", help="the chart (needs matplotlib: the plot extra)")
    p.add_argument("--csv", metavar="FILE", help="every row (COLUMNS) as CSV")
    p.add_argument("--scheduler", metavar="ADDRESS", help="run the cells on a Dask scheduler (tcp://host:port)")
    return p


def _replica_list(text: str) -> List[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--replicas must be ints 1..{MAX_REPLICAS} separated by commas, got {text!r}") from None
    if not values or any(not 1 <= v <= MAX_REPLICAS for v in values):
        raise ValueError(f"--replicas must be ints 1..{MAX_REPLICAS} separated by commas, got {text!r}")
    return values


def main(argv: Optional[Sequence[str]] = None) -> int:
    from ..cmdline import MissingExtra, UserError, write_file
    from .progress import Progress
    from .sweep_file import executor_for

    args = _parser().parse_args(argv)
    try:
        if args.out is not None:
            from .plot import require_matplotlib

            require_matplotlib()  # before the study's minutes, not after
        model = replace(STUDY_MODEL, duration=args.duration, warmup=args.warmup)
        if args.seeds < 1:
            raise ValueError(f"--seeds must be an int >= 1, got {args.seeds}")
        todo = cells(replicas=_replica_list(args.replicas), seeds=tuple(range(args.seeds)), model=model)
        executor, client = executor_for(args.scheduler)
    except (ValueError, TypeError, UserError, MissingExtra) as exc:
        print(f"python -m leastload.sim.replicas: {exc}", file=sys.stderr)
        return 2
    progress = Progress(len(todo), "replica study")
    try:
        table = study(todo, executor=executor, on_done=progress.update)
    finally:
        progress.close()
        if client is not None:
            client.close()
    lines = summary(table.rows, model)
    print(summary_text(lines, model))
    if args.csv is not None:
        data = table.to_csv().encode()

        def write(fh: Any) -> None:
            fh.write(data)
        write_file(args.csv, write)
    if args.out is not None:
        save_figure(lines, args.out, model)
    return 0




if __name__ == "__main__":
    sys.exit(main())
