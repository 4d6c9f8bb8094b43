"""An asyncio HTTP/1.1 reverse proxy balancing with leastload (`leastload proxy`).

Needs httptools (`pip install leastload[proxy]`, which brings uvloop too).
docs/proxy.md describes what it does per request, on failure and under load.

Its modules import one way, each only from those above it in this list (never from this
package's __init__; tools/check_import_cycles.py keeps it so):

    _http1, _accesslog, _listen, _stats, _control, _config   no sibling imports
    _health                                                  probes; given the loop and the vserver
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

from .. import IMPLEMENTATION as _IMPLEMENTATION


def _http1_layer() -> str:
    """Which HTTP/1.1 layer (_http1) the proxy uses, chosen before anything imports it: the
    compiled module (_http1.py built with Cython) when it is there, the pure _http1.py when
    it is not or under LEASTLOAD_IMPLEMENTATION=python."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    name = __name__ + "._http1"
    if _IMPLEMENTATION == "python":
        # an ordinary import would find the extension module beside _http1.py first: the .py
        # is loaded by its path, under the name the other modules import
        spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(__file__), "_http1.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    else:
        module = importlib.import_module(name)
    origin = getattr(module, "__file__", None) or ""
    return "compiled" if origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)) else "python"


HTTP_LAYER = _http1_layer()
"""`"compiled"` or `"python"`: the HTTP/1.1 layer in use (see _http1_layer)."""

from ._accesslog import AccessLog  # noqa: E402
from ._cli import main  # noqa: E402 (after the layer is chosen)
from ._proxy import Proxy  # noqa: E402

__all__ = ["AccessLog", "Proxy", "main", "HTTP_LAYER"]
