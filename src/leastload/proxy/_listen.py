"""`Listener`: accepts client connections itself, so that it can stop at a limit.

`loop.create_server` accepts whenever the listening socket is readable, however many
connections are open, and when accept() fails for want of descriptors (EMFILE) it
retries every second while the descriptors it needs for backends and health probes
are gone as well. The Listener accepts in batches from `loop.add_reader` instead and,
like HAProxy at `maxconn`, stops accepting while `max_connections` client
connections are open: the next clients wait in the kernel's backlog (4096) until
one closes. When accept() fails for the process's or the system's own shortage
(EMFILE, ENFILE, ENOBUFS, ENOMEM) it stops for a short while, logged once per episode.

The default limit, `default_max_connections()`, follows the descriptor limit:
each client connection may hold one backend connection too, and some descriptors
(`reserve`, 64) are kept for the health probes, the admin port, logs and the pool,
so it is (soft RLIMIT_NOFILE - reserve) // 2, at most 10,000 and at least 1;
1,024 descriptors give 480 connections. Raise the limit (`ulimit -n`) for more.

With an `overload` (_overload.Overload) the Listener goes on accepting at the limit:
each connection accepted past it asks `overload.make_room()` to close one that waits for
its head, and only when none does is the listener paused (one connection over the limit
at most). With a `reserve` (_overload.Reserve), an accept() that fails for want of
descriptors frees the reserve and accepts; the new connection stays if one was closed in
its stead, else it is closed at once.

Every protocol the factory makes must call `listener.connection_closed()` once, from
its `connection_lost`: that is how the Listener counts what is open.

With an `edge` (_edge.Edge: TLS, the PROXY protocol) each accepted socket goes through
`_edge.take()` in a task of its own, and its protocol is `edge_factory(header, accepted_at)`;
a connection the edge refuses never has a protocol, so the Listener counts it closed itself.
Without one, the path is the task-less hand-over below, nothing added. While a connection is
at its edge, the overload state sees it (`AtEdge` in `overload.at_edge`): at the limit it can
be closed for a new connection like one waiting for its head (a silent TLS or PROXY client
would otherwise hold its place for the whole header timeout).
"""

import asyncio
import errno
import logging
import socket
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Optional, Tuple

from ._core import clock
from ._edge import take
from ._overload import FIRST_BYTES_GRACE

if TYPE_CHECKING:
    from ._edge import Edge
    from ._overload import Overload, Reserve
    from ._proxy_protocol import ProxyHeader

log = logging.getLogger("leastload.proxy")

BACKLOG = 4096
BATCH = 64             # accepts per wake-up: one busy listener must not starve the loop
RETRY_DELAY = 0.25     # seconds without accepting after an EMFILE and the like
ROOM_RETRY = 0.1       # seconds before a full listener that found nothing to close asks again
MAX_CONNECTIONS = 10_000
RESERVE = 64
# accept() failing for the proxy's own shortage: wait, do not spin
SHORTAGE = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM))
# accept() passing on one client's trouble (the network errors Linux's accept(2) lists): the next one
DESCRIPTORS = frozenset((errno.EMFILE, errno.ENFILE))  # what the reserve descriptor answers
SKIP = frozenset(getattr(errno, name) for name in (
    "ECONNABORTED", "EPERM", "EPROTO", "ENETDOWN", "ENOPROTOOPT", "EHOSTDOWN", "ENONET", "EHOSTUNREACH",
    "EOPNOTSUPP", "ENETUNREACH") if hasattr(errno, name))


