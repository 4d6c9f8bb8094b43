"""One admin port for every worker (`leastload proxy --workers N`): the supervisor's fan-out.

Each worker process has its own admin port (_admin.py); the supervisor serves one more,
`start_fanout(host, port, worker_ports, token)`, which asks every worker's admin port and
answers as one proxy:

    GET  /metrics              every worker's /metrics (asked at once, each within SCRAPE_TIMEOUT;
                               one that does not answer, or not in the text format, is skipped and
                               counted) merged into one exposition (text format 0.0.4): a family
                               whose values add up is summed over the workers, series by series
                               (same name, same labels; a histogram bucket by bucket, with its
                               _sum and _count); any other family keeps each worker's series with
                               a label worker="0", "1", ... (FAMILIES below decides, family by
                               family; a family it does not name is per worker); with one engine
                               shared by the workers, what the engine says (ENGINE_FAMILIES) is
                               given once, from the first worker that gives it. The fan-out's own:
                                   leastload_fanout_workers                 worker admin ports asked
                                   leastload_fanout_workers_scraped         those whose /metrics came in
                                   leastload_fanout_scrape_failures_total   a worker's failed scrapes
                                                                            (label worker), since start
    GET  /leastload/status     {"workers": [worker 0's status JSON, worker 1's, ...]}, null for a
                               worker that did not answer (the query, ?vserver= or ?format=text, goes
                               to each; format=text: each worker's text under a "# worker i" line);
                               when no worker answered 200, the first answer given (a 404 for an
                               unknown vserver stays a 404)
    GET  /healthz              200 while at least one worker answers 200, else 503
    POST /leastload/command    forwarded, body and Authorization header as received, to every
    POST /leastload/reload     worker at once; 200 {"ok": true, "workers": [each worker's JSON
                               answer]} when each answered 2xx, else the first other status (in
                               worker order; 502 for a worker that did not answer, its entry null)
                               with {"ok": false, "error": "worker i: ...", "workers": [...]}

With a token, the fan-out checks writes itself (every command but show/stat, and reload;
`Authorization: Bearer TOKEN`, compared in constant time): an unauthorized write gets 401
and never reaches a worker. Requests are read by the proxy's own reader (_http1.RequestReader)
with the admin port's limits (_admin.ADMIN_LIMITS: a body of at most 64 KiB), a request head
must arrive within HEADER_TIMEOUT, at most _admin.MAX_ADMIN_CONNECTIONS connections are open at
once; anything else is 404; after its one answer a connection lingers (_one_request.py).
Workers' answers are read by _http1.ResponseReader.

The fan-out runs its own event loop in a daemon thread, so a synchronous supervisor can own it:
`start_fanout` returns once the port is bound (or raises OSError, ValueError), `.close()` stops it.
`worker_ports()` is called from that thread, once per request: it must be safe to call there
(return a fresh list). Its list's index is the worker label: a supervisor keeps the labels
stable by listing every worker's port in worker order, a restarting worker's port included (it
refuses, and is skipped as any worker that does not answer).
"""

import asyncio
import hmac
import json
import logging
import re
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

from ..config.proxy_settings import DEFAULT
from . import _admin, _http1, _metrics
from ._control import Control
from ._one_request import OneRequestConnection

log = logging.getLogger("leastload.proxy")

SCRAPE_TIMEOUT = 2.0     # a worker's GET (/metrics, /healthz, /leastload/status) answers within this
COMMAND_TIMEOUT = 5.0    # a worker's POST answers within this (leastload ctl waits 10 s for the whole)
HEADER_TIMEOUT: float = DEFAULT["header_timeout"]  # a request head arrives within this (as the proxy's)
START_TIMEOUT = 10.0     # start_fanout binds within this; close() stops within it
MAX_WORKER_ANSWER = 64 << 20  # a worker's answer larger than this is refused (as no answer)
_WORKER_LIMITS = _http1.Limits(max_header_size=16384, max_headers=64)

Number = Union[int, float]
Labels = Tuple[Tuple[str, str], ...]

# ---- which families add up ---------------------------------------------------------------------

