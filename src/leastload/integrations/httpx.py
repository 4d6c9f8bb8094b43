"""A client-side balancer for httpx: `Transport` spreads requests over backends.

    import httpx
    from leastload.integrations.httpx import Transport

    transport = Transport(["a=10.0.0.1:8080", "b=10.0.0.2:8080"], method="LEASTRESPONSETIME")
    with httpx.Client(transport=transport, base_url="http://api.internal") as client:
        client.get("/users")

Each request is sent to the backend the vserver picks, with its path, query
and headers unchanged (the Host header stays the one of the URL the caller
used). The transaction is charged the time to the response headers, the
body bytes both ways and the TCP segments, and ends when the response is
closed. Under a hash method each request's key comes from the request (its
path and query, Host, headers) and this host's address; see docs/httpx.md for
the keys and for the accounting, retry and ejection rules.
"""

try:
    import httpx
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("leastload.integrations.httpx needs httpx: pip install leastload[httpx]") from exc

import asyncio
import ipaddress
import logging
import socket
import threading
import time
import weakref
from collections import deque
from typing import (Any, AsyncIterator, Awaitable, Callable, Deque, Dict, Iterable, Iterator, List, Optional,
                    Tuple, Type, Union)

from ..net import orca, tcpinfo
from ..net import upstream
from ..engine.errors import NoServiceAvailable, UnknownService
from ..net.request_keys import Address, KeyRule, MissingKey, ip_or_none
from ..net.upstream import Backend, Outcome
from ..net.tcpinfo import SegmentCounter

log = logging.getLogger("leastload.httpx")

# A transaction handle of either engine (the C engine's or the reference's: the same interface).
_Handle = Any
_Trace = Callable[[str, Dict[str, Any]], Any]

__all__ = ["Transport", "NoBackendAvailable", "Backend", "MissingKey"]

MAX_TTFB = 3600.0  # the engine takes 0..3600 s; a longer wait (long polling) is charged as this
NOT_A_FAILURE = 499  # "client closed request": ends a transaction the backend is not to blame for

# What the retry rule (upstream.after_attempt) is told of an error before the response headers:
# Nothing reached the backend: Outcome.NOT_SENT.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)
# The connection broke before the response headers, the backend may have acted on the request:
# Outcome.NO_RESPONSE. (RemoteProtocolError is also what h11 raises for an unparsable head:
# the transport cannot tell it from a close, unlike the proxy.)
_BROKEN = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
# Raised in this process, not by the backend: a full local pool, a malformed request:
# Outcome.NOT_THE_BACKEND, like cancellation and any error that is not httpx's.
_LOCAL = (httpx.PoolTimeout, httpx.LocalProtocolError, httpx.UnsupportedProtocol)
# Every other httpx.TransportError (a read or write timeout, a proxy error): Outcome.FAILED.


def _outcome_of(exc: BaseException) -> Outcome:
    """The retry rule's Outcome for an error an attempt raised before the response headers."""
    if isinstance(exc, _NOT_SENT):
        return Outcome.NOT_SENT
    if isinstance(exc, _BROKEN):
        return Outcome.NO_RESPONSE
    if isinstance(exc, httpx.TransportError) and not isinstance(exc, _LOCAL):
        return Outcome.FAILED  # timed out waiting for the backend, or a proxy error
    return Outcome.NOT_THE_BACKEND  # cancelled, interrupted, or an error of this process


class NoBackendAvailable(httpx.ConnectError):
    """No backend can take the request: all are down, ejected, draining or at their slow-start cap."""


