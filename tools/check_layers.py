"""Check that leastload's packages import one way: down the layers of LAYERS (issue 48).

Usage: python tools/check_layers.py [SRC_DIR]      (default: src/leastload)

A unit is a subpackage of the package (all its modules), a module at the top
of it, or the package's own __init__ (the root: what `import leastload` gives
users). The imports are the ones tools/check_import_cycles.py reads (every
import statement, in functions and under TYPE_CHECKING too). A unit may
import units of lower layers only: not its own layer's other units, not a
layer above. An import outside the rule that EXCEPTIONS names is allowed for
now and listed; any other is an error (exit status 1), printed with where it is.
An exception that no import uses any more is reported, to be taken out.
"""
import pathlib
import sys
from typing import Dict, List, Set, Tuple

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from check_import_cycles import build_graph, package_dir  # noqa: E402  (the tool beside this one)

ROOT = "(root)"  # the package's __init__

# Bottom first. Units of one layer do not import each other.
LAYERS: List[Tuple[str, ...]] = [
    ("_version", "hashing", "cmdline", "prometheus_text"),  # import nothing of leastload
    ("engine",),                         # one vserver: the C binding and its twin, the reference; the policy
    ("reference",),                      # leastload.reference, the reference's public name (engine.reference)
    ("_implementation",),                # which engine `import leastload` gives
    ("net", "config"),                   # take the engine as an argument (default: _implementation's)
    ("integrations", "proxy", "sim"),    # the engine's applications, side by side
    ("bench", "cli"),                    # the commands above them
    (ROOT, "__main__", "backends", "httpx"),  # the users' face: nothing inside imports it
]

# (importer, imported): allowed for now, each with why it is still there and where.
EXCEPTIONS: Dict[Tuple[str, str], str] = {}


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def check(src: pathlib.Path) -> Tuple[List[str], List[str], List[str]]:
    """(errors, excepted imports, unused exceptions), one line each."""
    layer_of: Dict[str, int] = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    graph = build_graph(src)
    errors: List[str] = []
    excepted: List[str] = []
    used: Set[Tuple[str, str]] = set()
    for unit in sorted({unit_of(m) for m in graph} - set(layer_of)):
        errors.append(f"{unit}: a unit in no layer of {pathlib.Path(__file__).name}'s LAYERS: give it one")
    for module in sorted(graph):
        for dep, (file, line) in sorted(graph[module].items()):
            a, b = unit_of(module), unit_of(dep)
            if a == b or a not in layer_of or b not in layer_of:
                continue
            if layer_of[b] < layer_of[a]:
                continue
            edge = f"{module} -> {dep}  ({file}:{line})"
            if (a, b) in EXCEPTIONS:
                used.add((a, b))
                excepted.append(edge)
                continue
            where = "the same layer" if layer_of[a] == layer_of[b] else "a layer above"
            errors.append(f"{edge}: {a} may not import {b} ({where})")
    unused = [f"{a} -> {b}: {why}" for (a, b), why in EXCEPTIONS.items() if (a, b) not in used]
    return errors, excepted, unused


def main(argv: List[str]) -> int:
    src = package_dir(argv)
    if src is None:
        return 2
    errors, excepted, unused = check(src)
    for edge in excepted:
        print(f"allowed for now (EXCEPTIONS): {edge}")
    for entry in unused:
        print(f"an exception no import uses any more, to take out of EXCEPTIONS: {entry}")
    for error in errors:
        print(error)
    if errors:
        print(f"{len(errors)} import(s) against the layers in {src}", file=sys.stderr)
        return 1
    print(f"the layers hold in {src}: {len(LAYERS)} layers, {len(excepted)} import(s) excepted for now")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
