"""`GET /metrics` on the admin port: the proxy and its engine in Prometheus' text format.

The text exposition format, version 0.0.4, written by hand (no client library):
a `# HELP` and a `# TYPE` line before each family's samples, a family's samples
together, label values escaped (backslash, double quote, line feed), `NaN` and
`+Inf` spelled as Prometheus reads them. `render(*proxies)` reads each vserver in
one hold of it (`atomic()`), so one scrape is one instant of each engine.

Every series has the label `vserver` (the proxy's `name`); a service's series
have `service` (the backend's name) too. Counters come from the proxy's own
counters (`proxy.stats`), kept from start to stop, so they never go back while
the proxy runs, also across a backend's unbind and bind; while a backend stays
bound they equal the engine's figures (`requests_total` = info()["selected"],
`failures_total` = info()["failures"]). Gauges read from the engine
(`info()`) are given only for bound services.

Per service (labels `vserver`, `service`; `_total` are counters, the rest gauges):

    leastload_service_bound                       1 while bound to the vserver, 0 once a drain unbound it
    leastload_service_active_transactions         requests in flight on it now (info "active")
    leastload_service_requests_total              requests sent to it: every pick (a retry counts where it went)
    leastload_service_responses_total             its answers by status class (label code="1xx".."5xx")
    leastload_service_request_bytes_total         request bytes written to it
    leastload_service_response_bytes_total        response bytes read from it
    leastload_service_packets_total               TCP segments both ways on its connections (TCP_INFO deltas, as
                                                  the engine was told them; 0 where TCP_INFO is not read)
    leastload_service_failures_total              refused, reset, timed out, garbled, or answered 5xx
    leastload_service_retries_total               requests that failed on it and went on to another backend
    leastload_service_stale_connections_total     pooled connections found closed, the request resent on a new one
    leastload_service_ejections_total             passive (outlier) ejections of it, from the vserver's outlier events
    leastload_service_ejected                     1 while it is ejected, else 0
    leastload_service_draining                    1 while it drains (no new requests), else 0
    leastload_service_state                       1 for its state now, 0 for the others
                                                  (label state="UP", "DOWN", "OUT_OF_SERVICE")
    leastload_service_weight                      its weight (1..100)
    leastload_service_slow_start_cap              requests per second slow start allows it now
                                                  (no series while it is not in slow start)
    leastload_service_slow_start_held             1 while closed-loop slow start (slow_start_guard) holds its
                                                  ramp back, else 0 (a series only in slow start, guard on)
    leastload_service_load                        the method's N for it now (info "load": connections, bytes,
                                                  packets, seconds, ... as the method counts)
    leastload_service_consecutive_failures        its failures in a row now (what outlier ejection counts)
    leastload_service_window_bytes                bytes both ways in the engine's window (info "bytes")
    leastload_service_window_packets              TCP segments both ways in the engine's window (info "packets")
    leastload_service_ttfb_average_seconds        the engine's moving average of its time to first byte
                                                  (info "ttfb"; no series before the first)
    leastload_service_ttfb_seconds                histogram of its times from request sent to first response
                                                  byte: _bucket{le=...} (cumulative, le="+Inf" too), _sum, _count
    leastload_service_idle_connections            idle keep-alive connections to it in the pool
    leastload_service_connections_opened_total    connections opened to it
    leastload_service_health_probes_total         health probes made to it (no series without a monitor)
    leastload_service_health_failed_probes        its health probes failed in a row now (no series without a monitor)

Per vserver (label `vserver`):

    leastload_vserver_info                        1, the method in the label `method`
    leastload_vserver_window_seconds              the engine's window of bytes and packets, in seconds
    leastload_vserver_picks_total                 backends the engine picked for requests, retries included
                                                  (the sum of leastload_service_requests_total)
    leastload_vserver_no_service_available_total  requests answered 503 "no backend available" (none eligible)
    leastload_vserver_proxy_responses_total       answers the proxy wrote itself, by status (label code="502",
                                                  "503", "504" always, others once they happen)
    leastload_vserver_clients                     client connections open now
    leastload_vserver_max_connections             the most client connections kept open at once
    leastload_vserver_accepted_connections_total  client connections accepted
    leastload_vserver_accept_shortages_total      accept() failures for want of descriptors or memory
    leastload_vserver_listener_paused             1 while the listener does not accept (full, or short of
                                                  descriptors), else 0
    leastload_vserver_overload_level              0 up to overload_connections open client connections, 1 at
                                                  max_connections, linear between (header and idle timeouts
                                                  shrink with it)
    leastload_vserver_overload_state              1 for the overload state now, 0 for the others (label
                                                  state="normal", "high", "full")
    leastload_vserver_overload_entered_total      times the state went to "high" or "full" (label state)
    leastload_vserver_overload_evictions_total    connections waiting for a head closed to admit a new one
    leastload_vserver_overload_reserve_accepts_total  accept()s made with the reserve descriptor
    leastload_vserver_overload_refused_total      connections accepted with the reserve and closed at once
                                                  (none waiting to close instead)
    leastload_vserver_linger_resets_total         lingering closes reset: the client sent past linger_bytes
    leastload_vserver_tunnels_total               upgrades a backend accepted (101): tunnels opened
    leastload_vserver_tunnels_open                tunnels open now
    leastload_vserver_tunnel_timeouts_total       tunnels ended by tunnel_timeout (no byte either way)
    leastload_vserver_backend_connections         connections to backends open now, all backends together
    leastload_vserver_local_errors_total          the proxy's own troubles (descriptors, ports, buffers), by what
                                                  failed (label what)

  with TLS or the PROXY protocol on the listener (_edge.py's counters; only then):
    leastload_vserver_tls_handshakes_total        TLS handshakes completed
    leastload_vserver_tls_handshake_failures_total  refused (reason="error") or not done by the header
                                                  timeout (reason="timeout")
    leastload_vserver_tls_reloads_total           certificate reloads that loaded
    leastload_vserver_proxy_protocol_headers_total  PROXY headers read (command="PROXY", or "LOCAL": LOCAL,
                                                  UNKNOWN and the families that fall back to the connection's)
    leastload_vserver_proxy_protocol_refused_total  connections refused: reason="malformed" (no valid header)
                                                  or "timeout" (incomplete at the header timeout)
    leastload_vserver_edge_closed_early_total     clients gone before their connection was set up

Where a figure comes from: ejections_total counts the "ejected" events of
`vserver.outlier_events` from the proxy's start, read incrementally at each scrape; the engine
keeps its newest events only, so more than a thousand events between two scrapes lose some.
"""

