"""The test suite's own fixtures: the proxy's HTTP/1.1 layer (compiled and pure) and
backend processes. The engines (`impl`, `c_impl`, `ref_impl`) come from the
repository's conftest.py, shared with the benchmarks. Tests are in folders by
layer (engine, hashing, net, proxy, integrations, sim, config, cli, package);
their in-process helpers (servers.py, keyed_backends.py, data/) stay here; what they
share with the benchmarks (ports, waits, processes, backends) is leastload_testkit.
"""
import importlib
import os
import sys

import pytest

NO_C = "--no-c-extensions"  # the option the repository's conftest.py adds


# ---- the proxy's HTTP/1.1 layer: compiled and pure -------------------------------------------

# The layer is three modules, lowest first: each imports the ones before it by their real
# names, so a set (all compiled or all pure) is loaded with sys.modules holding that set
# under those names, and the names given back as they were after.
_LAYER_MODULES = ("_scan", "_response", "_http1")
_LAYER_SETS = {}  # "compiled" or "python" -> that set's _http1


def _load_layer(kind, spec_of):
    import importlib.util
    import sys

    proxy = importlib.import_module("leastload.proxy")
    names = [proxy.__name__ + "." + module for module in _LAYER_MODULES]
    saved = {name: sys.modules.get(name) for name in names}
    try:
        for name in names:
            spec = spec_of(name, proxy)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        _LAYER_SETS[kind] = sys.modules[names[-1]]
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return _LAYER_SETS[kind]


def _compiled_spec(name, proxy):
    import importlib.machinery

    for finder in sys.meta_path:  # the finders an import would ask (an editable install's among them)
        find_spec = getattr(finder, "find_spec", None)
        spec = find_spec(name, proxy.__path__) if find_spec is not None else None
        if spec is not None and (spec.origin or "").endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            return spec
    pytest.skip("the compiled HTTP/1.1 layer is not built (no extension module " + name + "): "
                "only the pure .py files are tested")


def _pure_spec(name, proxy):
    import importlib.util

    path = os.path.join(os.path.dirname(proxy.__file__), name.rsplit(".", 1)[1] + ".py")
    return importlib.util.spec_from_file_location(name, path)


def load_compiled_http1(config):
    """The compiled HTTP/1.1 layer (the extension modules built from _scan.py, _response.py and
    _http1.py), whichever layer leastload.proxy chose (the suite's default,
    LEASTLOAD_IMPLEMENTATION=python, puts the .py files under their names). Skips, saying why,
    when the extensions are not built or under --no-c-extensions."""
    if config.getoption(NO_C):
        pytest.skip("the compiled HTTP/1.1 layer: C-extension tests disabled by --no-c-extensions")
    proxy = importlib.import_module("leastload.proxy")
    if proxy.HTTP_LAYER == "compiled":
        return sys.modules[proxy.__name__ + "._http1"]
    return _LAYER_SETS.get("compiled") or _load_layer("compiled", _compiled_spec)


def load_pure_http1():
    """The pure _http1.py (with the pure _scan.py and _response.py it imports), by their paths:
    a compiled module beside a .py would win an ordinary import."""
    proxy = importlib.import_module("leastload.proxy")
    if proxy.HTTP_LAYER == "python":
        return sys.modules[proxy.__name__ + "._http1"]
    return _LAYER_SETS.get("python") or _load_layer("python", _pure_spec)


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
