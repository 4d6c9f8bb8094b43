"""The pure-Python reference: the oracle the C engine is tested against.

`VirtualServer` here is the shared policy (leastload._facade: settings, slow
start, ejection, show(), explain()) over the reference engine
(leastload._oracle, which imports no policy), as leastload._native puts the
same policy over the C engine. The pick rules both the reference engine and
explain() apply are leastload._rules.
"""
from ._errors import DuplicateService, NoServiceAvailable, TransactionEnded, UnknownService
from ._facade import VirtualServerFacade
from ._oracle import Engine, ManualClock, Transaction

__all__ = ["ManualClock", "Engine", "VirtualServer", "Transaction", "NoServiceAvailable",
           "UnknownService", "DuplicateService", "TransactionEnded"]


class VirtualServer(VirtualServerFacade, Engine):
    """The reference vserver: the shared facade over the reference engine."""
