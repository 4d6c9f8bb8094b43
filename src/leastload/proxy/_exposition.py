"""Prometheus' text exposition format (0.0.4): a reader, the merge of the workers' families, a writer.

The supervisor's fan-out (_fanout.py) reads each worker's /metrics with parse(), merges
them with merge() and writes the result with render(). How a family merges is declared
beside the family in _metrics.py (FAMILY_SPECS: SUM, one series per label set, the
workers' values added; PER_WORKER, each worker's series labelled worker="i"; with one
engine shared by the workers, what the engine says is given once). A family _metrics
does not name (another exporter's) is per worker; a summary never adds.
"""

import logging
import re
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

from . import _metrics
from ._metrics import ENGINE_FAMILIES, FAMILIES, PER_WORKER, SUM

log = logging.getLogger("leastload.proxy")

Number = Union[int, float]
Labels = Tuple[Tuple[str, str], ...]

DEFAULT_MODE = PER_WORKER  # a family _metrics.FAMILIES does not name
ENGINE = "engine"  # with one engine shared by the workers: an ENGINE_FAMILIES family, from the first that gives it
WORKER_LABEL = "worker"
_SUMMABLE_TYPES = ("counter", "gauge", "histogram", "untyped")  # a summary's quantiles never add

_OWN = ("leastload_fanout_workers", "leastload_fanout_workers_scraped", "leastload_fanout_scrape_failures_total")


# ---- the text format, version 0.0.4: a reader ------------------------------------------------------


class ExpositionError(ValueError):
    """Text that is not the exposition format (the message names the line)."""


class Family:
    """One metric family as read: `kind` None when no TYPE line gave one (untyped)."""

    __slots__ = ("name", "kind", "help", "samples")

    def __init__(self, name: str) -> None:
        self.name = name
        self.kind: Optional[str] = None
        self.help: Optional[str] = None
        self.samples: List[Tuple[str, Labels, Number]] = []  # (sample name, labels in order, value)


_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_INT = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf(?:inity)?|nan))\Z")
_TIMESTAMP = re.compile(r"-?[0-9]+\Z")
_TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
_BLANKS = " \t"