import collections
import math
import weakref
from typing import (TYPE_CHECKING, Any, Counter, Dict, List, Mapping, NamedTuple, Optional, Protocol, Sequence,
                    Sized, Tuple, Union)

from ._overload import STATES as OVERLOAD_STATES
from ._stats import TTFB_BUCKETS, BackendCounters, Stats

if TYPE_CHECKING:
    from ._backend import ConnectionBudget, Pool
    from ._health import HealthMonitor
    from ._listen import Listener
    from ._overload import Overload


class Observed(Protocol):
    """What the metrics read of one vserver's proxy (a Proxy is one)."""

    @property
    def name(self) -> str: ...

    @property
    def vserver(self) -> Any: ...  # the engine's VirtualServer (either engine's)

    @property
    def stats(self) -> Stats: ...

    @property
    def backends(self) -> Mapping[str, object]: ...  # its backends by name (bound or not)

    @property
    def pools(self) -> "Mapping[str, Pool]": ...

    @property
    def monitors(self) -> "Mapping[str, HealthMonitor]": ...

    @property
    def clients(self) -> Sized: ...  # client connections open now

    @property
    def max_connections(self) -> int: ...

    @property
    def listener(self) -> "Optional[Listener]": ...

    @property
    def budget(self) -> "ConnectionBudget": ...

    @property
    def local_errors(self) -> Mapping[str, int]: ...

    @property
    def overload(self) -> "Overload": ...

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

Number = Union[int, float]
Labels = Tuple[Tuple[str, str], ...]

STATES = ("UP", "DOWN", "OUT_OF_SERVICE")
CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
PROXY_CODES = (502, 503, 504)  # always given (0 until the first), others once they happen


