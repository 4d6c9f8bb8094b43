"""Requests per second per service over time, as a PNG (matplotlib, Agg).

`pip install 'leastload[plot]'`. One panel per vserver, one line per
service (services with equal series share one), events marked with a dotted vertical line and a label. The series
drawn are the simulation's counts exactly; they are also stored in the PNG
as a text chunk (key `leastload-series`, JSON) so the figure's data can be
checked against the simulation.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from ..cmdline import MissingExtra, write_file

SERIES_KEY = "leastload-series"


@dataclass(frozen=True)
class Panel:
    """What one panel shows: a vserver's requests per second per service."""

    title: str
    start: int                     # the first second
    series: dict[str, list[int]]   # service -> requests in each second
    events: tuple[tuple[float, str], ...] = ()  # (time, label)


def require_matplotlib() -> None:
    """Raises MissingExtra when matplotlib is not installed (check before any work)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingExtra("--plot", "matplotlib", "plot") from None


def _grouped(series: dict[str, list[int]]) -> list[tuple[list[str], list[int]]]:
    """Services with equal series share one line (labelled with all their names):
    lines drawn on top of each other would hide all but the last."""
    groups: dict[tuple[int, ...], list[str]] = {}
    for name, counts in series.items():
        groups.setdefault(tuple(counts), []).append(name)
    return [(names, list(counts)) for counts, names in groups.items()]


def figure(panels: Sequence[Panel], title: str = "") -> Any:
    """A matplotlib Figure of the panels (Agg backend, no display needed)."""
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.6 * max(1, len(panels))), dpi=100, layout="constrained")
    axes = fig.subplots(max(1, len(panels)), 1, squeeze=False)[:, 0]
    for ax, panel in zip(axes, panels):
        for names, counts in _grouped(panel.series):
            xs = list(range(panel.start, panel.start + len(counts)))
            ax.plot(xs, counts, label=", ".join(names), drawstyle="steps-post", linewidth=1.6)
        top = max([1, *(max(c, default=0) for c in panel.series.values())])
        for t, label in panel.events:
            ax.axvline(t, color="0.4", linestyle=":", linewidth=1)
            ax.annotate(label, (t, top), xytext=(3, -2), textcoords="offset points",
                        fontsize=8, color="0.3", va="top", rotation=90)
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("requests per second")
        ax.set_ylim(bottom=0, top=top * 1.15)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8, ncol=1 + len(panel.series) // 8)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def save(panels: Sequence[Panel], path: str, title: str = "") -> Any:
    """Writes the PNG at `path` (all or nothing: a temporary file renamed) and returns the Figure."""
    fig = figure(panels, title)
    data = json.dumps([{"title": p.title, "start": p.start, "series": p.series} for p in panels])
    write_file(path, lambda fh: fig.savefig(fh, format="png", metadata={SERIES_KEY: data}))
    return fig