class Transport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """An httpx transport (sync and async) that balances over `backends` with a leastload vserver.

    backends: "NAME=HOST:PORT[:WEIGHT]" strings, Backend objects, or a
    {name: "HOST:PORT[:WEIGHT]"} dict. `retries`: how many other backends a
    failed request may go to (docs/httpx.md says which failures). Other keyword
    arguments (limits, http2, proxy, ...) go to the inner httpx.HTTPTransport /
    httpx.AsyncHTTPTransport, made on first use.

    Hash methods: `token_header` names the header TOKEN hashes; `request_key`, a
    function of the httpx.Request, replaces the key the transport would derive
    (needed for SRCIPSRCPORTHASH: a client learns its source port only once
    connected to the backend picked).
    """

    def __init__(self, backends: Union[Iterable[Union[str, Backend]], Dict[str, Union[str, Backend]]],
                 method: str = "LEASTCONNECTION", *, retries: int = 2, outlier_failures: int = 5,
                 outlier_ejection_time: float = 30, outlier_max_ejection_percent: int = 50,
                 new_service_request: int = 0, new_service_request_unit: str = "PER_SECOND",
                 new_service_request_increment_interval: int = 0, engine: Optional[Type[Any]] = None,
                 token_header: Optional[str] = None,
                 request_key: Optional[Callable[[httpx.Request], object]] = None,
                 **transport_kwargs: Any) -> None:
        upstream.check_int("retries", retries, 0, upstream.MAX_RETRIES)
        parsed = upstream.parse_backends(backends)
        self.keys = KeyRule(token_header)
        if request_key is not None and not callable(request_key):
            raise TypeError(f"request_key must be a function of the httpx.Request, got {request_key!r}")
        if request_key is None and method == "SRCIPSRCPORTHASH":
            raise ValueError("method SRCIPSRCPORTHASH hashes the connection's source port, which a client "
                             "learns only after the pick: give request_key=, got None")
        if request_key is None and method == "TOKEN" and token_header is None:
            raise ValueError("token_header must name the request header TOKEN hashes (e.g. 'X-Session'), "
                             "got None")
        self.request_key = request_key
        self._local_ip: Optional[Address] = None  # this host's address toward the backends, asked once
        self._resolved: Dict[str, Address] = {}  # URL host name -> address (DESTINATIONIPHASH, SRCIPDESTIPHASH)
        self.retries = retries
        self.vserver = upstream.make_vserver(
            parsed, method, engine=engine,
            outlier_failures=outlier_failures, outlier_ejection_time=outlier_ejection_time,
            outlier_max_ejection_percent=outlier_max_ejection_percent,
            new_service_request=new_service_request, new_service_request_unit=new_service_request_unit,
            new_service_request_increment_interval=new_service_request_increment_interval)
        self._addresses = {b.name: b for b in parsed}  # may keep drained names until pruned
        self._transport_kwargs = transport_kwargs
        self._lock = threading.Lock()
        self._sync: Optional[httpx.HTTPTransport] = None
        self._async: Optional[httpx.AsyncHTTPTransport] = None
        # network stream -> SegmentCounter
        self._counters: "weakref.WeakKeyDictionary[Any, SegmentCounter]" = weakref.WeakKeyDictionary()
        self._orphans: Deque[_Account] = deque()  # accounts of responses dropped without close()

    # ---- backends ------------------------------------------------------------

    @property
    def backends(self) -> Dict[str, Backend]:
        """name -> Backend for every backend bound now (draining ones included), in bind order."""
        addresses = self._addresses
        return {name: addresses[name] for name in self.vserver.services if name in addresses}

    def add_backend(self, spec: Union[str, Backend]) -> Backend:
        """Binds a backend ("NAME=HOST:PORT[:WEIGHT]" or Backend); slow start applies to it."""
        backend = spec if isinstance(spec, Backend) else upstream.parse_backend(spec)
        with self._lock:
            self._prune()
            if backend.name in self.vserver:  # still bound, maybe draining: keep its address
                raise ValueError(f"backend {backend.name!r} is already bound")
            self._addresses[backend.name] = backend  # before bind: a pick must find its address
            self.vserver.bind(backend.name, backend.weight)
        return backend

    def drain_backend(self, name: str) -> None:
        """No new requests for `name`; it is unbound when its last request ends."""
        with self._lock:
            self.vserver.drain(name)
            self._prune()

    def _prune(self) -> None:
        vs = self.vserver
        for name in [n for n in self._addresses if n not in vs]:
            del self._addresses[name]

    # ---- inner transports ------------------------------------------------------

    def _sync_transport(self) -> httpx.HTTPTransport:
        inner = self._sync
        if inner is None:
            with self._lock:
                if self._sync is None:
                    self._sync = httpx.HTTPTransport(**self._transport_kwargs)
                inner = self._sync
        return inner

    def _async_transport(self) -> httpx.AsyncHTTPTransport:
        inner = self._async
        if inner is None:
            with self._lock:
                if self._async is None:
                    self._async = httpx.AsyncHTTPTransport(**self._transport_kwargs)
                inner = self._async
        return inner

    def close(self) -> None:
        """Closes the sync connection pool (httpx.Client calls this)."""
        self._reap()
        inner, self._sync = self._sync, None
        if inner is not None:
            inner.close()

    async def aclose(self) -> None:
        """Closes the async connection pool (httpx.AsyncClient calls this)."""
        self._reap()
        inner, self._async = self._async, None
        if inner is not None:
            await inner.aclose()

    # ---- requests --------------------------------------------------------------

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self._reap()
        exchange = _Exchange(self, request, self._key_of(request))
        inner = self._sync_transport()
        while True:  # at most retries + 1 attempts: failed() says when none is left
            t, backend = exchange.acquire()
            sent_at = time.perf_counter()
            try:
                response = inner.handle_request(exchange.request_for(backend, _sync_trace))
            except BaseException as exc:
                if exchange.failed(t, exc):
                    continue
                raise
            return exchange.respond(t, backend, response, sent_at, _SyncBody)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self._reap()
        await self._look_up_async(request)
        exchange = _Exchange(self, request, self._key_of(request))
        inner = self._async_transport()
        while True:  # at most retries + 1 attempts: failed() says when none is left
            t, backend = exchange.acquire()
            sent_at = time.perf_counter()
            try:
                response = await inner.handle_async_request(exchange.request_for(backend, _async_trace))
            except BaseException as exc:
                if exchange.failed(t, exc):
                    continue
                raise
            return exchange.respond(t, backend, response, sent_at, _AsyncBody)

    # ---- the request's key (hash methods) ------------------------------------------

    def _key_of(self, request: httpx.Request) -> object:
        """The key the vserver's method picks by (None for the methods that do not hash)."""
        if self.request_key is not None:
            return self.request_key(request)
        return self.keys.key(self.vserver.method, _RequestView(self, request))

    async def _look_up_async(self, request: httpx.Request) -> None:
        """The addresses the method's key needs and the transport has not found yet, found off
        the event loop (a name lookup may block): each once for the transport's life."""
        if self.request_key is not None:
            return
        method = self.vserver.method
        loop = asyncio.get_running_loop()
        if self._local_ip is None and method in ("SOURCEIPHASH", "SRCIPDESTIPHASH", "TOKEN"):
            await loop.run_in_executor(None, self.local_ip)
        if method in ("DESTINATIONIPHASH", "SRCIPDESTIPHASH") and request.url.host not in self._resolved:
            await loop.run_in_executor(None, self.destination_ip, request)

    def local_ip(self) -> Address:
        """This host's address as the backends see it: the `local_address` given to the
        transport, else the one the system routes from toward the first backend (found
        with an unconnected UDP socket: no packet is sent), asked once."""
        if self._local_ip is None:
            given = self._transport_kwargs.get("local_address")
            address = ip_or_none(given) if given else None
            if address is None:
                first = next(iter(self._addresses.values()))
                try:
                    family = socket.AF_INET6 if ":" in first.host else socket.AF_INET
                    with socket.socket(family, socket.SOCK_DGRAM) as probe:
                        probe.connect((first.host, first.port))
                        address = ip_or_none(probe.getsockname()[0])
                except OSError as exc:
                    raise httpx.ConnectError(f"cannot find this host's address toward {first.host}: {exc}") from exc
            if address is None:
                raise httpx.ConnectError(f"cannot find this host's address toward the backends, got {given!r}")
            self._local_ip = address
        return self._local_ip

    def destination_ip(self, request: httpx.Request) -> Address:
        """The address of the URL's host: an IP literal as it is, a name resolved once."""
        host = request.url.host
        address = self._resolved.get(host)
        if address is None:
            address = ip_or_none(host)
            if address is None:
                try:
                    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
                except OSError as exc:
                    raise httpx.ConnectError(f"cannot resolve {host!r} (the destination address the method "
                                             f"hashes): {exc}", request=request) from exc
                address = ipaddress.ip_address(str(infos[0][4][0]).split("%", 1)[0])
            self._resolved[host] = address
        return address

    def _reap(self) -> None:
        """Ends the transactions of responses that were garbage-collected unclosed.

        A finalizer may run inside any call, even one of the engine's own, so
        it only queues the account; the engine is called from here, outside.
        """
        while self._orphans:
            try:
                account = self._orphans.popleft()
            except IndexError:  # another thread took the last one
                return
            account.end()

    def _packet_counter(self, network_stream: Any) -> Optional[SegmentCounter]:
        """The SegmentCounter of a pooled connection, made the first time it is seen."""
        if network_stream is None:
            return None
        with self._lock:
            counter = self._counters.get(network_stream)
            if counter is None:
                try:
                    sock = network_stream.get_extra_info("socket")
                except Exception:  # a stream without sockets (a mock, a custom backend)
                    sock = None
                counter = tcpinfo.SegmentCounter(sock, from_start=True)  # the first request pays the handshake
                self._counters[network_stream] = counter
            return counter