SUM = "sum"                # one series per label set, the workers' values added
PER_WORKER = "per worker"  # each worker's series, labelled worker="i"
WORKER_LABEL = "worker"

FAMILIES: Dict[str, str] = {
    # per service: counters and the histogram add up; so do the gauges that count things now
    "leastload_service_bound": PER_WORKER,                  # 1/0: a state
    "leastload_service_active_transactions": SUM,
    "leastload_service_requests_total": SUM,
    "leastload_service_packets_total": SUM,
    "leastload_service_responses_total": SUM,
    "leastload_service_request_bytes_total": SUM,
    "leastload_service_response_bytes_total": SUM,
    "leastload_service_failures_total": SUM,
    "leastload_service_retries_total": SUM,
    "leastload_service_stale_connections_total": SUM,
    "leastload_service_ejections_total": SUM,
    "leastload_service_ejected": PER_WORKER,                # 1/0: each engine ejects on its own
    "leastload_service_draining": PER_WORKER,               # 1/0
    "leastload_service_state": PER_WORKER,                  # 1 for the state, 0 for the others
    "leastload_service_weight": PER_WORKER,                 # a setting, not an amount
    "leastload_service_slow_start_cap": PER_WORKER,         # each engine's own ramp
    "leastload_service_slow_start_held": PER_WORKER,        # 1/0
    "leastload_service_load": PER_WORKER,                   # the method's N: its unit varies by method
    "leastload_service_consecutive_failures": PER_WORKER,   # a run of failures in one engine
    "leastload_service_window_bytes": SUM,
    "leastload_service_window_packets": SUM,
    "leastload_service_ttfb_average_seconds": PER_WORKER,   # an average: averages do not add
    "leastload_service_ttfb_seconds": SUM,                  # histogram: bucket by bucket, _sum, _count
    "leastload_service_idle_connections": SUM,
    "leastload_service_connections_opened_total": SUM,
    "leastload_service_health_probes_total": SUM,
    "leastload_service_health_failed_probes": PER_WORKER,   # a run of failures in one worker's monitor
    # per vserver
    "leastload_vserver_info": PER_WORKER,                   # 1 with the method as a label
    "leastload_vserver_window_seconds": PER_WORKER,         # a setting
    "leastload_vserver_picks_total": SUM,
    "leastload_vserver_no_service_available_total": SUM,
    "leastload_vserver_proxy_responses_total": SUM,
    "leastload_vserver_clients": SUM,
    "leastload_vserver_max_connections": PER_WORKER,        # each worker's own limit
    "leastload_vserver_accepted_connections_total": SUM,
    "leastload_vserver_accept_shortages_total": SUM,
    "leastload_vserver_listener_paused": PER_WORKER,        # 1/0
    "leastload_vserver_overload_level": PER_WORKER,         # each worker's own connections against its own limit
    "leastload_vserver_overload_state": PER_WORKER,         # 1/0
    "leastload_vserver_overload_entered_total": SUM,
    "leastload_vserver_overload_evictions_total": SUM,
    "leastload_vserver_overload_reserve_accepts_total": SUM,
    "leastload_vserver_overload_refused_total": SUM,
    "leastload_vserver_linger_resets_total": SUM,
    "leastload_vserver_backend_connections": SUM,
    "leastload_vserver_local_errors_total": SUM,
}
DEFAULT_MODE = PER_WORKER  # a family FAMILIES does not name
# With one engine shared by the workers (the default of --workers N), what the engine says is
# the same in each: these families come from the first worker that gives them, with no worker label.
ENGINE = "engine"
ENGINE_FAMILIES = frozenset((
    "leastload_service_bound", "leastload_service_active_transactions", "leastload_service_ejections_total",
    "leastload_service_ejected", "leastload_service_draining", "leastload_service_state",
    "leastload_service_weight", "leastload_service_slow_start_cap", "leastload_service_slow_start_held",
    "leastload_service_load",
    "leastload_service_consecutive_failures", "leastload_service_window_bytes",
    "leastload_service_window_packets", "leastload_service_ttfb_average_seconds", "leastload_vserver_info",
    "leastload_vserver_window_seconds"))
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