# ---- the families: what each says, and how the fan-out merges it over --workers -----------------------

SUM = "sum"                # _fanout/_exposition: one series per label set, the workers' values added
PER_WORKER = "per worker"  # each worker's series, labelled worker="i"


class FamilySpec(NamedTuple):
    name: str
    kind: str    # counter, gauge, histogram
    merge: str   # SUM or PER_WORKER: how the supervisor's /metrics merges the workers' series
    help: str
    engine: bool = False  # what the engine says: with one engine shared by the workers, said once


def _service(suffix: str, kind: str, merge: str, help_text: str, engine: bool = False) -> FamilySpec:
    return FamilySpec("leastload_service_" + suffix, kind, merge, help_text, engine)


def _vserver(suffix: str, kind: str, merge: str, help_text: str, engine: bool = False) -> FamilySpec:
    return FamilySpec("leastload_vserver_" + suffix, kind, merge, help_text, engine)


# In the order written. Per service, counters and the histogram add up; so do the gauges that count
# things now; states, settings, averages and runs of one engine's or worker's are given per worker.
FAMILY_SPECS: Tuple[FamilySpec, ...] = (
    # 1/0: a state
    _service("bound", "gauge", PER_WORKER,
             "1 while the service is bound to the vserver, 0 after a drain unbound it.", engine=True),
    _service("active_transactions", "gauge", SUM, "Requests in flight on the service now.", engine=True),
    _service("requests_total", "counter", SUM,
             "Requests sent to the service (every pick; a retry counts on the backend it went to)."),
    _service("responses_total", "counter", SUM, "Answers the service gave, by status class."),
    _service("request_bytes_total", "counter", SUM, "Request bytes written to the service."),
    _service("response_bytes_total", "counter", SUM, "Response bytes read from the service."),
    _service("failures_total", "counter", SUM,
             "Requests the service refused, reset, timed out, garbled or answered with a 5xx."),
    _service("retries_total", "counter", SUM, "Requests that failed on the service and went on to another backend."),
    _service("stale_connections_total", "counter", SUM,
             "Pooled connections found closed by the service, the request resent on a new one."),
    _service("ejections_total", "counter", SUM, "Passive (outlier) ejections of the service.", engine=True),
    # 1/0: each engine ejects on its own
    _service("ejected", "gauge", PER_WORKER, "1 while the service is ejected, else 0.", engine=True),
    # 1/0
    _service("draining", "gauge", PER_WORKER, "1 while the service drains (no new requests), else 0.", engine=True),
    # 1 for the state, 0 for the others
    _service("state", "gauge", PER_WORKER, "1 for the service's state now, 0 for the other states.", engine=True),
    # a setting, not an amount
    _service("weight", "gauge", PER_WORKER, "The service's weight.", engine=True),
    # each engine's own ramp
    _service("slow_start_cap", "gauge", PER_WORKER,
             "Requests per second slow start allows the service now.", engine=True),
    # 1/0
    _service("slow_start_held", "gauge", PER_WORKER,
             "1 while closed-loop slow start holds the service's ramp back (slow_start_guard), else 0.",
             engine=True),
    # the method's N: its unit varies by method
    _service("load", "gauge", PER_WORKER,
             "The method's N for the service now (connections, bytes, packets, seconds, ... as the method "
             "counts).", engine=True),
    # a run of failures in one engine
    _service("consecutive_failures", "gauge", PER_WORKER, "Failures of the service in a row now.", engine=True),
    _service("window_bytes", "gauge", SUM, "Bytes both ways in the engine's window.", engine=True),
    _service("window_packets", "gauge", SUM, "TCP segments both ways in the engine's window.", engine=True),
    _service("packets_total", "counter", SUM,
             "TCP segments both ways on the service's connections (TCP_INFO), as told to the engine."),
    # an average: averages do not add
    _service("ttfb_average_seconds", "gauge", PER_WORKER,
             "The engine's moving average of the time to first byte.", engine=True),
    # histogram: bucket by bucket, _sum, _count
    _service("ttfb_seconds", "histogram", SUM, "Time from the request sent to the first response byte."),
    _service("idle_connections", "gauge", SUM, "Idle keep-alive connections to the service in the pool."),
    _service("connections_opened_total", "counter", SUM, "Connections opened to the service."),
    _service("health_probes_total", "counter", SUM, "Health probes made to the service."),
    # a run of failures in one worker's monitor
    _service("health_failed_probes", "gauge", PER_WORKER, "Health probes of the service failed in a row now."),
    # 1 with the method as a label
    _vserver("info", "gauge", PER_WORKER, "1, with the vserver's method in the label method.", engine=True),
    # a setting
    _vserver("window_seconds", "gauge", PER_WORKER,
             "The engine's window of bytes and packets, in seconds.", engine=True),
    _vserver("picks_total", "counter", SUM, "Backends the engine picked for requests (retries included)."),
    _vserver("no_service_available_total", "counter", SUM, "Requests answered 503 because no backend was available."),
    _vserver("proxy_responses_total", "counter", SUM, "Answers the proxy wrote itself, by status."),
    _vserver("clients", "gauge", SUM, "Client connections open now."),
    # each worker's own limit
    _vserver("max_connections", "gauge", PER_WORKER, "The most client connections kept open at once."),
    _vserver("accepted_connections_total", "counter", SUM, "Client connections accepted."),
    _vserver("accept_shortages_total", "counter", SUM, "accept() failures for want of descriptors or memory."),
    # 1/0
    _vserver("listener_paused", "gauge", PER_WORKER, "1 while the listener has stopped accepting, else 0."),
    # each worker's own connections against its own limit
    _vserver("overload_level", "gauge", PER_WORKER,
             "0 up to overload_connections open client connections, 1 at max_connections, linear between."),
    # 1/0
    _vserver("overload_state", "gauge", PER_WORKER,
             "1 for the overload state now (normal, high, full), 0 for the others."),
    _vserver("overload_entered_total", "counter", SUM, "Times the overload state went to high or full."),
    _vserver("overload_evictions_total", "counter", SUM,
             "Client connections waiting for a head closed to admit a new one."),
    _vserver("overload_reserve_accepts_total", "counter", SUM, "accept()s made with the reserve descriptor."),
    _vserver("overload_refused_total", "counter", SUM,
             "Connections accepted with the reserve and closed at once (none to close instead)."),
    _vserver("linger_resets_total", "counter", SUM,
             "Lingering closes reset: the client sent past linger_bytes after the last answer."),
    _vserver("tunnels_total", "counter", SUM, "Upgrades a backend accepted (101): tunnels opened."),
    _vserver("tunnels_open", "gauge", SUM, "Tunnels open now."),
    _vserver("tunnel_timeouts_total", "counter", SUM, "Tunnels ended by tunnel_timeout (no byte either way)."),
    _vserver("backend_connections", "gauge", SUM, "Connections to backends open now."),
    _vserver("local_errors_total", "counter", SUM, "The proxy's own troubles, by what failed."),
    _vserver("tls_handshakes_total", "counter", SUM, "TLS handshakes completed."),
    _vserver("tls_handshake_failures_total", "counter", SUM,
             "TLS handshakes refused (reason error) or not done by the header timeout (reason timeout)."),
    _vserver("tls_reloads_total", "counter", SUM, "Certificate reloads that loaded."),
    _vserver("proxy_protocol_headers_total", "counter", SUM, "PROXY protocol headers read, by command."),
    _vserver("proxy_protocol_refused_total", "counter", SUM,
             "Connections refused for their PROXY protocol header (malformed or missing; or late)."),
    _vserver("edge_closed_early_total", "counter", SUM, "Clients gone before their connection was set up."),
)
FAMILIES: Dict[str, str] = {f.name: f.merge for f in FAMILY_SPECS}  # name -> its merge rule
ENGINE_FAMILIES = frozenset(f.name for f in FAMILY_SPECS if f.engine)


