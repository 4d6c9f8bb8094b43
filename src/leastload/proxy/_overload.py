"""Overload: what one proxy process does as its client connections near their limit.

Slow clients that trickle a head hold a descriptor each for the whole header
timeout; enough of them fill `max_connections`, the listener stops accepting,
and every other client waits in the kernel's backlog until a slow one times
out. So, in the manner of Envoy's overload manager (`reduce_timeouts`):

- Past `overload_connections` open client connections (the high-water mark)
  the header and idle timeouts shrink linearly with the connections open, down
  to `overload_timeout` at `max_connections` (a timeout shorter than that stays
  as it is). The proxy's sweep ends the waits with the shrunk timeouts.
- At `max_connections` a new connection is still accepted, and the connection
  that has waited longest without a complete head is closed in its stead
  (`make_room`): answered 408 when it waits for a head (a new connection's first
  one too), closed quietly when it sat idle between requests. A connection still at its
  edge (a PROXY header or a TLS handshake not done: `at_edge`, kept by the Listener) waits
  for its head too, since it was accepted; it is shut down without an answer (there is no
  HTTP yet to answer in). Only when no connection waits so does the listener stop accepting.
  A connection younger than FIRST_BYTES_GRACE is spared if it has sent nothing yet, or if
  it is at its edge: its first bytes may be in the socket still, and a flood of new
  connections fills the limit within a few turns of the loop.
- One descriptor is kept in reserve (`Reserve`): when accept() fails for want
  of descriptors, the reserve is closed to accept the connection, one that
  waits is closed in its stead (else the new one is closed at once, not left in
  the backlog), and the reserve is taken again once a descriptor is free.

The state (normal; high: past the high-water mark; full: the limit was
reached; either ends a tenth of the mark below it) is logged once per change,
and counted in the admin port's status and /metrics.
"""

import heapq
import itertools
import logging
import os
from operator import itemgetter
from typing import Collection, Dict, List, Optional, Protocol, Set, Tuple

log = logging.getLogger("leastload.proxy")

NORMAL, HIGH, FULL = "normal", "high", "full"
STATES = (NORMAL, HIGH, FULL)
CANDIDATES = 64  # the longest waiting connections one scan finds; closed from the oldest, then scanned again
# seconds a connection that has sent nothing yet is spared by make_room: a new client connection
# (_client reads it) or one still at its edge (_listen.AtEdge)
FIRST_BYTES_GRACE = 0.25


class Waiting(Protocol):
    """A client connection as the overload state sees it (_client.ClientConnection is one)."""

    def waiting_since(self) -> float:
        """When (the connections' clock) it began to wait for a head; -1.0 when it does not wait
        for one (a request is in or being served, or it is closing)."""
        ...

    def evict(self) -> None:
        """Closes it to admit a new connection (408 unless idle between requests)."""
        ...