def _unescape(text: str, lineno: int, quote: bool) -> str:
    """A HELP text's or a label value's escapes: \\\\, \\n (and \\" in a label value)."""
    if "\\" not in text:
        return text
    out: List[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            nxt = text[i + 1:i + 2]
            if nxt == "n":
                out.append("\n")
            elif nxt == "\\" or (quote and nxt == '"'):
                out.append(nxt)
            elif quote:
                raise ExpositionError(f"line {lineno}: bad escape \\{nxt} in a label value")
            else:  # a HELP text: an unknown escape stays as it is (as Prometheus reads it)
                out.append(c + nxt)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _parse_labels(line: str, pos: int, lineno: int) -> Tuple[Labels, int]:
    """The label pairs after a '{' at pos - 1 -> (pairs in order, the position after '}')."""
    labels: List[Tuple[str, str]] = []
    seen: Set[str] = set()
    while True:
        while line[pos:pos + 1] in (" ", "\t") and pos < len(line):
            pos += 1
        if line[pos:pos + 1] == "}":
            return tuple(labels), pos + 1
        m = _LABEL_NAME.match(line, pos)
        if m is None:
            raise ExpositionError(f"line {lineno}: a label name expected at column {pos + 1}")
        name = m.group()
        if name in seen:
            raise ExpositionError(f"line {lineno}: label {name} twice")
        seen.add(name)
        pos = m.end()
        while line[pos:pos + 1] in (" ", "\t") and pos < len(line):
            pos += 1
        if line[pos:pos + 2] != '="':
            raise ExpositionError(f'line {lineno}: =" expected after label {name}')
        pos += 2
        start = pos
        while True:
            if pos >= len(line):
                raise ExpositionError(f"line {lineno}: the value of label {name} does not end")
            c = line[pos]
            if c == "\\":
                pos += 2
            elif c == '"':
                break
            else:
                pos += 1
        labels.append((name, _unescape(line[start:pos], lineno, quote=True)))
        pos += 1
        while line[pos:pos + 1] in (" ", "\t") and pos < len(line):
            pos += 1
        if line[pos:pos + 1] == ",":
            pos += 1
        elif line[pos:pos + 1] != "}":
            raise ExpositionError(f"line {lineno}: ',' or '}}' expected after label {name}")


def parse_number(text: str) -> Number:
    """A sample value: an int when written as digits, else a float (NaN, +Inf, -Inf included)."""
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    raise ValueError(f"not a number: {text!r}")


def _comment(line: str, families: Dict[str, Family], lineno: int) -> None:
    rest = line[1:].lstrip(_BLANKS)
    keyword, rest = _split(rest)
    if keyword not in ("HELP", "TYPE"):
        return  # any other comment
    name, rest = _split(rest)
    if not _METRIC_NAME.fullmatch(name):
        raise ExpositionError(f"line {lineno}: bad metric name {name!r} in {keyword}")
    family = families.get(name)
    if family is None:
        family = families[name] = Family(name)
    if keyword == "HELP":
        if family.help is not None:
            raise ExpositionError(f"line {lineno}: a second HELP for {name}")
        family.help = _unescape(rest, lineno, quote=False)
    else:
        kind = rest.strip(_BLANKS)
        if kind not in _TYPES:
            raise ExpositionError(f"line {lineno}: unknown type {kind!r} for {name}")
        if family.kind is not None:
            raise ExpositionError(f"line {lineno}: a second TYPE for {name}")
        if family.samples:
            raise ExpositionError(f"line {lineno}: TYPE for {name} after its samples")
        family.kind = kind


def _split(text: str) -> Tuple[str, str]:
    """(the first word, the rest after the blanks that follow it)."""
    for i, c in enumerate(text):
        if c in _BLANKS:
            return text[:i], text[i:].lstrip(_BLANKS)
    return text, ""


def _family_of(name: str, families: Dict[str, Family], lineno: int) -> Family:
    for kind, suffixes in _SUFFIXES.items():
        for suffix in suffixes:
            if name.endswith(suffix):
                base = families.get(name[:-len(suffix)])
                if base is not None and base.kind == kind:
                    return base
    family = families.get(name)
    if family is None:
        family = families[name] = Family(name)
    elif family.kind == "histogram":
        raise ExpositionError(f"line {lineno}: histogram {name} sample without _bucket, _sum or _count")
    return family


def parse(text: str) -> Dict[str, Family]:
    """The exposition text (format 0.0.4) -> {family name: Family}, in the order first named.

    Reads what Prometheus reads: HELP and TYPE lines (other comments and blank lines are
    skipped), samples with or without labels (values escaped \\\\, \\", \\n; blanks around
    the pairs, a trailing comma), a value (digits, a float, NaN, +Inf, -Inf) and an optional
    timestamp (dropped: a merged series has no one time). A histogram's or a summary's
    _bucket, _sum and _count samples belong to their family. ExpositionError (a ValueError)
    names the first line it cannot read, or a series given twice."""
    families: Dict[str, Family] = {}
    seen: Set[Tuple[str, Labels]] = set()
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line.strip(_BLANKS):
            continue
        if line.startswith("#"):
            _comment(line, families, lineno)
            continue
        m = _METRIC_NAME.match(line)
        if m is None:
            raise ExpositionError(f"line {lineno}: a metric name expected")
        name, pos = m.group(), m.end()
        labels: Labels = ()
        if line[pos:pos + 1] == "{":
            labels, pos = _parse_labels(line, pos + 1, lineno)
        if line[pos:pos + 1] not in (" ", "\t") or pos >= len(line):
            raise ExpositionError(f"line {lineno}: a blank and a value expected after {name}")
        fields = line[pos:].split()
        if not 1 <= len(fields) <= 2 or (len(fields) == 2 and not _TIMESTAMP.match(fields[1])):
            raise ExpositionError(f"line {lineno}: a value and at most a timestamp expected after {name}")
        try:
            value = parse_number(fields[0])
        except ValueError as exc:
            raise ExpositionError(f"line {lineno}: {exc}") from None
        key = (name, tuple(sorted(labels)))
        if key in seen:
            raise ExpositionError(f"line {lineno}: the series {name}{dict(labels)} given twice")
        seen.add(key)
        _family_of(name, families, lineno).samples.append((name, labels, value))
    return families


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
        labels = tuple((k, _metrics.format_value(float(v)) if k == "le" and _FLOAT.match(v) else v)
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
            return 0, float(le) if _FLOAT.match(le) else float("inf")
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
