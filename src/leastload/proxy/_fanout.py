"""One admin port for every worker (`leastload proxy --workers N`): the supervisor's fan-out.

Each worker process has its own admin port (_admin.py); the supervisor serves one more,
`start_fanout(host, port, worker_ports, token)`, which asks every worker's admin port and
answers as one proxy:

    GET  /metrics              every worker's /metrics (asked at once, each within SCRAPE_TIMEOUT;
                               one that does not answer, or not in the text format, is skipped and
                               counted) merged into one exposition (text format 0.0.4): a family
                               whose values add up is summed over the workers, series by series
                               (same name, same labels; a histogram bucket by bucket, with its
                               _sum and _count); any other family keeps each worker's series with
                               a label worker="0", "1", ... (_metrics.FAMILY_SPECS declares it
                               beside each family; a family it does not name is per worker); with one engine
                               shared by the workers, what the engine says (ENGINE_FAMILIES) is
                               given once, from the first worker that gives it (_exposition.py reads,
                               merges and writes the text). The fan-out's own:
                                   leastload_fanout_workers                 worker admin ports asked
                                   leastload_fanout_workers_scraped         those whose /metrics came in
                                   leastload_fanout_scrape_failures_total   a worker's failed scrapes
                                                                            (label worker), since start
    GET  /leastload/status     {"workers": [worker 0's status JSON, worker 1's, ...]}, null for a
                               worker that did not answer (the query, ?vserver= or ?format=text, goes
                               to each; format=text: each worker's text under a "# worker i" line);
                               when no worker answered 200, the first answer given (a 404 for an
                               unknown vserver stays a 404)
    GET  /healthz              200 while at least one worker answers 200, else 503
    POST /leastload/command    forwarded, body and Authorization header as received, to every
    POST /leastload/reload     worker at once; 200 {"ok": true, "workers": [each worker's JSON
                               answer]} when each answered 2xx, else the first other status (in
                               worker order; 502 for a worker that did not answer, its entry null)
                               with {"ok": false, "error": "worker i: ...", "workers": [...]}

With a token, the fan-out checks writes itself (every command but show/stat, and reload;
`Authorization: Bearer TOKEN`, compared in constant time: _admin.token_matches): an unauthorized write gets 401
and never reaches a worker. Requests are read by the proxy's own reader (_http1.RequestReader)
with the admin port's limits (_admin.ADMIN_LIMITS: a body of at most 64 KiB), a request head
must arrive within HEADER_TIMEOUT, at most _admin.MAX_ADMIN_CONNECTIONS connections are open at
once; anything else is 404; after its one answer a connection lingers (_one_request.py).
Workers' answers are read by _http1.ResponseReader.

The fan-out runs its own event loop in a daemon thread, so a synchronous supervisor can own it:
`start_fanout` returns once the port is bound (or raises OSError, ValueError), `.close()` stops it.
`worker_ports()` is called from that thread, once per request: it must be safe to call there
(return a fresh list). Its list's index is the worker label: a supervisor keeps the labels
stable by listing every worker's port in worker order, a restarting worker's port included (it
refuses, and is skipped as any worker that does not answer).
"""

import asyncio
import json
import logging
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from .. import prometheus_text
from ..config.proxy_settings import DEFAULT
from . import _admin, _exposition, _http1
from ._metrics import CONTENT_TYPE
from ._control import Control
from ._one_request import OneRequestConnection

log = logging.getLogger("leastload.proxy")

SCRAPE_TIMEOUT = 2.0     # a worker's GET (/metrics, /healthz, /leastload/status) answers within this
COMMAND_TIMEOUT = 5.0    # a worker's POST answers within this (leastload ctl waits 10 s for the whole)
HEADER_TIMEOUT: float = DEFAULT["header_timeout"]  # a request head arrives within this (as the proxy's)
START_TIMEOUT = 10.0     # start_fanout binds within this; close() stops within it
MAX_WORKER_ANSWER = 64 << 20  # a worker's answer larger than this is refused (as no answer)
_WORKER_LIMITS = _http1.Limits(max_header_size=16384, max_headers=64)

