"""The performance targets `python -m leastload bench` checks: what each measures, and why
one can be missed.

A target is a goal, not a check: a missed one is printed as MISSED with what stands
between its figure and its limit, and the command still exits 0 (`--strict` makes
a miss exit 1). Every target compares figures measured in the same run, mostly as
ratios of two things timed side by side, because these machines are shared and
noisy; a busy neighbour moves a ratio much less than an absolute time.

The notes say what each target measures and what costs lie between the figure and
its limit: the structure, never a measured figure (those go stale).
"""
from typing import Any, Callable, Dict, List, Optional, Tuple

Results = Dict[str, Any]

# kind -> (its title, what the target measures, why it can be missed)
NOTES: Dict[str, Tuple[str, str, str]] = {
    "select_over_noop": (
        "select() / _noop(1)",
        "select() (LEASTCONNECTION, random loads) over _noop(1), the extension's empty method taking and "
        "returning an int, per loop step, the two timed side by side: what a pick costs beyond the call into C.",
        "a pick climbs the tournament tree from the cursor, charges one transaction and refreshes the chosen "
        "leaf's path: a few hundred instructions (benchmarks/instructions.py counts them) against a call that "
        "does nothing, plus mispredicted branches that the empty call never has. At n=16,384 the tree's 14 levels "
        "and the service records no longer fit the L1 and L2 caches, and every pick lands on another service."),
    "replay_over_floor": (
        "replay / floor",
        "a trace replayed by the C batch path over the floor: a bare C loop that makes the same decisions "
        "(checked equal, request by request) with only the packed tree, N per service and the completion "
        "queue. The two are timed in turns.",
        "the replay keeps what the floor leaves out: the per-call state machine that lets a replay stop at an "
        "event or a slow-start deadline and resume exactly there, the window's bytes (LEASTCONNECTION records "
        "them too), the per-service results and the TTFB average. At n=16,384 each of these touches a random "
        "service's record a request, and the cache misses widen the gap."),
    "tied_over_random": (
        "all-tied / random",
        "select()+finish() with every service tied, over the same pair with random loads (LEASTCONNECTION), "
        "at the worst n: the vendor's tie rule (the first tied service after the last pick) must not turn "
        "into a scan.",
        "a tie is found by the same climb as any pick; a miss means the tied case climbed further than the "
        "random one, or one side met a busy moment of the machine (they are timed in turns)."),
    "replay_speedup": (
        "replay, C vs reference",
        "the C batch path over the reference replaying the head of the same trace call by call, at the "
        "worst n and method (x faster).",
        "the reference is the rules written plainly, O(n) scans included; a miss at small n means the C "
        "side's fixed cost a replay (its set-up) weighs on a short trace."),
    "percall_speedup": (
        "per-call, C vs reference",
        "the C engine's per-call pair over the reference's, at the worst n and method (x faster).",
        "at n=3 the reference scans almost nothing, and both pay the same Python call overhead."),
    "shared_over_private": (
        "shared / private",
        "select()+finish() on a vserver in shared memory (VirtualServer(shared=...)), one process, over the "
        "same on a private vserver, timed in turns: the price of sharing one engine between processes.",
        "every call on a shared vserver takes a robust process-shared mutex and keeps this process's ledger of "
        "open transactions (docs/shared.md)."),
    "methods_over_lc": (
        "every method / LEASTCONNECTION",
        "each method's per-call pair at n=64 over LEASTCONNECTION's, the worst method named: no method "
        "should cost more than twice the default.",
        "a hash method hashes the request's key and then scores every eligible service (rendezvous hashing "
        "is a scan: 64 scores at n=64, a few in vector registers at a time); each score's 64-bit multiplies "
        "are one instruction with AVX-512DQ/VL and several 32-bit ones without it, so on a processor without "
        "AVX-512 the limit is out of reach with unequal weights. The IP methods read and mask the address "
        "first. The methods are timed one after another, not in turns, so a busy machine moves this ratio "
        "more than the others."),
    "o1_by_n": (
        "P2C, PEAKEWMA by n",
        "P2C's (or PEAKEWMA's) pair at the largest n over the same at n=64: a pick draws two services, O(1).",
        "the instructions are the same at every n; what grows is the cache and TLB misses on two random "
        "services' records and names."),
    "worst_select": (
        "worst single select()",
        "the slowest single select() when every second rolls the window, at 10^6 services (the full run).",
        "the roll visits only the services with traffic in the window; a miss means the process was "
        "descheduled during that one call, or many services were live."),
    "bytes_per_service": (
        "bytes per service",
        "the C core's memory per service at the largest n, bound one by one and after reserve(n).",
        "a service holds 14 + 14 window buckets of 8 bytes, its totals, its record, its key and two tree "
        "nodes; a new per-service column (a method's input) adds to every service that uses it."),
}


