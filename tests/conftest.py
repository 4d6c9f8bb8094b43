"""The test suite's own fixtures: the proxy's HTTP/1.1 layer (compiled and pure) and
backend processes. The engines (`impl`, `c_impl`, `ref_impl`) come from the
repository's conftest.py, shared with the benchmarks. Tests are in folders by
layer (engine, hashing, net, proxy, integrations, sim, config, cli, package);
their in-process helpers (servers.py, keyed_backends.py, data/) stay here; what they
share with the benchmarks (ports, waits, processes, backends) is leastload_testkit.
"""
import importlib
import os

import pytest

NO_C = "--no-c-extensions"  # the option the repository's conftest.py adds


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
    """The proxy's HTTP/1.1 layer, once compiled and once pure: tests/proxy/test_http1.py and
    tests/proxy/test_http1_fuzz.py run against both."""
    if request.param == "compiled":
        return load_compiled_http1(request.config)
    return load_pure_http1()


@pytest.fixture
def backend_procs():
    """start(n) -> n more `leastload backends` processes (leastload_testkit.backends); all stopped after the test."""
    from leastload_testkit.backends import start_backend

    started = []

    def start(n):
        for _ in range(n):
            started.append(start_backend())
        return started[-n:]
    yield start
    for b in started:
        b.stop()
