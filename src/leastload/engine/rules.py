"""The pick rules, once, as functions over plain data (docs/semantics.md says them in words).

The reference engine (leastload.reference) picks with these functions, and
vs.explain() applies the same functions to the state it reads back from
either engine, so the two cannot tell different stories. The C core
(csrc/) is the only other copy; tests/engine/test_differential.py holds it to
this one.

A pick sees the bound services in bind order as `Seen` records; positions
are indexes into that sequence. The cursor is a count: how many bound
services are at or before the service picked last (0: before the first), so
"the first after the cursor" is the first candidate at a position >= cursor.
"""
from typing import Callable, Collection, Dict, NamedTuple, Optional, Sequence, Tuple

from .methods import HASH_METHODS
from ..hashing.rendezvous import KEY_FORMS, KeySettings, rendezvous_rank, xxh64
from .methods import BY_NAME
from .peakewma import load as peakewma_load

__all__ = ["Seen", "Pick", "N_OF", "n_of", "key_of", "why_not", "uses_startup_rr", "key_hash",
           "rank", "first_after", "round_robin", "splitmix64", "draw_two", "better_of_two", "pick"]

_MASK64 = 2**64 - 1
DRAW_TRIES = 64  # P2C, PEAKEWMA: draws per choice before giving up


class Seen(NamedTuple):
    """One bound service as a pick sees it (integers exactly as the engines compare them)."""
    name: str
    weight: int
    state: str              # "UP", "DOWN" or "OUT_OF_SERVICE"
    draining: bool
    ejected: bool
    cap: Optional[int]      # slow start: picks allowed this second; None: no cap
    sel_this_sec: int       # picks this second
    over_threshold: bool    # CUSTOMLOAD: a metric at or over its threshold
    active: int             # open transactions
    ttfb_us: int            # smoothed TTFB (LEASTRESPONSETIME), microseconds
    probe_us: int           # smoothed probe time (LRTM), microseconds
    bytes: int              # in the window (LEASTBANDWIDTH)
    packets: int            # in the window (LEASTPACKETS)
    custom_load: int        # CUSTOMLOAD's load
    peak_us: int            # PEAKEWMA's estimate E(now), microseconds
    name_hash: int          # the hash methods' side of the service (_hash.name_hash(name))


# ---- N, the key, eligibility ------------------------------------------------------

# N of each method: what it counts for a service.
N_OF: Dict[str, Callable[[Seen], int]] = {
    "ROUNDROBIN": lambda s: s.active,  # no N of its own: activity is reported
    "LEASTCONNECTION": lambda s: s.active,
    "LEASTREQUEST": lambda s: s.active,  # a transaction here is one request
    "LEASTRESPONSETIME": lambda s: s.active * s.ttfb_us,
    "LRTM": lambda s: s.active * s.probe_us,
    "LEASTBANDWIDTH": lambda s: s.bytes,
    "LEASTPACKETS": lambda s: s.packets,
    "CUSTOMLOAD": lambda s: s.custom_load,
    "P2C": lambda s: s.active,  # compared between the two services drawn
    "PEAKEWMA": lambda s: peakewma_load(s.peak_us, s.active),  # E(now) * (active + 1)
    # the hash methods pick by key (rendezvous); N is what DOMAINHASH without a domain uses
    **{m: (lambda s: s.active) for m in HASH_METHODS},
}


def n_of(method: str, s: Seen) -> int:
    """N of the method, an exact int (LEASTRESPONSETIME, LRTM, PEAKEWMA: microseconds)."""
    return N_OF[method](s)


def key_of(method: str, s: Seen) -> int:
    """The sort key compared (the lowest wins): floor(N * 10000 / weight). CUSTOMLOAD
    puts idle services first (0) and the others one above that."""
    key = n_of(method, s) * 10000 // s.weight
    if method == "CUSTOMLOAD":
        return 0 if s.active == 0 else key + 1
    return key


def why_not(method: str, s: Seen, excluded: bool = False) -> Tuple[str, ...]:
    """Why `s` cannot be picked; empty: it is eligible."""
    reasons = []
    if s.state != "UP":
        reasons.append(s.state)
    if s.draining:
        reasons.append("draining")
    if s.ejected:
        reasons.append("ejected")
    if s.cap is not None and s.sel_this_sec >= s.cap:
        reasons.append(f"slow start: {s.cap} picks this second")
    if method == "CUSTOMLOAD" and s.over_threshold:
        reasons.append("a metric at or over its threshold")
    if excluded:
        reasons.append("excluded")
    return tuple(reasons)


def uses_startup_rr(method: str, startup_rr_left: int) -> bool:
    """Whether the next pick is a startup round-robin pick: the least-load family only
    (neither ROUNDROBIN, the hash methods nor the sampled ones use or count it down)."""
    return startup_rr_left > 0 and BY_NAME[method].family == "least"


# ---- the ways of choosing ------------------------------------------------------------

def first_after(candidates: Sequence[int], cursor: int) -> int:
    """The first candidate position (ascending) after the cursor, else the first."""
    return next((i for i in candidates if i >= cursor), candidates[0])


def round_robin(services: Sequence[Seen], eligible: Sequence[int], cursor: int, r: int) -> Tuple[int, int]:
    """Weighted round robin's step from round r: (the position picked, the round it was
    picked in). The first eligible after the cursor with weight >= r; none left: the
    next round (after the highest weight, round 1 again), from the start."""
    after = [i for i in eligible if services[i].weight >= r and i >= cursor]
    if after:
        return after[0], r
    r += 1
    if r > max(services[i].weight for i in eligible):
        r = 1
    return next(i for i in eligible if services[i].weight >= r), r


