"""The pure-Python reference: the oracle the C engine is tested against.

`VirtualServer` here is the reference's policy (leastload.engine.ref_policy: slow
start, ejection and the utilization weights in plain Python, over the shared face of
leastload.engine.policy: settings, show(), explain()) over the reference engine
(leastload.engine.oracle, which imports no policy); leastload.engine.native puts the
same face over the C engine, whose core runs the policy. The pick rules both the reference engine and
explain() apply are leastload.engine.rules.
"""
from .engine.errors import DuplicateService, NoServiceAvailable, TransactionEnded, UnknownService
from .engine.ref_policy import ReferencePolicy
from .engine.oracle import Engine, ManualClock, Transaction

__all__ = ["ManualClock", "Engine", "VirtualServer", "Transaction", "NoServiceAvailable",
           "UnknownService", "DuplicateService", "TransactionEnded"]


class VirtualServer(ReferencePolicy, Engine):
    """The reference vserver: its policy and the shared facade over the reference engine."""