def _target(kind: str, name: str, value: Optional[float], limit: float, lower_is_better: bool = True,
            where: str = "") -> Dict[str, Any]:
    bound = "at most" if lower_is_better else "at least"
    _, what, why = NOTES[kind]
    row = {"target": name, "kind": kind, "value": value, "bound": bound, "limit": limit, "met": None,
           "where": "not measured", "what": what, "why_missed": why}
    if value is not None:
        row["met"] = bool(value <= limit if lower_is_better else value >= limit)
        row["where"] = where
    return row


def targets(results: Results) -> List[Dict[str, Any]]:
    """The performance targets, each met, missed or not measured (met None)."""
    rows = {r["n"]: r for r in results["rows"]}
    out: List[Dict[str, Any]] = []
    for n, limit in ((64, 2.0), (16384, 4.0)):
        r = rows.get(n)
        # timed as the floor is: per loop step, the loop included
        out.append(_target("select_over_noop", f"select() / _noop(1) at n={n}", r and r["select_over_noop"],
                           limit, where=f"n={n}"))
    for method in ("LEASTCONNECTION", "LEASTBANDWIDTH"):
        for n in (64, 16384):
            r = rows.get(n)
            v = r["methods"][method]["replay_over_floor"] if r and method in r["methods"] else None
            out.append(_target("replay_over_floor", f"replay / floor, {method} at n={n}", v, 1.5,
                               where=f"{method} n={n}"))

    def worst(key: str, pick: Callable[[Dict[str, Any], str], Optional[float]],
              lower_is_better: bool = True) -> Tuple[Optional[float], str]:
        vals = [(pick(r, key), r["n"]) for r in results["rows"]]
        vals = [(v, n) for v, n in vals if v is not None]
        if not vals:
            return None, ""
        v, n = (max if lower_is_better else min)(vals)
        return v, f"worst at n={n}"

    v, where = worst("tied_over_random", lambda r, k: r[k])
    out.append(_target("tied_over_random", "all-tied / random select+finish (every n)", v, 1.5, where=where))
    for key, name, limit in (("replay_speedup", "replay C vs reference, x faster (every n, method)", 30.0),
                             ("percall_speedup", "per-call C vs reference, x faster (every n, method)", 10.0)):
        v, where = worst(key, lambda r, k: min((m[k] for m in r["methods"].values()), default=None), False)
        out.append(_target(key, name, v, limit, lower_is_better=False, where=where))
    shared = results.get("shared_n64")
    if shared:
        out.append(_target("shared_over_private", "shared / private vserver, select+finish at n=64 (one process)",
                           shared["shared_over_private"], 1.5, where=f"n={shared['n']}"))
    every = results.get("methods_n64") or []
    if every:
        worst_m = max(every, key=lambda r: r["over_lc"])
        out.append(_target("methods_over_lc", "per-call pair of every method / LEASTCONNECTION's at n=64",
                           worst_m["over_lc"], 2.0, where=f"worst: {worst_m['method']}"))
    for name, key in (("P2C", "p2c_by_n"), ("PEAKEWMA", "peakewma_by_n")):
        by_n = results.get(key) or []
        base = next((r for r in by_n if r["n"] == 64), None)
        if base and by_n[-1]["n"] > 64:
            out.append(_target("o1_by_n", f"{name} per-call pair at n={by_n[-1]['n']:,} / at n=64 (flat: O(1))",
                               by_n[-1]["ns"] / base["ns"], 2.0, where=f"n={by_n[-1]['n']:,}"))
    for w in results.get("worst_select", ()):
        if w["n"] >= 10**6:
            out.append(_target("worst_select",
                               f"worst single select() {w['method']} at n={w['n']:,}, every second rolling, ms",
                               w["worst_ms"], 1.0, where=f"mean {w['mean_us']:.2f} us"))
    if results["rows"]:
        big = results["rows"][-1]
        v = max(big["bytes_per_service"], big["bytes_per_service_reserved"])
        out.append(_target("bytes_per_service", f"bytes per service at n={big['n']} (bound, and reserved)", v, 320.0,
                           where=f"n={big['n']}"))
    return out
