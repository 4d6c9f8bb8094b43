"""The pure-Python reference, the twin of leastload.engine.native: the oracle the C engine
is tested against (users import it as leastload.reference).

`VirtualServer` here is the reference's policy (ref_policy: slow start, ejection and the
utilization weights in plain Python, over the shared face of policy.py: settings, show(),
explain()) over the reference engine (oracle.py, which imports no policy); native.py puts
the same face over the C engine, whose core runs the policy. The pick rules both the
reference engine and explain() apply are rules.py.
"""
from .errors import DuplicateService, NoServiceAvailable, TransactionEnded, UnknownService
from .ref_policy import ReferencePolicy
from .oracle import Engine, ManualClock, Transaction

__all__ = ["ManualClock", "Engine", "VirtualServer", "Transaction", "NoServiceAvailable",
           "UnknownService", "DuplicateService", "TransactionEnded"]


class VirtualServer(ReferencePolicy, Engine):
    """The reference vserver: its policy and the shared facade over the reference engine."""
