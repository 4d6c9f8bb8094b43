# cython: annotation_typing=False
"""One request's way through the engine and the backends, retries included.

Callback-driven, no task or future per request: `start()` picks a backend
and sends at once on a pooled connection (a new connection is the only
step that waits, in a small task); the backend connection calls
`on_outcome()` when the exchange ends, which does the accounting and then
either retries on another backend or hands the client connection on.

The engine sees, per request:

    acquire(exclude=tried, key=key)  the pick (key: the request's, for a hash method);
                                a retry excludes the backends tried
    record(bytes=...)           the request as sent, each response chunk as it arrives
    record(packets=...)         the backend socket's TCP_INFO segment delta at the end
    finish(ttfb, status)        request fully sent -> first response byte; the status
    fail()                      refused, reset, timed out or garbled: no response

Whether an attempt that went wrong is the backend's failure, and whether the
request goes on (to another backend, or to the same one on a new connection),
is `upstream.after_attempt()`'s decision, the rule the httpx transport uses too;
`on_outcome()` only says which `upstream.Outcome` the connection's outcome is.
"""

import asyncio
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Protocol

from ..engine.errors import NoServiceAvailable
from ..net import upstream
from ..net.upstream import Outcome
from . import _backend, _http1, _tunnel
from ._backend import CLIENT_GONE, OK, RESET, TIMEOUT, ExchangeSide
from ._core import clock
from ._health import is_local_error
from ._http1 import error_response
from ._stats import Stats

if TYPE_CHECKING:
    from ._accesslog import AccessLog
    from ._backend import BackendConnection, Pool

CLIENT_CLOSED = 499  # ends a transaction whose client left before any status: not the backend's fault

# A backend connection's outcome (other than OK) for the retry rule. RESET without a
# connection (refused, or not accepted in time) is Outcome.NOT_SENT instead.
_OUTCOMES = {
    RESET: Outcome.NO_RESPONSE,         # closed or reset before any response byte
    TIMEOUT: Outcome.FAILED,            # 504
    _backend.BAD_RESPONSE: Outcome.FAILED,       # unparsable before anything was passed on: 502
    _backend.BROKEN: Outcome.FAILED,             # part of the answer is out: the client is closed
    CLIENT_GONE: Outcome.NOT_THE_BACKEND,
    _backend.CLIENT_STALLED: Outcome.NOT_THE_BACKEND,
}


class Upstream(Protocol):
    """What an exchange uses of the proxy (a Proxy is one): the engine, the pools, the
    counters, the backend-side settings, where failures are reported, the access log."""

    @property
    def vserver(self) -> Any: ...  # the engine's VirtualServer (either engine's)

    @property
    def pools(self) -> "Dict[str, Pool]": ...

    @property
    def stats(self) -> Stats: ...

    @property
    def access_log(self) -> "Optional[AccessLog]": ...

    @property
    def retries(self) -> int: ...

    @property
    def connect_timeout(self) -> float: ...

    @property
    def timeout(self) -> float: ...

    @property
    def tunnel_timeout(self) -> float: ...  # a tunnel's idle time (_tunnel.py)

    def note_failure(self, name: str, why: object) -> None: ...

    @property
    def load_reports(self) -> bool: ...  # read the backends' endpoint-load-metrics reports

    def note_load_report(self, name: str, value: bytes) -> None: ...

    def note_local_error(self, what: str, exc: BaseException) -> None: ...


