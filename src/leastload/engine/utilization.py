"""Weights from the backends' reported load, after gRPC's weighted round robin.

Each report gives a service's queries per second (rps_fractional), errors per
second (eps) and utilization (application_utilization when set, else
cpu_utilization); its weight is

    weight = qps / (utilization + eps / qps * ERROR_PENALTY)

(0, no weight, when qps or utilization is 0). A weight counts only once
BLACKOUT seconds have passed since the service's first weighted report (a
service that just came up is not trusted on its first numbers), and no longer
once EXPIRATION seconds have passed since its last report (then its blackout
starts over). The facade applies the weights every UPDATE_PERIOD seconds: the
services with a weight get it, those without get the mean of the others', and
with fewer than two weights every service gets the same (plain round robin).
The engine's weights are integers 1..100: the largest weight becomes 100 and
the others their share of it, rounded (at least 1).
"""

from typing import Dict, List, Optional

BLACKOUT = 10.0       # seconds (gRPC's blackout_period)
EXPIRATION = 180.0    # seconds (weight_expiration_period)
UPDATE_PERIOD = 1.0   # seconds (weight_update_period)
ERROR_PENALTY = 1.0   # error_utilization_penalty


def weight_of(qps: float, eps: float, utilization: float) -> float:
    """gRPC's formula; 0.0 when the report cannot weigh (no queries, or no utilization)."""
    if qps <= 0 or utilization <= 0:
        return 0.0
    return qps / (utilization + eps / qps * ERROR_PENALTY)


class _Endpoint:
    __slots__ = ("weight", "non_empty_since", "last_update")

    def __init__(self) -> None:
        self.weight = 0.0
        self.non_empty_since: Optional[float] = None  # the first weighted report since it had none
        self.last_update: Optional[float] = None


class UtilizationWeights:
    """The reports of each service, and the weights they give at a time."""

    def __init__(self) -> None:
        self.endpoints: Dict[str, _Endpoint] = {}

    def report(self, name: str, now: float, qps: float, eps: float, utilization: float) -> float:
        """One report of `name` at `now`; returns the weight it gives (0.0: none)."""
        e = self.endpoints.setdefault(name, _Endpoint())
        weight = weight_of(qps, eps, utilization)
        if weight == 0.0:
            return 0.0  # gRPC ignores such a report: the last weight stays
        if e.non_empty_since is None:
            e.non_empty_since = now
        e.weight, e.last_update = weight, now
        return weight

    def forget(self, name: str) -> None:
        self.endpoints.pop(name, None)

    def weight(self, name: str, now: float) -> Optional[float]:
        """`name`'s weight at `now`, or None (no report, in its blackout, or expired)."""
        e = self.endpoints.get(name)
        if e is None or e.last_update is None or e.non_empty_since is None:
            return None
        if now - e.last_update >= EXPIRATION:
            e.non_empty_since = None  # expired: the next report starts a new blackout
            return None
        if now - e.non_empty_since < BLACKOUT:
            return None
        return e.weight

    def engine_weights(self, names: List[str], now: float) -> Dict[str, int]:
        """The engine's weights (1..100) for `names` at `now`."""
        weights = {name: self.weight(name, now) for name in names}
        known = [w for w in weights.values() if w is not None]
        if len(known) < 2:
            return {name: 1 for name in names}
        mean = sum(known) / len(known)
        full = {name: (mean if w is None else w) for name, w in weights.items()}
        top = max(full.values())
        return {name: max(1, min(100, round(100 * w / top))) for name, w in full.items()}
