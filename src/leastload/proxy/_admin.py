"""The admin port (off by default): status, Prometheus metrics, a health check, the runtime API.

    GET  /leastload/status     the vserver as JSON (`?format=text`: the `show()` table as plain
                               text); several vservers (a config's): {"vservers": {NAME: ...}},
                               or one of them with `?vserver=NAME`
    GET  /metrics              Prometheus' text format, version 0.0.4 (_metrics.py lists every series)
    GET  /healthz              200 `ok` while every vserver has a bound backend UP (not DOWN or
                               OUT_OF_SERVICE, not ejected, not draining), else 503 naming those without
    POST /leastload/command    the runtime API (_control.py): {"command": ["disable", "service", "s1"]}
    POST /leastload/reload     reread the --config file and apply the difference (_gateway.py)

Writes (every command but show/stat, and reload) need the admin token:
`Authorization: Bearer TOKEN`, compared in constant time; without it, or on
a port started without a token, 401. Anything else is 404. Requests go through
the same I/O-free reader as the proxy's clients, with small limits
(ADMIN_LIMITS: a long request line is refused as it arrives, never
buffered; a body of at most 64 KiB); a request head must arrive within the
proxy's `header_timeout`, and an idle connection closes after it too. At most
MAX_ADMIN_CONNECTIONS are open at once (more are closed at once), so the
admin port cannot eat the descriptors the proxy keeps for backends. One
request per connection (_one_request.py); after its answer the connection
lingers (_linger.py), so a refused body cannot reset the answer away.
"""

import asyncio
import hmac
import ipaddress
import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Set, Tuple

from . import _http1, _metrics
from ._control import Control
from ._one_request import OneRequestConnection

STATUS_PATH = b"/leastload/status"
METRICS_PATH = b"/metrics"
HEALTH_PATH = b"/healthz"
COMMAND_PATH = b"/leastload/command"
RELOAD_PATH = b"/leastload/reload"
NOT_FOUND = (b"try GET /leastload/status, GET /metrics, GET /healthz, POST /leastload/command "
             b"or POST /leastload/reload\n")
ADMIN_LIMITS = _http1.Limits(max_request_line=4096, max_header_size=16384, max_headers=64, max_body=65536)
MAX_ADMIN_CONNECTIONS = 32
JSON = b"application/json"


class Served(_metrics.Observed, Protocol):
    """What the admin port uses of each vserver's proxy (a Proxy is one): its status, its
    metrics (_metrics.Observed), its header timeout. The runtime API (_control.Control) is
    handed the same proxies."""

    @property
    def header_timeout(self) -> float: ...

    def status(self) -> Dict[str, Any]: ...


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_admin_address(host: str, token: Optional[str]) -> None:
    """The admin port binds loopback, unless writes are guarded by a token."""
    if not is_loopback(host) and not token:
        raise ValueError(f"admin address {host!r} is not loopback: an admin port reachable from other "
                         "machines needs an admin token (--admin-token-file)")


class Site:
    """What one admin port serves: this process's vservers (one Proxy each), their runtime API,
    the token writes need, and the config reload when there is a config."""

    def __init__(self, proxies: Mapping[str, Served], token: Optional[str] = None,
                 reload: Optional[Callable[[], List[str]]] = None) -> None:
        self.proxies, self.token, self.reload = proxies, token, reload
        self.control = Control(proxies)
        self.header_timeout = min(p.header_timeout for p in proxies.values())

    def status(self, vserver: Optional[str] = None) -> Dict[str, Any]:
        if vserver is not None:
            return self.proxies[vserver].status()
        if len(self.proxies) == 1:
            return next(iter(self.proxies.values())).status()
        return {"vservers": {name: proxy.status() for name, proxy in self.proxies.items()}}

    def healthy(self) -> Tuple[bool, str]:
        down = [name for name, proxy in self.proxies.items() if not _metrics.healthy(proxy)[0]]
        if not down:
            return True, "ok"
        if len(self.proxies) == 1:
            return _metrics.healthy(next(iter(self.proxies.values())))
        return False, f"no backend is UP in lb vserver {', '.join(down)}"

    def authorized(self, head: "_http1.RequestHead") -> bool:
        return token_matches(head, self.token)