class _RequestView:
    """An httpx.Request as leastload.net.request_keys reads it."""

    __slots__ = ("transport", "request")

    def __init__(self, transport: Transport, request: httpx.Request) -> None:
        self.transport, self.request = transport, request

    @property
    def source_ip(self) -> Optional[Address]:
        return self.transport.local_ip()

    @property
    def source_port(self) -> Optional[int]:
        return None  # known only once connected to the backend picked

    @property
    def destination_ip(self) -> Optional[Address]:
        return self.transport.destination_ip(self.request)

    @property
    def target(self) -> bytes:
        return self.request.url.raw_path  # path and query, as sent

    def header(self, name: bytes) -> Optional[bytes]:
        for key, value in self.request.headers.raw:
            if key.lower() == name:
                return value
        return None


class _Exchange:
    """One caller's request across its attempts: its key, what was tried, the last error, the body."""

    __slots__ = ("transport", "request", "key", "tried", "last_error", "replayable", "body", "sent_at",
                 "retries")

    def __init__(self, transport: Transport, request: httpx.Request, key: object = None) -> None:
        self.transport = transport
        self.request = request
        self.retries = transport.retries  # as it was when the request came: other backends it may go to
        self.key = key  # the same on every attempt: a retry goes to the key's next choice
        self.tried: List[str] = []
        self.last_error: Optional[BaseException] = None
        self.sent_at: Optional[float] = None
        self.body: Union[bytes, _CountingStream]
        try:
            self.body = request.content  # bytes known up front: replayable
            self.replayable = True
        except httpx.RequestNotRead:  # a one-shot stream: count it as it goes out
            self.body = _CountingStream(request.stream)
            self.replayable = False

    def acquire(self) -> Tuple[_Handle, Backend]:
        try:
            t = self.transport.vserver.acquire(exclude=self.tried, key=self.key)
        except NoServiceAvailable:
            t = None
        if t is not None:
            backend = self.transport._addresses.get(t.service)
            if backend is None:  # bound on the vserver directly, not with add_backend()
                t.finish(status=NOT_A_FAILURE)
                raise LookupError(f"backend {t.service!r} has no address: bind backends with add_backend()")
            return t, backend
        if self.last_error is not None:  # the backends left were tried: report what went wrong
            raise self.last_error
        raise NoBackendAvailable(
            f"no backend available for {self.request.method} {self.request.url}: every backend is "
            f"down, ejected, draining or at its slow-start cap (bound: {', '.join(self.transport.vserver.services) or 'none'})",
            request=self.request)

    def request_for(self, backend: Backend, make_trace: Callable[["_Exchange", Any], Any]) -> httpx.Request:
        """The caller's request, addressed to `backend` (Host header and body unchanged)."""
        original = self.request
        url = original.url.copy_with(scheme="http", host=backend.host, port=backend.port)
        extensions = dict(original.extensions)
        extensions["trace"] = make_trace(self, original.extensions.get("trace"))
        self.sent_at = None
        stream = original.stream if isinstance(self.body, bytes) else self.body
        return httpx.Request(original.method, url, headers=original.headers, stream=stream,
                             extensions=extensions)

    def failed(self, t: _Handle, exc: BaseException) -> bool:
        """Ends the attempt's transaction after `exc`; True if another backend is to be tried.

        The shared rule decides (upstream.after_attempt). What the transport passes that the
        proxy does not: `replayable` (False for a one-shot body stream); reused=False (httpcore
        does not say which connection an attempt used, so there is no same-backend resend).
        """
        verdict = upstream.after_attempt(_outcome_of(exc), self.request.method, replayable=self.replayable,
                                         tried=len(self.tried) + 1, retries=self.retries)
        if not verdict.failure:  # cancelled, interrupted, or an error of this process
            t.finish(status=NOT_A_FAILURE)
            return False
        t.fail()
        self.tried.append(t.service)
        self.last_error = exc
        return verdict.retry

    def respond(self, t: _Handle, backend: Backend, response: httpx.Response, sent_at: float,
                body_class: "Union[Type[_SyncBody], Type[_AsyncBody]]") -> httpx.Response:
        """Charges the response headers and wraps the body so that its end ends `t`."""
        try:
            headers_at = time.perf_counter()
            started = self.sent_at if self.sent_at is not None else sent_at
            network_stream = response.extensions.get("network_stream")
            account = _Account(t, min(max(headers_at - started, 0.0), MAX_TTFB), _status(response.status_code),
                               self.transport._packet_counter(network_stream))
            sent = len(self.body) if isinstance(self.body, bytes) else self.body.count
            account.charge(sent=sent)
            vserver = self.transport.vserver
            if getattr(vserver, "_by_utilization", False):  # weights_from_utilization: the backend's ORCA report
                _report_load(vserver, backend.name, response.headers.get(orca.HEADER))
            response.stream = body_class(response.stream, account, self.transport._orphans)
            response.extensions["leastload_backend"] = backend.name
            return response
        except BaseException:
            if not t.done:
                t.fail()
            raise


