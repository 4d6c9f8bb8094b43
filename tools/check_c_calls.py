"""Check that the C files of csrc/ call each other one way: no circle between files.

Usage: python tools/check_c_calls.py [CSRC_DIR]      (default: csrc)

A file calls another when it calls an ll_* function that the other defines (not
static: read from the text, comments left out; a macro is not followed). The files
are the nodes of a graph; a circle (a strongly connected set of two or more files)
is an error, printed with the calls that make it (exit status 1), unless its files
are one unit of UNITS or its edges are in EXCEPTIONS (listed, each with why).
"""
import pathlib
import re
import sys
from typing import Dict, List, Set, Tuple

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from check_import_cycles import cycles  # noqa: E402  (the tool beside this one)

# files that are one unit: the policy (ll_policy.c) calls its parts and they call its helpers
UNITS: List[Set[str]] = [
    {"ll_policy.c", "ll_slowstart.c", "ll_ejection.c", "ll_utilization.c"},
]
# (caller, callee): allowed for now, with why
EXCEPTIONS: Dict[Tuple[str, str], str] = {
    ("ll_policy.c", "ll_vserver.c"): "the policy sets the window (ll_set_window, ll_window) of the vserver "
                                     "whose hooks (ll_pol_*) call it: to pass the window through a hook",
}

_HEAD = re.compile(r"^(?!static\b|typedef\b|return\b|extern\b)[A-Za-z_][^\n(=;]*?\b(ll_\w+)\s*\(", re.M)
_CALL = re.compile(r"\b(ll_\w+)\s*\(")


def _code(path: pathlib.Path) -> str:
    text = re.sub(r"/\*.*?\*/", " ", path.read_text(encoding="utf-8"), flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _defined(text: str) -> Set[str]:
    """The non-static ll_* functions that `text` defines (a head followed by a body)."""
    out = set()
    for m in _HEAD.finditer(text):
        i, depth = m.end(), 1
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        if text[i:].lstrip().startswith("{"):
            out.add(m.group(1))
    return out


def call_graph(csrc: pathlib.Path) -> Dict[str, Dict[str, Set[str]]]:
    """caller file -> callee file -> the functions called (names relative to csrc)."""
    files = sorted(p for p in csrc.rglob("*.c"))
    texts = {p.relative_to(csrc).as_posix(): _code(p) for p in files}
    owner: Dict[str, str] = {}
    for name, text in texts.items():
        for fn in _defined(text):
            owner.setdefault(fn, name)
    graph: Dict[str, Dict[str, Set[str]]] = {name: {} for name in texts}
    for name, text in texts.items():
        for fn in set(_CALL.findall(text)):
            callee = owner.get(fn)
            if callee is not None and callee != name:
                graph[name].setdefault(callee, set()).add(fn)
    return graph


def main(argv: List[str]) -> int:
    csrc = pathlib.Path(argv[1] if len(argv) > 1 else "csrc")
    if not csrc.is_dir():
        print(f"{csrc}: not a directory", file=sys.stderr)
        return 2
    graph = call_graph(csrc)
    unit_of = {f: i for i, unit in enumerate(UNITS) for f in unit}
    kept = {a: {b: fns for b, fns in calls.items()
                if (a, b) not in EXCEPTIONS and not (a in unit_of and unit_of.get(b) == unit_of[a])}
            for a, calls in graph.items()}
    for (a, b), why in EXCEPTIONS.items():
        if b in graph.get(a, {}):
            print(f"allowed for now (EXCEPTIONS): {a} -> {b}: {why}")
        else:
            print(f"an exception no call uses any more, to take out of EXCEPTIONS: {a} -> {b}")
    found = cycles(kept)  # Tarjan's strongly connected sets, the import check's
    for group in found:
        print("a circle of calls between " + ", ".join(group) + ":")
        for a in group:
            for b in group:
                if b in kept[a]:
                    print(f"  {a} -> {b}: {', '.join(sorted(kept[a][b]))}")
    if found:
        print(f"{len(found)} circle(s) of calls in {csrc}", file=sys.stderr)
        return 1
    print(f"no circle of calls between the {len(graph)} C files of {csrc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