# ---- asking the workers ------------------------------------------------------------------------------


class _BadAnswer(Exception):
    pass


Answer = Tuple[int, bytes, bytes]  # (status, content type, body)


def _reachable(host: str) -> str:
    """Where the workers' admin ports are reached: an unspecified address is this machine."""
    bare = host.strip("[]")
    if bare in ("", "0.0.0.0"):
        return "127.0.0.1"
    if bare == "::":
        return "::1"
    return bare


async def _exchange(host: str, port: int, method: bytes, target: bytes, body: bytes,
                    headers: Sequence[Tuple[bytes, bytes]]) -> Answer:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        authority = (f"[{host}]" if ":" in host else host).encode() + b":%d" % port
        out = [b"%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" % (method, target, authority)]
        out += [name + b": " + value + b"\r\n" for name, value in headers]
        if method == b"POST":
            out.append(b"Content-Length: %d\r\n" % len(body))
        out += [b"\r\n", body]
        writer.write(b"".join(out))
        await writer.drain()
        response = _http1.ResponseReader(_WORKER_LIMITS)
        # read as an HTTP/1.0 client's: the body de-chunked if chunked
        response.start(head_only=False, http10=True, keep_alive=False)
        pieces: List[bytes] = []
        size = 0
        while not (response.complete or response.failed):
            data = await reader.read(65536)
            if not data:
                pieces += [bytes(p) for p in response.feed_eof()]
                break
            size += len(data)
            if size > MAX_WORKER_ANSWER:
                raise _BadAnswer(f"an answer larger than {MAX_WORKER_ANSWER} bytes")
            pieces += [bytes(p) for p in response.feed(data)]
        if response.failed or not response.complete:
            raise _BadAnswer(response.failed or "an incomplete answer")
        head, _, content = b"".join(pieces).partition(b"\r\n\r\n")
        content_type = b"application/octet-stream"
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-type":
                content_type = value.strip()
        return response.status, content_type, content
    finally:
        writer.close()


class _Connection(OneRequestConnection):
    """One client of the fan-out port; its request is served by a task, which answers."""

    def __init__(self, fanout: "Fanout") -> None:
        super().__init__(_admin.ADMIN_LIMITS, fanout._open, _admin.MAX_ADMIN_CONNECTIONS, HEADER_TIMEOUT)
        self.fanout = fanout
        self.task: Optional["asyncio.Task[None]"] = None

    def connection_lost(self, exc: Optional[Exception]) -> None:
        super().connection_lost(exc)
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def serve(self, head: _http1.RequestHead, body: bytes) -> None:
        self.task = asyncio.get_running_loop().create_task(self._serve(head, body))

    async def _serve(self, head: _http1.RequestHead, body: bytes) -> None:
        try:
            status, content_type, content = await self.fanout._serve(head, body)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug here must not leave the client waiting
            log.exception("fan-out: %s %s failed", head.method.decode("latin-1"), head.target.decode("latin-1"))
            status, content_type, content = 500, b"text/plain", b"the fan-out failed: see its log\n"
        self.answer(status, content_type, content)


def _json(status: int, data: Any) -> Answer:
    return status, _admin.JSON, json.dumps(data, indent=2, default=str).encode() + b"\n"