def _report_load(vserver: Any, name: str, value: Optional[str]) -> None:
    """A response's endpoint-load-metrics header, to the vserver; a bad one is dropped (logged)."""
    if value is None:
        return
    try:
        report = orca.parse(value)
        vserver.report_utilization(name, cpu_utilization=report.cpu_utilization,
                                   application_utilization=report.application_utilization,
                                   rps_fractional=report.rps_fractional, eps=report.eps)
    except ValueError as exc:
        log.debug("backend %s: load report dropped: %s", name, exc)
    except UnknownService:
        pass  # unbound meanwhile


def _status(code: int) -> int:
    # The engine takes 100..599; anything else from a backend is a bad gateway.
    return code if 100 <= code <= 599 else 502


def _sync_trace(exchange: _Exchange, user_trace: Optional[_Trace]) -> _Trace:
    def trace(name: str, info: Dict[str, Any]) -> None:
        if name.endswith("send_request_headers.started"):
            exchange.sent_at = time.perf_counter()
        if user_trace is not None:
            user_trace(name, info)
    return trace


def _async_trace(exchange: _Exchange,
                 user_trace: Optional[Callable[[str, Dict[str, Any]], Awaitable[Any]]]) -> _Trace:
    async def trace(name: str, info: Dict[str, Any]) -> None:
        if name.endswith("send_request_headers.started"):
            exchange.sent_at = time.perf_counter()
        if user_trace is not None:
            await user_trace(name, info)
    return trace