def key_hash(method: str, key: object, settings: KeySettings, seed: int) -> Optional[int]:
    """The hash methods' hash of a request key (validated: TypeError, ValueError); None
    when the method is not a hash method (the key is ignored) or DOMAINHASH has no domain."""
    form = KEY_FORMS.get(method)
    data = None if form is None else form(key, settings)
    return None if data is None else xxh64(data, seed)


def rank(key_h: int, s: Seen, position: int) -> Tuple[int, int, int]:
    """A service's rendezvous rank for a key (the least wins; _hash.rendezvous_rank)."""
    return rendezvous_rank(key_h, s.name_hash, s.weight, position)


def splitmix64(state: int) -> Tuple[int, int]:
    """One step of splitmix64: (the next state, the value drawn)."""
    state = (state + 0x9E3779B97F4A7C15) & _MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return state, z ^ (z >> 31)


def draw_two(bound: int, ok: Callable[[int], bool], first_ok: int, state: int
             ) -> Tuple[Tuple[int, Optional[int]], int]:
    """The sampled methods' draws: two distinct eligible positions out of `bound`, each
    drawn as a rank in bind order (DRAW_TRIES tries each). The first choice finding none
    takes `first_ok`, the first eligible; the second finding none (or fewer than two
    bound) is None. Returns the draws and the generator's next state."""
    def draw(other: Optional[int]) -> Optional[int]:
        nonlocal state
        for _ in range(DRAW_TRIES):
            state, value = splitmix64(state)
            i = value % bound
            if i != other and ok(i):
                return i
        return None

    a = draw(None)
    if a is None:
        a = first_ok
    b = draw(a) if bound >= 2 else None
    return (a, b), state


def better_of_two(method: str, services: Sequence[Seen], a: int, b: Optional[int]) -> int:
    """The sampled methods' choice between the two drawn: the lower key, `a` on a tie."""
    return b if b is not None and key_of(method, services[b]) < key_of(method, services[a]) else a


# ---- one pick ---------------------------------------------------------------------------

class Pick(NamedTuple):
    """What a pick chose and why; `chosen` None: nothing eligible (or, replaying
    recorded draws, a service drawn is gone or no longer eligible)."""
    chosen: Optional[int]                # a position in bind order
    rule: str                            # the rule that decided, in one line
    tie: Tuple[int, ...] = ()            # least load: the eligible sharing the lowest key
    rr_round: int = 1                    # ROUNDROBIN: the round after the pick
    drawn: Tuple[Optional[int], ...] = ()  # sampled: the positions drawn
    rng: int = 0                         # sampled: the generator's state after the draws


def pick(method: str, services: Sequence[Seen], exclude: Collection[str], cursor: int, rr_round: int,
         startup: bool, key_h: Optional[int], rng: int,
         drawn: Optional[Tuple[Optional[int], ...]] = None) -> Pick:
    """The pick of `method` over `services` (bound, in bind order): `cursor` as above,
    `rr_round` the round robin's round, `startup` whether it is a startup round-robin
    pick, `key_h` the request key's hash (key_hash; None: no key), `rng` the draws'
    state. `drawn`: the positions a sampled pick drew, to replay them instead of drawing."""
    eligible = tuple(i for i, s in enumerate(services) if not why_not(method, s, s.name in exclude))
    family = BY_NAME[method].family
    if not eligible:
        return Pick(None, "no service is eligible", rr_round=rr_round, rng=rng)
    if startup:
        return Pick(first_after(eligible, cursor), "startup round robin: the first eligible service "
                    "after the cursor", rr_round=rr_round, rng=rng)
    if key_h is not None:
        chosen = min(eligible, key=lambda i: rank(key_h, services[i], i))
        return Pick(chosen, "rendezvous hashing: the least rank of the request key (weighted)",
                    rr_round=rr_round, rng=rng)
    if family == "roundrobin":
        chosen, after = round_robin(services, eligible, cursor, rr_round)
        return Pick(chosen, f"weighted round robin, round {rr_round}: the first eligible service "
                    "after the cursor with weight >= round", rr_round=after, rng=rng)
    if family == "sampled":
        rule = "two services drawn at random: the lower key, the first drawn on a tie"
        if drawn is None:
            ok = set(eligible)
            drawn, rng = draw_two(len(services), ok.__contains__, eligible[0], rng)
        first, second = (tuple(drawn) + (None, None))[:2]
        if first is None or any(d is not None and d not in eligible for d in (first, second)):
            return Pick(None, rule, rr_round=rr_round, drawn=drawn, rng=rng)
        return Pick(better_of_two(method, services, first, second), rule, rr_round=rr_round,
                    drawn=drawn, rng=rng)
    # the least-load family, and DOMAINHASH without a domain (LEASTCONNECTION's N)
    keys = {i: key_of(method, services[i]) for i in eligible}
    lowest = min(keys.values())
    tie = tuple(i for i in eligible if keys[i] == lowest)
    return Pick(first_after(tie, cursor), "the lowest key floor(N x 10000 / weight); ties: the first "
                "after the cursor", tie=tie, rr_round=rr_round, rng=rng)