def default_max_connections(reserve: int = RESERVE) -> int:
    """(soft RLIMIT_NOFILE - reserve) // 2, at most 10,000 and at least 1 (see the module's text)."""
    try:
        import resource
    except ImportError:  # Windows: no descriptor limit to read
        return MAX_CONNECTIONS
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(1, min(MAX_CONNECTIONS, (soft - reserve) // 2))


class Listener:
    """A listening TCP socket whose connections become `protocol_factory()`'s, at most
    `max_connections` open at once (None: `default_max_connections()`).

        listener = Listener(loop, "127.0.0.1", 0, factory, 1000)
        listener.start()            # listener.sockname: where it listens
        ...                         # each protocol calls listener.connection_closed() when lost
        listener.close()
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, host: str, port: int,
                 protocol_factory: Callable[[], asyncio.BaseProtocol],
                 max_connections: Optional[int] = None, *, reuse_port: bool = False,
                 backlog: int = BACKLOG, overload: "Optional[Overload]" = None,
                 reserve: "Optional[Reserve]" = None, edge: "Optional[Edge]" = None,
                 edge_factory: "Optional[Callable[[Optional[ProxyHeader], float], asyncio.BaseProtocol]]" = None
                 ) -> None:
        self.loop, self.host, self.port = loop, host, port
        self.protocol_factory = protocol_factory
        self.max_connections = default_max_connections() if max_connections is None else max_connections
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections!r}")
        self.reuse_port, self.backlog = reuse_port, backlog
        self.overload, self.reserve = overload, reserve
        if edge is not None and edge_factory is None:
            raise ValueError("edge_factory: needed with an edge, got None")
        self.edge, self.edge_factory = edge, edge_factory
        self.sock: Optional[socket.socket] = None
        self.active = 0       # client connections open (accepted, not yet closed)
        self.accepted = 0     # since start
        self.shortages = 0    # accept() failures for want of descriptors or memory
        self.reading = False  # the loop watches the listening socket
        self.closed = False
        self._retry: Optional[asyncio.TimerHandle] = None  # the end of a backoff
        self._short_since: Optional[float] = None  # when the current shortage episode began
        self._done: "asyncio.Future[None]" = loop.create_future()

    # ---- life cycle ------------------------------------------------------------

    def start(self) -> "Listener":
        """Binds and listens (OSError when it cannot), then accepts."""
        assert self.sock is None, "the listener is already started"
        family, _, _, _, address = socket.getaddrinfo(self.host or None, self.port, type=socket.SOCK_STREAM,
                                                      flags=socket.AI_PASSIVE)[0]
        # create_server sets SO_REUSEADDR (POSIX) and IPV6_V6ONLY, as loop.create_server does
        self.sock = socket.create_server(address[:2], family=family, backlog=self.backlog,
                                         reuse_port=self.reuse_port)
        self.sock.setblocking(False)
        self._resume()
        return self

    @property
    def sockname(self) -> Tuple[str, int]:
        """(host, port) it listens on."""
        assert self.sock is not None, "the listener is not started"
        host, port = self.sock.getsockname()[:2]
        return host, port

    @property
    def paused(self) -> bool:
        """True while it does not accept: full, or backing off after a shortage."""
        return not self.reading

    def close(self) -> None:
        """Stops listening (the backlog's clients are refused); open connections stay open."""
        if self.closed:
            return
        self.closed = True
        self._pause()
        if self._retry is not None:
            self._retry.cancel()
        if self.sock is not None:
            self.sock.close()
        if self.reserve is not None:
            self.reserve.close()
        if not self._done.done():
            self._done.set_result(None)

    async def serve_forever(self) -> None:
        """Returns once the listener is closed; closes it when cancelled."""
        try:
            await asyncio.shield(self._done)
        finally:
            self.close()

    # ---- connections -------------------------------------------------------------

    def connection_closed(self) -> None:
        """A protocol's connection is lost (call once per connection, from connection_lost)."""
        self.active -= 1
        if self.reserve is not None and self.reserve.fd is None:
            # the reserve was spent: taken again once this socket is closed (after connection_lost)
            self.loop.call_soon(self._descriptor_freed)
        elif self.active < self.max_connections and self._retry is None:
            self._resume()

    def _descriptor_freed(self) -> None:
        """A connection closed while the reserve was spent: the reserve is taken again, and a
        back-off for want of descriptors ends at once (one is free now)."""
        if self.reserve is not None:
            self.reserve.take()
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self.active < self.max_connections:
            self._resume()

    def _resume(self) -> None:
        if not self.reading and not self.closed and self.sock is not None:
            self.loop.add_reader(self.sock, self._accept)
            self.reading = True

    def _pause(self) -> None:
        if self.reading:
            assert self.sock is not None
            self.loop.remove_reader(self.sock)
            self.reading = False

    def _accept(self) -> None:
        sock = self.sock
        assert sock is not None
        overload = self.overload
        for _ in range(BATCH):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return  # nothing more waits
            except OSError as exc:
                if exc.errno in SKIP:
                    continue
                if exc.errno in DESCRIPTORS and self._accept_with_reserve():
                    continue
                self._back_off(exc)
                return
            if self._short_since is not None:
                log.warning("accepting connections again after %.1f s (%d open)",
                            self.loop.time() - self._short_since, self.active)
                self._short_since = None
            self.active += 1
            self.accepted += 1
            room = self.active <= self.max_connections or (overload is not None and overload.make_room())
            self._hand_over(conn)
            if not room or (overload is None and self.active >= self.max_connections):
                self._pause()  # full: the next clients wait in the backlog
                if not room and self._retry is None:
                    # nothing waits that may be closed yet (the young are spared a while): ask again
                    self._retry = self.loop.call_later(ROOM_RETRY, self._retry_room)
                return

    def _accept_with_reserve(self) -> bool:
        """accept() failed for want of descriptors: the reserve's is freed to accept one, which
        stays when a waiting connection is closed in its stead, else is closed at once. False
        when there is no reserve to free (or nothing waits to be accepted)."""
        reserve, overload = self.reserve, self.overload
        if reserve is None or overload is None or not reserve.release():
            return False
        assert self.sock is not None
        try:
            conn, _ = self.sock.accept()
        except OSError:
            reserve.take()
            return False
        overload.reserve_accepts += 1
        if not overload.make_room():
            overload.refused += 1
            conn.close()
            reserve.take()
            return False  # nothing can be closed: back off as without a reserve
        self.active += 1
        self.accepted += 1
        self._hand_over(conn)  # the reserve is taken again when a descriptor is free (connection_closed)
        return True

    def _hand_over(self, conn: socket.socket) -> None:
        """Runs connect_accepted_socket() without a Task of its own: its first step now,
        which makes the protocol and the transport on both asyncio's loop and uvloop and
        schedules connection_made; the rest once the future it waits for is done.
        (A Task costs some 5 us more per connection, on either loop.) With an edge, a task
        of _edge.take() instead."""
        if self.edge is not None:
            wait = AtEdge(conn, clock())  # the clock the connections' deadlines use
            if self.overload is not None:
                self.overload.at_edge.add(wait)
            self.loop.create_task(self._through_edge(conn, wait))
            return
        coro = self.loop.connect_accepted_socket(self.protocol_factory, conn)
        try:
            waiting = coro.send(None)
        except StopIteration:
            return
        except Exception as exc:  # before there is a transport: no protocol will report it
            log.error("cannot take a client connection: %r", exc, exc_info=exc)
            conn.close()
            self.connection_closed()
            return
        waiting.add_done_callback(lambda _: _finish(coro))

    async def _through_edge(self, conn: socket.socket, wait: "AtEdge") -> None:
        """The PROXY header and the TLS handshake (_edge.take), then the protocol; a refused
        connection is closed and counted by take(), and closed here for the Listener's count."""
        edge, make = self.edge, self.edge_factory
        assert edge is not None and make is not None
        accepted_at = wait.since
        try:
            taken = await take(self.loop, conn, edge, lambda header: make(header, accepted_at),
                               accepted_at=self.loop.time(), evicted=wait.was_evicted)
        except Exception as exc:  # not the client's doing: logged, and the connection closed
            log.error("cannot take a client connection: %r", exc, exc_info=exc)
            conn.close()
            taken = None
        finally:
            wait.done = True
            if self.overload is not None:
                self.overload.at_edge.discard(wait)
        if taken is None:
            self.connection_closed()

    def _back_off(self, exc: OSError) -> None:
        """Not accepting for RETRY_DELAY: EMFILE and the like pass as connections close."""
        self.shortages += 1
        if self._short_since is None:  # once per episode, not per attempt
            self._short_since = self.loop.time()
            level = logging.WARNING if exc.errno in SHORTAGE else logging.ERROR
            log.log(level, "cannot accept connections (%s), %d open: retrying every %.2f s",
                    exc, self.active, RETRY_DELAY)
        self._pause()
        self._retry = self.loop.call_later(RETRY_DELAY, self._end_backoff)

    def _retry_room(self) -> None:
        """Full, and nothing could be closed for a new connection: accept again, asking anew."""
        self._retry = None
        self._resume()

    def _end_backoff(self) -> None:
        self._retry = None
        if self.active < self.max_connections:
            self._resume()


class AtEdge:
    """A connection between accept() and its protocol (its PROXY header or TLS handshake not
    done), as the overload state sees it (_overload.Waiting): waiting for its head since it was
    accepted, once past FIRST_BYTES_GRACE. Evicted, its socket is shut down: the edge's read or the
    handshake ends at once and take() closes it, counted as an eviction, not as a client that
    left. (A shutdown, not a close or a cancel: the socket may be the loop's transport's by
    then, whose close reports itself; a socket already closed refuses it, harmlessly.)"""

    __slots__ = ("sock", "since", "done", "evicted")

    def __init__(self, sock: socket.socket, since: float) -> None:
        self.sock, self.since = sock, since
        self.done = False     # take() has returned: nothing left here to evict
        self.evicted = False

    def waiting_since(self) -> float:
        if self.done or self.evicted or clock() - self.since < FIRST_BYTES_GRACE:
            return -1.0
        return self.since

    def was_evicted(self) -> bool:
        return self.evicted

    def evict(self) -> None:
        self.evicted = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # closed meanwhile (take() refused it, or its transport closed it)


def _finish(coro: "Coroutine[Any, Any, Any]") -> None:
    try:
        coro.send(None)
    except StopIteration:
        pass
    except Exception as exc:  # it closed the transport: the protocol's connection_lost counts it
        log.debug("client connection failed as it was taken: %r", exc)
