"""The installed distribution is what a user gets: typed, licensed, described,
without build leftovers. Runs against whatever is installed (the dev venv's
build, or CI's installed wheel)."""
import importlib.metadata as md
import json

import pytest

import leastload

DIST = md.distribution("leastload")


def installed_files():
    return {str(f).replace("\\", "/") for f in DIST.files or ()}


def _editable():
    """True for `pip install -e` (PEP 660): the package is the source tree, not installed files."""
    try:
        return bool(json.loads(DIST.read_text("direct_url.json") or "{}").get("dir_info", {}).get("editable"))
    except ValueError:
        return False


# what a wheel puts where: only an installed wheel has it (CI's first and wheel stages)
needs_a_wheel = pytest.mark.skipif(_editable(), reason="an editable install lists no package files; "
                                                      "the installed wheel's are checked in CI")


def test_the_version_is_single_sourced():
    assert DIST.version == leastload.__version__


@needs_a_wheel
def test_types_ship_with_the_package():
    files = installed_files()
    assert "leastload/py.typed" in files
    assert "leastload/engine/_engine.pyi" in files
    assert "leastload/engine/_interface.pyi" in files  # the interface the stub builds on
    assert any(f.startswith("leastload/engine/_engine.") and f.endswith((".so", ".pyd")) for f in files), sorted(files)


@needs_a_wheel
def test_the_http_layer_ships_compiled_and_as_python():
    files = installed_files()
    # the proxy's per-request path: each module compiled, and each .py itself (LEASTLOAD_IMPLEMENTATION=python)
    from leastload.proxy import _COMPILED_PATH
    for module in _COMPILED_PATH:
        assert any(f.startswith(f"leastload/proxy/{module}.") and f.endswith((".so", ".pyd")) for f in files), \
            (module, sorted(files))
        assert f"leastload/proxy/{module}.py" in files


def test_no_build_leftovers():
    leftovers = [f for f in installed_files() if f.startswith("leastload/") and f.endswith((".pyx", ".pxd", ".pxi", ".c"))]
    assert leftovers == []


def test_the_license_travels_with_it():
    files = installed_files()
    assert any(f.endswith("/LICENSE") and ".dist-info/" in f for f in files), sorted(files)
    meta = DIST.metadata
    assert "License :: OSI Approved :: MIT License" in meta.get_all("Classifier")


def test_metadata_a_package_index_page_needs():
    meta = DIST.metadata
    classifiers = meta.get_all("Classifier")
    assert "Typing :: Typed" in classifiers
    for minor in range(9, 15):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert meta["Requires-Python"] == ">=3.9"
    assert meta["Keywords"]
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Homepage", "Documentation", "Source", "Changelog"} <= set(urls)
    assert "load balancing" in meta["Summary"] or "load-balancing" in meta["Summary"]
    # the engine itself needs nothing
    assert not [r for r in (meta.get_all("Requires-Dist") or []) if "extra ==" not in r]
