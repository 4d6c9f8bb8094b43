"""Types shared by both engines' signatures (for type checkers; nothing here runs per call)."""
from typing import Any, Dict, Protocol, Tuple

__all__ = ["Clock", "Info", "Snapshot", "Totals"]


class Clock(Protocol):
    """What a vserver reads time from: any object with `now()` returning seconds."""

    def now(self) -> float: ...


Info = Dict[str, Any]
"""info(name): one service's counters as plain data (keys in docs/api.md)."""

Snapshot = Dict[str, Any]
"""snapshot(): the whole vserver as plain data."""

Totals = Tuple[int, int, int, int, int, int, int]
"""_totals(): (bound, UP, pickable, open, ejected, last-second selections of UP, of open)."""
