# Types of the C extension leastload.engine._engine (built from _engine.pyx): the engine's
# interface (_interface.pyi, shared with the pure-Python reference) and what the C
# engine has besides; tests/test_public_api.py compares them with the engines.
from typing import Any, Collection, Dict, Optional

from ._interface import EngineAPI, TransactionAPI

def monotonic() -> float:
    """The default clock of a VirtualServer: time.monotonic itself."""

class ManualClock:
    def __init__(self, start: float = 0.0) -> None: ...
    def now(self) -> float: ...
    def advance(self, seconds: float) -> None: ...
    def set(self, t: float) -> None: ...

class Transaction(TransactionAPI): ...

class Engine(EngineAPI):
    def acquire(self, exclude: Optional[Collection[str]] = None, key: object = None) -> Transaction: ...
    # the C engine only: memory
    def reserve(self, services: int) -> None:
        """Makes room for `services` services (0..2**30), so binding them allocates nothing."""
    def memory_bytes(self) -> int:
        """Bytes the C core has allocated for this vserver."""
    # the batch path and the benchmarks' floor (not public)
    def _replay(self, trace: Any, result: Any, events: Any) -> Any: ...
    def _check_replay(self, clock: Any, trace: Any) -> Any: ...
    def _replay_mapping(self, trace: Any) -> Any: ...
    def _noop(self, x: Any) -> Any: ...
    # shared="NAME" (not public beyond the constructor's keyword)
    def _shared_sequence(self) -> int: ...
    def _shared_stats(self) -> Optional[Dict[str, Any]]: ...

def unlink_shared(name: str) -> bool:
    """Removes the shared vserver `name`'s segment; True when there was one."""

def _hash64(data: bytes, seed: int) -> int:
    """XXH64 of `data` with `seed`, from the C core."""

def _neg_log2(x: int) -> int:
    """The hash methods' fixed-point -log2 from the C core."""

def _floor_replay(trace: Any, method: str, chosen: Any) -> bool:
    """The batch replay's floor (benchmarks): a bare C loop over `trace`, its choices into `chosen`."""
