"""What `leastload top` shows, computed from two readings of a proxy's `GET /metrics` (no I/O,
no terminal): one `Snapshot` per reading, `views(before, now)` the rows.

The admin port's /metrics (proxy/_metrics.py lists the series) is read rather than its status
JSON because it is what `--workers N`'s supervisor merges: counters summed over the workers,
what a shared engine says given once, and under `--private-engines` one series per worker
(label `worker`); here a value that differs between workers shows each worker's, joined by
"/", and one that is the same in each shows once. Requests a second are the difference of
`leastload_service_requests_total` between the two readings over the time between them; a
counter that went down (the proxy restarted, or a worker missed the supervisor's scrape) gives
no rate for that interval rather than a wrong one.
"""

import math
from typing import Callable, Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

from ..prometheus_text import ExpositionError as ExpositionError, parse  # (top and its tests take it from here)

Labels = FrozenSet[Tuple[str, str]]
WORKER = "worker"


def read_samples(text: str) -> Dict[str, List[Tuple[Labels, float]]]:
    """Every sample of an exposition, by sample name, in order (leastload.prometheus_text reads
    it: ExpositionError names the first line it cannot read)."""
    samples: Dict[str, List[Tuple[Labels, float]]] = {}
    for family in parse(text).values():
        for name, labels, value in family.samples:
            samples.setdefault(name, []).append((frozenset(labels), float(value)))
    return samples


class Snapshot:
    """One reading of /metrics at `when` (seconds of a monotonic clock)."""

    def __init__(self, text: str, when: float) -> None:
        self.when = when
        self.samples = read_samples(text)
        if not any(name.startswith("leastload_") for name in self.samples):
            raise ExpositionError("no leastload_ series: not a leastload proxy's /metrics")

    def values(self, name: str, **match: str) -> Dict[Tuple[Tuple[str, str], ...], List[float]]:
        """`name`'s samples whose labels include `match`, grouped by their other labels (the worker
        label left out): {other labels, sorted: [value of each worker, in worker order]}."""
        grouped: Dict[Tuple[Tuple[str, str], ...], List[Tuple[int, float]]] = {}
        for labels, value in self.samples.get(name, ()):
            if any((k, v) not in labels for k, v in match.items()):
                continue
            worker = -1
            rest = []
            for k, v in labels:
                if k == WORKER:
                    worker = int(v) if v.isdigit() else -1
                elif k not in match:
                    rest.append((k, v))
            grouped.setdefault(tuple(sorted(rest)), []).append((worker, value))
        return {key: [v for _, v in sorted(found)] for key, found in grouped.items()}

    def one(self, name: str, **match: str) -> List[float]:
        """The values of `name` for exactly these labels (one per worker; [] when absent)."""
        return self.values(name, **match).get((), [])

    def total(self, name: str, **match: str) -> Optional[float]:
        found = self.one(name, **match)
        return sum(found) if found else None

    def vservers(self) -> List[str]:
        names: Dict[str, None] = {}
        for family in ("leastload_vserver_info", "leastload_service_requests_total"):
            for labels, _ in self.samples.get(family, ()):
                names.update({v: None for k, v in labels if k == "vserver"})
        return list(names)

    def services(self, vserver: str) -> List[str]:
        names: Dict[str, None] = {}
        for labels, _ in self.samples.get("leastload_service_requests_total", ()):
            d = dict(labels)
            if d.get("vserver") == vserver and "service" in d:
                names[d["service"]] = None
        return list(names)


def rate(before: Optional[float], now: Optional[float], seconds: float) -> Optional[float]:
    """A counter's increase a second between two readings; None when it cannot be told (a
    reading missing, no time between them, or the counter went down: restarted or partial)."""
    if before is None or now is None or not seconds > 0 or now < before:
        return None
    return (now - before) / seconds


class ServiceRow(NamedTuple):
    name: str
    state: str            # UP, DOWN, OUT_OF_SERVICE (each worker's when they differ), and flags
    weight: str
    active: str
    requests_per_second: Optional[float]
    load: str             # the method's N
    ttfb: str             # the engine's moving average
    slow_start: str       # "-" outside slow start, "ramp" or "held", and the cap
    ejections: str        # passive ejections since start, "(ejected)" while it is


class VserverView(NamedTuple):
    name: str
    method: str
    clients: str
    requests_per_second: Optional[float]
    rows: List[ServiceRow]
    edge: str = ""  # tunnels, TLS handshakes, PROXY headers: the parts this vserver has ("" if none)


def joined(values: Sequence[float], show: Callable[[float], str]) -> str:
    """One value, or each worker's joined by "/" when they differ; "-" for none."""
    if not values:
        return "-"
    texts = [show(v) for v in values]
    return texts[0] if len(set(texts)) == 1 else "/".join(texts)


def number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return f"{value:.0f}" if value == int(value) else f"{value:.3g}"


def seconds(value: float) -> str:
    if value < 1e-3:
        return f"{value * 1e6:.0f}us"
    if value < 1.0:
        return f"{value * 1e3:.1f}ms"
    return f"{value:.2f}s"