class Fanout:
    """The fan-out port, served by its own event loop in a daemon thread (see start_fanout)."""

    def __init__(self, host: str, port: int, worker_ports: Callable[[], List[int]], token: Optional[str],
                 shared_engine: bool = False) -> None:
        self.worker_ports, self.token = worker_ports, token
        self.shared_engine = shared_engine  # the workers balance with one engine: its families once
        self.worker_host = _reachable(host)
        self.address: Tuple[str, int] = (host, port)  # the bound (host, port) once started
        self.scrape_failures: Dict[int, int] = {}  # worker index -> failed scrapes of its /metrics
        self._listen = (host, port)
        self._open: Set[OneRequestConnection] = set()
        self._server: Optional[asyncio.AbstractServer] = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="leastload-fanout", daemon=True)
        self._closed = False

    # ---- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            try:
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            finally:
                self._loop.close()

    def _start(self) -> None:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._bind(), self._loop).result(START_TIMEOUT)
        except BaseException:
            self.close()
            raise

    async def _bind(self) -> None:
        host, port = self._listen
        self._server = await self._loop.create_server(lambda: _Connection(self), host, port, reuse_address=True)
        bound = self._server.sockets[0].getsockname()
        self.address = (str(bound[0]), int(bound[1]))

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._open):
            connection.transport.abort()
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=START_TIMEOUT)

    def close(self) -> None:
        """Stops serving (open connections are cut) and ends the thread; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        if not self._thread.is_alive():
            if not self._loop.is_closed():
                self._loop.close()
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(START_TIMEOUT)
        except Exception as exc:  # stopping goes on
            log.debug("fan-out: shutdown: %r", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(START_TIMEOUT)

    def __enter__(self) -> "Fanout":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- requests -------------------------------------------------------------------------------

    def _ports(self) -> List[int]:
        try:
            return [int(p) for p in self.worker_ports()]
        except Exception:
            log.exception("fan-out: worker_ports() failed: no worker is asked")
            return []

    async def _ask(self, port: int, method: bytes, target: bytes, timeout: float, body: bytes = b"",
                   headers: Sequence[Tuple[bytes, bytes]] = ()) -> Optional[Answer]:
        """A worker's answer, or None when it gives none in time (refused, reset, garbled, late)."""
        try:
            return await asyncio.wait_for(_exchange(self.worker_host, port, method, target, body, headers), timeout)
        except (OSError, asyncio.TimeoutError, _BadAnswer) as exc:
            log.debug("fan-out: no answer from the worker admin port %s:%d to %s %s: %r", self.worker_host, port,
                      method.decode(), target.decode("latin-1"), exc)
            return None

    async def _ask_all(self, method: bytes, target: bytes, timeout: float, body: bytes = b"",
                       headers: Sequence[Tuple[bytes, bytes]] = ()) -> List[Optional[Answer]]:
        ports = self._ports()
        return list(await asyncio.gather(*(self._ask(p, method, target, timeout, body, headers) for p in ports)))

    async def _serve(self, head: _http1.RequestHead, body: bytes) -> Answer:
        path, _, query = head.target.partition(b"?")
        if head.method == b"POST" and path in (_admin.COMMAND_PATH, _admin.RELOAD_PATH):
            return await self._post(head, path, body)
        if head.method != b"GET":
            return 404, b"text/plain", _admin.NOT_FOUND
        if path == _admin.METRICS_PATH:
            return 200, CONTENT_TYPE, await self.metrics()
        if path == _admin.HEALTH_PATH:
            return await self._health()
        if path == _admin.STATUS_PATH:
            return await self._status(head.target, query)
        return 404, b"text/plain", _admin.NOT_FOUND

    async def metrics(self) -> bytes:
        """Every worker's /metrics now, merged (the fan-out's /metrics; runs on the fan-out's loop)."""
        answers = await self._ask_all(b"GET", _admin.METRICS_PATH, SCRAPE_TIMEOUT)
        parsed: List[Tuple[int, Dict[str, prometheus_text.Family]]] = []
        for index, answer in enumerate(answers):
            families: Optional[Dict[str, prometheus_text.Family]] = None
            if answer is not None and answer[0] == 200:
                try:
                    families = prometheus_text.parse(answer[2].decode("utf-8"))
                except (UnicodeDecodeError, prometheus_text.ExpositionError) as exc:
                    log.warning("fan-out: worker %d's /metrics is not the text format: %s", index, exc)
            if families is None:
                self.scrape_failures[index] = self.scrape_failures.get(index, 0) + 1
            else:
                self.scrape_failures.setdefault(index, 0)
                parsed.append((index, families))
        failures = {i: n for i, n in self.scrape_failures.items() if i < len(answers)}
        text = (_exposition.render(_exposition.merge(parsed, self.shared_engine))
                + _exposition.own_families(len(answers), len(parsed), failures))
        return text.encode("utf-8")

    async def _health(self) -> Answer:
        answers = await self._ask_all(b"GET", _admin.HEALTH_PATH, SCRAPE_TIMEOUT)
        healthy = sum(1 for a in answers if a is not None and a[0] == 200)
        if answers and healthy == len(answers):
            return 200, b"text/plain", b"ok\n"
        if healthy:
            return 200, b"text/plain", b"ok (%d of %d workers)\n" % (healthy, len(answers))
        why = "; ".join(f"worker {i}: " + ("no answer" if a is None else a[2].decode("utf-8", "replace").strip())
                        for i, a in enumerate(answers)) or "no worker is running"
        return 503, b"text/plain", f"no worker is healthy: {why}\n".encode()

    async def _status(self, target: bytes, query: bytes) -> Answer:
        answers = await self._ask_all(b"GET", target, SCRAPE_TIMEOUT)
        if not any(a is not None and a[0] == 200 for a in answers):
            given = next((a for a in answers if a is not None), None)
            if given is not None:
                return given
        params = dict(p.partition(b"=")[::2] for p in query.split(b"&") if p)
        if params.get(b"format") == b"text":
            parts = [f"# worker {i}\n".encode() + (a[2] if a is not None and a[0] == 200 else b"(no answer)\n")
                     for i, a in enumerate(answers)]
            return 200, b"text/plain", b"\n".join(parts)
        workers: List[Any] = []
        for answer in answers:
            doc = None
            if answer is not None and answer[0] == 200:
                try:
                    doc = json.loads(answer[2])
                except ValueError:
                    doc = None
            workers.append(doc)
        return _json(200, {"workers": workers})

    async def _post(self, head: _http1.RequestHead, path: bytes, body: bytes) -> Answer:
        write = True
        if path == _admin.COMMAND_PATH:
            words = _admin.command_words(body)
            if words is None:
                return _json(400, {"ok": False, "error": _admin.BAD_COMMAND, "workers": []})
            write = not Control.is_read(words)
        if write and self.token and not _admin.token_matches(head, self.token):
            return _json(401, {"ok": False, "error": _admin._UNAUTHORIZED, "workers": []})
        headers = [(b"Content-Type", b"application/json")]
        authorization = head.header(b"authorization")
        if authorization is not None:
            headers.append((b"Authorization", authorization))
        answers = await self._ask_all(b"POST", head.target, COMMAND_TIMEOUT, body, headers)
        if not answers:
            return _json(503, {"ok": False, "error": "no worker is running", "workers": []})
        workers: List[Any] = []
        failed: Optional[Tuple[int, str]] = None
        for index, answer in enumerate(answers):
            if answer is None:
                workers.append(None)
                if failed is None:
                    failed = 502, f"worker {index}: no answer"
                continue
            status, _, content = answer
            try:
                doc = json.loads(content)
            except ValueError:
                doc = {"ok": False, "error": content.decode("utf-8", "replace").strip()}
            workers.append(doc)
            if not 200 <= status < 300 and failed is None:
                error = doc.get("error") if isinstance(doc, dict) else None
                failed = status, f"worker {index}: {error if error is not None else status}"
        if failed is None:
            return _json(200, {"ok": True, "workers": workers})
        return _json(failed[0], {"ok": False, "error": failed[1], "workers": workers})


def start_fanout(host: str, port: int, worker_ports: Callable[[], List[int]], token: Optional[str], *,
                 shared_engine: bool = False) -> Fanout:
    """Serves the fan-out on (host, port) (port 0: any free one; `.address` says which) from a new
    daemon thread, asking the admin ports `worker_ports()` lists on `host` (127.0.0.1 for 0.0.0.0,
    ::1 for ::). `token`: the admin token writes need, or None to leave the check to the workers.
    Returns once the port is bound; raises OSError when it cannot be (a port in use), ValueError
    for a non-loopback host without a token (as the workers' admin port)."""
    _admin.check_admin_address(host, token)
    fanout = Fanout(host, port, worker_ports, token, shared_engine)
    fanout._start()
    return fanout
