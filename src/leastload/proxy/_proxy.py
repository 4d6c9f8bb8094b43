"""`Proxy`: the listening server, the engine, the pools, the monitors, the admin port."""

import asyncio
import collections
import logging
from dataclasses import asdict
from typing import Any, Counter, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Type, Union, cast

from ..cmdline import UserError
from ..config import proxy_settings
from ..config.proxy_settings import DEFAULT as _D
from ..engine import errors as _errors
from ..engine.errors import UnknownService
from ..net import orca, upstream
from ..net.request_keys import KeyRule
from ..net.upstream import Backend
from . import _admin, _backend, _client, _core, _edge, _health, _http1, _listen, _overload
from ._accesslog import AccessLog
from ._proxy_protocol import ProxyHeader
from ._tls import CertificateStore
from ._stats import TTFB_BUCKETS, BackendCounters, Stats, wall_time  # noqa: F401 (TTFB_BUCKETS, BackendCounters: importable here as before)

log = logging.getLogger("leastload.proxy")


def _core_view(name: str) -> Any:
    """A Proxy attribute kept in its core (_core.ProxyCore), where the compiled
    per-request path reads it as a C field."""
    def get(self: "Proxy") -> Any:
        return getattr(self.core, name)

    def set_(self: "Proxy", value: Any) -> None:
        setattr(self.core, name, value)
    return property(get, set_, doc=f"The proxy's {name} (kept in proxy.core).")


def _edge_tls(certs: Tuple[str, ...], keys: Tuple[str, ...]) -> Optional[CertificateStore]:
    """The certificate store of tls_cert and tls_key, paired in order; None without them."""
    if len(certs) != len(keys):
        raise _errors.bad_value("tls_key", list(keys), f"as many keys as certificates (tls_cert has "
                                f"{len(certs)}, tls_key {len(keys)})")
    return CertificateStore(list(zip(certs, keys))) if certs else None


