"""Checks that the Cython declarations of the C core say what its headers say.

Cython needs the C structs and functions it uses declared again in a .pxd
(src/leastload/engine/_cengine.pxd); the C compiler checks calls against the
real headers, but a field declared with the wrong type, or one the header no
longer has, is read wrongly without a word. This script reads both sides and
fails on any difference: every struct field the .pxd declares exists in the
header with the same type, and every function it declares has the header's
return and parameter types. (The .pxd may leave out what the binding does not
use.) It also holds the settings table (src/leastload/engine/settings.py) to
the core's one settings struct: C_SETTINGS names ll_settings's fields in
their order, and each is a row of the table. Run: python tools/check_c_mirrors.py [pxd] ; CI runs it.
"""
import re
import sys
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
PXD = ROOT / "src" / "leastload" / "engine" / "_cengine.pxd"
SETTINGS_PY = ROOT / "src" / "leastload" / "engine" / "settings.py"

Decls = Tuple[Dict[str, Dict[str, str]], Dict[str, Tuple[str, List[str]]]]  # structs, functions


def _norm(ctype: str) -> str:
    """A type as both sides can be compared: no const, no names of params, stars tight."""
    t = re.sub(r"\bconst\b", "", ctype)
    t = re.sub(r"\s*\*\s*", "*", t)
    return " ".join(t.split())


def _split_decl(decl: str) -> Tuple[str, str]:
    """'const double *arrival' -> ('double*', 'arrival'); arrays keep a star."""
    decl = decl.strip()
    array = "[" in decl
    decl = re.sub(r"\[[^\]]*\]", "", decl)
    m = re.match(r"(.*?)([A-Za-z_]\w*)\s*$", decl)
    if not m:
        raise ValueError(f"cannot read the declaration {decl!r}")
    return _norm(m.group(1) + ("*" if array else "")), m.group(2)


def _params(text: str) -> List[str]:
    text = text.strip()
    if text in ("", "void"):
        return []
    return [_split_decl(p)[0] for p in text.split(",")]


def read_header(path: Path) -> Decls:
    src = re.sub(r"/\*.*?\*/", " ", path.read_text(), flags=re.S)
    src = re.sub(r"//[^\n]*", " ", src)
    src = re.sub(r"^\s*#.*$", " ", src, flags=re.M)
    structs: Dict[str, Dict[str, str]] = {}
    for body, name in re.findall(r"typedef\s+struct\s*\w*\s*\{(.*?)\}\s*(\w+)\s*;", src, flags=re.S):
        fields: Dict[str, str] = {}
        for stmt in body.split(";"):
            stmt = " ".join(stmt.split())
            if not stmt:
                continue
            first, *more = stmt.split(",")
            base_type, name0 = _split_decl(first)
            fields[name0] = base_type
            base = base_type.rstrip("*")
            for d in more:  # `double *a, *b`: each declarator has its own stars
                t, n = _split_decl(base + " " + d.strip())
                fields[n] = t
        structs[name] = fields
    functions: Dict[str, Tuple[str, List[str]]] = {}
    flat = re.sub(r"typedef[^;]*\{.*?\}[^;]*;", " ", src, flags=re.S)
    for ret, name, params in re.findall(r"([A-Za-z_][\w \*]*?[\s\*])([A-Za-z_]\w*)\s*\(([^()]*)\)\s*;", flat):
        if ret.strip() in ("return", "typedef") or ret.strip().startswith("typedef"):
            continue
        functions[name] = (_norm(ret), _params(params))
    return structs, functions


def read_pxd(path: Path) -> Dict[str, Decls]:
    """The declarations of each `cdef extern from "header"` block."""
    blocks: Dict[str, Decls] = {}
    header = None
    struct = None
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        m = re.match(r'cdef extern from "([^"]+)"', line)
        if m:
            header, struct = m.group(1), None
            blocks.setdefault(header, ({}, {}))
            continue
        if header is None or not line.startswith(" "):
            header = None if not line.startswith(" ") else header
            continue
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        m = re.match(r"ctypedef struct (\w+)\s*:", text)
        if m:
            struct = m.group(1)
            blocks[header][0][struct] = {}
            continue
        if struct is not None and indent > 4:
            if text != "pass":
                t, n = _split_decl(text)
                blocks[header][0][struct][n] = t
            continue
        struct = None
        m = re.match(r"(.*?[\s\*])([A-Za-z_]\w*)\s*\((.*)\)\s*(except.*|nogil)?$", text)
        if m and not text.startswith(("ctypedef", "enum", "const ")):
            blocks[header][1][m.group(2)] = (_norm(m.group(1)), _params(m.group(3)))
    return blocks


def check(pxd: Path) -> List[str]:
    problems: List[str] = []
    for header, (structs, functions) in read_pxd(pxd).items():
        path = ROOT / "csrc" / header
        c_structs, c_functions = read_header(path)
        for name, fields in structs.items():
            if not fields:
                continue  # opaque
            if name not in c_structs:
                problems.append(f"{header}: no struct {name}")
                continue
            for field, t in fields.items():
                have = c_structs[name].get(field)
                if have != t:
                    problems.append(f"{header}: {name}.{field} is {have!r} in C, {t!r} in the .pxd")
        for name, (ret, params) in functions.items():
            have = c_functions.get(name)
            if have != (ret, params):
                problems.append(f"{header}: {name} is {have!r} in C, {(ret, params)!r} in the .pxd")
    return problems


def check_settings(header: Path = ROOT / "csrc" / "leastload.h", table: Path = SETTINGS_PY) -> List[str]:
    """ll_settings's fields against the settings table's C_SETTINGS and its rows."""
    import ast
    tree = ast.parse(table.read_text())
    mirrored: List[str] = []
    rows = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "C_SETTINGS" for t in node.targets):
            mirrored = [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Setting" and node.args:
            rows.add(ast.literal_eval(node.args[0]))
    fields = list(read_header(header)[0].get("ll_settings", {}))
    problems = []
    if fields != mirrored:
        problems.append(f"leastload.h: ll_settings has {fields}, settings.C_SETTINGS says {mirrored}")
    problems += [f"settings.py: C_SETTINGS names {name!r}, which is no row of the table"
                 for name in mirrored if name not in rows]
    return problems


def main() -> int:
    pxd = Path(sys.argv[1]) if len(sys.argv) > 1 else PXD
    problems = check(pxd) + check_settings()
    for p in problems:
        print(p)
    blocks = read_pxd(pxd)
    n_fields = sum(len(f) for s, _ in blocks.values() for f in s.values())
    n_functions = sum(len(f) for _, f in blocks.values())
    if problems:
        print(f"{len(problems)} difference(s) between {pxd.name} and the C headers")
        return 1
    print(f"{pxd.name} agrees with the C headers: {n_fields} struct fields, {n_functions} functions;"
          f" the settings table with ll_settings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
