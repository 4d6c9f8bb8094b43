"""vs.explain(): why the last pick went where it did, for both engines alike.

A pick costs explain() nothing but a few stores: each engine keeps the state
the pick was made from that the pick itself overwrote (the cursor, the round,
whether it was a startup pick, the services P2C/PEAKEWMA drew, the exclude and
key it was given; `_last_pick()`). explain() reads the services as they are
now (`snapshot()`, which does not read the clock), takes back the pick's own
charge from the service picked (one active transaction, one selection this
second), and applies the method's rule to the result. When nothing but the
pick changed the vserver since, that is the state the pick saw; the rule is
applied again, and `reproduced` says whether it gives the same service (False:
the vserver changed between the pick and explain()).

The numbers are restated from info() here, so they are exact integers: N as
the engines compare it and the sort key floor(N * 10000 / weight).
"""
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from . import _hash, _peakewma
from ._methods import BY_NAME

__all__ = ["Candidate", "Explanation", "explain"]


@dataclass(frozen=True)
class Candidate:
    """One bound service as the pick saw it."""
    name: str
    weight: int
    active: int             # open transactions before the pick
    n: int                  # N as compared: an exact int (microseconds for the time-based methods)
    key: Optional[int]      # the sort key compared (the lowest wins); None: the method has none
    eligible: bool
    why_not: Tuple[str, ...]  # empty when eligible: DOWN, draining, excluded, ...


@dataclass(frozen=True)
class Explanation:
    """Why the last pick went to `chosen`: what vs.explain() returns; str() gives a table."""
    method: str
    chosen: str
    rule: str                       # the rule that decided, in one line
    cursor: Optional[str]           # the service at the cursor before the pick (ties start after it)
    candidates: Tuple[Candidate, ...]  # every bound service, in bind order
    tie: Tuple[str, ...]            # the eligible services sharing the lowest key (least-load picks)
    drawn: Tuple[str, ...]          # P2C, PEAKEWMA: the services drawn, in draw order
    rr_round: Optional[int]         # ROUNDROBIN: the round when the pick began
    key: object                     # the request key given to the pick (hash methods)
    reproduced: bool                # the rule applied to these figures gives `chosen` again

    def __str__(self) -> str:
        lines = [f"{self.method}: {self.chosen} ({self.rule})"]
        if self.cursor is not None:
            lines.append(f"cursor: {self.cursor} (ties go to the first after it)")
        if self.tie:
            lines.append("tie: " + ", ".join(self.tie))
        if self.drawn:
            lines.append("drawn: " + ", ".join(self.drawn))
        lines.append(f"{'service':<16} {'weight':>6} {'active':>6} {'N':>14} {'key':>18}  eligible")
        for c in self.candidates:
            mark = "yes" if c.eligible else "no: " + ", ".join(c.why_not)
            key = "-" if c.key is None else str(c.key)
            lines.append(f"{c.name:<16} {c.weight:>6} {c.active:>6} {c.n:>14} {key:>18}  {mark}")
        if not self.reproduced:
            lines.append("(the vserver changed since the pick: these figures are today's)")
        return "\n".join(lines)


def _us(seconds: Optional[float]) -> int:
    """info()'s seconds back to the engines' integer microseconds (exact below 2**53 us)."""
    return 0 if seconds is None else round(seconds * 1e6)


def _n(method: str, info: Dict[str, Any], active: int) -> int:
    """N of the method for a service with `active` open transactions."""
    if method == "LEASTRESPONSETIME":
        return active * _us(info["ttfb"])
    if method == "LRTM":
        return active * _us(info["probe"])
    if method == "LEASTBANDWIDTH":
        return int(info["bytes"])
    if method == "LEASTPACKETS":
        return int(info["packets"])
    if method == "CUSTOMLOAD":
        return int(info["custom_load"])
    if method == "PEAKEWMA":
        return _peakewma.load(_us(info["peak_ewma"]), active)
    return active  # the active-transaction methods, and what round robin and hashing report


def _sort_key(method: str, n: int, weight: int, active: int) -> int:
    """The key the engines compare: floor(N * 10000 / weight); CUSTOMLOAD puts idle first."""
    if method == "CUSTOMLOAD":
        return 0 if active == 0 else n * 10000 // weight + 1
    return n * 10000 // weight


def _why_not(method: str, info: Dict[str, Any], sel_this_sec: int, excluded: bool) -> Tuple[str, ...]:
    reasons = []
    if info["state"] != "UP":
        reasons.append(info["state"])
    if info["draining"]:
        reasons.append("draining")
    if info["ejected"]:
        reasons.append("ejected")
    if info["cap"] is not None and sel_this_sec >= info["cap"]:
        reasons.append(f"slow start: {info['cap']} picks this second")
    if method == "CUSTOMLOAD" and info["over_threshold"]:
        reasons.append("a metric at or over its threshold")
    if excluded:
        reasons.append("excluded")
    return tuple(reasons)