def escape_label_value(text: str) -> str:
    """A label value as the format quotes it: backslash, double quote and line feed escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """A HELP text: backslash and line feed escaped."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: Number) -> str:
    """A sample value as Go's ParseFloat reads it: ints as digits, NaN, +Inf, -Inf."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


class _Family:
    __slots__ = ("name", "kind", "help", "lines")

    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name, self.kind, self.help = name, kind, help_text
        self.lines: List[str] = []

    def add(self, labels: Labels, value: Number, suffix: str = "") -> None:
        inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels)
        self.lines.append(f"{self.name}{suffix}{{{inner}}} {format_value(value)}")


class _Writer:
    """The families in the order first declared; each one's samples together."""

    def __init__(self) -> None:
        self.families: Dict[str, _Family] = {}

    def family(self, name: str, kind: str, help_text: str) -> _Family:
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = _Family(name, kind, help_text)
        return family

    def text(self) -> str:
        out: List[str] = []
        for f in self.families.values():
            if not f.lines:  # nothing to say: no HELP or TYPE either
                continue
            out.append(f"# HELP {f.name} {escape_help(f.help)}")
            out.append(f"# TYPE {f.name} {f.kind}")
            out.extend(f.lines)
        return "\n".join(out) + "\n"


class _EjectionCounter:
    """Ejections per service, counted from the vserver's outlier events as they come.

    The events list keeps its newest entries only (the facade trims its front): the
    newest event seen is looked for by identity, and when it was trimmed away every
    event still there is newer. Events trimmed before any scrape saw them are lost
    to the count (more than a thousand between two scrapes)."""

    def __init__(self) -> None:
        self.last: Optional[Tuple[float, str, str]] = None
        self.counts: "Counter[str]" = collections.Counter()

    def update(self, events: Sequence[Tuple[float, str, str]]) -> "Counter[str]":
        start = 0
        if self.last is not None:
            start = len(events)
            while start > 0 and events[start - 1] is not self.last:
                start -= 1
        for _, name, what in events[start:]:
            if what == "ejected":
                self.counts[name] += 1
        if events:
            self.last = events[-1]
        return self.counts


