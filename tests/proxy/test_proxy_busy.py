"""A pool's busy list: the backend connections with an exchange on them, the ones its timeout
sweep (Pool.check_timeouts) looks at. Each connection knows its place in the list, and one
whose exchange ends is replaced by the list's last, so the list must stay exactly the set of
connections in an exchange whatever order the exchanges end in. Both paths."""

import asyncio
import random

import pytest

from leastload.proxy import _backend, _core, _http1

from test_proxy_write_now import RecordingTransport


class StubTransport(RecordingTransport):
    """write_now's stand-in transport (no socket: TCP_INFO is estimated, writes are handed to
    it), which a backend connection may also pause and resume."""

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass


class Handle:
    """The exchange's transaction handle: send() records the request's bytes on it."""

    def record(self, bytes=0, packets=0):
        pass


class Client(_backend.ClientSide):
    def __init__(self):
        _backend.ClientSide.__init__(self)
        self.transport = StubTransport()
        self.gone = self.paused = False


class Exchange(_backend.ExchangeSide):
    def __init__(self, client, outcomes):
        self.client, self.t, self.outcomes = client, Handle(), outcomes

    def on_outcome(self, outcome, conn):
        self.outcomes.append((outcome, conn))


@pytest.fixture
def pool():
    loop = asyncio.new_event_loop()
    yield _backend.Pool(loop, "127.0.0.1", 1, 16, _http1.Limits(), _backend.ConnectionBudget(100))
    loop.close()


def open_connections(pool, n):
    conns = []
    for _ in range(n):
        conn = _backend.BackendConnection(pool)
        conn.connection_made(StubTransport())
        conns.append(conn)
    return conns


def send(conn, outcomes):
    conn.send(Exchange(Client(), outcomes), b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 5.0, False, False, True)


@pytest.mark.parametrize("seed", range(5))
def test_the_busy_list_is_the_connections_in_an_exchange_whatever_order_they_end_in(pool, seed):
    rng = random.Random(seed)
    conns = open_connections(pool, 8)
    outcomes = []
    in_exchange = set()
    for _ in range(60):
        conn = rng.choice(conns)
        if conn in in_exchange:
            conn.abandon()  # the client went away: the exchange ends (the connection is not reused)
            in_exchange.discard(conn)
            conns[conns.index(conn)] = open_connections(pool, 1)[0]
        else:
            send(conn, outcomes)
            in_exchange.add(conn)
        assert sorted(map(id, pool.busy)) == sorted(map(id, in_exchange))
        assert all(pool.busy[conn.busy_at] is conn for conn in in_exchange)
    assert all(outcome == _backend.CLIENT_GONE for outcome, _ in outcomes)


def test_the_timeout_sweep_ends_every_busy_connection_once_and_only_those(pool):
    conns = open_connections(pool, 5)
    outcomes = []
    for conn in conns:
        send(conn, outcomes)
    conns[1].abandon()  # the middle of the list: the last takes its place
    conns[4].abandon()
    outcomes.clear()
    pool.check_timeouts(_core.clock() + 60.0)
    assert sorted(id(conn) for _, conn in outcomes) == sorted(id(c) for c in (conns[0], conns[2], conns[3]))
    assert {outcome for outcome, _ in outcomes} == {_backend.TIMEOUT}
    assert pool.busy == []
    assert all(conn.busy_at == -1 for conn in conns)
