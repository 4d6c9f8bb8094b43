"""How `leastload.bench` shows its results: a text table, JSON, a PNG plot."""
import json
import math
import textwrap
from typing import Any, Callable, Dict, List, Optional, Tuple

from .cases import SHORT
from .targets import NOTES

WIDTH = 100  # the notes' lines


def _fmt(v: Optional[float], kind: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if kind == "ns":
        return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"
    if kind == "x":
        return f"{v:,.0f}x" if v >= 100 else f"{v:.1f}x"
    if kind == "ratio":
        return f"{v:.2f}"
    return f"{v:,.0f}"


def _rows(results: Dict[str, Any]) -> List[Tuple[str, str, List[Any]]]:
    """(label, unit kind, value per size) for each line of the table."""
    rows = results["rows"]
    methods = list(rows[0]["methods"]) if rows else []
    lines: List[Tuple[str, str, List[Any]]] = []
    for m in methods:
        s, pair = SHORT[m], rows[0]["methods"][m]["pair"]

        def get(key: str, m: str = m) -> List[Any]:
            return [r["methods"][m][key] for r in rows]
        lines += [
            (f"replay {s}, ns/request, C fast path", "ns", get("replay_ns_c")),
            (f"replay {s}, ns/request, reference", "ns", get("replay_ns_ref")),
            (f"replay {s}, C faster by", "x", get("replay_speedup")),
            (f"replay {s}, ns/request, floor (bare C loop)", "ns", get("floor_ns")),
            (f"replay {s}, C fast path / floor", "ratio", get("replay_over_floor")),
            (f"{pair} {s}, ns, C", "ns", get("percall_ns_c")),
            (f"{pair} {s}, ns, reference", "ns", get("percall_ns_ref")),
            (f"{pair} {s}, C faster by", "x", get("percall_speedup")),
        ]
    col: Callable[[str], List[Any]] = lambda key: [r[key] for r in rows]  # noqa: E731
    lines += [
        ("select() LC, ns, C", "ns", col("select_ns")),
        ("select() / _noop(1), per loop step", "ratio", col("select_over_noop")),
        ("select() / _noop(1), calls only", "ratio", col("select_over_noop_net")),
        ("all-tied / random select+finish LC", "ratio", col("tied_over_random")),
        ("window roll, ns per service", "ns", col("roll_ns_per_service")),
        ("memory, bytes per service", "int", col("bytes_per_service")),
        ("memory after reserve(n), bytes/service", "int", col("bytes_per_service_reserved")),
    ]
    return lines


def _grid(header: List[str], body: List[List[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]

    def fmt(r: List[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    rule = "-" * len(fmt(header))
    return "\n".join([fmt(header), rule] + [fmt(r) for r in body])


def text(results: Dict[str, Any]) -> str:
    """The whole report: one table (a column per n), the floor, the targets."""
    rows = results["rows"]
    header = ["n ="] + [f"{r['n']:,}" for r in rows]
    body = [[label] + [_fmt(v, kind) for v in values] for label, kind, values in _rows(results)]
    floor = results["floor"]
    meta = results["meta"]
    out = [_grid(header, body), "",
           f"floor: _noop(1) {floor['noop_ns']:.1f} ns per call, the empty loop {floor['empty_loop_ns']:.1f} ns "
           "(select() / _noop(1) compares with the two measured beside select() at each n)",
           f"{meta['statistic']}; {meta['machine']}, Python {meta['python']}",
           f"trace: {meta['trace']}", ""]
    shared = results.get("shared_n64")
    if shared:
        out += [f"shared vserver (one segment, the lock per call), select+finish LEASTCONNECTION at n={shared['n']}: "
                f"{shared['shared_ns']:.1f} ns vs {shared['private_ns']:.1f} ns private "
                f"({shared['shared_over_private']:.2f}x); with a second process hammering it: "
                f"{shared['contended_ns']:.1f} ns here, {shared['contended_per_s']:,.0f} and "
                f"{shared['other_per_s']:,.0f} calls/s per process", ""]
    for r in results.get("methods_n64", ()):
        out.append(f"per-call {r['pair']} {r['method']} at n={r['n']}: {r['ns']:.1f} ns, "
                   f"{r['over_lc']:.2f}x LEASTCONNECTION's")
    if results.get("methods_n64"):
        out.append("")
    for name, key in (("P2C", "p2c_by_n"), ("PEAKEWMA", "peakewma_by_n")):
        if results.get(key):
            out.append(f"{name} per-call select+finish by n: " + ", ".join(
                f"{r['n']:,}: {r['ns']:.1f} ns" for r in results[key]))
    if results.get("p2c_by_n"):
        out.append("")
    for w in results.get("worst_select", ()):
        out.append(f"worst single select() at n={w['n']:,}, {w['method']}, every second rolling: "
                   f"{w['worst_ms']:.3f} ms (mean {w['mean_us']:.2f} us)")
    if results.get("worst_select"):
        out.append("")
    trows = []
    for t in results["targets"]:
        verdict = {True: "met", False: "MISSED", None: "not measured"}[t["met"]]
        value = "-" if t["value"] is None else f"{t['value']:,.2f}"
        op = "<=" if t["bound"] == "at most" else ">="
        trows.append([t["target"], value, f"{op} {t['limit']:g}", verdict, t["where"]])
    out.append(_grid(["target", "value", "limit", "", ""], trows))
    out += ["", *notes(results["targets"])]
    return "\n".join(out)


def notes(targets: List[Dict[str, Any]]) -> List[str]:
    """Under the targets' table: what each kind of target measures and, for a missed one,
    what stands between its figure and its limit; then how many were missed."""
    lines = ["What the targets measure (each compares figures of this run):"]
    kinds: Dict[str, List[Dict[str, Any]]] = {}
    for t in targets:
        kinds.setdefault(t["kind"], []).append(t)
    for kind, rows in kinds.items():
        lines += textwrap.wrap(f"- {NOTES[kind][0]}: {rows[0]['what']}", WIDTH, subsequent_indent="  ")
        missed = [t for t in rows if t["met"] is False]
        if missed:
            which = ", ".join(t["where"] for t in missed)
            lines += textwrap.wrap(f"MISSED ({which}): {rows[0]['why_missed']}", WIDTH,
                                   initial_indent="  ", subsequent_indent="  ")
    count = sum(t["met"] is False for t in targets)
    lines += ["", f"{count} of {len(targets)} targets missed. A target is a goal, not a check: the exit status "
                  "is 0 unless --strict."]
    return lines


def write_json(results: Dict[str, Any], path: str) -> None:
    with open(path, "w") as fh:
        json.dump(results, fh, indent=2, allow_nan=True)
        fh.write("\n")


def plot(results: Dict[str, Any], path: str) -> bool:
    """ns/op against n on log axes. False if matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = results["rows"]
    ns = [r["n"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 6))
    for m in rows[0]["methods"] if rows else []:
        s, pair = SHORT[m], rows[0]["methods"][m]["pair"]
        for key, label, style in (("replay_ns_c", f"replay {s} (C)", "o-"),
                                  ("replay_ns_ref", f"replay {s} (reference)", "o--"),
                                  ("percall_ns_c", f"{pair} {s} (C)", "s-"),
                                  ("percall_ns_ref", f"{pair} {s} (reference)", "s--")):
            ax.plot(ns, [r["methods"][m][key] for r in rows], style, label=label)
    ax.plot(ns, [r["select_ns"] for r in rows], "^-", label="select() LC (C)")
    # (a label starting with "_" would be left out of the legend)
    ax.axhline(results["floor"]["noop_ns"], color="grey", linestyle=":", label="empty call noop(1) (C)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(ns, [f"{n:,}" for n in ns])
    ax.minorticks_off()
    ax.set_xlabel("services (n)")
    ax.set_ylabel("ns per operation (replay: per request)")
    ax.set_title("leastload: C engine and pure-Python reference")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
