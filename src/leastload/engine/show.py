"""show(): a vserver's state as data, printed like the vendor's `show lb vserver`."""

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from .methods import HASH_METHODS
from .settings import SETTING, SETTINGS, WINDOWED
from .types import Info


@dataclass(frozen=True)
class ServiceView:
    name: str
    state: str
    weight: int
    load: object      # N: int, or float seconds for LEASTRESPONSETIME
    score: float      # Nw = N * 10000 / weight
    active: int
    cap: object       # slow-start requests per second, None when not in slow start
    phase: str        # "normal" or "slow start (...)"


@dataclass(frozen=True)
class VServerView:
    name: str
    method: str
    new_service_request: int
    new_service_request_unit: str
    new_service_request_increment_interval: int
    startup_rr_factor: int
    startup_rr_left: int
    services: "tuple[ServiceView, ...]"
    hashing: "str | None" = None  # a hash method's settings; None for the other methods
    peakewma_decay: "float | None" = None  # PEAKEWMA's decay time, seconds; None for the others
    slow_start_handover: "str | None" = None  # a windowed method's, when not the vendor's

    def __str__(self) -> str:
        up = sum(1 for s in self.services if s.state == "UP")
        lines = [
            f"{self.name} - Method: {self.method}",
            f"State: {'UP' if up else 'DOWN'}  ({up}/{len(self.services)} services UP)",
            f"New Service Startup Request Rate: {self.new_service_request} {self.new_service_request_unit}, "
            f"Increment Interval: {self.new_service_request_increment_interval}",
            f"Startup RR Factor: {self.startup_rr_factor} ({self.startup_rr_left} left)",
        ]
        if self.hashing is not None:
            lines.append(f"Hash: {self.hashing}")
        if self.peakewma_decay is not None:
            lines.append(f"PEAKEWMA decay: {self.peakewma_decay:g} s")
        if self.slow_start_handover is not None:
            lines.append(f"Slow start hand-over: {self.slow_start_handover} (a ramp ends once the new "
                         "service's window caught up)")
        if self.services:
            lines.append("")
            lines.append(f"{'#':>3}  {'service':<16} {'state':<14} {'weight':>6} {'N':>14} {'Nw':>16} "
                         f"{'active':>7} {'cap/s':>7}  phase")
            for i, s in enumerate(self.services, 1):
                load = f"{s.load:.6g}" if isinstance(s.load, float) else str(s.load)
                cap = "-" if s.cap is None else str(s.cap)
                lines.append(f"{i:>3}) {s.name:<16} {s.state:<14} {s.weight:>6} {load:>14} {s.score:>16.2f} "
                             f"{s.active:>7} {cap:>7}  {s.phase}")
        lines.append("Done")
        return "\n".join(lines)


def vserver_view(vs: Any) -> VServerView:
    """The view of a VirtualServer (either engine's), read through its public face; the
    caller holds it (atomic()) so that the rows are of one moment."""
    services = []
    for name in vs.services:
        info = vs.info(name)
        ramp = vs.slow_start(name)
        services.append(ServiceView(
            name=name, state=info["state"], weight=info["weight"], load=info["load"],
            score=info["score"], active=info["active"],
            cap=None if ramp is None else ramp["cap"],
            phase=_phase(info, ramp, vs.ejection(name) if info["ejected"] else None, vs.now)))
    handover = vs.slow_start_handover
    return VServerView(
        name=vs.name, method=vs.method,
        new_service_request=vs.new_service_request, new_service_request_unit=vs.new_service_request_unit,
        new_service_request_increment_interval=vs.new_service_request_increment_interval,
        startup_rr_factor=vs.startup_rr_factor, startup_rr_left=vs.startup_rr_left,
        services=tuple(services),
        hashing=(", ".join(f"{s.name} {getattr(vs, s.name)}" for s in SETTINGS if s.methods == HASH_METHODS)
                 if vs.method in HASH_METHODS else None),
        peakewma_decay=vs.peakewma_decay if vs.method in SETTING["peakewma_decay"].methods else None,
        slow_start_handover=handover if handover != "vendor" and vs.method in WINDOWED else None)


def _phase(info: Info, ramp: Optional[Dict[str, Any]], ejection: Optional[Dict[str, Any]],
           now: Callable[[], float]) -> str:
    """A service's phase column: draining, ejected (for how long yet), slow start, or normal.
    An ejection's end is a time of the vserver's clock (a monotonic one in the proxy, which
    means nothing to a reader), so the column gives the seconds left."""
    if info["draining"]:
        return "draining"
    if info["ejected"]:
        return "ejected" if ejection is None else f"ejected, {max(0.0, ejection['until'] - now()):.1f} s left"
    if ramp is None:
        return "normal"
    if ramp["mode"] == "manual":
        return "slow start (manual)"
    held = f", held back: {ramp['held']}" if ramp.get("held") else ""
    return f"slow start ({ramp['increments']} increments{held})"
