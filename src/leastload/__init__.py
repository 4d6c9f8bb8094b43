"""leastload: NetScaler-style load-balancing selection, with a C hot path.

`LEASTLOAD_IMPLEMENTATION=c` forces the C engine (and fails loudly if it is
missing), `=python` forces the pure-Python reference; unset means the C engine (leastload._implementation chooses).
`VirtualServer`, `ManualClock` and `Transaction` (what acquire() returns) are
the chosen engine's; `Explanation` is what vs.explain() returns.
"""

from ._implementation import IMPLEMENTATION, ManualClock, Transaction, VirtualServer
from ._version import __version__
from .engine.errors import DuplicateService, NoServiceAvailable, TransactionEnded, UnknownService
from .engine.explain import Candidate, Explanation


def unlink_shared(name: str) -> bool:
    """Removes the segment of the shared vserver `name` (VirtualServer(shared=name)).
    Processes that have it open go on using it; the next to name it creates a new
    one. True when there was one. Shared vservers are the C engine's."""
    from .engine._engine import unlink_shared as _unlink  # the reference has none to remove

    return bool(_unlink(name))

__all__ = [
    "VirtualServer",
    "ManualClock",
    "Transaction",
    "NoServiceAvailable",
    "UnknownService",
    "DuplicateService",
    "TransactionEnded",
    "Explanation",
    "Candidate",
    "IMPLEMENTATION",
    "unlink_shared",
    "__version__",
]
