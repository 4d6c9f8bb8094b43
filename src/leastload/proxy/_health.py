"""Active health monitors: one probe loop per backend, DOWN after `fall`, UP after `rise`.

The defaults follow the vendor's monitors: a probe every 5 s, 2 s to answer,
3 failures in a row mark the service DOWN, 1 success marks it UP again
(and the engine starts slow start on DOWN -> UP when it is configured).
A `tcp` probe opens a connection; an `http` probe sends `GET path` on a new
connection and wants a 2xx or 3xx status. Probes do not go through the engine:
they are not transactions and do not count as load.
"""

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from ..upstream import Backend

if TYPE_CHECKING:
    from ._proxy import Proxy

log = logging.getLogger("leastload.proxy")

KINDS = ("none", "tcp", "http")


class HealthMonitor:
    def __init__(self, proxy: "Proxy", backend: Backend, kind: str, path: str, interval: float,
                 timeout: float, fall: int, rise: int) -> None:
        self.proxy, self.backend = proxy, backend
        self.kind, self.path = kind, path
        self.interval, self.timeout, self.fall, self.rise = interval, timeout, fall, rise
        self.failures = 0   # probes failed in a row
        self.successes = 0  # probes passed in a row
        self.probes = 0
        self.last_error: Optional[str] = None
        self.task: "Optional[asyncio.Task[None]]" = None

    def start(self) -> None:
        assert self.proxy.loop is not None  # the proxy starts its monitors once it runs
        self.task = self.proxy.loop.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            ok, why = await self._probe()
            self.probes += 1
            self._judge(ok, why)

    async def _probe(self) -> Tuple[bool, Optional[str]]:
        b = self.backend
        writer: Optional[asyncio.StreamWriter] = None
        try:
            reader, opened = await asyncio.wait_for(asyncio.open_connection(b.host, b.port), self.timeout)
            writer = opened
            if self.kind == "tcp":
                return True, None
            opened.write(f"GET {self.path} HTTP/1.1\r\nHost: {b.host}:{b.port}\r\nConnection: close\r\n"
                         f"User-Agent: leastload-health\r\n\r\n".encode())
            line = await asyncio.wait_for(reader.readline(), self.timeout)
            parts = line.split()
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
                return False, f"not an HTTP response: {line[:60]!r}"
            status = int(parts[1])
            return 200 <= status < 400, f"status {status}"
        except (OSError, asyncio.TimeoutError) as exc:
            return False, type(exc).__name__ + (f": {exc}" if str(exc) else "")
        finally:
            if writer is not None:
                writer.close()

    def _judge(self, ok: bool, why: Optional[str]) -> None:
        vs, name = self.proxy.vserver, self.backend.name
        if name not in vs:
            return
        if ok:
            self.failures = 0
            self.successes += 1
            if vs.state(name) == "DOWN" and self.successes >= self.rise:
                vs.set_state(name, "UP")
                log.warning("backend %s is UP (%d probe(s) passed)", name, self.successes)
        else:
            self.successes = 0
            self.failures += 1
            self.last_error = why
            if vs.state(name) == "UP" and self.failures >= self.fall:
                vs.set_state(name, "DOWN")
                log.warning("backend %s is DOWN (%d probes failed, last: %s)", name, self.failures, why)

    def status(self) -> Dict[str, Any]:
        return {"check": self.kind, "probes": self.probes, "failures_in_row": self.failures,
                "successes_in_row": self.successes, "last_error": self.last_error}

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
