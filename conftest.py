"""The engines, for every suite (tests/ and benchmarks/): `impl` is the C extension
or the reference, `c_impl` and `ref_impl` one of them.

Tests take classes from the fixture (`impl.VirtualServer`, `impl.ManualClock`)
and exceptions from `leastload.engine.errors`, which both engines share. Each suite's
own fixtures are in its folder's conftest.py (tests/: the HTTP/1.1 layer and
backend processes; benchmarks/: the sizes). This file being at the root, pytest puts
the root on sys.path: the harness both suites share (leastload_testkit/) and the
benchmarks package (benchmarks/) import from there.
"""
import importlib
import os

import pytest

NO_C = "--no-c-extensions"


def pytest_addoption(parser):
    parser.addoption(NO_C, action="store_true", default=False,
                     help="skip the C-extension half of the suite (the reference alone is tested)")


def pytest_configure(config):
    # Importing any leastload module runs the package's chooser, which by default
    # demands the C engine. The suite picks its engines itself (the fixtures
    # below), so the chooser is pointed at the reference: a missing C engine then
    # fails the c-extension tests, not the import of the reference as well.
    os.environ.setdefault("LEASTLOAD_IMPLEMENTATION", "python")


def pytest_report_header(config):
    if config.getoption(NO_C):
        return "leastload: C-extension tests skipped (--no-c-extensions)"
    return None


def load_c_extension(config):
    """The C engine's module; skips under --no-c-extensions, fails if it cannot be imported."""
    if config.getoption(NO_C):
        pytest.skip("C-extension tests disabled by --no-c-extensions")
    try:
        return importlib.import_module("leastload.engine.native")
    except ImportError as exc:  # a broken build must never pass for the reference
        pytest.fail(f"the C engine leastload.engine.native cannot be imported: {exc}", pytrace=False)


@pytest.fixture(scope="session", params=["c-extension", "pure-python"])
def impl(request):
    if request.param == "c-extension":
        return load_c_extension(request.config)
    return importlib.import_module("leastload.reference")


@pytest.fixture(scope="session")
def c_impl(request):
    return load_c_extension(request.config)


@pytest.fixture(scope="session")
def ref_impl():
    return importlib.import_module("leastload.reference")
