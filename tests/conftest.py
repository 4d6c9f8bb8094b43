"""One suite for both engines: the `impl` fixture is the C extension or the reference.

Tests take classes from the fixture (`impl.VirtualServer`, `impl.ManualClock`)
and exceptions from `leastload._errors`, which both engines share.
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
        return importlib.import_module("leastload._native")
    except ImportError as exc:  # a broken build must never pass for the reference
        pytest.fail(f"the C engine leastload._native cannot be imported: {exc}", pytrace=False)


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


# ---- the proxy's HTTP/1.1 layer: compiled and pure -------------------------------------------

_COMPILED_HTTP1 = {}  # its path -> the module, loaded once


def load_compiled_http1(config):
    """The compiled HTTP/1.1 layer (the extension module built from _http1.py), whichever layer
    leastload.proxy chose (the suite's default, LEASTLOAD_IMPLEMENTATION=python, puts the .py
    under its name). Skips, saying why, when the extension is not built or under --no-c-extensions."""
    import importlib.machinery
    import importlib.util
    import sys

    if config.getoption(NO_C):
        pytest.skip("the compiled HTTP/1.1 layer: C-extension tests disabled by --no-c-extensions")
    proxy = importlib.import_module("leastload.proxy")
    name = proxy.__name__ + "._http1"
    if proxy.HTTP_LAYER == "compiled":
        return sys.modules[name]
    for finder in sys.meta_path:  # the finders an import would ask (an editable install's among them)
        find_spec = getattr(finder, "find_spec", None)
        spec = find_spec(name, proxy.__path__) if find_spec is not None else None
        if spec is not None and (spec.origin or "").endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            # its init function is named after _http1: loaded under the same name, beside the .py
            # that sys.modules holds under it
            if spec.origin not in _COMPILED_HTTP1:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                _COMPILED_HTTP1[spec.origin] = module
            return _COMPILED_HTTP1[spec.origin]
    pytest.skip("the compiled HTTP/1.1 layer is not built (no extension module " + name + "): "
                "only the pure _http1.py is tested")


def load_pure_http1():
    """The pure _http1.py, by its path, under a private name (a compiled module beside it would
    win an ordinary import)."""
    import importlib.util
    import sys

    proxy = importlib.import_module("leastload.proxy")
    name = proxy.__name__ + "._http1_pure"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(proxy.__file__), "_http1.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="module", params=["compiled", "python"])
def http1(request):
    """The proxy's HTTP/1.1 layer, once compiled and once pure: tests/test_http1.py and
    tests/test_http1_fuzz.py run against both."""
    if request.param == "compiled":
        return load_compiled_http1(request.config)
    return load_pure_http1()


@pytest.fixture
def backend_procs():
    """start(n) -> n more `leastload backends` processes (tests/servers.py); all stopped after the test."""
    from servers import start_backend

    started = []

    def start(n):
        for _ in range(n):
            started.append(start_backend())
        return started[-n:]
    yield start
    for b in started:
        b.stop()
