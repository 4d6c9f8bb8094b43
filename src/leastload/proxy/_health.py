"""Active health monitors: one probe loop per backend, DOWN after `fall`, UP after `rise`.

The defaults follow the vendor's monitors: a probe every 5 s, 2 s to answer,
3 failures in a row mark the service DOWN, 1 success marks it UP again
(and the engine starts slow start on DOWN -> UP when it is configured). A
passed probe of an UP backend also ends its passive ejection, unless the
proxy keeps ejections (health_ends_ejection=False, --outlier-keep-on-health).
A `tcp` probe opens a connection; an `http` probe sends `GET path` (or the
monitor's own method and path) on a new connection and wants a 2xx or 3xx
status (or one of the monitor's response codes). Probes do not go through the engine:
they are not transactions and do not count as load.

A probe that cannot even be made for the proxy's own trouble (out of descriptors,
buffers, memory or local ports: `is_local_error`) says nothing of the backend: it is
neither a failure nor a success, is counted (`local_errors`) and logged once per episode.
"""

import asyncio
import errno
import logging
from typing import Any, Dict, Optional, Tuple

from ..config.proxy_settings import HEALTH_KINDS
from ..net.upstream import Backend

log = logging.getLogger("leastload.proxy")

KINDS = HEALTH_KINDS  # the health_check setting's choices
# the proxy's own shortages, not the peer's answer
LOCAL_ERRNOS = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.EADDRNOTAVAIL))


def is_local_error(exc: BaseException) -> bool:
    """True when a connect (a probe's, or a request's to a backend) failed for the proxy's
    own trouble: out of descriptors (EMFILE, ENFILE), buffers or memory (ENOBUFS, ENOMEM),
    or local ports (EADDRNOTAVAIL). Such a failure must not count against the backend."""
    return isinstance(exc, OSError) and exc.errno in LOCAL_ERRNOS


class HealthMonitor:
    """Probes `backend` on `loop` and sets its state in `vserver` (the engine's VirtualServer)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, vserver: Any, backend: Backend, kind: str, path: str,
                 interval: float, timeout: float, fall: int, rise: int, method: str = "GET",
                 codes: Tuple[Tuple[int, int], ...] = ((200, 399),), *, ends_ejection: bool = True) -> None:
        self.loop, self.vserver, self.backend = loop, vserver, backend
        self.kind, self.path, self.method, self.codes = kind, path, method, codes
        self.interval, self.timeout, self.fall, self.rise = interval, timeout, fall, rise
        self.ends_ejection = ends_ejection  # a passed probe of an UP backend ends its passive ejection
        self.failures = 0   # probes failed in a row
        self.successes = 0  # probes passed in a row
        self.probes = 0
        self.last_error: Optional[str] = None
        self.local_errors = 0  # probes the proxy could not make (is_local_error)
        self.unprobed = 0      # of them in a row: an episode of the proxy's trouble while > 0
        self.last_local_error: Optional[str] = None
        self.task: "Optional[asyncio.Task[None]]" = None
        self.stopped = False

    def start(self) -> None:
        self.task = self.loop.create_task(self._run())

    async def _run(self) -> None:
        # the flag as well as the cancel: Python 3.11's asyncio.wait_for can swallow a cancel that
        # arrives as the probe's connection completes, and the probes would then go on after stop()
        while not self.stopped:
            await asyncio.sleep(self.interval)
            ok, why = await self._probe()
            if self.stopped:
                return
            self.probes += 1
            self._judge(ok, why)

    async def _probe(self) -> Tuple[Optional[bool], Optional[str]]:
        """(True, why) passed, (False, why) failed, (None, why) could not be made (local)."""
        b = self.backend
        writer: Optional[asyncio.StreamWriter] = None
        try:
            reader, opened = await asyncio.wait_for(asyncio.open_connection(b.host, b.port), self.timeout)
            writer = opened
            if self.kind == "tcp":
                return True, None
            opened.write(f"{self.method} {self.path} HTTP/1.1\r\nHost: {b.host}:{b.port}\r\nConnection: close\r\n"
                         f"User-Agent: leastload-health\r\n\r\n".encode())
            line = await asyncio.wait_for(reader.readline(), self.timeout)
            parts = line.split()
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
                return False, f"not an HTTP response: {line[:60]!r}"
            status = int(parts[1])
            return any(low <= status <= high for low, high in self.codes), f"status {status}"
        except (OSError, asyncio.TimeoutError) as exc:
            why = type(exc).__name__ + (f": {exc}" if str(exc) else "")
            return (None if is_local_error(exc) else False), why
        finally:
            if writer is not None:
                writer.close()

    def _judge(self, ok: Optional[bool], why: Optional[str]) -> None:
        vs, name = self.vserver, self.backend.name
        if name not in vs:
            return
        if ok is None:  # the proxy's trouble: the runs of failures and successes stand
            self.local_errors += 1
            self.unprobed += 1
            self.last_local_error = why
            if self.unprobed == 1:  # once per episode, not per probe
                log.warning("backend %s cannot be probed for the proxy's own trouble (%s): "
                            "its state stays %s until a probe can be made", name, why, vs.state(name))
            return
        if self.unprobed:
            log.warning("backend %s can be probed again (%d probe(s) could not be made)", name, self.unprobed)
            self.unprobed = 0
        if ok:
            self.failures = 0
            self.successes += 1
            if vs.state(name) == "DOWN" and self.successes >= self.rise:
                vs.set_state(name, "UP")
                log.warning("backend %s is UP (%d probe(s) passed)", name, self.successes)
            if self.ends_ejection and vs.state(name) == "UP":
                # as Envoy's successful_active_health_check_uneject_host: the backend answers
                # its monitor again, so its passive ejection need not run its whole time. The
                # engine records the return ("returned early"); the proxy logs it from there, once
                vs.end_ejection(name)
        else:
            self.successes = 0
            self.failures += 1
            self.last_error = why
            if vs.state(name) == "UP" and self.failures >= self.fall:
                vs.set_state(name, "DOWN")
                log.warning("backend %s is DOWN (%d probes failed, last: %s)", name, self.failures, why)

    def status(self) -> Dict[str, Any]:
        return {"check": self.kind, "interval": self.interval, "probes": self.probes, "failures_in_row": self.failures,
                "successes_in_row": self.successes, "last_error": self.last_error,
                "local_errors": self.local_errors, "unprobed_in_row": self.unprobed,
                "last_local_error": self.last_local_error}

    def stop(self) -> None:
        self.stopped = True
        if self.task is not None:
            self.task.cancel()