_ejections: "weakref.WeakKeyDictionary[Observed, _EjectionCounter]" = weakref.WeakKeyDictionary()


def ejections(proxy: Observed) -> "Counter[str]":
    """Ejections of each service since the proxy started (as far as its events tell)."""
    counter = _ejections.get(proxy)
    if counter is None:
        counter = _ejections[proxy] = _EjectionCounter()
    return counter.update(proxy.vserver.outlier_events)


def is_up(info: Dict[str, Any]) -> bool:
    """A bound service that can take a new request: UP, not ejected, not draining."""
    return bool(info["state"] == "UP" and not info["ejected"] and not info["draining"])


def healthy(proxy: Observed) -> Tuple[bool, str]:
    """(True, why) when at least one bound service is UP (not ejected, not draining)."""
    vs = proxy.vserver
    with vs.atomic():
        up = any(is_up(vs.info(name)) for name in vs.services)
    if up:
        return True, "ok"
    return False, "no backend is UP (all down, out of service, ejected, draining or unbound)"


def render(*proxies: Observed) -> bytes:
    """The exposition text (version 0.0.4) of the proxies now (each vserver one proxy, as a
    config's are served by one process), as UTF-8 bytes: each family once, every vserver's
    samples in it."""
    w = _Writer()
    for proxy in proxies:
        _add(w, proxy)
    return w.text().encode("utf-8")


