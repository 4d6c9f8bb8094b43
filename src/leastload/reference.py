"""The pure-Python reference: the oracle the C engine is tested against.

`VirtualServer` here is the shared policy (leastload.engine.policy: settings, slow
start, ejection, show(), explain()) over the reference engine
(leastload.engine.oracle, which imports no policy), as leastload.engine.native puts the
same policy over the C engine. The pick rules both the reference engine and
explain() apply are leastload.engine.rules.
"""
from .engine.errors import DuplicateService, NoServiceAvailable, TransactionEnded, UnknownService
from .engine.policy import VirtualServerFacade
from .engine.oracle import Engine, ManualClock, Transaction

__all__ = ["ManualClock", "Engine", "VirtualServer", "Transaction", "NoServiceAvailable",
           "UnknownService", "DuplicateService", "TransactionEnded"]


class VirtualServer(VirtualServerFacade, Engine):
    """The reference vserver: the shared facade over the reference engine."""
