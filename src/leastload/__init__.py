"""leastload: NetScaler-style load-balancing selection, with a C hot path.

`LEASTLOAD_IMPLEMENTATION=c` forces the C engine (and fails loudly if it is
missing), `=python` forces the pure-Python reference; unset means the C engine.
`VirtualServer`, `ManualClock` and `Transaction` (what acquire() returns) are
the chosen engine's; `Explanation` is what vs.explain() returns.
"""

import os as _os
from typing import TYPE_CHECKING

from ._version import __version__
from .engine.errors import DuplicateService, NoServiceAvailable, TransactionEnded, UnknownService
from .engine.explain import Candidate, Explanation

_choice = _os.environ.get("LEASTLOAD_IMPLEMENTATION", "c").strip().lower() or "c"
if TYPE_CHECKING:  # type checkers see the default, the C engine (the reference has the same signatures)
    from .engine.native import ManualClock, Transaction, VirtualServer
elif _choice == "python":
    from .reference import ManualClock, Transaction, VirtualServer
elif _choice == "c":
    try:
        from .engine.native import ManualClock, Transaction, VirtualServer
    except ImportError as exc:  # a broken build must never pass for the reference
        raise ImportError(
            "leastload's C engine is not importable (" + str(exc) + "); rebuild the package "
            "or set LEASTLOAD_IMPLEMENTATION=python to use the pure-Python reference"
        ) from exc
else:
    raise ImportError(f"LEASTLOAD_IMPLEMENTATION must be 'c' or 'python', got {_choice!r}")

IMPLEMENTATION = _choice


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
