"""The C engine and the reference expose the same public API.

Same public names (the C engine adds only its memory calls), same signatures
(names, kinds and defaults of every parameter), signatures visible to
inspect.signature() and help() on the C engine's methods, and the
extension's stub (_engine.pyi) saying the same as the reference.
"""
import ast
import inspect
import pathlib
import pydoc

import pytest

import leastload
from leastload import reference
from leastload.engine import _engine
from leastload.engine import native as _native

C_ONLY = {"VirtualServer": {"reserve", "memory_bytes"}}  # the reference has no C memory to manage
CLASSES = ["VirtualServer", "ManualClock", "Transaction"]


def public(cls):
    return {n for n in dir(cls) if not n.startswith("_")}


def params(sig):
    """(name, kind, default) of every parameter after self."""
    return [(p.name, p.kind, p.default) for p in list(sig.parameters.values())[1:]]


def kind_of(cls, name):
    return "property" if isinstance(inspect.getattr_static(cls, name), property) \
        or type(inspect.getattr_static(cls, name)).__name__ == "getset_descriptor" else "method"


@pytest.mark.parametrize("cls", CLASSES)
def test_same_public_names(cls):
    c, ref = getattr(_native, cls), getattr(reference, cls)
    assert public(c) - C_ONLY.get(cls, set()) == public(ref)
    assert C_ONLY.get(cls, set()) <= public(c)


@pytest.mark.parametrize("cls", CLASSES)
def test_same_signatures(cls):
    c, ref = getattr(_native, cls), getattr(reference, cls)
    for name in sorted(public(ref)):
        if name == "service" and cls == "Transaction":
            continue  # a read-only attribute in both: a slot in the reference, a property in C
        assert kind_of(c, name) == kind_of(ref, name), name
        if kind_of(ref, name) == "method":
            assert params(inspect.signature(getattr(c, name))) == params(inspect.signature(getattr(ref, name))), name


def test_constructors_take_the_same_arguments():
    assert params(inspect.signature(_native.VirtualServer.__init__)) == \
        params(inspect.signature(reference.VirtualServer.__init__))
    # the C class's signature comes from its docstring's first lines (the text-signature form)
    assert params(inspect.signature(_native.ManualClock)) == params(inspect.signature(reference.ManualClock))
    assert str(inspect.signature(_native.ManualClock)) == "(start=0.0)"


@pytest.mark.parametrize("cls", [_engine.Engine, _engine.ManualClock, _engine.Transaction])
def test_c_methods_show_their_signatures(cls):
    methods = [n for n in public(cls) if kind_of(cls, n) == "method"]
    assert methods
    for name in methods:
        sig = inspect.signature(getattr(cls, name))  # raised ValueError before embedsignature
        text = pydoc.render_doc(getattr(cls, name), renderer=pydoc.plaintext)
        assert f"{name}{sig}" in text, (name, text)


def test_help_shows_record_arguments():
    assert "record(self, /, name, bytes=0, packets=0, control=False)" in pydoc.render_doc(_engine.Engine.record, renderer=pydoc.plaintext)


# ---- the stub ------------------------------------------------------------------

# beside the extension module, as the wheel installs it; an editable install (the README's
# quick loop) keeps the extension in site-packages and the stub in the source package
STUB_PLACES = (pathlib.Path(_engine.__file__).with_name("_engine.pyi"),
               pathlib.Path(leastload.__file__).parent / "engine" / "_engine.pyi")
STUB = next((p for p in STUB_PLACES if p.is_file()), STUB_PLACES[0])


def stub_classes():
    """The stub's classes; one built on the interface (_interface.pyi, beside the stub)
    carries the interface's members after its own."""
    def classes(path):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    interface = classes(STUB.with_name("_interface.pyi"))
    out = classes(STUB)
    for node in out.values():
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in interface:
                node.body = node.body + interface[base.id].body
    return out


