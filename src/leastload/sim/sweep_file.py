"""`leastload simulate --sweep FILE`: the sweep's cells from a TOML file, run, summarized.

    seeds = 8                        # seeds 0..7; or a list: [0, 7, 42]
    [configs]                        # name = a config file, relative to this file
    lc = "slowstart.conf"
    [workloads.steady-ish]           # name = a generated workload
    pattern = "poisson"              # poisson, bursty or diurnal
    rate = 500                       # requests a second
    duration = 20                    # whole seconds

`--scheduler tcp://HOST:PORT` runs the cells on that Dask scheduler's workers
(the sweep extra); without it, on local processes. `--csv` writes every row
of the table; the summary printed is each service's share of its vserver's
requests, the mean over the seeds with the lowest and highest.
"""
from __future__ import annotations

import importlib
import os
import statistics
import sys
from typing import Any, Dict, List, Optional, Tuple

from ..cmdline import FileError, MissingExtra, UserError
from .sweep import Generated, Table, sweep

KEYS = ("seeds", "configs", "workloads")
WORKLOAD_KEYS = ("pattern", "rate", "duration")
MAX_SEEDS = 10_000


def read(path: str) -> Tuple[Dict[str, str], Dict[str, Generated], List[int]]:
    """(configs by name as paths, workloads by name, seeds) from a sweep file; FileError
    naming the file and what is wrong."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on old Pythons only
        try:
            import tomli as tomllib
        except ImportError as exc:
            raise MissingExtra("a sweep file (TOML) on Python < 3.11", "tomli", "toml") from exc
    try:
        with open(path, "rb") as f:
            data: Dict[str, Any] = tomllib.load(f)
    except OSError as exc:
        raise UserError(f"--sweep: cannot read {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # tomllib.TOMLDecodeError
        raise FileError(f"{path}: {exc}") from exc

    def fail(message: str) -> FileError:
        return FileError(f"{path}: {message}")

    def check_keys(table: Dict[str, Any], keys: Tuple[str, ...], where: str, holder: str) -> None:
        """Every key of `keys` in `table`, and no other."""
        unknown = sorted(set(table) - set(keys))
        if unknown:
            raise fail(f"{where}unknown key {unknown[0]!r} ({holder} has {', '.join(keys)})")
        missing = [k for k in keys if k not in table]
        if missing:
            raise fail(f"{where}no {missing[0]!r}")

    check_keys(data, KEYS, "", "a sweep file")
    seeds_value = data["seeds"]
    if isinstance(seeds_value, int) and not isinstance(seeds_value, bool):
        if not 1 <= seeds_value <= MAX_SEEDS:
            raise fail(f"seeds: a count must be in 1..{MAX_SEEDS}, got {seeds_value}")
        seeds = list(range(seeds_value))
    elif isinstance(seeds_value, list) and seeds_value and all(
            isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**63 for s in seeds_value):
        if len(seeds_value) > MAX_SEEDS:
            raise fail(f"seeds: at most {MAX_SEEDS}, got {len(seeds_value)}")
        seeds = list(seeds_value)
    else:
        raise fail(f"seeds: a count or a non-empty list of ints >= 0, got {seeds_value!r}")
    configs = data["configs"]
    if not isinstance(configs, dict) or not configs:
        raise fail("configs: a table of name = \"file\", at least one")
    here = os.path.dirname(os.path.abspath(path))
    config_paths: Dict[str, str] = {}
    for name, value in configs.items():
        if not isinstance(value, str):
            raise fail(f"configs.{name}: a config file's path, got {value!r}")
        config_paths[name] = os.path.join(here, value)
    workloads = data["workloads"]
    if not isinstance(workloads, dict) or not workloads:
        raise fail("workloads: a table of [workloads.NAME] tables, at least one")
    generated: Dict[str, Generated] = {}
    for name, spec in workloads.items():
        if not isinstance(spec, dict):
            raise fail(f"workloads.{name}: a table with {', '.join(WORKLOAD_KEYS)}, got {spec!r}")
        check_keys(spec, WORKLOAD_KEYS, f"workloads.{name}: ", "a workload")
        try:
            generated[name] = Generated(spec["pattern"], spec["rate"], spec["duration"])
        except ValueError as exc:
            raise fail(f"workloads.{name}: {exc}") from exc
    return config_paths, generated, seeds


def executor_for(scheduler: Optional[str]) -> Tuple[Any, Any]:
    """(executor, its client to close) for `--scheduler`; (None, None): local processes."""
    if scheduler is None:
        return None, None
    try:  # by name: dask is optional, and mypy's view of it depends on its version
        distributed: Any = importlib.import_module("dask.distributed")
    except ImportError as exc:
        raise MissingExtra("--scheduler", "dask.distributed", "sweep") from exc
    try:
        client = distributed.Client(scheduler, timeout=30)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UserError(f"--scheduler: cannot reach {scheduler}: {exc}") from exc
    return client.get_executor(), client


def summary(table: Table) -> str:
    """Each service's share of its vserver's requests: mean over the seeds, lowest, highest."""
    groups: Dict[Tuple[str, str, str, str, str], List[float]] = {}
    for r in table:
        groups.setdefault((r["config"], r["workload"], r["vserver"], r["method"], r["service"]), []).append(r["share"])
    rows = [("config", "workload", "vserver", "method", "service", "seeds", "share %", "lowest", "highest")]
    for (config, workload, vserver, method, service), shares in groups.items():
        rows.append((config, workload, vserver, method, service, str(len(shares)),
                     f"{100 * statistics.fmean(shares):.2f}", f"{100 * min(shares):.2f}",
                     f"{100 * max(shares):.2f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i < 5 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def run(path: str, scheduler: Optional[str]) -> Table:
    """The sweep of the file, on the scheduler's workers or local processes."""
    from ..config import load

    config_paths, workloads, seeds = read(path)
    configs = {}
    for name, config_path in config_paths.items():
        if not os.path.isfile(config_path):
            raise FileError(f"{path}: configs.{name}: no such file {config_path}")
        configs[name] = load(config_path)  # every config read and checked before a cell runs
        if not configs[name].vservers:
            raise FileError(f"{path}: configs.{name}: {config_path} has no lb vserver")
    executor, client = executor_for(scheduler)
    try:
        return sweep(configs, workloads, seeds, executor=executor)
    finally:
        if client is not None:
            client.close()