def _add(w: _Writer, proxy: Observed) -> None:
    """One proxy's samples into `w` (families are made on first use, then shared)."""

    vserver_labels: Labels = (("vserver", proxy.name),)
    vs = proxy.vserver

    fam = {f.name[len("leastload_"):]: w.family(f.name, f.kind, f.help) for f in FAMILY_SPECS}
    bound_f = fam["service_bound"]
    active_f = fam["service_active_transactions"]
    requests_f = fam["service_requests_total"]
    responses_f = fam["service_responses_total"]
    req_bytes_f = fam["service_request_bytes_total"]
    resp_bytes_f = fam["service_response_bytes_total"]
    failures_f = fam["service_failures_total"]
    retries_f = fam["service_retries_total"]
    stale_f = fam["service_stale_connections_total"]
    ejections_f = fam["service_ejections_total"]
    ejected_f = fam["service_ejected"]
    draining_f = fam["service_draining"]
    state_f = fam["service_state"]
    weight_f = fam["service_weight"]
    cap_f = fam["service_slow_start_cap"]
    held_f = fam["service_slow_start_held"]
    load_f = fam["service_load"]
    in_row_f = fam["service_consecutive_failures"]
    window_bytes_f = fam["service_window_bytes"]
    window_packets_f = fam["service_window_packets"]
    packets_f = fam["service_packets_total"]
    ttfb_avg_f = fam["service_ttfb_average_seconds"]
    ttfb_f = fam["service_ttfb_seconds"]
    idle_f = fam["service_idle_connections"]
    opened_f = fam["service_connections_opened_total"]
    probes_f = fam["service_health_probes_total"]
    failed_probes_f = fam["service_health_failed_probes"]
    info_f = fam["vserver_info"]
    window_f = fam["vserver_window_seconds"]
    picks_f = fam["vserver_picks_total"]
    no_service_f = fam["vserver_no_service_available_total"]
    proxy_f = fam["vserver_proxy_responses_total"]
    clients_f = fam["vserver_clients"]
    max_f = fam["vserver_max_connections"]
    accepted_f = fam["vserver_accepted_connections_total"]
    shortages_f = fam["vserver_accept_shortages_total"]
    paused_f = fam["vserver_listener_paused"]
    level_f = fam["vserver_overload_level"]
    ostate_f = fam["vserver_overload_state"]
    entered_f = fam["vserver_overload_entered_total"]
    evicted_f = fam["vserver_overload_evictions_total"]
    reserve_f = fam["vserver_overload_reserve_accepts_total"]
    refused_f = fam["vserver_overload_refused_total"]
    linger_f = fam["vserver_linger_resets_total"]
    tunnels_f, tunnels_open_f = fam["vserver_tunnels_total"], fam["vserver_tunnels_open"]
    tunnel_timeouts_f = fam["vserver_tunnel_timeouts_total"]
    backend_conns_f = fam["vserver_backend_connections"]
    local_f = fam["vserver_local_errors_total"]

    stats = proxy.stats
    with vs.atomic():
        method = str(vs.method)
        window = int(vs.window_seconds)
        ejected_counts = ejections(proxy)
        bound: Dict[str, Dict[str, Any]] = {name: vs.info(name) for name in vs.services}
        ramps = {name: vs.slow_start(name) for name, info in bound.items() if info["cap"] is not None}
    names = list(dict.fromkeys([*proxy.backends, *stats.backends, *bound]))  # in order, each once
    picks = 0
    for name in names:
        labels: Labels = vserver_labels + (("service", name),)
        counters = stats.backends.get(name)
        if counters is None:  # added at run time, not picked yet: zeros
            counters = BackendCounters()
        info = bound.get(name)
        bound_f.add(labels, 1 if info is not None else 0)
        picks += counters.requests
        requests_f.add(labels, counters.requests)
        packets_f.add(labels, counters.packets)
        for k, code in enumerate(CLASSES, start=1):
            responses_f.add(labels + (("code", code),), counters.by_class[k])
        req_bytes_f.add(labels, counters.bytes_in)
        resp_bytes_f.add(labels, counters.bytes_out)
        failures_f.add(labels, counters.failures)
        retries_f.add(labels, counters.retries)
        stale_f.add(labels, counters.stale)
        cumulative = 0
        for bound_le, count in zip(TTFB_BUCKETS, counters.ttfb_buckets):
            cumulative += count
            ttfb_f.add(labels + (("le", format_value(float(bound_le))),), cumulative, "_bucket")
        cumulative += counters.ttfb_buckets[len(TTFB_BUCKETS)]
        ttfb_f.add(labels + (("le", "+Inf"),), cumulative, "_bucket")
        ttfb_f.add(labels, float(counters.ttfb_sum), "_sum")
        ttfb_f.add(labels, cumulative, "_count")
        ejections_f.add(labels, ejected_counts.get(name, 0))
        if info is not None:
            active_f.add(labels, info["active"])
            ejected_f.add(labels, bool(info["ejected"]))
            draining_f.add(labels, bool(info["draining"]))
            for state in STATES:
                state_f.add(labels + (("state", state),), 1 if info["state"] == state else 0)
            weight_f.add(labels, info["weight"])
            if info["cap"] is not None:
                cap_f.add(labels, info["cap"])
                ramp = ramps.get(name)
                if ramp is not None and "held" in ramp:  # slow_start_guard on
                    held_f.add(labels, 1 if ramp["held"] else 0)
            load_f.add(labels, info["load"])
            in_row_f.add(labels, info["consecutive_failures"])
            window_bytes_f.add(labels, info["bytes"])
            window_packets_f.add(labels, info["packets"])
            if info["ttfb"] is not None:
                ttfb_avg_f.add(labels, info["ttfb"])
        pool = proxy.pools.get(name)
        if pool is not None:
            idle_f.add(labels, len(pool.idle))
            opened_f.add(labels, pool.opened)
        monitor = proxy.monitors.get(name)
        if monitor is not None:
            probes_f.add(labels, monitor.probes)
            failed_probes_f.add(labels, monitor.failures)

    info_f.add(vserver_labels + (("method", method),), 1)
    window_f.add(vserver_labels, window)
    picks_f.add(vserver_labels, picks)
    answered = stats.answered_by_proxy
    no_service_f.add(vserver_labels, stats.no_service)
    for status in sorted(set(PROXY_CODES) | set(answered)):
        proxy_f.add(vserver_labels + (("code", str(status)),), answered.get(status, 0))
    clients_f.add(vserver_labels, len(proxy.clients))
    max_f.add(vserver_labels, proxy.max_connections)
    listener = proxy.listener
    if listener is not None:
        accepted_f.add(vserver_labels, listener.accepted)
        shortages_f.add(vserver_labels, listener.shortages)
        paused_f.add(vserver_labels, bool(listener.paused))
    overload = proxy.overload
    level_f.add(vserver_labels, overload.level(len(proxy.clients)))
    for state in OVERLOAD_STATES:
        ostate_f.add(vserver_labels + (("state", state),), 1 if overload.state == state else 0)
    for state in OVERLOAD_STATES[1:]:
        entered_f.add(vserver_labels + (("state", state),), overload.entered[state])
    evicted_f.add(vserver_labels, overload.evicted)
    reserve_f.add(vserver_labels, overload.reserve_accepts)
    refused_f.add(vserver_labels, overload.refused)
    linger_f.add(vserver_labels, stats.linger_resets)
    tunnels_f.add(vserver_labels, stats.tunnels)
    tunnels_open_f.add(vserver_labels, stats.tunnels_open)
    tunnel_timeouts_f.add(vserver_labels, stats.tunnel_timeouts)
    backend_conns_f.add(vserver_labels, proxy.budget.open)
    for what in sorted(proxy.local_errors):
        local_f.add(vserver_labels + (("what", what),), proxy.local_errors[what])
    edge = getattr(proxy, "edge", None)  # _edge.Edge, with TLS or the PROXY protocol
    if edge is not None:
        _add_edge(fam, vserver_labels, edge)


def _add_edge(fam: Dict[str, "_Family"], labels: Labels, edge: Any) -> None:
    c = edge.counters
    if edge.tls is not None:
        fam["vserver_tls_handshakes_total"].add(labels, c.tls_handshakes)
        failures = fam["vserver_tls_handshake_failures_total"]
        failures.add(labels + (("reason", "error"),), c.tls_failures)
        failures.add(labels + (("reason", "timeout"),), c.tls_timeouts)
        fam["vserver_tls_reloads_total"].add(labels, edge.tls.reloads)
    if edge.accept_proxy:
        headers = fam["vserver_proxy_protocol_headers_total"]
        headers.add(labels + (("command", "PROXY"),), c.proxy_headers - c.proxy_local)
        headers.add(labels + (("command", "LOCAL"),), c.proxy_local)
        refused = fam["vserver_proxy_protocol_refused_total"]
        refused.add(labels + (("reason", "malformed"),), c.proxy_refused)
        refused.add(labels + (("reason", "timeout"),), c.proxy_timeouts)
    fam["vserver_edge_closed_early_total"].add(labels, c.closed_early)