def _first_after(names: List[str], order: List[str], cursor: int) -> Optional[str]:
    """The first of `names` after bind position `cursor` (1-based count), cyclically."""
    chosen = [n for n in order if n in names]
    after = [n for n in chosen if order.index(n) >= cursor]
    return (after or chosen)[0] if chosen else None


def explain(vs: Any) -> Explanation:
    """The explanation of vs's last charged pick; LookupError when there is none."""
    with vs.atomic():
        record = vs._last_pick()
        snap = vs.snapshot()
        settings = (vs._key_settings, vs._hash_seed)
    if record is None:
        raise LookupError("explain(): no pick to explain (none since the vserver was made or its "
                          "method set, or the service picked was unbound since)")
    method = snap["method"]
    family = BY_NAME[method].family
    chosen = record["service"]
    excluded = set(record["exclude"])
    order = [info["name"] for info in snap["services"]]
    candidates = []
    for position, info in enumerate(snap["services"]):
        mine = info["name"] == chosen  # its own charge is taken back
        active = info["active"] - mine
        sel_this = info["sel_this_sec"] - mine
        n = _n(method, info, active)
        weight = info["weight"]
        why = _why_not(method, info, sel_this, info["name"] in excluded)
        key = None if family in ("roundrobin", "hash") else _sort_key(method, n, weight, active)
        candidates.append(Candidate(info["name"], weight, active, n, key, not why, why))
    eligible = [c for c in candidates if c.eligible]
    names = [c.name for c in eligible]
    cursor = record["cursor"]
    cursor_name = order[cursor - 1] if cursor > 0 else None
    tie: Tuple[str, ...] = ()
    drawn = tuple(d for d in record["drawn"] if d is not None)
    key_data = _hash.KEY_FORMS[method](record["key"], settings[0]) if family == "hash" else None
    expected: Optional[str]
    if record["startup"]:
        rule = "startup round robin: the first eligible service after the cursor"
        expected = _first_after(names, order, cursor)
    elif family == "hash" and key_data is not None:
        key_h = _hash.xxh64(key_data, settings[1])
        ranks = {c.name: _hash.rendezvous_rank(key_h, _hash.name_hash(c.name), c.weight, order.index(c.name))
                 for c in eligible}
        candidates = [_ranked(c, ranks) for c in candidates]
        rule = "rendezvous hashing: the least rank of the request key (weighted)"
        expected = min(ranks, key=ranks.__getitem__) if ranks else None
    elif family == "roundrobin":
        r = record["rr_round"]
        rule = f"weighted round robin, round {r}: the first eligible service after the cursor with weight >= round"
        expected = _round_robin(eligible, order, cursor, r)
    elif family == "sampled":
        rule = "two services drawn at random: the lower key, the first drawn on a tie"
        keyed = {c.name: c.key or 0 for c in candidates}  # every sampled candidate has a key
        expected = drawn[0] if len(drawn) < 2 or keyed[drawn[0]] <= keyed[drawn[1]] else drawn[1]
    else:  # the least-load family (and DOMAINHASH without a domain)
        if family == "hash":
            candidates = [_with_key(c, _sort_key("LEASTCONNECTION", c.n, c.weight, c.active)) for c in candidates]
            eligible = [c for c in candidates if c.eligible]
        lowest = min((c.key for c in eligible if c.key is not None), default=None)
        tie = tuple(c.name for c in eligible if c.key == lowest)
        rule = "the lowest key floor(N x 10000 / weight); ties: the first after the cursor"
        expected = _first_after(list(tie), order, cursor)
    return Explanation(method, chosen, rule, cursor_name, tuple(candidates), tie, drawn,
                       record["rr_round"] if family == "roundrobin" else None, record["key"],
                       expected == chosen)


def _ranked(c: Candidate, ranks: Dict[str, Tuple[int, int, int]]) -> Candidate:
    """A hash candidate's key: its rank's first part (L / weight, scaled), when eligible."""
    return _with_key(c, ranks[c.name][0] if c.name in ranks else None)


def _with_key(c: Candidate, key: Optional[int]) -> Candidate:
    return Candidate(c.name, c.weight, c.active, c.n, key, c.eligible, c.why_not)


def _round_robin(eligible: List[Candidate], order: List[str], cursor: int, r: int) -> Optional[str]:
    """The weighted round-robin pick from round r (as the engines make it)."""
    if not eligible:
        return None
    after = [c.name for c in eligible if c.weight >= r and order.index(c.name) >= cursor]
    if after:
        return after[0]
    r = r + 1 if r < max(c.weight for c in eligible) else 1
    return next(c.name for c in eligible if c.weight >= r)
