"""The C engine behind the shared facade: what `leastload` exports by default."""

from ._engine import Engine, ManualClock, Transaction, monotonic, unlink_shared
from .errors import DuplicateService, NoServiceAvailable, TransactionEnded, UnknownService
from .policy import VirtualServerFacade

IMPLEMENTATION = "c"


class VirtualServer(VirtualServerFacade, Engine):
    __doc__ = Engine.__doc__


__all__ = [
    "VirtualServer",
    "ManualClock",
    "Engine",
    "monotonic",
    "NoServiceAvailable",
    "UnknownService",
    "DuplicateService",
    "TransactionEnded",
    "Transaction",
    "unlink_shared",
]