def stub_params(fn):
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [inspect.Parameter.empty] * (len(positional) - len(a.defaults)) + \
        [ast.literal_eval(d) for d in a.defaults]
    out = [(p.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, d) for p, d in zip(positional, defaults)][1:]
    out += [(p.arg, inspect.Parameter.KEYWORD_ONLY,
             inspect.Parameter.empty if d is None else ast.literal_eval(d))
            for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    return out


def stub_members(node):
    """name -> ("property" | "method", FunctionDef) of a stub class (first definition wins)."""
    out = {}
    for fn in node.body:
        if isinstance(fn, ast.FunctionDef) and fn.name not in out:
            is_prop = any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list)
            out[fn.name] = ("property" if is_prop else "method", fn)
    return out


def test_the_stub_exists_beside_the_extension():
    assert STUB.is_file(), STUB_PLACES
    assert STUB.with_name("_interface.pyi").is_file()  # the engines' interface it builds on
    assert pathlib.Path(leastload.__file__).with_name("py.typed").is_file()  # the package is typed


def test_the_stub_builds_on_the_interface():
    """The engine's interface is declared once (_interface.pyi): the C stub adds only what
    the C engine has besides, and declares nothing of the interface again."""
    def members(path, name):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
        return {fn.name for fn in cls.body if isinstance(fn, ast.FunctionDef)}
    interface = members(STUB.with_name("_interface.pyi"), "EngineAPI")
    assert {"select", "acquire", "finish", "bind", "snapshot"} <= interface
    assert members(STUB, "Engine") & interface == {"acquire"}  # narrowed to the C Transaction


@pytest.mark.parametrize("cls,stub_name", [("VirtualServer", "Engine"), ("ManualClock", "ManualClock"),
                                           ("Transaction", "Transaction")])
def test_stub_matches_the_reference(cls, stub_name):
    members = stub_members(stub_classes()[stub_name])
    ref = getattr(reference, cls if cls != "VirtualServer" else "Engine")
    assert {n for n in members if not n.startswith("_")} == public(getattr(_engine, stub_name))
    for name, (kind, fn) in members.items():
        if name.startswith("_") and name != "__init__":
            continue
        if name in C_ONLY.get(cls, ()):
            assert params(inspect.signature(getattr(_engine.Engine, name))) == stub_params(fn)
            continue
        ref_kind = "method" if name == "__init__" else kind_of(ref, name) if hasattr(ref, name) else None
        if name == "service" and cls == "Transaction":
            ref_kind = "property"  # a slot in the reference
        assert kind == ref_kind, name
        if kind == "method":
            assert stub_params(fn) == params(inspect.signature(getattr(ref, name))), name


# ---- the package's names ------------------------------------------------------------

def test_transaction_and_explanation_are_public():
    from leastload import Explanation, Transaction
    from leastload.engine import explain as _explain

    assert {"Transaction", "Explanation"} <= set(leastload.__all__)
    engine = _native if leastload.IMPLEMENTATION == "c" else reference
    assert Transaction is engine.Transaction
    assert Explanation is _explain.Explanation
    vs = leastload.VirtualServer(clock=leastload.ManualClock())
    vs.bind("S1")
    with vs.acquire() as t:
        assert isinstance(t, Transaction)
    assert isinstance(vs.explain(), Explanation)


def test_the_default_engine_s_transaction(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "LEASTLOAD_IMPLEMENTATION"}
    code = "import leastload, leastload.engine._engine as e; assert leastload.Transaction is e.Transaction"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tmp_path)


def test_the_reference_engine_imports_no_policy():
    """leastload.engine.oracle is the reference engine alone: the policy (the facade, show())
    is put over it by leastload.reference, as over the C engine by leastload.engine.native."""
    source = (pathlib.Path(reference.__file__).parent / "engine" / "oracle.py").read_text(encoding="utf-8")
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
            if node.level and not node.module:
                imported.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
    assert not {m for m in imported if m.split(".")[-1] in ("policy", "settings", "show", "explain", "reference")}, imported
    assert "" not in imported  # nothing from the package itself (`from . import ...`)