def token_matches(head: "_http1.RequestHead", token: Optional[str]) -> bool:
    """Whether the request carries the admin token (`Authorization: Bearer TOKEN`, its first
    Authorization header, compared in constant time); never without a token. The admin port's
    check and the fan-out's."""
    if not token:
        return False
    value = head.header(b"authorization")
    if value is None:
        return False
    scheme, _, given = value.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token.encode())


BAD_COMMAND = 'the body must be JSON: {"command": ["word", ...]}'


def command_words(body: bytes) -> Optional[List[str]]:
    """A POST /leastload/command body's words ({"command": ["word", ...]}); None when it is not
    that (answered 400 with BAD_COMMAND). The admin port's parse and the fan-out's."""
    try:
        words = json.loads(body or b"{}")["command"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
        return None
    return words


class AdminConnection(OneRequestConnection):
    def __init__(self, site: Site, open_set: "Set[OneRequestConnection]") -> None:
        super().__init__(ADMIN_LIMITS, open_set, MAX_ADMIN_CONNECTIONS, site.header_timeout)
        self.site = site

    def serve(self, head: "_http1.RequestHead", body: bytes) -> None:
        path, _, query = head.target.partition(b"?")
        site = self.site
        if head.method == b"POST" and path in (COMMAND_PATH, RELOAD_PATH):
            self._post(head, path, body)
        elif head.method != b"GET":
            self.answer(404, b"text/plain", NOT_FOUND)
        elif path == METRICS_PATH:
            self.answer(200, _metrics.CONTENT_TYPE, _metrics.render(*site.proxies.values()))
        elif path == HEALTH_PATH:
            ok, why = site.healthy()
            self.answer(200 if ok else 503, b"text/plain", why.encode() + b"\n")
        elif path != STATUS_PATH:
            self.answer(404, b"text/plain", NOT_FOUND)
        else:
            params = dict(p.partition(b"=")[::2] for p in query.split(b"&") if p)
            vserver = params.get(b"vserver")
            name = vserver.decode("latin-1") if vserver is not None else None
            if name is not None and name not in site.proxies:
                self.answer(404, b"text/plain", f"no lb vserver {name!r}\n".encode())
            elif params.get(b"format") == b"text":
                proxies = [site.proxies[name]] if name is not None else list(site.proxies.values())
                text = "\n\n".join(str(p.status()["show"]) for p in proxies)
                self.answer(200, b"text/plain", text.encode() + b"\n")
            else:
                self._json(200, site.status(name))

    def _post(self, head: "_http1.RequestHead", path: bytes, body: bytes) -> None:
        site = self.site
        if path == RELOAD_PATH:
            if not site.authorized(head):
                self._json(401, {"ok": False, "error": _UNAUTHORIZED})
            elif site.reload is None:
                self._json(404, {"ok": False, "error": "nothing to reload: the proxy was started without --config"})
            else:
                try:
                    changes = site.reload()
                except (ValueError, TypeError, OSError) as exc:  # ConfigError is a ValueError
                    self._json(400, {"ok": False, "error": f"reload refused, the running configuration stays: {exc}"})
                else:
                    self._json(200, {"ok": True, "changes": changes})
            return
        words = command_words(body)
        if words is None:
            self._json(400, {"ok": False, "error": BAD_COMMAND})
            return
        if not Control.is_read(words) and not site.authorized(head):
            self._json(401, {"ok": False, "error": _UNAUTHORIZED})
            return
        status, answer = site.control.run(words)
        self._json(status, answer)

    def _json(self, status: int, data: Any) -> None:
        self.answer(status, JSON, json.dumps(data, indent=2, default=str).encode() + b"\n")


_UNAUTHORIZED = ("writes need the admin token (Authorization: Bearer TOKEN; the proxy's "
                 "--admin-token-file, leastload ctl's --token-file or LEASTLOAD_ADMIN_TOKEN)")


async def start_site(site: Site, host: str, port: int) -> asyncio.Server:
    check_admin_address(host, site.token)
    open_set: Set[OneRequestConnection] = set()
    loop = asyncio.get_running_loop()
    server: asyncio.Server = await loop.create_server(lambda: AdminConnection(site, open_set), host, port,
                                                      reuse_address=True)
    return server


async def start(proxy: Served, host: str, port: int, token: Optional[str] = None) -> asyncio.Server:
    """One proxy's admin port (Proxy(admin=...))."""
    return await start_site(Site({proxy.name: proxy}, token), host, port)