class Proxy:
    """An asyncio HTTP/1.1 reverse proxy whose every pick is the engine's.

        proxy = Proxy(["app1=127.0.0.1:9001", "app2=127.0.0.1:9002"], method="LEASTRESPONSETIME")
        await proxy.start()          # proxy.address: where it listens
        ...
        await proxy.close()

    Settings (all keyword arguments): the proxy's own limits, timeouts, forwarding headers and
    health probes are the rows of its settings table (leastload.config.proxy_settings, whose
    defaults these keywords take and whose checks they pass; docs/proxy-settings.md lists
    them). The others: listen [("127.0.0.1", 8080)], name ["leastload": the vserver's name in
    metrics, logs and show()], admin [None, or (host, port): loopback unless admin_token is
    set], admin_token [None: the admin port is read-only; else the token its writes need],
    health_probes [True; False: no probes here, another process probes the shared engine's
    backends], load_metrics [None, or CUSTOMLOAD's metric table for the backends' ORCA
    reports: {"cpu_utilization": (weight, threshold), "named_metrics.queue": ...};
    utilizations count in percent], max_connections and overload_connections [None: derived
    from the descriptor limit, and three quarters of it], reuse_port [False], access_log
    [None, or a leastload.proxy AccessLog], engine [None: leastload.VirtualServer],
    token_header [None: the header TOKEN hashes; needed for method="TOKEN"], and the
    vserver's settings (outlier_failures [5 here], outlier_ejection_time,
    outlier_max_ejection_percent, new_service_request, the hash methods' netmask,
    v6netmasklen, hashlength, hash_seed, ...: engine/settings.py).

    Under a hash method each request's key is read as leastload.net.request_keys says
    (the client's address, the URL, the Host header, ...); docs/proxy.md has the table.
    """

    # read on every request: kept in the core, where the compiled path reads them as C fields
    vserver = _core_view("vserver")
    pools = _core_view("pools")
    stats = _core_view("stats")
    access_log = _core_view("access_log")
    forwarding = _core_view("forwarding")
    timeout = _core_view("timeout")
    header_timeout = _core_view("header_timeout")
    client_timeout = _core_view("client_timeout")

    def __init__(self, backends: Union[Iterable[Union[str, Backend]], Dict[str, Union[str, Backend]]],
                 method: str = "LEASTCONNECTION", *, listen: Tuple[str, int] = ("127.0.0.1", 8080),
                 retries: int = _D["retries"], connect_timeout: float = _D["connect_timeout"],
                 timeout: float = _D["timeout"], client_timeout: float = _D["client_timeout"],
                 max_body: int = _D["max_body"], pool_size: int = _D["pool_size"],
                 health_check: str = _D["health_check"], health_path: str = _D["health_path"],
                 health_interval: float = _D["health_interval"], health_timeout: float = _D["health_timeout"],
                 health_fall: int = _D["health_fall"], health_rise: int = _D["health_rise"],
                 admin: Optional[Tuple[str, int]] = None, reuse_port: bool = False,
                 engine: Optional[Type[Any]] = None, token_header: Optional[str] = None,
                 max_request_line: int = _D["max_request_line"], max_header_size: int = _D["max_header_size"],
                 max_headers: int = _D["max_headers"], header_timeout: float = _D["header_timeout"],
                 body_timeout: float = _D["body_timeout"], tunnel_timeout: float = _D["tunnel_timeout"],
                 max_connections: Optional[int] = None,
                 xff: str = _D["xff"], forwarded: bool = _D["forwarded"], via: bool = _D["via"],
                 name: str = "leastload", access_log: Optional[AccessLog] = None,
                 admin_token: Optional[str] = None, health_ends_ejection: bool = _D["health_ends_ejection"],
                 health_probes: bool = True, load_metrics: Optional[Dict[str, Tuple[int, int]]] = None,
                 overload_connections: Optional[int] = None, overload_timeout: float = _D["overload_timeout"],
                 linger_bytes: int = _D["linger_bytes"], tls_cert: Sequence[str] = _D["tls_cert"],
                 tls_key: Sequence[str] = _D["tls_key"], accept_proxy: bool = _D["accept_proxy"],
                 backend_header: Optional[str] = _D["backend_header"], **vserver_settings: Any) -> None:
        self.core = _core.ProxyCore()
        if not isinstance(name, str):
            raise _errors.bad_type("name", name, "a vserver name (str)")
        if not name or not name.isprintable() or '"' in name or "\\" in name:
            raise _errors.bad_value("name", name, "a vserver name: printable text without quotes or backslashes")
        self.name = name  # the vserver's name: the `vserver` label of the metrics
        self.access_log = access_log  # an AccessLog, or None: no access log
        if admin_token is not None and (not isinstance(admin_token, str) or not admin_token.strip()):
            raise _errors.bad_value("admin_token", admin_token, "a non-empty str (the token admin writes need)")
        if admin is not None:
            _admin.check_admin_address(admin[0], admin_token)
        self.admin_token = admin_token
        self.backends = {b.name: b for b in upstream.parse_backends(backends)}
        self.keys = KeyRule(token_header)
        # CUSTOMLOAD's metric table for the backends' ORCA reports (None: reports feed no CUSTOMLOAD)
        self.load_metrics = None if load_metrics is None else orca.check_metric_table(load_metrics)
        if method == "TOKEN" and token_header is None:
            raise ValueError("token_header must name the request header TOKEN hashes (e.g. 'X-Session'), "
                             "got None")
        # the proxy's settings table checks every keyword it has a row for (config/proxy_settings.py)
        given = locals()
        checked = {s.name: proxy_settings.check(s.name, given[s.name]) for s in proxy_settings.SETTINGS
                   if s.keyword and s.kind != "address"}
        # the edge (_edge.py): TLS with its certificates loaded now (a bad file: UserError, one line)
        # and the PROXY protocol; None without either (the accept path is then as without them)
        self.tls = _edge_tls(checked["tls_cert"], checked["tls_key"])
        self.accept_proxy = checked["accept_proxy"]
        self.backend_header = checked["backend_header"]
        self.edge: Optional[_edge.Edge] = None
        if self.tls is not None or self.accept_proxy:
            self.edge = _edge.Edge(accept_proxy=self.accept_proxy, tls=self.tls,
                                   header_timeout=checked["header_timeout"])
        if health_probes is not True and health_probes is not False:
            raise TypeError(f"health_probes must be True or False, got {health_probes!r}")
        vserver_settings.setdefault("outlier_failures", 5)
        vserver_settings.setdefault("name", name)  # show() (the status page, `ctl show`) names it as the metrics do
        self.vserver = upstream.make_vserver(list(self.backends.values()), method, engine=engine,
                                             **vserver_settings)
        self.listen, self.admin_listen, self.reuse_port = listen, admin, reuse_port
        self.retries, self.connect_timeout, self.timeout = retries, checked["connect_timeout"], checked["timeout"]
        self.client_timeout, self.max_body, self.pool_size = checked["client_timeout"], max_body, pool_size
        self.max_request_line, self.max_header_size, self.max_headers = max_request_line, max_header_size, max_headers
        self.header_timeout, self.body_timeout = checked["header_timeout"], checked["body_timeout"]
        self.tunnel_timeout = checked["tunnel_timeout"]  # a tunnel's idle time (_tunnel.py)
        self.max_connections = max_connections if max_connections is not None else _listen.default_max_connections()
        if overload_connections is not None and overload_connections > self.max_connections:
            raise _errors.bad_value("overload_connections", overload_connections,
                                    f"at most max_connections ({self.max_connections})")
        self.overload_connections = (overload_connections if overload_connections is not None
                                     else _overload.default_high_water(self.max_connections))
        self.overload_timeout, self.linger_bytes = checked["overload_timeout"], linger_bytes
        self.limits = _http1.Limits(max_request_line, max_header_size, max_headers, max_body)
        self.forwarding = _http1.Forwarding(xff, forwarded, via, https=self.tls is not None)
        self.budget = _backend.ConnectionBudget(self.max_connections)
        self.local_errors: "Counter[str]" = collections.Counter()  # the proxy's own troubles, by what failed
        self.health: Tuple[str, str, float, float, int, int] = (
            health_check, health_path, checked["health_interval"], checked["health_timeout"], health_fall, health_rise)
        self.health_ends_ejection = health_ends_ejection
        self.health_probes = health_probes  # False: another process probes the (shared) engine's backends
        # per backend, a probe of its own (a config's monitors: kind, path, interval, timeout, fall,
        # rise, method, codes) instead of the proxy-wide one; with health_check="none", no probes at all
        self.probes: Dict[str, Tuple[Any, ...]] = {}
        self.stats = Stats(self.backends)
        self.clients: Set[_client.ClientConnection] = set()
        self.overload = _overload.Overload(self.max_connections, self.overload_connections, self.overload_timeout,
                                           self.clients)
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.pools = {}  # name -> _backend.Pool
        self.monitors: Dict[str, _health.HealthMonitor] = {}
        self.listener: Optional[_listen.Listener] = None
        self.admin: Optional[asyncio.Server] = None
        self._watch: "Optional[asyncio.Task[None]]" = None
        self._sweeper: "Optional[asyncio.Task[None]]" = None
        # the newest event of each list already logged (by identity)
        self._seen: Dict[str, Optional[Tuple[float, str, str]]] = {"outlier_events": None, "slow_start_exits": None}
        self._last_outlier: Dict[str, str] = {}  # per backend, the outlier news last logged
        self._local_error_logged: Dict[str, float] = {}

    # ---- life cycle -----------------------------------------------------------

    async def start(self) -> "Proxy":
        self.loop = loop = asyncio.get_running_loop()
        self.core.turn = _core.WriteTurn(loop)  # the writes of a turn of the loop, sent at its end
        for b in self.backends.values():
            self.pools[b.name] = self._pool(b)
        host, port = self.listen
        # ClientConnection is a protocol without asyncio.Protocol's base (an extension type compiled)
        self.listener = _listen.Listener(loop, host, port,
                                         lambda: cast(asyncio.BaseProtocol, _client.ClientConnection(self)),
                                         self.max_connections, reuse_port=self.reuse_port,
                                         overload=self.overload, reserve=_overload.Reserve(),
                                         edge=self.edge, edge_factory=self._edge_client).start()
        for b in self.backends.values():
            self._start_monitor(b)
        if self.admin_listen is not None:
            # POST /leastload/reload rereads the certificates (with TLS; without it, there is no reload)
            reload = self._reload_for_admin if self.tls is not None else None
            self.admin = await _admin.start_site(_admin.Site({self.name: self}, self.admin_token, reload),
                                                 *self.admin_listen)
        self._watch = loop.create_task(self._watch_events())
        self._sweeper = loop.create_task(self._sweep())
        return self

    def _edge_client(self, header: Optional[ProxyHeader], accepted_at: float) -> asyncio.BaseProtocol:
        """The protocol of a connection that passed the edge: its client address is the PROXY
        header's source when there is one, its first head due a header timeout after accept."""
        client = _client.ClientConnection(self)
        if header is not None and header.source is not None:
            client.client = header.source
        client.accepted_at = accepted_at
        return cast(asyncio.BaseProtocol, client)

    def reload_certificates(self) -> bool:
        """Reads the TLS certificates and keys again for new connections (SIGHUP, the runtime
        API's reload); a file that does not load is logged and the old pairs stay. True when
        there was something to reload and it loaded."""
        if self.tls is None:
            return False
        try:
            self.tls.reload()
        except UserError as exc:
            log.error("vserver %s: certificates not reloaded, the old ones stay: %s", self.name, exc)
            return False
        log.warning("vserver %s: certificates reloaded (%s)", self.name,
                    ", ".join(p.cert_file for p in self.tls.pairs))
        return True

    def set_edge(self, edge: Dict[str, Any]) -> List[str]:
        """A config's reload changed the vserver's edge: new certificates make a new store for the
        next connections (a file that does not load: UserError, nothing changed); the PROXY
        protocol and TLS on or off apply at the next start. What changed, one line each."""
        changes: List[str] = []
        certs, keys = tuple(edge.get("tls_cert", ())), tuple(edge.get("tls_key", ()))
        if self.tls is not None and certs:
            if (certs, keys) != tuple(zip(*[(p.cert_file, p.key_file) for p in self.tls.pairs])):
                try:
                    store = _edge_tls(certs, keys)
                except UserError as exc:  # the reload's refusal (a ValueError), the old pairs stay
                    raise ValueError(str(exc)) from None
                assert store is not None and self.edge is not None
                self.tls = self.edge.tls = store
                changes.append(f"{self.name}: certificates {', '.join(certs)}")
        elif bool(certs) != (self.tls is not None):
            changes.append(f"{self.name}: TLS on or off applies at the next start")
        if bool(edge.get("accept_proxy", False)) != self.accept_proxy:
            changes.append(f"{self.name}: accept_proxy applies at the next start")
        return changes

    def _reload_for_admin(self) -> List[str]:
        if not self.reload_certificates():
            raise ValueError("the certificates did not load (the log says why); the old ones stay")
        return [f"vserver {self.name}: certificates reloaded"]

    @property
    def address(self) -> Tuple[str, int]:
        """(host, port) the proxy listens on."""
        assert self.listener is not None, "the proxy is not started"
        return self.listener.sockname

    @property
    def admin_address(self) -> Optional[Tuple[str, int]]:
        """(host, port) of the admin port, None when it is off."""
        if self.admin is None:
            return None
        host, port = self.admin.sockets[0].getsockname()[:2]
        return host, port

    async def close(self, grace: float = 5.0) -> None:
        """Stops listening, lets open requests finish for up to `grace` seconds, closes the rest."""
        assert self.listener is not None and self.loop is not None, "the proxy is not started"
        self.listener.close()
        if self.admin is not None:
            self.admin.close()
        for monitor in self.monitors.values():
            monitor.stop()
        deadline = self.loop.time() + grace
        while any(c.busy for c in self.clients) and self.loop.time() < deadline:
            await asyncio.sleep(0.02)
        if self.core.turn is not None:
            self.core.turn.flush()  # answers held to this turn's end go out before the aborts
        for client in list(self.clients):
            client.transport.abort()
        for pool in self.pools.values():
            pool.close()
        if self._watch is not None:
            self._watch.cancel()
        if self._sweeper is not None:
            self._sweeper.cancel()
        self._log_events()
        await asyncio.sleep(0)  # let the aborted transports report connection_lost

    async def __aenter__(self) -> "Proxy":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def serve_forever(self) -> None:
        assert self.listener is not None, "the proxy is not started"
        await self.listener.serve_forever()

    # ---- backends at run time ---------------------------------------------------

    def add_backend(self, spec: Union[str, Backend]) -> Backend:
        """Adds `NAME=HOST:PORT[:WEIGHT]` to a running proxy (a new service: slow start applies)."""
        backend = upstream.parse_backend(spec) if isinstance(spec, str) else spec
        if backend.name in self.vserver and not (self.shared and backend.name not in self.backends):
            raise ValueError(f"backend {backend.name!r} is already bound")
        # a shared engine: another worker may have bound it already, or bind it this moment (the
        # fan-out asks every worker at once): the check and the bind under the engine's lock
        with self.vserver.atomic():
            if backend.name not in self.vserver:
                self.vserver.bind(backend.name, backend.weight)
        self.backends[backend.name] = backend
        if self.loop is not None:
            old = self.pools.get(backend.name)
            if old is not None:
                old.close()
            self.pools[backend.name] = self._pool(backend)
            self._start_monitor(backend)
        return backend

    @property
    def shared(self) -> bool:
        """True when the engine is shared with other processes (the vserver's shared=)."""
        return getattr(self.vserver, "shared", None) is not None

    def drain_backend(self, name: str) -> None:
        """No new requests for `name`; it is unbound when its last request ends (vs.drain)."""
        self.vserver.drain(name)

    def remove_backend(self, name: str) -> None:
        """Drains `name` (requests in flight finish, then the engine unbinds it), stops its probes
        and keeps none of its connections once they are idle."""
        if not (self.shared and name not in self.vserver):  # a shared engine's: another worker's drain did it
            self.vserver.drain(name)
        monitor = self.monitors.pop(name, None)
        if monitor is not None:
            monitor.stop()
        pool = self.pools.get(name)
        if pool is not None:
            pool.close()
            pool.max_idle = 0  # connections of requests still in flight are closed as they end

    def set_probe(self, name: str, probe: Optional[Tuple[Any, ...]]) -> None:
        """`name`'s own probe settings (None: the proxy-wide ones); a running probe restarts with them."""
        if probe is None:
            self.probes.pop(name, None)
        else:
            self.probes[name] = probe
        backend = self.backends.get(name)
        if self.loop is not None and backend is not None and name in self.vserver:
            self._start_monitor(backend)

    def _start_monitor(self, backend: Backend) -> None:
        old = self.monitors.pop(backend.name, None)
        if old is not None:
            old.stop()
        if self.health[0] == "none" or not self.health_probes:
            return
        settings = self.probes.get(backend.name, self.health)
        assert self.loop is not None  # monitors start once the proxy runs
        monitor = self.monitors[backend.name] = _health.HealthMonitor(
            self.loop, self.vserver, backend, *settings, ends_ejection=self.health_ends_ejection)
        monitor.start()

    # ---- observability ----------------------------------------------------------

    def status(self) -> Dict[str, Any]:
        """What GET /leastload/status returns: the vserver's show(), the proxy's counters, the monitors."""
        view = self.vserver.show()
        backends: Dict[str, Dict[str, Any]] = {}
        for name, b in self.backends.items():
            entry: Dict[str, Any] = {"address": f"{b.host}:{b.port}", "weight": b.weight,
                     "idle_connections": len(self.pools[name].idle) if name in self.pools else 0,
                     "connections_opened": self.pools[name].opened if name in self.pools else 0}
            if name in self.monitors:
                entry["health"] = self.monitors[name].status()
            entry["bound"] = name in self.vserver
            if entry["bound"]:
                entry["engine"] = self.vserver.info(name)  # bytes, packets (14 s window), ttfb, ...
                ejection = entry["ejection"] = self.vserver.ejection(name)
                if ejection is not None:  # the engine's monotonic times, and the wall clock's beside them
                    ejection["until_time"] = wall_time(ejection["until"])
                    ejection["since_time"] = wall_time(ejection["since"])
            entry.update(self.stats.of(name).as_dict())
            backends[name] = entry
        now = self.vserver.now()
        return {"time": wall_time(now), "monotonic": now, "name": self.name,
                "vserver": asdict(view), "show": str(view), "backends": backends,
                "answered_by_proxy": {str(k): v for k, v in self.stats.answered_by_proxy.items()},
                "clients": len(self.clients), "max_connections": self.max_connections,
                "listener": self._listener_status(), "overload": self.overload.status(len(self.clients)),
                "linger_resets": self.stats.linger_resets,
                "tunnels": self.stats.tunnels, "tunnels_open": self.stats.tunnels_open,
                "tunnel_timeouts": self.stats.tunnel_timeouts,
                "backend_connections": self.budget.open, "local_errors": dict(self.local_errors),
                **self._edge_status()}

    def _edge_status(self) -> Dict[str, Any]:
        """`tls` (the certificates' files and names, reloads) and `edge` (its counters), with an edge."""
        if self.edge is None:
            return {}
        found: Dict[str, Any] = {"edge": self.edge.counters.as_dict()}
        if self.tls is not None:
            found["tls"] = {"pairs": self.tls.status(), "reloads": self.tls.reloads}
        return found

    def _pool(self, b: Backend) -> _backend.Pool:
        assert self.loop is not None  # pools are made once the proxy runs
        pool = _backend.Pool(self.loop, b.host, b.port, self.pool_size, self.limits, self.budget,
                             lambda packets: self._late_packets(b.name, packets), self.core.turn)
        if self.backend_header is not None:  # the response names the service that answered
            pool.added_head = f"{self.backend_header}: {b.name}\r\n".encode()
        return pool

    def _late_packets(self, name: str, packets: int) -> None:
        """Segments a lost backend connection had not reported with an exchange (the method
        does not pick by packets: see _backend.SEGMENTS_READ_EVERY),
        to the engine's window and the counters, so that their totals stay exact."""
        try:
            self.vserver.record(name, packets=packets)
        except UnknownService:  # unbound since: the engine no longer counts it
            return
        self.stats.of(name).packets += packets

    def client_opened(self, client: "_client.ClientConnection") -> None:
        self.clients.add(client)
        self.overload.update(len(self.clients))

    def client_closed(self, client: "_client.ClientConnection") -> None:
        self.clients.discard(client)
        self.overload.update(len(self.clients))
        if self.listener is not None:
            self.listener.connection_closed()

    def note_local_error(self, what: str, exc: BaseException) -> None:
        """A failure of the proxy's own (descriptors, ports, buffers): logged once per kind a
        second at most, counted, never charged to a backend."""
        self.local_errors[what] += 1
        now = self.loop.time() if self.loop is not None else 0.0
        if now - self._local_error_logged.get(what, -2.0) >= 1.0:
            self._local_error_logged[what] = now
            log.error("%s failed for a local reason: %s (%d so far)", what, exc, self.local_errors[what])

    def _listener_status(self) -> Dict[str, Any]:
        listener = self.listener
        if listener is None:
            return {}
        return {"active": listener.active, "accepted": listener.accepted, "paused": listener.paused,
                "shortages": listener.shortages}

    @property
    def load_reports(self) -> bool:
        """Whether the backends' ORCA reports are read (the vserver's weights_from_utilization;
        read without the engine's lock: a change reaches the next responses)."""
        return self.load_metrics is not None or bool(getattr(self.vserver, "_by_utilization", False))

    def note_load_report(self, name: str, value: bytes) -> None:
        """A backend's `endpoint-load-metrics` header: its report, to the engine. A bad one
        is counted (local error "load_report") and dropped; the response goes on."""
        try:
            report = orca.parse(value.decode("latin-1"))
            if name not in self.vserver:
                return
            if self.load_metrics is not None:
                self.vserver.report_load(name, orca.custom_load(report, self.load_metrics))
            if getattr(self.vserver, "_by_utilization", False):
                self.vserver.report_utilization(
                    name, cpu_utilization=report.cpu_utilization,
                    application_utilization=report.application_utilization,
                    rps_fractional=report.rps_fractional, eps=report.eps)
        except ValueError as exc:
            self.note_local_error("load_report", exc)
        except UnknownService:
            pass  # unbound meanwhile (by another worker of a shared engine): nothing to weigh

    def note_failure(self, name: str, why: object) -> None:
        log.debug("backend %s failed: %s", name, why)
        self._log_events()

    async def _sweep(self) -> None:
        """One timer for every wait: backends silent for `timeout`, clients past their
        header, body, idle or write deadline (checked a few times per shortest period; the
        header and idle timeouts shrunk under overload, and checked as often as their floor asks)."""
        shortest = min(self.timeout, self.header_timeout, self.body_timeout, self.client_timeout)
        tick = min(1.0, max(0.01, shortest / 10))
        overloaded_tick = min(tick, max(0.01, self.overload_timeout / 10))
        overload = self.overload
        while True:
            await asyncio.sleep(tick if overload.state == _overload.NORMAL else overloaded_tick)
            now = _core.clock()  # the clock the connections stamp their deadlines with
            for pool in list(self.pools.values()):
                pool.check_timeouts(now)
            n = len(self.clients)
            head_cut = self.header_timeout - overload.timeout(self.header_timeout, n)
            idle_cut = self.client_timeout - overload.timeout(self.client_timeout, n)
            for client in list(self.clients):
                client.check_deadline(now, head_cut, idle_cut)

    async def _watch_events(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self._log_events()

    def _log_events(self) -> None:
        """Logs ejections, returns and slow-start exits the engine recorded since the last look
        (a shared engine's: by the worker that probes, once for all)."""
        if self.shared and not self.health_probes:
            return
        with self.vserver.atomic():  # a shared engine's: as the other workers left them
            lists = {attr: list(getattr(self.vserver, attr)) for attr in ("outlier_events", "slow_start_exits")}
        for attr in ("outlier_events", "slow_start_exits"):
            events: List[Tuple[float, str, str]] = lists[attr]
            last = self._seen[attr]
            start = 0
            if last is not None:
                start = len(events)
                while start > 0 and events[start - 1] != last:  # a shared engine's arrive as copies
                    start -= 1
            for when, name, what in events[start:]:
                if attr == "slow_start_exits":
                    log.warning("backend %s left slow start at %s (%s)", name, wall_time(when), what)
                elif self._last_outlier.get(name) != what:  # a change, not the same news again
                    self._last_outlier[name] = what
                    why = " (its health probe passed)" if what == "returned early" else ""
                    log.warning("backend %s: %s at %s%s", name, what, wall_time(when), why)
            if events:
                self._seen[attr] = events[-1]

