"""Each field of a compiled proxy class is declared in its .pxd, and the .py agrees with it.

The per-request modules (leastload.proxy._COMPILED_PATH) are compiled from their .py files
with the types of the .pxd beside each (Cython's pure-Python mode). The .pxd is where a
field is declared; the .py only repeats what plain Python needs: a class's `__slots__` (so
the pure path refuses an undeclared attribute as the compiled one does). These tests read
both files, so that the two cannot drift:
- a class's `__slots__` in the .py name exactly the fields its .pxd declares;
- every attribute a method assigns (`self.name = ...`) is declared in the .pxd, for the
  class or a base (the compiled module fails on an undeclared one, at run time, on the
  path that assigns it);
- a class-level annotation in the .py (what mypy reads of a field a subclass sets) names
  a declared field.
"""
import ast
import pathlib
import re

import pytest

import leastload.proxy as proxy

# The files are read from the source tree when the tests run in it (an installed package,
# as in CI's stages, has the .py files but not the .pxd), else from the package itself.
_SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2] / "src" / "leastload" / "proxy"
PROXY_DIR = _SOURCE_DIR if _SOURCE_DIR.is_dir() else pathlib.Path(proxy.__file__).parent
if not all((PROXY_DIR / f"{module}.pxd").exists() for module in proxy._COMPILED_PATH):
    pytest.skip(f"no .pxd files in {PROXY_DIR} (an installed package without its source tree): the "
                "declarations are checked where the source is", allow_module_level=True)
# `cdef [public|readonly] TYPE name, name  # comment`: a field (a method has a parenthesis)
_FIELD = re.compile(r"^\s+cdef\s+(?:public\s+|readonly\s+)?(?:(?:unsigned|signed|long|short)\s+)*[\w.]+\s+"
                    r"(\w+(?:\s*,\s*\w+)*)\s*(?:#.*)?$")
_CLASS = re.compile(r"^cdef class (\w+)(?:\((\w+)\))?:")


def pxd_classes():
    """{class name: (its base's name or None, {field names})} over every compiled module's .pxd."""
    classes = {}
    for module in proxy._COMPILED_PATH:
        current = None
        for line in (PROXY_DIR / f"{module}.pxd").read_text().splitlines():
            match = _CLASS.match(line)
            if match:
                current = match.group(1)
                classes[current] = (match.group(2), set())
                continue
            if current is None:
                continue
            if line and not line[0].isspace():
                if not line.startswith("@"):
                    current = None  # the class's block ended
                continue
            field = _FIELD.match(line)
            if field and "(" not in line.split("#")[0]:
                classes[current][1].update(name.strip() for name in field.group(1).split(","))
    return classes


def py_classes():
    """[(module, class node)] of every compiled module's .py."""
    found = []
    for module in proxy._COMPILED_PATH:
        tree = ast.parse((PROXY_DIR / f"{module}.py").read_text())
        found += [(module, node) for node in tree.body if isinstance(node, ast.ClassDef)]
    return found


PXD = pxd_classes()
CLASSES = [(module, node) for module, node in py_classes() if node.name in PXD]


def declared(name):
    """The fields a compiled class has: its own and its bases'."""
    fields = set()
    while name is not None:
        base, own = PXD[name]
        fields |= own
        name = base
    return fields


def test_the_pxd_files_are_read():
    # the parsing above finds what it should (a parse that finds nothing would pass the rest)
    assert {"Limits", "RequestReader", "ResponseReader", "Stats", "ProxyCore", "Exchange"} <= set(PXD)
    assert PXD["Limits"][1] == {"max_request_line", "max_header_size", "max_headers", "max_body"}
    assert "_chunks" in PXD["ResponseReader"][1] and PXD["ResponseReader"][0] == "_HeadReader"
    assert "__dict__" in PXD["Pool"][1]
    assert len(CLASSES) == len(PXD), sorted(set(PXD) - {node.name for _, node in CLASSES})


@pytest.mark.parametrize("module,node", CLASSES, ids=[node.name for _, node in CLASSES])
def test_slots_name_the_declared_fields(module, node):
    slots = [s for s in node.body if isinstance(s, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in s.targets)]
    if not slots:
        return  # no __slots__: nothing to agree with (a pure instance takes any attribute)
    names = set(ast.literal_eval(slots[0].value))
    assert names == PXD[node.name][1], (f"{module}.py's {node.name}.__slots__ and {module}.pxd differ: "
                                        f"only in the .py {sorted(names - PXD[node.name][1])}, "
                                        f"only in the .pxd {sorted(PXD[node.name][1] - names)}")


@pytest.mark.parametrize("module,node", CLASSES, ids=[node.name for _, node in CLASSES])
def test_every_assigned_attribute_is_declared(module, node):
    fields = declared(node.name)
    if "__dict__" in fields:
        return  # an instance __dict__ takes what is not declared
    properties = {f.name for f in node.body if isinstance(f, ast.FunctionDef)
                  and any(isinstance(d, ast.Attribute) and d.attr == "setter" for d in f.decorator_list)}
    assigned = set()
    for function in (f for f in node.body if isinstance(f, ast.FunctionDef)):
        for sub in ast.walk(function):
            targets = sub.targets if isinstance(sub, ast.Assign) else \
                [sub.target] if isinstance(sub, (ast.AnnAssign, ast.AugAssign)) else []
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name) \
                            and leaf.value.id == "self":
                        assigned.add(leaf.attr)
    assert assigned - fields - properties == set(), f"{module}.py's {node.name} sets fields {module}.pxd lacks"


@pytest.mark.parametrize("module,node", CLASSES, ids=[node.name for _, node in CLASSES])
def test_class_annotations_name_declared_fields(module, node):
    annotated = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    assert annotated - declared(node.name) == set()
