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

No rule is written here: the snapshot is turned back into the plain data the
pick rules take (leastload.engine.rules.Seen, integers exactly as the engines
compare them) and the rules' own functions are applied to it, the same
functions the reference engine picks with.

When a figure shows that the pick's own charge is already gone (the chosen
service has no open transaction, or no selection this second, left to take
back: a transaction ended or a second began since), nothing is taken back
from it, `changed` says so and `reproduced` is False.
"""
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..hashing.rendezvous import name_hash
from .methods import BY_NAME
from .rules import Seen, key_hash, key_of, n_of, pick, rank, why_not

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
    reproduced: bool                # the rule applied to these figures gives `chosen` again (and
                                    # nothing in `changed`)
    changed: Tuple[str, ...] = ()   # what shows the vserver changed since the pick

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
        lines.extend(f"({why})" for why in self.changed)
        return "\n".join(lines)


def _us(seconds: Optional[float]) -> int:
    """info()'s seconds back to the engines' integer microseconds (exact below 2**53 us)."""
    return 0 if seconds is None else round(seconds * 1e6)


def _seen(info: Dict[str, Any], active: int, sel_this_sec: int) -> Seen:
    """A snapshot's service as the pick rules see it (with the given counts)."""
    return Seen(info["name"], info["weight"], info["state"], info["draining"], info["ejected"], info["cap"],
                sel_this_sec, info["over_threshold"], active, _us(info["ttfb"]), _us(info["probe"]),
                int(info["bytes"]), int(info["packets"]), int(info["custom_load"]), _us(info["peak_ewma"]),
                name_hash(info["name"]))


def _taken_back(info: Dict[str, Any], changed: List[str]) -> Seen:
    """The chosen service before its pick: one open transaction and one selection this
    second fewer, unless that charge is gone already (then said in `changed`)."""
    active, sel_this_sec = info["active"], info["sel_this_sec"]
    if active > 0:
        active -= 1
    else:
        changed.append(f"{info['name']} has no open transaction left: the pick's has ended since")
    if sel_this_sec > 0:
        sel_this_sec -= 1
    else:
        changed.append(f"{info['name']} has no selection this second: a new second began since the pick")
    return _seen(info, active, sel_this_sec)


def explain(vs: Any) -> Explanation:
    """The explanation of vs's last charged pick; LookupError when there is none."""
    with vs.atomic():
        record = vs._last_pick()
        snap = vs.snapshot()
        settings = (vs._key_settings, vs._hash_seed)
        # slow_start_guard: the ramps its last boundary held back, and why
        held = {info["name"]: ramp["held"] for info in snap["services"]
                if info["cap"] is not None and (ramp := vs.slow_start(info["name"])) and ramp.get("held")}
    if record is None:
        raise LookupError("explain(): no pick to explain (none since the vserver was made or its "
                          "method set, or the service picked was unbound since)")
    method = snap["method"]
    family = BY_NAME[method].family
    chosen = record["service"]
    excluded = set(record["exclude"])
    changed: List[str] = []
    services = [_taken_back(info, changed) if info["name"] == chosen
                else _seen(info, info["active"], info["sel_this_sec"]) for info in snap["services"]]
    order = [s.name for s in services]
    where = {name: i for i, name in enumerate(order)}
    drawn = tuple(None if d is None else where.get(d) for d in record["drawn"])
    key_h = key_hash(method, record["key"], *settings)
    made = pick(method, services, excluded, record["cursor"], record["rr_round"], record["startup"],
                key_h, 0, drawn if family == "sampled" else None)
    candidates = []
    for i, s in enumerate(services):
        why = why_not(method, s, s.name in excluded)
        if s.name in held:  # a capped service's cap, and why the closed loop keeps it there
            why = tuple(w + f" (held back: {held[s.name]})" if w.startswith("slow start:") else w for w in why)
        if key_h is not None:  # the rank's first part (L / weight, scaled); none when not eligible
            key: Optional[int] = None if why else rank(key_h, s, i)[0]
        else:  # round robin compares no key; a hash method without a key is LEASTCONNECTION
            key = None if family == "roundrobin" else key_of(method, s)
        candidates.append(Candidate(s.name, s.weight, s.active, n_of(method, s), key, not why, why))
    cursor = record["cursor"]
    expected = None if made.chosen is None else order[made.chosen]
    return Explanation(method, chosen, made.rule, order[cursor - 1] if cursor > 0 else None,
                       tuple(candidates), tuple(order[i] for i in made.tie),
                       tuple(d for d in record["drawn"] if d is not None),
                       record["rr_round"] if family == "roundrobin" else None, record["key"],
                       expected == chosen and not changed, tuple(changed))
