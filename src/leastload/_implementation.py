"""Which engine `import leastload` gives: the C engine, or the pure-Python reference.

`LEASTLOAD_IMPLEMENTATION=c` forces the C engine (and fails loudly if it is
missing), `=python` forces the reference; unset means the C engine. The
package's root re-exports these names. The parts below the root that build a
vserver with the chosen engine when their caller names none (net.upstream,
config.build) import this module, not the root: the root is the users' face,
at the top of the package's layers (tools/check_layers.py).
"""
import os as _os
from typing import TYPE_CHECKING

_choice = _os.environ.get("LEASTLOAD_IMPLEMENTATION", "c").strip().lower() or "c"
if TYPE_CHECKING:  # type checkers see the default, the C engine (the reference has the same signatures)
    from .engine.native import ManualClock, Transaction, VirtualServer
elif _choice == "python":
    from .engine.reference import ManualClock, Transaction, VirtualServer
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

__all__ = ["IMPLEMENTATION", "ManualClock", "Transaction", "VirtualServer"]
