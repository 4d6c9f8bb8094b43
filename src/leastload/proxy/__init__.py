"""An asyncio HTTP/1.1 reverse proxy balancing with leastload (`leastload proxy`).

Needs httptools (`pip install leastload[proxy]`, which brings uvloop too).
docs/proxy.md describes what it does per request, on failure and under load.

Its modules import one way, each only from those above it in this list (never from this
package's __init__; tools/check_import_cycles.py keeps it so):

    _scan, _accesslog, _overload, _stats, _control,           no sibling imports
    _response                                                the HTTP/1.1 layer: responses (_scan's scanner)
    _http1                                                   the HTTP/1.1 layer: requests; re-exports _response's
    _listen                                                  (an _overload's types)
    _config, _linger
    _health                                                  probes; given the loop and the vserver
    _one_request                                             the admin ports' connections (one request each)
    _core                                                    the clock, the write turn, ProxyCore
    _backend                                                 pools, connections; ExchangeSide/ClientSide
    _exchange                                                one request's tries; Upstream/Client
    _client                                                  client connections; ClientContext
    _metrics, _admin                                         the admin port; Observed/Served
    _proxy                                                   Proxy: wires all of the above
    _gateway, _fanout, _cli                                  a config's proxies, the workers, the command

A lower part gets what it needs as arguments typed by a small Protocol of its own (named
after the semicolon above), which Proxy and the classes above it satisfy.
"""

try:
    import httptools  # noqa: F401
except ImportError as exc:
    raise ImportError("leastload.proxy needs httptools: pip install leastload[proxy]") from exc

from .._implementation import IMPLEMENTATION as _IMPLEMENTATION


# The per-request path: the HTTP/1.1 layer, the counters, and the three modules that carry a
# request, each compiled from its .py with the .pxd beside it (Cython's pure-Python mode),
# lowest layer first. The compiled ones cimport each other's types: all of them or none.
_COMPILED_PATH = ("_scan", "_response", "_http1", "_stats", "_core", "_backend", "_exchange", "_client")


def _request_path() -> str:
    """Which per-request path the proxy uses, chosen before anything imports it: the compiled
    modules (built from the .py files with Cython) when they are there, the plain .py files
    when one is missing or under LEASTLOAD_IMPLEMENTATION=python."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    def compiled(name: str) -> bool:
        spec = importlib.util.find_spec(name)
        return spec is not None and (spec.origin or "").endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))

    names = [__name__ + "." + module for module in _COMPILED_PATH]
    if _IMPLEMENTATION != "python" and all(compiled(name) for name in names):
        for name in names:
            importlib.import_module(name)
        return "compiled"
    # an ordinary import would find an extension module beside its .py first: each .py is
    # loaded by its path, under the name the other modules import, lowest layer first
    for name in names:
        path = os.path.join(os.path.dirname(__file__), name.rsplit(".", 1)[1] + ".py")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return "python"


HTTP_LAYER = _request_path()
"""`"compiled"` or `"python"`: the per-request path in use, the HTTP/1.1 layer and the
connections and exchanges over it (see _request_path)."""

from ._accesslog import AccessLog  # noqa: E402
from ._cli import main  # noqa: E402 (after the layer is chosen)
from ._proxy import Proxy  # noqa: E402

__all__ = ["AccessLog", "Proxy", "main", "HTTP_LAYER"]
