"""Sweeps: configs x workloads x seeds, each cell a simulation, on any executor.

    from leastload.sim.sweep import sweep, Generated
    table = sweep({"lc": "examples/slowstart.conf"},
                  {"poisson": Generated("poisson", rate=2000, duration=30)},
                  seeds=range(8))
    table.to_pandas()            # with pandas installed; else table.rows

A cell is one (config, workload, seed): every lb vserver of the config is
replayed through the C engine on the workload's trace, as `leastload simulate`
does (`leastload.sim.runs.run_trace`). Cells run on `executor`, any
`concurrent.futures.Executor`: local processes when it is None, or a
cluster's, such as `dask.distributed.Client(...).get_executor()` or Ray's.
The table does not depend on the executor: every cell is seeded, and rows
come in the order of the cells (configs, then workloads, then seeds, as
given), whatever order they finished in.

The table is tidy: one row per (config, workload, seed, vserver, service)
with what the service served and its state at the end (`COLUMNS`).
"""
from __future__ import annotations

import concurrent.futures
import csv
import importlib
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from ..config import Config, load

COLUMNS = ("config", "workload", "seed", "vserver", "method", "service", "requests", "share", "bytes",
           "packets", "dropped", "load", "state")
PATTERNS = ("poisson", "bursty", "diurnal")
T = TypeVar("T")


@dataclass(frozen=True)
class Generated:
    """A generated workload (leastload.sim.workloads.make_trace): `pattern` arrivals at
    `rate` requests a second for `duration` whole seconds."""
    pattern: str
    rate: float
    duration: int

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {self.pattern!r}")
        if isinstance(self.rate, bool) or not isinstance(self.rate, (int, float)) or not (
                math.isfinite(self.rate) and self.rate > 0):
            raise ValueError(f"rate must be a number above 0, got {self.rate!r}")
        if isinstance(self.duration, bool) or not isinstance(self.duration, int) or self.duration < 1:
            raise ValueError(f"duration must be an int >= 1 (seconds), got {self.duration!r}")


ConfigLike = Union[str, Path, Config]


class Table:
    """The sweep's rows (dicts keyed by `columns`, COLUMNS by default), in cell order."""

    def __init__(self, rows: Sequence[Dict[str, Any]], columns: Sequence[str] = COLUMNS) -> None:
        self.rows: List[Dict[str, Any]] = list(rows)
        self.columns = tuple(columns)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        return iter(self.rows)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Table) and self.rows == other.rows

    def __repr__(self) -> str:
        return f"<leastload.sim.sweep.Table: {len(self.rows)} rows x {len(self.columns)} columns>"

    def to_csv(self) -> str:
        """The rows as CSV text: a header of the columns, None as an empty cell."""
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(self.columns)
        for r in self.rows:
            w.writerow(["" if r[c] is None else r[c] for c in self.columns])
        return out.getvalue()

    def to_pandas(self) -> Any:
        """A pandas DataFrame of the rows (needs pandas)."""
        try:  # by name: pandas is optional, and typed only with its stubs
            pandas = importlib.import_module("pandas")
        except ImportError as exc:
            raise ImportError("Table.to_pandas() needs pandas: pip install pandas") from exc
        return pandas.DataFrame(self.rows, columns=list(self.columns))


def _config(value: ConfigLike, name: str) -> Config:
    if isinstance(value, Config):
        return value
    if isinstance(value, (str, Path)):
        return load(value)
    raise TypeError(f"configs[{name!r}] must be a path or a leastload.config.Config, got {type(value).__name__}")


def run_cell(config_name: str, config: Config, workload_name: str, workload: Generated,
             seed: int) -> List[Dict[str, Any]]:
    """One cell's rows: each lb vserver of `config` under `workload` with `seed`, C engine.
    Module-level (and its arguments plain data) so that any executor can ship it."""
    from ..engine import native
    from . import runs

    rows: List[Dict[str, Any]] = []
    for vs in config.vservers:
        run = runs.run_trace(config, vs, native, workload.duration, [], workload.pattern, float(workload.rate),
                             seed, None)
        dropped = int(run.dropped.sum())
        for result in run.results:
            rows.append({"config": config_name, "workload": workload_name, "seed": seed, "vserver": run.vserver,
                         "method": run.method, "service": result.name, "requests": result.requests,
                         "share": result.share, "bytes": result.bytes, "packets": result.packets,
                         "dropped": dropped, "load": result.load, "state": result.state})
    return rows


def _cells(configs: Mapping[str, Config], workloads: Mapping[str, Generated],
           seeds: Sequence[int]) -> List[Tuple[str, Config, str, Generated, int]]:
    return [(c, configs[c], w, workloads[w], s) for c in configs for w in workloads for s in seeds]


def sweep(configs: Mapping[str, ConfigLike], workloads: Mapping[str, Generated], seeds: Iterable[int], *,
          executor: Optional[concurrent.futures.Executor] = None) -> Table:
    """Every (config, workload, seed) simulated; the rows of all cells as one Table.

    configs: name -> a config file (NetScaler lines, or TOML by its name) or a parsed
    `leastload.config.Config`; workloads: name -> `Generated`; seeds: ints.
    executor: where the cells run; None: a local process pool (as many processes as
    CPUs), shut down before this returns. A given executor is left running."""
    parsed = {str(name): _config(value, str(name)) for name, value in configs.items()}
    if not parsed:
        raise ValueError("configs is empty: nothing to sweep")
    for name, workload in workloads.items():
        if not isinstance(workload, Generated):
            raise TypeError(f"workloads[{name!r}] must be a leastload.sim.sweep.Generated, "
                            f"got {type(workload).__name__}")
    if not workloads:
        raise ValueError("workloads is empty: nothing to sweep")
    seed_list = list(seeds)
    for seed in seed_list:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seeds must be ints >= 0, got {seed!r}")
    if not seed_list:
        raise ValueError("seeds is empty: nothing to sweep")
    for config_name, config in parsed.items():
        if not config.vservers:
            raise ValueError(f"configs[{config_name!r}] has no lb vserver")
    cells = _cells(parsed, dict(workloads), seed_list)
    rows: List[Dict[str, Any]] = []
    for cell_rows in run_cells(run_cell, cells, executor):
        rows.extend(cell_rows)
    return Table(rows)


def run_cells(fn: Callable[..., T], cells: Sequence[Tuple[Any, ...]],
              executor: Optional[concurrent.futures.Executor] = None,
              on_done: Optional[Callable[[int], None]] = None) -> List[T]:
    """`fn(*cell)` for each cell, on `executor`; the results in cell order, whatever
    order they finished in. `fn` must be a module-level function and the cells plain
    data, so that any executor can ship them. executor None: a local process pool (as
    many processes as CPUs, at most one a cell), shut down before this returns; a given
    executor is left running. `on_done(n)` is called as the n-th cell finishes (progress)."""
    if not cells:
        return []
    own = executor is None
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=min(len(cells), os.cpu_count() or 1)) if own \
        else executor
    assert pool is not None
    try:
        futures = [pool.submit(fn, *cell) for cell in cells]
        if on_done is not None:
            for done, _ in enumerate(concurrent.futures.as_completed(futures), 1):
                on_done(done)
        return [future.result() for future in futures]  # cell order, not completion order
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)
