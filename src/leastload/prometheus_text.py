"""Prometheus' text exposition format (0.0.4), read: `parse(text)` gives each metric family
with its HELP, TYPE and samples; ExpositionError names the first line it cannot read.

One reader for the packages that read a proxy's /metrics: the supervisor's fan-out
(proxy/_exposition.py merges the workers' families) and `leastload top` (cli/top_model.py).
It imports nothing of leastload (the bottom layer of tools/check_layers.py).
"""

import re
from typing import Dict, List, Optional, Set, Tuple, Union

Number = Union[int, float]
Labels = Tuple[Tuple[str, str], ...]


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
FLOAT_TEXT = re.compile(  # a float as the format writes one (digits, an exponent, NaN, +Inf)
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf(?:inity)?|nan))\Z")
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
    if FLOAT_TEXT.match(text):
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
