"""tools/check_import_cycles.py (issue 20): it finds import cycles in planted packages (one
through an import under TYPE_CHECKING, one through a relative import of a name from a
package's __init__, one through an import inside a function), passes an acyclic one, and
finds no cycle in src/leastload.

The tool and the source tree are found beside this file; where they are not (CI also runs
the tests from a copy outside the source tree, against an installed wheel), the tests skip
and say why."""
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "check_import_cycles.py"
SRC = ROOT / "src" / "leastload"

if not TOOL.is_file():
    pytest.skip(f"no {TOOL}: not run from the source tree", allow_module_level=True)


def plant(root: pathlib.Path, files: dict) -> pathlib.Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root / "pkg"


def check(src: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), str(src)], capture_output=True, text=True, timeout=120)


CYCLIC = {
    "pkg/__init__.py": "from .a import A\n",
    # a -> b only for types, b -> a at run time: still a cycle
    "pkg/a.py": """\
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from .b import B
        class A: ...
        """,
    "pkg/b.py": "from pkg.a import A\nclass B(A): ...\n",
    # sub/__init__ imports x; x takes a name (not a module) from its package's __init__
    "pkg/sub/__init__.py": "HELPER = 1\nfrom .x import X\n",
    "pkg/sub/x.py": "from . import HELPER\nX = HELPER\n",
    # an import inside a function counts too; c and d are outside every cycle above
    "pkg/c.py": "def f():\n    from .d import g\n    return g\n",
    "pkg/d.py": "import pkg.c\ndef g(): ...\n",
    "pkg/leaf.py": "import os\nfrom . import a\n",
}


def test_cycles_are_reported_with_their_edges(tmp_path):
    result = check(plant(tmp_path, CYCLIC))
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "import cycle among 2 modules: pkg.a, pkg.b" in out
    assert "pkg.a -> pkg.b" in out and "pkg.b -> pkg.a" in out
    assert "import cycle among 2 modules: pkg.sub, pkg.sub.x" in out
    assert "pkg.sub -> pkg.sub.x" in out and "pkg.sub.x -> pkg.sub " in out
    assert "import cycle among 2 modules: pkg.c, pkg.d" in out
    assert "pkg.c -> pkg.d" in out and "pkg.d -> pkg.c" in out
    assert "pkg.leaf" not in out and "pkg -> " not in out
    assert out.count("import cycle among") == 3
    assert "3 import cycle(s)" in result.stderr


def test_no_cycle_exit_0(tmp_path):
    files = dict(CYCLIC)
    files["pkg/a.py"] = "class A: ...\n"  # the types-only import gone
    files["pkg/sub/x.py"] = "from . import y\nX = y.HELPER\n"  # a module of the package, not its __init__
    files["pkg/sub/y.py"] = "HELPER = 1\n"
    files["pkg/d.py"] = "def g(): ...\n"
    result = check(plant(tmp_path, files))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("no import cycle in ") and len(result.stdout.splitlines()) == 1
    assert "9 modules, 6 imports" in result.stdout


def test_not_a_package(tmp_path):
    result = check(tmp_path)
    assert result.returncode == 2 and "not a package" in result.stderr


def test_leastload_has_no_import_cycle():
    if not (SRC / "__init__.py").is_file():
        pytest.skip(f"no source tree at {SRC}")
    result = check(SRC)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("package", ["benchmarks", "leastload_testkit"])
def test_no_cycle_in_the_benchmarks_or_the_harness(package):
    """The benchmarks and the harness they share with the tests import each other one way
    (issue 48: proxy_vs_haproxy and proxy_stages imported each other)."""
    if not (ROOT / package / "__init__.py").is_file():
        pytest.skip(f"no {package}/ beside the tests")
    done = check(ROOT / package)
    assert done.returncode == 0, done.stdout + done.stderr
