"""What `leastload simulate` prints and writes: the per-service summary, the
per-second table, CSV and JSON. Files are written whole or not at all (a
temporary file in the same directory, renamed)."""
from __future__ import annotations

import csv
import io
import json
from typing import Any, BinaryIO, Sequence

from ..cmdline import write_file
from .runs import Run


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.7g}"
    return str(x)


def summary(run: Run, header: str) -> str:
    served = int(run.counts.sum())
    dropped = int(run.dropped.sum())
    lines = [f"{header}: {served} requests served, {dropped} dropped"]
    width = max([7, *(len(r.name) for r in run.results)])
    lines.append(f"  {'service':<{width}} {'requests':>9} {'share':>7} {'bytes':>12} {'packets':>9} "
                 f"{'N':>9} {'Nw':>9}  phase")
    for r in run.results:
        lines.append(f"  {r.name:<{width}} {r.requests:>9} {r.share:>7.1%} {r.bytes:>12} {r.packets:>9} "
                     f"{_fmt(r.load):>9} {_fmt(r.score):>9}  {r.phase}"
                     + ("" if r.state in ("UP", "unbound") else f" ({r.state})"))
    for t, name, why in run.slow_start_exits:
        lines.append(f"  t={t:g}: {name} left slow start: {why}")
    if run.keys is not None:
        k = run.keys
        lines.append(f"  keys: {k.distinct} distinct served, {k.on_one} always by one service"
                     + (f", {k.on_several} by two or more" if k.on_several else ""))
    return "\n".join(lines)


def table(run: Run, every: int = 1) -> str:
    """Requests per service per second, one row every `every` seconds."""
    widths = [max(8, len(n) + 2) for n in run.services]
    head = "  t(s)" + "".join(f"{n:>{w}}" for n, w in zip(run.services, widths)) + "  dropped"
    rows = [f"{run.start + i:>6}" + "".join(f"{int(c):>{w}}" for c, w in zip(row, widths))
            + f"{int(run.dropped[i]):>9}" for i, row in enumerate(run.counts) if i % every == 0]
    return "\n".join([head, *rows])


def csv_text(runs: Sequence[Run]) -> str:
    """Long form: vserver, second, service, requests; the row with an empty
    service holds the requests dropped in that second (no service available)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["vserver", "second", "service", "requests"])
    for run in runs:
        for i, row in enumerate(run.counts):
            second = run.start + i
            for name, c in zip(run.services, row):
                w.writerow([run.vserver, second, name, int(c)])
            w.writerow([run.vserver, second, "", int(run.dropped[i])])
    return out.getvalue()


def json_data(runs: Sequence[Run], settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "settings": settings,
        "vservers": [{
            "name": run.vserver, "method": run.method, "start": run.start, "services": list(run.services),
            "requests_per_second": run.series(), "dropped_per_second": [int(d) for d in run.dropped],
            "summary": [vars(r) for r in run.results],
            "events": [{"time": e.time, "action": e.action, "service": e.service} for e in run.events],
            "slow_start_exits": [{"time": t, "service": n, "why": why} for t, n, why in run.slow_start_exits],
            "keys": None if run.keys is None else vars(run.keys),
        } for run in runs],
    }


def write_atomically(path: str, text: str) -> None:
    def write(fh: BinaryIO) -> None:
        fh.write(text.encode("utf-8"))

    write_file(path, write)


def json_text(runs: Sequence[Run], settings: dict[str, Any]) -> str:
    return json.dumps(json_data(runs, settings), indent=1) + "\n"