def _own_families(asked: int, scraped: int, failures: Dict[int, int]) -> str:
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


# ---- asking the workers ------------------------------------------------------------------------------


class _BadAnswer(Exception):
    pass


Answer = Tuple[int, bytes, bytes]  # (status, content type, body)


def _reachable(host: str) -> str:
    """Where the workers' admin ports are reached: an unspecified address is this machine."""
    bare = host.strip("[]")
    if bare in ("", "0.0.0.0"):
        return "127.0.0.1"
    if bare == "::":
        return "::1"
    return bare


async def _exchange(host: str, port: int, method: bytes, target: bytes, body: bytes,
                    headers: Sequence[Tuple[bytes, bytes]]) -> Answer:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        authority = (f"[{host}]" if ":" in host else host).encode() + b":%d" % port
        out = [b"%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" % (method, target, authority)]
        out += [name + b": " + value + b"\r\n" for name, value in headers]
        if method == b"POST":
            out.append(b"Content-Length: %d\r\n" % len(body))
        out += [b"\r\n", body]
        writer.write(b"".join(out))
        await writer.drain()
        response = _http1.ResponseReader(_WORKER_LIMITS)
        response.start(False, True, False)  # read as an HTTP/1.0 client's: the body de-chunked if chunked
        pieces: List[bytes] = []
        size = 0
        while not (response.complete or response.failed):
            data = await reader.read(65536)
            if not data:
                pieces += [bytes(p) for p in response.feed_eof()]
                break
            size += len(data)
            if size > MAX_WORKER_ANSWER:
                raise _BadAnswer(f"an answer larger than {MAX_WORKER_ANSWER} bytes")
            pieces += [bytes(p) for p in response.feed(data)]
        if response.failed or not response.complete:
            raise _BadAnswer(response.failed or "an incomplete answer")
        head, _, content = b"".join(pieces).partition(b"\r\n\r\n")
        content_type = b"application/octet-stream"
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-type":
                content_type = value.strip()
        return response.status, content_type, content
    finally:
        writer.close()


class _Connection(OneRequestConnection):
    """One client of the fan-out port; its request is served by a task, which answers."""

    def __init__(self, fanout: "Fanout") -> None:
        super().__init__(_admin.ADMIN_LIMITS, fanout._open, _admin.MAX_ADMIN_CONNECTIONS, HEADER_TIMEOUT)
        self.fanout = fanout
        self.task: Optional["asyncio.Task[None]"] = None

    def connection_lost(self, exc: Optional[Exception]) -> None:
        super().connection_lost(exc)
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def serve(self, head: _http1.RequestHead, body: bytes) -> None:
        self.task = asyncio.get_running_loop().create_task(self._serve(head, body))

    async def _serve(self, head: _http1.RequestHead, body: bytes) -> None:
        try:
            status, content_type, content = await self.fanout._serve(head, body)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug here must not leave the client waiting
            log.exception("fan-out: %s %s failed", head.method.decode("latin-1"), head.target.decode("latin-1"))
            status, content_type, content = 500, b"text/plain", b"the fan-out failed: see its log\n"
        self.answer(status, content_type, content)


def _json(status: int, data: Any) -> Answer:
    return status, _admin.JSON, json.dumps(data, indent=2, default=str).encode() + b"\n"


