"""An asyncio HTTP/1.1 reverse proxy balancing with leastload (`leastload proxy`).

Needs httptools (`pip install leastload[proxy]`, which brings uvloop too).
docs/proxy.md describes what it does per request, on failure and under load.
"""

try:
    import httptools  # noqa: F401
except ImportError as exc:
    raise ImportError("leastload.proxy needs httptools: pip install leastload[proxy]") from exc

from ._cli import main
from ._proxy import Proxy

__all__ = ["Proxy", "main"]
