"""tools/check_layers.py (issue 48): the package's units import down the layers only.

Each test runs the tool on the source tree, or on a copy of it with one import
planted against the layers. The tool and the source tree are found beside this
file; where they are not (CI also runs the tests from a copy outside the source
tree, against an installed wheel), the tests skip and say why."""
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "check_layers.py"
SRC = ROOT / "src" / "leastload"

if not TOOL.is_file() or not (SRC / "__init__.py").is_file():
    pytest.skip(f"no {TOOL} or no source tree at {SRC}: not run from the source tree", allow_module_level=True)


def run(src: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), str(src)], capture_output=True, text=True, timeout=120)


def copy_with(tmp_path: pathlib.Path, plant: dict) -> pathlib.Path:
    """A copy of the package's sources, with `plant` {relative path: line appended, or None to delete}."""
    dest = tmp_path / "leastload"
    shutil.copytree(SRC, dest, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.html"))
    for rel, line in plant.items():
        path = dest / rel
        if line is None:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as fh:
                fh.write("\n" + line + "\n")
    return dest


def test_the_layers_hold_in_leastload():
    result = run(SRC)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the layers hold in" in result.stdout


def test_an_import_up_or_across_is_an_error_naming_where(tmp_path):
    src = copy_with(tmp_path, {
        "net/upstream.py": "from ..cli import ctl",          # net under cli
        "config/build.py": "import leastload",               # the root: nothing inside imports it
        "sim/keys.py": "from ..proxy import _stats",          # sim beside the proxy
    })
    result = run(src)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "leastload.net.upstream -> leastload.cli.ctl" in out and "net may not import cli (a layer above)" in out
    assert "leastload.config.build -> leastload  (leastload/config/build.py:" in out
    assert "config may not import (root) (a layer above)" in out
    assert "sim may not import proxy (the same layer)" in out
    assert "3 import(s) against the layers" in result.stderr


def test_a_unit_in_no_layer_is_an_error(tmp_path):
    result = run(copy_with(tmp_path, {"newpart/__init__.py": "X = 1"}))
    assert result.returncode == 1 and "newpart: a unit in no layer" in result.stdout


def test_an_exception_no_import_uses_is_reported(monkeypatch):
    """EXCEPTIONS is empty today: one is planted in the tool's table, for an import nothing makes."""
    monkeypatch.syspath_prepend(str(TOOL.parent))
    import check_layers

    monkeypatch.setattr(check_layers, "EXCEPTIONS", {("proxy", "cli"): "a planted exception"})
    errors, excepted, unused = check_layers.check(SRC)
    assert errors == [] and excepted == []
    assert unused == ["proxy -> cli: a planted exception"]


def test_not_a_package(tmp_path):
    result = run(tmp_path)
    assert result.returncode == 2 and "not a package" in result.stderr
