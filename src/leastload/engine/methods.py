"""The method registry: every load-balancing method once, for every part that needs it.

A row says what the C core's method list says (its name and enum value, one
line each in csrc/methods/list.h; its family; whether this engine implements
it) and what the Python side needs around it: the unit of N as `load()` and
`show()` report it, and the per-call pair the benchmarks time. The C engine
checks its own table against this one when it is imported (`check_against_c`),
so the two cannot drift apart silently.

Adding a least-X method touches three source files: its LL_LEAST line in
csrc/methods/list.h (its value and its N as a C expression: that line makes
its enum value, key, row and replay loop; see csrc/ll_method.h), its N in the
reference (`rules.N_OF`, which the reference and explain() share), and its row
here; then its tests and docs.
"""
from typing import Iterable, NamedTuple


class Method(NamedTuple):
    name: str        # as the vendor spells it
    value: int       # the C enum's value (csrc/methods/list.h)
    family: str      # "least", "roundrobin", "hash" or "sampled"
    unit: str        # what N counts; "seconds": kept in microseconds, shown as seconds
    pair: str        # the per-call pair the benchmarks time
    short: str       # its abbreviation in benchmark tables and on the command line
    supported: bool  # False: the vendor's method, not implemented by this engine yet


TABLE = (
    Method("ROUNDROBIN", 0, "roundrobin", "active transactions", "select+finish", "RR", True),
    Method("LEASTCONNECTION", 1, "least", "active transactions", "select+finish", "LC", True),
    Method("LEASTRESPONSETIME", 2, "least", "seconds", "select+finish", "LRT", True),
    Method("LEASTBANDWIDTH", 3, "least", "bytes", "select+record", "LB", True),
    Method("LEASTPACKETS", 4, "least", "packets", "select+record", "LP", True),
    Method("LEASTREQUEST", 5, "least", "active requests", "select+finish", "LR", True),
    Method("LRTM", 6, "least", "seconds", "select+finish", "LRTM", True),
    Method("CUSTOMLOAD", 7, "least", "load", "select+finish", "CL", True),
    Method("SOURCEIPHASH", 8, "hash", "active transactions", "select(key)+finish", "SIPH", True),
    Method("DESTINATIONIPHASH", 9, "hash", "active transactions", "select(key)+finish", "DIPH", True),
    Method("SRCIPDESTIPHASH", 10, "hash", "active transactions", "select(key)+finish", "SDIPH", True),
    Method("SRCIPSRCPORTHASH", 11, "hash", "active transactions", "select(key)+finish", "SIPPH", True),
    Method("URLHASH", 12, "hash", "active transactions", "select(key)+finish", "URLH", True),
    Method("DOMAINHASH", 13, "hash", "active transactions", "select(key)+finish", "DOMH", True),
    Method("CALLIDHASH", 14, "hash", "active transactions", "select(key)+finish", "CIDH", True),
    Method("TOKEN", 15, "hash", "active transactions", "select(key)+finish", "TOKEN", True),
    # not the vendor's
    Method("P2C", 16, "sampled", "active transactions", "select+finish", "P2C", True),
    Method("PEAKEWMA", 17, "sampled", "seconds", "select+finish", "PEWMA", True),
)

BY_NAME = {m.name: m for m in TABLE}
METHODS = tuple(m.name for m in TABLE if m.supported)  # what VirtualServer(method=...) accepts
ALL_METHODS = tuple(m.name for m in TABLE)              # the vendor's, this engine's or not
HASH_METHODS = tuple(m.name for m in TABLE if m.family == "hash")
IN_SECONDS = frozenset(m.name for m in TABLE if m.unit == "seconds")
BY_PACKETS = frozenset(m.name for m in TABLE if m.unit == "packets")  # a proxy reads TCP_INFO per response
# the hash methods whose select() needs the request's key (DOMAINHASH without one is LEASTCONNECTION)
NEEDS_KEY = frozenset(m.name for m in TABLE if m.family == "hash" and m.name != "DOMAINHASH")
KEYLESS_METHODS = tuple(m for m in METHODS if m not in NEEDS_KEY)  # select() works without a key


def check_against_c(names: Iterable[str], supported: Iterable[bool]) -> None:
    """Raises ImportError unless the C core's table (its names in enum order, and
    which it implements) is this registry's."""
    mine = [(m.name, m.supported) for m in sorted(TABLE, key=lambda m: m.value)]
    theirs = list(zip(names, supported))
    if [m.value for m in sorted(TABLE, key=lambda m: m.value)] != list(range(len(TABLE))) or mine != theirs:
        raise ImportError(f"leastload's C method table {theirs} does not match the Python registry {mine}: "
                          "rebuild the package")