def _state(now: Snapshot, vserver: str, service: str) -> str:
    labels = {"vserver": vserver, "service": service}
    per_state = now.values("leastload_service_state", **labels)
    workers = max((len(v) for v in per_state.values()), default=0)
    states = []
    for i in range(workers):
        here = [dict(key)["state"] for key, vals in per_state.items() if i < len(vals) and vals[i] == 1]
        states.append(here[0] if here else "?")
    if not states:
        bound = now.one("leastload_service_bound", **labels)
        return "unbound" if bound and not any(bound) else "-"
    text = states[0] if len(set(states)) == 1 else "/".join(states)
    for flag in ("ejected", "draining"):
        flags = now.one(f"leastload_service_{flag}", **labels)
        if any(flags):
            text += f", {flag}" if all(flags) else f", {flag} ({'/'.join(number(f) for f in flags)})"
    return text


def _slow_start(now: Snapshot, labels: Dict[str, str]) -> str:
    caps = now.one("leastload_service_slow_start_cap", **labels)
    if not caps:
        return "-"
    held = now.one("leastload_service_slow_start_held", **labels)
    phase = "held" if any(held) else "ramp"
    return f"{phase} {joined(caps, number)}/s"


def _all(now: Snapshot, name: str, vserver: str) -> Optional[float]:
    """`name` summed over every worker and every other label (reason, command); None if absent."""
    found = now.values(name, vserver=vserver)
    return sum(sum(v) for v in found.values()) if found else None


def _edge(now: Snapshot, vserver: str) -> str:
    """The edge's line: open tunnels, TLS handshakes and PROXY headers, each where the proxy
    exports it (TLS and the PROXY protocol only when on; tunnels once one was opened)."""
    parts = []
    opened = _all(now, "leastload_vserver_tunnels_total", vserver)
    if opened:
        part = f"tunnels {_maybe(_all(now, 'leastload_vserver_tunnels_open', vserver))} open, {number(opened)} opened"
        timeouts = _all(now, "leastload_vserver_tunnel_timeouts_total", vserver)
        parts.append(part + (f", {number(timeouts)} timed out" if timeouts else ""))
    handshakes = _all(now, "leastload_vserver_tls_handshakes_total", vserver)
    if handshakes is not None:
        failed = _all(now, "leastload_vserver_tls_handshake_failures_total", vserver) or 0.0
        parts.append(f"TLS {number(handshakes)} handshakes, {number(failed)} failed")
    headers = _all(now, "leastload_vserver_proxy_protocol_headers_total", vserver)
    if headers is not None:
        refused = _all(now, "leastload_vserver_proxy_protocol_refused_total", vserver) or 0.0
        parts.append(f"PROXY {number(headers)} headers, {number(refused)} refused")
    return "  ".join(parts)


def views(before: Optional[Snapshot], now: Snapshot, vserver: Optional[str] = None) -> List[VserverView]:
    """The rows to show: per vserver (all, or the one named), each service's figures now and its
    requests a second since `before` (None: the first reading, no rates yet)."""
    interval = now.when - before.when if before is not None else 0.0
    shown = []
    for vs in now.vservers():
        if vserver is not None and vs != vserver:
            continue
        methods = [dict(key).get("method", "?") for key in now.values("leastload_vserver_info", vserver=vs)]
        rows = []
        for service in now.services(vs):
            labels = {"vserver": vs, "service": service}
            done = now.total("leastload_service_requests_total", **labels)
            ejections = joined(now.one("leastload_service_ejections_total", **labels), number)
            if any(now.one("leastload_service_ejected", **labels)):
                ejections += " (ejected)"
            rows.append(ServiceRow(
                service, _state(now, vs, service),
                joined(now.one("leastload_service_weight", **labels), number),
                joined(now.one("leastload_service_active_transactions", **labels), number),
                rate(before.total("leastload_service_requests_total", **labels) if before else None, done, interval),
                joined(now.one("leastload_service_load", **labels), number),
                joined(now.one("leastload_service_ttfb_average_seconds", **labels), seconds),
                _slow_start(now, labels), ejections))
        picks = now.total("leastload_vserver_picks_total", vserver=vs)
        shown.append(VserverView(
            vs, "/".join(dict.fromkeys(methods)) or "?",
            _maybe(now.total("leastload_vserver_clients", vserver=vs)),
            rate(before.total("leastload_vserver_picks_total", vserver=vs) if before else None, picks, interval),
            rows, _edge(now, vs)))
    return shown


def workers_line(now: Snapshot) -> Optional[str]:
    """`--workers N`'s supervisor: how many workers answered its scrape (None: one process)."""
    asked = now.total("leastload_fanout_workers")
    scraped = now.total("leastload_fanout_workers_scraped")
    if asked is None or scraped is None:
        return None
    return f"{number(scraped)} of {number(asked)} workers answered"


def _maybe(value: Optional[float]) -> str:
    return "-" if value is None else number(value)


def per_second(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"
