"""Workload files: requests and service events as CSV or JSON rows.

One row per request or per service event, in any order of time (rows are
taken in time order; equal times keep file order):

    time            seconds from the start of the run (required, >= 0)
    event           ACTION:SERVICE makes the row a service event, e.g. bind:S4,
                    down:S2, up:S2, out_of_service:S3, unbind:S1; the request
                    columns are then left empty
    request_bytes   bytes of the request (default 300)
    response_bytes  bytes of the response (default 1200)
    ttfb            seconds to the first byte of the response, in (0, 3600];
                    a column given for every request or for none (then each
                    service's TTFB applies: the config's, else 0.01 s)
    duration        seconds from the first byte to the last (default 0)
    status          HTTP status of the response (default 200)
    key             what a hash method picks by: an address, ADDRESS:PORT, a URL,
                    a domain, a token (leastload.sim.keys.parse, read per the
                    vserver's method; the other methods ignore it)

CSV: a header line naming the columns, in any order. JSON: a list of
objects with those keys. Packets are counted as one per 1460 bytes (rounded
up) plus one.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from ..cmdline import FileError

COLUMNS = ("time", "event", "request_bytes", "response_bytes", "ttfb", "duration", "status", "key")
ACTIONS = ("bind", "unbind", "down", "up", "out_of_service")
DEFAULT_REQUEST_BYTES = 300
DEFAULT_RESPONSE_BYTES = 1200
MSS = 1460
MAX_BYTES = 10**9
MAX_TTFB = 3600.0


@dataclass(frozen=True)
class Event:
    """A service event at `time`: `action` (one of ACTIONS) on `service`; `where` names its origin."""

    time: float
    action: str
    service: str
    where: str = ""


@dataclass
class Workload:
    """Requests (parallel lists, in time order) and service events of a workload file."""

    source: str
    time: list[float] = field(default_factory=list)
    request_bytes: list[int] = field(default_factory=list)
    response_bytes: list[int] = field(default_factory=list)
    ttfb: Optional[list[float]] = None       # None: the services' TTFBs apply
    duration: list[float] = field(default_factory=list)
    status: list[int] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    key: list[Any] = field(default_factory=list)    # the key cell of each request (None: blank)
    where: list[str] = field(default_factory=list)  # each request's row, for messages

    @property
    def has_keys(self) -> bool:
        return any(cell is not None for cell in self.key)

    def __len__(self) -> int:
        return len(self.time)

    @property
    def end(self) -> float:
        """The last time a row names (0 for an empty file)."""
        return max([0.0, *self.time, *(e.time for e in self.events)])


def packets(nbytes: int) -> int:
    """Packets of a message of `nbytes`: one per MSS, rounded up, plus one."""
    return (nbytes + MSS - 1) // MSS + 1


def parse_event(text: str, at: float, where: str) -> Event:
    """`ACTION:SERVICE` -> an Event at `at` (the service name may itself hold colons)."""
    action, sep, service = text.partition(":")
    action = action.strip().lower()
    if not sep or action not in ACTIONS or not service:
        raise ValueError(f"event: must be ACTION:SERVICE with ACTION one of {', '.join(ACTIONS)}, got {text!r}")
    return Event(at, action, service, where)


def _number(column: str, value: Any, low: float, high: float, *, low_inclusive: bool) -> float:
    try:
        x = float(value)
        if isinstance(value, bool):
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f"{column}: must be a number, got {value!r}") from None
    ok = (x >= low if low_inclusive else x > low) and x <= high and math.isfinite(x)
    if not ok:
        bracket = "[" if low_inclusive else "("
        raise ValueError(f"{column}: must be in {bracket}{low:g}, {high:g}], got {value!r}")
    return x


def _integer(column: str, value: Any, low: int, high: int) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{column}: must be an integer in {low}..{high}, got {value!r}")
    try:
        n = int(value) if isinstance(value, (int, float)) else int(text)
    except ValueError:
        raise ValueError(f"{column}: must be an integer in {low}..{high}, got {value!r}") from None
    if not low <= n <= high:
        raise ValueError(f"{column}: must be an integer in {low}..{high}, got {value!r}")
    return n


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


class _Reader:
    def __init__(self, source: str) -> None:
        self.workload = Workload(source)
        self.ttfb_rows: list[bool] = []
        self.ttfb_values: list[float] = []

    def row(self, row: dict[str, Any], where: str) -> None:
        unknown = [k for k in row if k not in COLUMNS]
        if unknown:
            raise FileError(f"{where}: unknown column {unknown[0]!r} (columns: {', '.join(COLUMNS)})")
        try:
            if _blank(row.get("time")):
                raise ValueError("time: missing")
            t = _number("time", row["time"], 0.0, 2.0**40, low_inclusive=True)
            if not _blank(row.get("event")):
                self.workload.events.append(parse_event(str(row["event"]), t, where))
                return
            w = self.workload
            get = row.get
            w.time.append(t)
            w.request_bytes.append(DEFAULT_REQUEST_BYTES if _blank(get("request_bytes"))
                                   else _integer("request_bytes", get("request_bytes"), 0, MAX_BYTES))
            w.response_bytes.append(DEFAULT_RESPONSE_BYTES if _blank(get("response_bytes"))
                                    else _integer("response_bytes", get("response_bytes"), 0, MAX_BYTES))
            w.duration.append(0.0 if _blank(get("duration"))
                              else _number("duration", get("duration"), 0.0, MAX_TTFB, low_inclusive=True))
            w.status.append(200 if _blank(get("status")) else _integer("status", get("status"), 100, 599))
            w.key.append(None if _blank(get("key")) else get("key"))
            w.where.append(where)
            has_ttfb = not _blank(get("ttfb"))
            self.ttfb_rows.append(has_ttfb)
            self.ttfb_values.append(_number("ttfb", get("ttfb"), 0.0, MAX_TTFB, low_inclusive=False)
                                    if has_ttfb else 0.0)
            if self.ttfb_rows[0] != has_ttfb:
                raise ValueError("ttfb: give it on every request row or on none")
        except ValueError as exc:
            raise FileError(f"{where}: {exc}") from None

    def done(self) -> Workload:
        w = self.workload
        if self.ttfb_rows and self.ttfb_rows[0]:
            w.ttfb = self.ttfb_values
        order = sorted(range(len(w.time)), key=lambda i: w.time[i])  # stable: equal times keep file order
        if order != list(range(len(order))):
            for name in ("time", "request_bytes", "response_bytes", "duration", "status", "key", "where"):
                column = getattr(w, name)
                setattr(w, name, [column[i] for i in order])
            if w.ttfb is not None:
                w.ttfb = [w.ttfb[i] for i in order]
        w.events.sort(key=lambda e: e.time)
        return w


def read_csv(path: Union[str, Path]) -> Workload:
    source = str(path)
    reader = _Reader(source)
    with open(path, newline="", encoding="utf-8") as fh:
        rows = csv.DictReader(fh)
        if rows.fieldnames is None:
            raise FileError(f"{source}:1: empty file: needs a header line ({', '.join(COLUMNS)})")
        header = [name.strip() for name in rows.fieldnames]
        rows.fieldnames = header
        if "time" not in header:
            raise FileError(f"{source}:1: the header needs a time column (columns: {', '.join(COLUMNS)})")
        for row in rows:
            if None in row:  # more cells than the header has names
                raise FileError(f"{source}:{rows.line_num}: more cells than the header has columns")
            reader.row({k: v for k, v in row.items() if k is not None}, f"{source}:{rows.line_num}")
    return reader.done()


def read_json(path: Union[str, Path]) -> Workload:
    source = str(path)
    with open(path, encoding="utf-8") as fh:
        try:
            data = json.load(fh)
        except json.JSONDecodeError as exc:
            raise FileError(f"{source}:{exc.lineno}: bad JSON: {exc.msg}") from None
    if not isinstance(data, list):
        raise FileError(f"{source}: must be a JSON list of row objects ({', '.join(COLUMNS)})")
    reader = _Reader(source)
    for i, row in enumerate(data):
        if not isinstance(row, dict):
            raise FileError(f"{source}: row {i}: must be an object, got {json.dumps(row)[:40]}")
        reader.row(row, f"{source}: row {i}")
    return reader.done()


def read(path: Union[str, Path]) -> Workload:
    """A workload file: JSON when its name ends in .json, else CSV."""
    source = str(path)
    try:
        if source.lower().endswith(".json"):
            return read_json(path)
        return read_csv(path)
    except FileNotFoundError:
        raise FileError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise FileError(f"{source}: is a directory, not a workload file") from None
    except UnicodeDecodeError as exc:
        raise FileError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except csv.Error as exc:
        raise FileError(f"{source}: bad CSV: {exc}") from None
    except OSError as exc:
        raise FileError(f"{source}: cannot read: {exc.strerror or exc}") from None
