"""Prometheus' text exposition format (0.0.4) for the workers: the merge of their families, a writer.

The supervisor's fan-out (_fanout.py) reads each worker's /metrics with
leastload.prometheus_text.parse(), merges them with merge() and writes the result with render(). How a family merges is declared
beside the family in _metrics.py (FAMILY_SPECS: SUM, one series per label set, the
workers' values added; PER_WORKER, each worker's series labelled worker="i"; with one
engine shared by the workers, what the engine says is given once). A family _metrics
does not name (another exporter's) is per worker; a summary never adds.
"""

import logging
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..prometheus_text import FLOAT_TEXT, Family, Labels, Number
from . import _metrics
from ._metrics import ENGINE_FAMILIES, FAMILIES, PER_WORKER, SUM

log = logging.getLogger("leastload.proxy")

DEFAULT_MODE = PER_WORKER  # a family _metrics.FAMILIES does not name
ENGINE = "engine"  # with one engine shared by the workers: an ENGINE_FAMILIES family, from the first that gives it
WORKER_LABEL = "worker"
_SUMMABLE_TYPES = ("counter", "gauge", "histogram", "untyped")  # a summary's quantiles never add

_OWN = ("leastload_fanout_workers", "leastload_fanout_workers_scraped", "leastload_fanout_scrape_failures_total")


# ---- merging the workers' families -----------------------------------------------------------------


class _Merged:
    __slots__ = ("name", "kind", "help", "mode", "series")

    def __init__(self, name: str, kind: str, help_text: Optional[str], mode: str) -> None:
        self.name, self.kind, self.help, self.mode = name, kind, help_text, mode
        # (sample name, labels sorted) -> [sample name, labels in order, value]
        self.series: Dict[Tuple[str, Labels], List[Any]] = {}


def mode_of(name: str, kind: Optional[str]) -> str:
    """SUM or PER_WORKER for a family (FAMILIES, else DEFAULT_MODE; never SUM for a summary)."""
    mode = FAMILIES.get(name, DEFAULT_MODE)
    if mode == SUM and (kind or "untyped") not in _SUMMABLE_TYPES:
        return PER_WORKER
    return mode


def _with_worker(labels: Labels, index: int) -> Labels:
    """labels and worker="index"; a worker label already there is kept as exported_worker."""
    if any(k == WORKER_LABEL for k, _ in labels):
        labels = tuple(("exported_" + k if k == WORKER_LABEL else k, v) for k, v in labels)
    return labels + ((WORKER_LABEL, str(index)),)


def _key(name: str, labels: Labels, histogram: bool) -> Tuple[str, Labels]:
    if histogram:  # le="1" and le="1.0" are one bucket
        labels = tuple((k, _metrics.format_value(float(v)) if k == "le" and FLOAT_TEXT.match(v) else v)
                       for k, v in labels)
    return name, tuple(sorted(labels))


def merge(workers: Sequence[Tuple[int, Dict[str, Family]]], shared_engine: bool = False) -> List[_Merged]:
    """Each worker's families (worker index, parse()'s result) -> the merged families, in the
    order first seen. A family whose TYPE differs from the first worker's keeps the first's,
    and the other worker's samples of it are dropped. shared_engine: ENGINE_FAMILIES are the
    first worker's that gives them."""
    merged: Dict[str, _Merged] = {}
    taken: Dict[str, int] = {}  # shared_engine: the worker each engine family comes from
    for index, families in workers:
        for family in families.values():
            if family.name in _OWN or not family.samples:
                continue
            if shared_engine and family.name in ENGINE_FAMILIES:
                if taken.setdefault(family.name, index) != index:
                    continue  # the one engine, said by another worker already
            kind = family.kind or "untyped"
            out = merged.get(family.name)
            if out is None:
                mode = ENGINE if shared_engine and family.name in ENGINE_FAMILIES else mode_of(family.name,
                                                                                               family.kind)
                out = merged[family.name] = _Merged(family.name, kind, family.help, mode)
            elif out.kind != kind:
                log.debug("fan-out: worker %d gives %s as a %s, not a %s: its samples dropped",
                          index, family.name, kind, out.kind)
                continue
            if out.help is None:
                out.help = family.help
            histogram = kind == "histogram"
            for name, labels, value in family.samples:
                if out.mode == PER_WORKER:
                    labels = _with_worker(labels, index)
                key = _key(name, labels, histogram)
                entry = out.series.get(key)
                if entry is None:
                    out.series[key] = [name, labels, value]
                elif out.mode == SUM:
                    entry[2] += value
    return list(merged.values())


def _ordered(family: _Merged) -> List[List[Any]]:
    """A family's series to write: a histogram's grouped by label set (in the order first seen),
    each group's buckets by increasing le, then _sum and _count."""
    entries = list(family.series.values())
    if family.kind != "histogram":
        return entries
    groups: Dict[Labels, List[List[Any]]] = {}
    for entry in entries:
        rest = tuple(sorted((k, v) for k, v in entry[1] if k != "le"))
        groups.setdefault(rest, []).append(entry)

    def order(entry: List[Any]) -> Tuple[int, float]:
        name, labels = entry[0], entry[1]
        if name.endswith("_bucket"):
            le = dict(labels).get("le", "+Inf")
            return 0, float(le) if FLOAT_TEXT.match(le) else float("inf")
        return (1 if name.endswith("_sum") else 2), 0.0

    return [entry for group in groups.values() for entry in sorted(group, key=order)]


def _sample_line(name: str, labels: Labels, value: Number) -> str:
    if not labels:
        return f"{name} {_metrics.format_value(value)}"
    inner = ",".join(f'{k}="{_metrics.escape_label_value(v)}"' for k, v in labels)
    return f"{name}{{{inner}}} {_metrics.format_value(value)}"


def render(families: Sequence[_Merged]) -> str:
    """Merged families as exposition text (HELP, TYPE, then the samples; an empty family not at all)."""
    lines: List[str] = []
    for family in families:
        if not family.series:
            continue
        if family.help is not None:
            lines.append(f"# HELP {family.name} {_metrics.escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        lines.extend(_sample_line(*entry) for entry in _ordered(family))
    return "".join(line + "\n" for line in lines)


def own_families(asked: int, scraped: int, failures: Dict[int, int]) -> str:
    lines = ["# HELP leastload_fanout_workers Worker admin ports the fan-out asked for this scrape.",
             "# TYPE leastload_fanout_workers gauge",
             f"leastload_fanout_workers {asked}",
             "# HELP leastload_fanout_workers_scraped Workers whose /metrics came in for this scrape.",
             "# TYPE leastload_fanout_workers_scraped gauge",
             f"leastload_fanout_workers_scraped {scraped}"]
    if failures:
        lines += ["# HELP leastload_fanout_scrape_failures_total Scrapes of a worker's /metrics that failed "
                  "(refused, not in time, not 200, not the text format), since the fan-out started.",
                  "# TYPE leastload_fanout_scrape_failures_total counter"]
        lines += [f'leastload_fanout_scrape_failures_total{{{WORKER_LABEL}="{i}"}} {n}'
                  for i, n in sorted(failures.items())]
    return "".join(line + "\n" for line in lines)