class Fanout:
    """The fan-out port, served by its own event loop in a daemon thread (see start_fanout)."""

    def __init__(self, host: str, port: int, worker_ports: Callable[[], List[int]], token: Optional[str],
                 shared_engine: bool = False) -> None:
        self.worker_ports, self.token = worker_ports, token
        self.shared_engine = shared_engine  # the workers balance with one engine: its families once
        self.worker_host = _reachable(host)
        self.address: Tuple[str, int] = (host, port)  # the bound (host, port) once started
        self.scrape_failures: Dict[int, int] = {}  # worker index -> failed scrapes of its /metrics
        self._listen = (host, port)
        self._open: Set[OneRequestConnection] = set()
        self._server: Optional[asyncio.AbstractServer] = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="leastload-fanout", daemon=True)
        self._closed = False

    # ---- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            try:
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            finally:
                self._loop.close()

    def _start(self) -> None:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._bind(), self._loop).result(START_TIMEOUT)
        except BaseException:
            self.close()
            raise

    async def _bind(self) -> None:
        host, port = self._listen
        self._server = await self._loop.create_server(lambda: _Connection(self), host, port, reuse_address=True)
        bound = self._server.sockets[0].getsockname()
        self.address = (str(bound[0]), int(bound[1]))

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._open):
            connection.transport.abort()
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=START_TIMEOUT)

    def close(self) -> None:
        """Stops serving (open connections are cut) and ends the thread; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        if not self._thread.is_alive():
            if not self._loop.is_closed():
                self._loop.close()
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(START_TIMEOUT)
        except Exception as exc:  # stopping goes on
            log.debug("fan-out: shutdown: %r", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(START_TIMEOUT)

    def __enter__(self) -> "Fanout":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- requests -------------------------------------------------------------------------------

    def _ports(self) -> List[int]:
        try:
            return [int(p) for p in self.worker_ports()]
        except Exception:
            log.exception("fan-out: worker_ports() failed: no worker is asked")
            return []

    async def _ask(self, port: int, method: bytes, target: bytes, timeout: float, body: bytes = b"",
                   headers: Sequence[Tuple[bytes, bytes]] = ()) -> Optional[Answer]:
        """A worker's answer, or None when it gives none in time (refused, reset, garbled, late)."""
        try:
            return await asyncio.wait_for(_exchange(self.worker_host, port, method, target, body, headers), timeout)
        except (OSError, asyncio.TimeoutError, _BadAnswer) as exc:
            log.debug("fan-out: no answer from the worker admin port %s:%d to %s %s: %r", self.worker_host, port,
                      method.decode(), target.decode("latin-1"), exc)
            return None

    async def _ask_all(self, method: bytes, target: bytes, timeout: float, body: bytes = b"",
                       headers: Sequence[Tuple[bytes, bytes]] = ()) -> List[Optional[Answer]]:
        ports = self._ports()
        return list(await asyncio.gather(*(self._ask(p, method, target, timeout, body, headers) for p in ports)))

    async def _serve(self, head: _http1.RequestHead, body: bytes) -> Answer:
        path, _, query = head.target.partition(b"?")
        if head.method == b"POST" and path in (_admin.COMMAND_PATH, _admin.RELOAD_PATH):
            return await self._post(head, path, body)
        if head.method != b"GET":
            return 404, b"text/plain", _admin.NOT_FOUND
        if path == _admin.METRICS_PATH:
            return 200, _metrics.CONTENT_TYPE, await self.metrics()
        if path == _admin.HEALTH_PATH:
            return await self._health()
        if path == _admin.STATUS_PATH:
            return await self._status(head.target, query)
        return 404, b"text/plain", _admin.NOT_FOUND

    async def metrics(self) -> bytes:
        """Every worker's /metrics now, merged (the fan-out's /metrics; runs on the fan-out's loop)."""
        answers = await self._ask_all(b"GET", _admin.METRICS_PATH, SCRAPE_TIMEOUT)
        parsed: List[Tuple[int, Dict[str, Family]]] = []
        for index, answer in enumerate(answers):
            families: Optional[Dict[str, Family]] = None
            if answer is not None and answer[0] == 200:
                try:
                    families = parse(answer[2].decode("utf-8"))
                except (UnicodeDecodeError, ExpositionError) as exc:
                    log.warning("fan-out: worker %d's /metrics is not the text format: %s", index, exc)
            if families is None:
                self.scrape_failures[index] = self.scrape_failures.get(index, 0) + 1
            else:
                self.scrape_failures.setdefault(index, 0)
                parsed.append((index, families))
        failures = {i: n for i, n in self.scrape_failures.items() if i < len(answers)}
        text = render(merge(parsed, self.shared_engine)) + _own_families(len(answers), len(parsed), failures)
        return text.encode("utf-8")

    async def _health(self) -> Answer:
        answers = await self._ask_all(b"GET", _admin.HEALTH_PATH, SCRAPE_TIMEOUT)
        healthy = sum(1 for a in answers if a is not None and a[0] == 200)
        if answers and healthy == len(answers):
            return 200, b"text/plain", b"ok\n"
        if healthy:
            return 200, b"text/plain", b"ok (%d of %d workers)\n" % (healthy, len(answers))
        why = "; ".join(f"worker {i}: " + ("no answer" if a is None else a[2].decode("utf-8", "replace").strip())
                        for i, a in enumerate(answers)) or "no worker is running"
        return 503, b"text/plain", f"no worker is healthy: {why}\n".encode()

    async def _status(self, target: bytes, query: bytes) -> Answer:
        answers = await self._ask_all(b"GET", target, SCRAPE_TIMEOUT)
        if not any(a is not None and a[0] == 200 for a in answers):
            given = next((a for a in answers if a is not None), None)
            if given is not None:
                return given
        params = dict(p.partition(b"=")[::2] for p in query.split(b"&") if p)
        if params.get(b"format") == b"text":
            parts = [f"# worker {i}\n".encode() + (a[2] if a is not None and a[0] == 200 else b"(no answer)\n")
                     for i, a in enumerate(answers)]
            return 200, b"text/plain", b"\n".join(parts)
        workers: List[Any] = []
        for answer in answers:
            doc = None
            if answer is not None and answer[0] == 200:
                try:
                    doc = json.loads(answer[2])
                except ValueError:
                    doc = None
            workers.append(doc)
        return _json(200, {"workers": workers})

    def _authorized(self, head: _http1.RequestHead) -> bool:
        if not self.token:
            return False
        value = head.header(b"authorization")
        if value is None:
            return False
        scheme, _, given = value.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token.encode())

    async def _post(self, head: _http1.RequestHead, path: bytes, body: bytes) -> Answer:
        write = True
        if path == _admin.COMMAND_PATH:
            try:
                words = json.loads(body or b"{}")["command"]
                if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
                    raise ValueError
            except (ValueError, KeyError, TypeError):
                return _json(400, {"ok": False, "error": 'the body must be JSON: {"command": ["word", ...]}',
                                   "workers": []})
            write = not Control.is_read(words)
        if write and self.token and not self._authorized(head):
            return _json(401, {"ok": False, "error": _admin._UNAUTHORIZED, "workers": []})
        headers = [(b"Content-Type", b"application/json")]
        authorization = head.header(b"authorization")
        if authorization is not None:
            headers.append((b"Authorization", authorization))
        answers = await self._ask_all(b"POST", head.target, COMMAND_TIMEOUT, body, headers)
        if not answers:
            return _json(503, {"ok": False, "error": "no worker is running", "workers": []})
        workers: List[Any] = []
        failed: Optional[Tuple[int, str]] = None
        for index, answer in enumerate(answers):
            if answer is None:
                workers.append(None)
                if failed is None:
                    failed = 502, f"worker {index}: no answer"
                continue
            status, _, content = answer
            try:
                doc = json.loads(content)
            except ValueError:
                doc = {"ok": False, "error": content.decode("utf-8", "replace").strip()}
            workers.append(doc)
            if not 200 <= status < 300 and failed is None:
                error = doc.get("error") if isinstance(doc, dict) else None
                failed = status, f"worker {index}: {error if error is not None else status}"
        if failed is None:
            return _json(200, {"ok": True, "workers": workers})
        return _json(failed[0], {"ok": False, "error": failed[1], "workers": workers})


def start_fanout(host: str, port: int, worker_ports: Callable[[], List[int]], token: Optional[str], *,
                 shared_engine: bool = False) -> Fanout:
    """Serves the fan-out on (host, port) (port 0: any free one; `.address` says which) from a new
    daemon thread, asking the admin ports `worker_ports()` lists on `host` (127.0.0.1 for 0.0.0.0,
    ::1 for ::). `token`: the admin token writes need, or None to leave the check to the workers.
    Returns once the port is bound; raises OSError when it cannot be (a port in use), ValueError
    for a non-loopback host without a token (as the workers' admin port)."""
    _admin.check_admin_address(host, token)
    fanout = Fanout(host, port, worker_ports, token, shared_engine)
    fanout._start()
    return fanout