class Exchange(ExchangeSide):
    """One request (complete, its bytes for the backend made) and its tries."""

    __slots__ = ("proxy", "method", "payload", "keep_alive", "head_only", "http10", "key", "head", "by_packets",
                 "tried", "reused", "counters", "began", "retried", "service")  # client, t: the base's

    def __init__(self, client: _backend.ClientSide, method: str, payload: _http1.Buffer, keep_alive: bool,
                 http10: bool, key: object = None, head: "Optional[_http1.RequestHead]" = None,
                 by_packets: bool = False) -> None:
        self._fill(client, method, payload, keep_alive, http10, key, head, by_packets)

    def _fill(self, client: _backend.ClientSide, method: str, payload: _http1.Buffer, keep_alive: bool,
              http10: bool, key: object, head: "Optional[_http1.RequestHead]", by_packets: bool) -> None:
        self.proxy: Upstream = client.proxy
        self.client = client
        self.method = method
        self.payload = payload  # the request as the backend gets it
        self.keep_alive = keep_alive
        self.head_only = method == "HEAD"
        self.http10 = http10
        self.key = key  # what the vserver's hash method picks by (None for the other methods)
        self.head = head  # what the access log reads (target, version, Referer, User-Agent)
        self.by_packets = by_packets  # the vserver's method picks by packets: TCP_INFO after the answer
        self.tried: Optional[List[str]] = None  # the backends that failed it (made at the first)
        self.t: Any = None  # the attempt's transaction handle (either engine's)
        self.service = ""  # its backend (t.service, read once: a property of the engine's handle)
        self.reused = False
        self.retried = 0  # other backends tried before this attempt
        # for the access log: when the request was complete (the proxy's clock, the wall clock)
        self.began = (clock(), time.time()) if self.client.core.access_log is not None else None

    def start(self) -> None:
        """Picks a backend (excluding those tried) and sends the request there."""
        core = self.client.core
        try:
            key = self.key  # the same key on every try: a retry goes to the key's next choice
            # positional: both engines' acquire(exclude, key), without a keyword call's cost
            self.t = t = core.vserver.acquire(self.tried, key)
        except NoServiceAvailable:
            if self.tried:
                self._answer_error(502, "all backends failed")
            else:
                core.stats.no_service += 1
                self._answer_error(503, "no backend available")
            return
        self.service = name = t.service
        pool = core.pools.get(name)
        if pool is None:
            # a shared engine's backend this worker has not learned of yet (another worker bound it a
            # moment ago, and the same command is on its way here): no outcome to charge, pick again
            t.finish(status=CLIENT_CLOSED)
            self._tried(name)
            return self.start()
        self.counters = counters = core.stats.of(name)
        counters.requests += 1
        conn = pool.take()
        self.reused = conn is not None
        if conn is None:
            self.client.loop.create_task(self._connect(pool))
        else:
            self._send(conn)

    async def _connect(self, pool: "Pool") -> None:
        try:
            conn = await pool.connect(self.proxy.connect_timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            if is_local_error(exc):
                # the proxy's own trouble (out of descriptors, ports, buffers): not the backend's
                # (Outcome.NOT_THE_BACKEND: a finish that is not a failure, nothing sent again)
                self.proxy.note_local_error("connect to backend", exc)
                self.t.finish(status=CLIENT_CLOSED)
                self._answer_error(503, "the proxy is out of resources")
                return
            self.proxy.note_failure(self.service, exc)
            self.on_outcome(RESET, None)  # no connection: Outcome.NOT_SENT
            return
        if self.client.gone:
            self.t.finish(status=CLIENT_CLOSED)
            conn.release(conn.reusable())
            if self.began is not None:
                self._log(CLIENT_CLOSED, None)
            self.client.exchange_done(False)
            return
        self._send(conn)

    def _send(self, conn: "BackendConnection") -> None:
        client = self.client
        client.backend = conn
        if client.paused:
            conn.hold()
        conn.send(self, self.payload, client.core.timeout, self.head_only, self.http10, self.keep_alive)
        head = self.head
        if head is not None and head.upgrade:
            conn.reader.upgrade_asked = True  # a 101 to it switches to a tunnel (else it is a bad answer)

    def on_outcome(self, outcome: str, conn: "Optional[BackendConnection]") -> None:
        """The backend connection's report; ends the transaction exactly once per attempt."""
        client, proxy, t = self.client, self.proxy, self.t
        client.backend = None
        name = self.service
        if conn is not None:
            self.counters.bytes_in += conn.sent
            self.counters.bytes_out += conn.received
        if outcome is OK:
            assert conn is not None  # an answer came on it
            reusable = conn.reusable()  # read once: nothing changes it before the release below
            packets = conn.packets(self.by_packets, reusable)
            if packets or conn.unrecorded:  # (the response's last bytes, left to this call)
                t.record(conn.unrecorded, packets)  # (bytes, packets), positional: a keyword call costs more
                self.counters.packets += packets
            status = conn.reader.status  # (BackendConnection.status, without a property's lookup)
            if status == 101:  # the backend switched: both connections are a tunnel's, the transaction too
                _tunnel.open_tunnel(self, conn)
                return
            # the backend's ORCA report, if it sent one and weights_from_utilization reads them
            report = conn.reader.load_report()
            if report is not None and proxy.load_reports:
                proxy.note_load_report(name, report)
            t.finish(conn.ttfb, status)  # (ttfb, status), positional: a keyword call costs more
            if conn.ttfb is not None:
                self.counters.add_ttfb(conn.ttfb)
            self.counters.by_class[status // 100] += 1
            if status >= 500:
                self.counters.failures += 1
            conn.release(reusable)
            if self.began is not None:
                self._log(status, conn)
            client.exchange_done(self.keep_alive and not conn.reader.close_client)
            return
        # The shared rule (upstream.after_attempt). The proxy reads a whole request before
        # sending it, so it can always send it again; `wanted`: the client is still there.
        verdict = upstream.after_attempt(
            Outcome.NOT_SENT if conn is None else _OUTCOMES[outcome], self.method,
            replayable=True, tried=(len(self.tried) if self.tried else 0) + 1, retries=proxy.retries,
            reused=self.reused, wanted=not client.gone)
        if verdict.reconnect:
            # A pooled connection the backend had just closed: once more on a new connection,
            # same backend, same transaction; not the backend's failure.
            self.counters.stale += 1
            self.reused = False
            client.loop.create_task(self._connect(proxy.pools[name]))
            return
        if not verdict.failure:  # the client left or stopped reading: never the backend's failure
            assert conn is not None  # the exchange was on it
            if outcome is CLIENT_GONE:  # finished with the status passed on, if one was
                t.finish(ttfb=conn.ttfb if conn.status else None, status=conn.status or CLIENT_CLOSED)
                if self.began is not None:
                    self._log(conn.status or CLIENT_CLOSED, conn)
            else:  # CLIENT_STALLED: the 499 finish
                t.finish(status=CLIENT_CLOSED)
                if self.began is not None:
                    self._log(CLIENT_CLOSED, conn)
            client.exchange_done(False)
            return
        self.counters.failures += 1
        if conn is not None:
            proxy.note_failure(name, outcome)
            if outcome is not RESET:
                conn.transport.abort()
        t.fail()
        self._tried(name)
        if verdict.retry:
            self.counters.retries += 1
            self.retried += 1
            self.start()
            return
        if conn is not None and conn.passed:  # part of the answer went out: only closing tells the client
            if self.began is not None:
                self._log(conn.status, conn)
            client.exchange_done(False)
            return
        if outcome is TIMEOUT:
            self._answer_error(504, "backend timed out")
        else:
            self._answer_error(502, "backend failed")

    def _tried(self, name: str) -> None:
        if self.tried is None:
            self.tried = [name]
        else:
            self.tried.append(name)

    def _answer_error(self, status: int, text: str) -> None:
        client = self.client
        keep_alive = self.keep_alive and not self.http10
        answer = error_response(status, text, not keep_alive, self.head_only)
        if not client.gone:
            client.write(answer)
        self.proxy.stats.answered_by_proxy[status] += 1
        if self.began is not None:
            self._log(status, None, len(answer))
        client.exchange_done(keep_alive)

    def _log(self, status: int, conn: "Optional[BackendConnection]", size: int = 0) -> None:
        """The access log's line for this request (only called when there is an access log)."""
        log, began = self.proxy.access_log, self.began
        assert log is not None and began is not None
        if conn is not None:
            backend: Optional[str] = self.service
            size, ttfb = conn.received, conn.ttfb
        else:  # the proxy answered: name the backend that failed last, if one did
            backend, ttfb = (self.tried[-1] if self.tried else None), None
        self.client.log_request(log, status, size, backend, ttfb, clock() - began[0],
                                self.retried, began[1], self.method, self.head)


def new_exchange(client: _backend.ClientSide, method: str, payload: _http1.Buffer, keep_alive: bool, http10: bool,
                 key: object, head: "Optional[_http1.RequestHead]", by_packets: bool) -> Exchange:
    """Exchange(...) without the constructor's argument parsing: the client connection's call,
    once a request (compiled, a C call)."""
    exchange = Exchange.__new__(Exchange)
    exchange._fill(client, method, payload, keep_alive, http10, key, head, by_packets)
    return exchange