class _CountingStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A one-shot request body that counts the bytes it hands out."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream  # the caller's one-shot stream: sync or async
        self.count = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.stream:
            self.count += len(chunk)
            yield chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            self.count += len(chunk)
            yield chunk

    def close(self) -> None:
        self.stream.close()

    async def aclose(self) -> None:
        await self.stream.aclose()


class _Account:
    """What one response owes the engine; ends its transaction exactly once."""

    __slots__ = ("t", "ttfb", "status", "counter", "received", "settled", "finalizer")

    def __init__(self, t: _Handle, ttfb: float, status: int, counter: Optional[SegmentCounter]) -> None:
        self.t, self.ttfb, self.status, self.counter = t, ttfb, status, counter
        self.received = 0
        self.settled = False
        self.finalizer: "Optional[weakref.finalize[..., Any]]" = None

    def charge(self, sent: int = 0, received: int = 0) -> None:
        """Packets since the previous charge (TCP_INFO, else an estimate from the bytes)."""
        if self.counter is not None:
            packets = self.counter.take(sent, received)
        else:
            packets = tcpinfo.estimate_packets(sent, received)
        if sent or packets:
            self.t.record(bytes=sent, packets=packets)

    def chunk(self, n: int) -> None:
        self.received += n
        self.t.record(bytes=n)

    def settle(self) -> None:
        """Charges the body's packets, once, while the connection is still open."""
        if not self.settled and not self.t.done:
            self.settled = True
            self.charge(received=self.received)

    def end(self, failed: bool = False) -> None:
        """A finish with the real status, or a failure; later calls do nothing."""
        if self.t.done:
            return
        if self.finalizer is not None:
            self.finalizer.detach()
        try:
            self.settle()
        finally:
            if failed:
                self.t.fail()
            else:
                self.t.finish(ttfb=self.ttfb, status=self.status)


class _SyncBody(httpx.SyncByteStream):
    def __init__(self, stream: Any, account: _Account, orphans: Deque[_Account]) -> None:
        self._stream, self._account = stream, account
        account.finalizer = weakref.finalize(self, orphans.append, account)

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._stream:
                self._account.chunk(len(chunk))
                yield chunk
        except httpx.TransportError:  # the body broke off: a failure of the backend
            self._account.end(failed=True)
            raise

    def close(self) -> None:
        try:
            self._account.settle()  # read the socket's counters before the pool may close it
        finally:
            try:
                self._stream.close()
            finally:
                self._account.end()


class _AsyncBody(httpx.AsyncByteStream):
    def __init__(self, stream: Any, account: _Account, orphans: Deque[_Account]) -> None:
        self._stream, self._account = stream, account
        account.finalizer = weakref.finalize(self, orphans.append, account)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                self._account.chunk(len(chunk))
                yield chunk
        except httpx.TransportError:
            self._account.end(failed=True)
            raise

    async def aclose(self) -> None:
        try:
            self._account.settle()
        finally:
            try:
                await self._stream.aclose()
            finally:
                self._account.end()