def default_high_water(max_connections: int) -> int:
    """overload_connections when not set: three quarters of max_connections (at least 1)."""
    return max(1, max_connections * 3 // 4)


class Overload:
    """The overload state of one proxy's client connections (see the module's text).

        overload = Overload(max_connections=480, high=360, floor=1.0, clients=proxy.clients)
        overload.update(len(proxy.clients))      # on every connection opened or closed
        overload.timeout(10.0, len(proxy.clients))  # a header or idle timeout, shrunk
        overload.make_room()                      # at the limit: True when a waiting one was closed
    """

    def __init__(self, max_connections: int, high: int, floor: float, clients: Collection[Waiting]) -> None:
        self.max_connections, self.high, self.floor = max_connections, min(high, max_connections), floor
        self.clients = clients
        self.state = NORMAL
        self.evicted = 0         # connections closed to admit a new one
        self.refused = 0         # connections accepted with the reserve and closed at once (none to close instead)
        self.reserve_accepts = 0  # accept()s made with the reserve descriptor
        self.entered: Dict[str, int] = {HIGH: 0, FULL: 0}  # times each state was entered
        self.at_edge: Set[Waiting] = set()  # accepted, before their protocol (the Listener adds and removes)
        self._candidates: List[Tuple[float, Waiting]] = []  # newest first: the oldest is popped

    def level(self, open_connections: int) -> float:
        """0.0 up to the high-water mark, 1.0 at max_connections, linear between."""
        if open_connections <= self.high:
            return 0.0
        if open_connections >= self.max_connections:
            return 1.0
        return (open_connections - self.high) / (self.max_connections - self.high)

    def timeout(self, timeout: float, open_connections: int) -> float:
        """A header or idle timeout with this many connections open: shrunk towards the floor."""
        if timeout <= self.floor:
            return timeout
        return timeout - (timeout - self.floor) * self.level(open_connections)

    def update(self, open_connections: int) -> str:
        """The state for this many connections open; a change is logged (once) and counted. An
        overload (high, or full: the limit was reached) ends only below the high-water mark, by a
        tenth of it, so that a proxy at its limit, which closes a connection for each new one, or
        one that hovers at the mark does not log every connection."""
        state = self.state
        if open_connections >= self.max_connections:
            state = FULL
        elif open_connections > self.high:
            if state == NORMAL:
                state = HIGH
        elif open_connections <= self.high - max(1, self.high // 10):
            state = NORMAL
        if state != self.state:
            if state != NORMAL:
                self.entered[state] += 1
            if state == FULL:
                log.warning("overload: %d client connections open, the limit (max_connections): the connection "
                            "waiting longest for its head is closed for each new one", open_connections)
            elif state == HIGH:
                log.warning("overload: %d client connections open, past %d (overload_connections): header and "
                            "idle timeouts shrink towards %g s", open_connections, self.high, self.floor)
            else:
                log.warning("overload over: %d client connections open (%d evicted, %d refused so far)",
                            open_connections, self.evicted, self.refused)
            self.state = state
        return state

    def make_room(self) -> bool:
        """Closes the connection that has waited longest without a complete head (a client
        connection's, or one still at its edge); False when
        none waits so. (A scan finds the CANDIDATES longest waiting; each is checked again
        when its turn comes, since it may have moved on meanwhile.)"""
        for _ in range(2):
            candidates = self._candidates
            while candidates:
                since, conn = candidates.pop()
                if conn.waiting_since() == since:  # still waiting, the same wait
                    conn.evict()
                    self.evicted += 1
                    return True
            waiting = [(since, c) for c in itertools.chain(self.clients, self.at_edge)
                       for since in (c.waiting_since(),) if since >= 0.0]
            if not waiting:
                return False
            self._candidates = heapq.nsmallest(CANDIDATES, waiting, key=itemgetter(0))[::-1]
        return False

    def status(self, open_connections: int) -> Dict[str, object]:
        """The admin port's view."""
        return {"state": self.state, "level": round(self.level(open_connections), 4),
                "overload_connections": self.high, "overload_timeout": self.floor,
                "evicted": self.evicted, "refused": self.refused, "reserve_accepts": self.reserve_accepts,
                "entered_high": self.entered[HIGH], "entered_full": self.entered[FULL]}


class Reserve:
    """One descriptor held open (on the null device) so that, when the process has no other,
    one can be freed to accept a connection (and close another in its stead)."""

    def __init__(self) -> None:
        self.fd: Optional[int] = None
        self.take()

    def take(self) -> bool:
        """Holds the descriptor again if it is not held; False when none is free yet."""
        if self.fd is None:
            try:
                self.fd = os.open(os.devnull, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                return False
        return True

    def release(self) -> bool:
        """Frees the descriptor for a moment; False when it was not held."""
        if self.fd is None:
            return False
        os.close(self.fd)
        self.fd = None
        return True

    def close(self) -> None:
        self.release()
