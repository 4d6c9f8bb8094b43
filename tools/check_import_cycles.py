"""Report import cycles among the modules of a Python package (issue 20).

Usage: python tools/check_import_cycles.py [SRC_DIR]      (default: src/leastload)

SRC_DIR is the package's directory; module names start at its name
(src/leastload/proxy/_cli.py is leastload.proxy._cli). Every .py file under it
is parsed with ast; .pyx, .pxd and .pyi files only name modules (so that an
import of a compiled module resolves), their own imports are not read.

What counts as an import of module A by module B (an edge B -> A):
- every `import` and `from ... import` statement anywhere in B: at module
  level, inside functions and classes, under `if TYPE_CHECKING:` (an import for
  types only is still a dependency), in try/except;
- relative imports are resolved against B's package (B itself when B is a
  package's __init__);
- `import a.b.c` depends on a.b.c (its parent packages are imported first in
  any case, so they are not edges);
- `from pkg import name` depends on pkg.name when that is a module, on pkg
  (its __init__) otherwise;
- only modules of the package count; an import of B by B is ignored, and so
  are dynamic imports (importlib.import_module, __import__).

A cycle is a strongly connected component of more than one module. Each is
printed with the edges inside it (and where each import is); the exit status
is 1 if there is any, 0 (after a one-line summary) if there is none.
"""
import ast
import pathlib
import sys
from typing import Dict, List, Optional, Set, Tuple

Graph = Dict[str, Dict[str, Tuple[str, int]]]  # module -> {imported module: (file, line)}


def find_modules(src: pathlib.Path) -> Dict[str, pathlib.Path]:
    modules: Dict[str, pathlib.Path] = {}
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".py", ".pyx", ".pxd", ".pyi"):
            continue
        parts = list(path.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if path.suffix == ".py" or name not in modules:  # the .py's imports are the ones read
            modules[name] = path
    return modules


def imports_of(name: str, path: pathlib.Path, modules: Dict[str, pathlib.Path]) -> Dict[str, int]:
    """The package's modules that module `name` (file `path`) imports, each with its first line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found: Dict[str, int] = {}

    def add(target: str, line: int) -> None:
        if target in modules and target != name:
            found.setdefault(target, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                for n in range(len(parts), 0, -1):  # the deepest module of the package named
                    if ".".join(parts[:n]) in modules:
                        add(".".join(parts[:n]), node.lineno)
                        break
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = source + "." + alias.name
                add(sub if sub in modules else source, node.lineno)
    return found


def build_graph(src: pathlib.Path) -> Graph:
    modules = find_modules(src)
    graph: Graph = {}
    for name, path in modules.items():
        deps = imports_of(name, path, modules) if path.suffix == ".py" else {}
        rel = str(path.relative_to(src.parent))
        graph[name] = {dep: (rel, line) for dep, line in deps.items()}
    return graph


def cycles(graph: Graph) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * len(graph) + 100))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def package_dir(argv: List[str]) -> Optional[pathlib.Path]:
    """The package directory a check reads (argv[1], else src/leastload); None, said on
    stderr, when it is not one."""
    src = pathlib.Path(argv[1] if len(argv) > 1 else "src/leastload")
    if not (src / "__init__.py").is_file():
        print(f"{src}: not a package directory (no __init__.py)", file=sys.stderr)
        return None
    return src


def main(argv: List[str]) -> int:
    src = package_dir(argv)
    if src is None:
        return 2
    graph = build_graph(src)
    found = cycles(graph)
    for component in found:
        inside = set(component)
        print(f"import cycle among {len(component)} modules: {', '.join(component)}")
        for module in component:
            for dep in sorted(set(graph[module]) & inside):
                file, line = graph[module][dep]
                print(f"  {module} -> {dep}  ({file}:{line})")
    edges = sum(len(deps) for deps in graph.values())
    if found:
        print(f"{len(found)} import cycle(s) in {src}", file=sys.stderr)
        return 1
    print(f"no import cycle in {src}: {len(graph)} modules, {edges} imports between them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
