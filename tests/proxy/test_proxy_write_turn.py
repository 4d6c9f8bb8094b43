"""_core.WriteTurn and WriteSide: a connection's writes held to the end of the event loop's
turn, then sent in the order they were made; a held piece is never lost to a graceful close and
never sent after an abort (when the descriptor's number may already be another connection's).

Both paths: the compiled build sends with write_now()'s send(), the pure-Python path hands the
pieces to the transport; what the peer receives, and when, is the same."""

import asyncio
import os
import socket
import time

import pytest

from leastload.proxy import _backend, _core, _http1

from servers import run_loop
from test_proxy_linger import started_proxy
from test_proxy_write_now import RecordingTransport as WriteNowTransport


class RecordingTransport(WriteNowTransport):
    """write_now's stand-in transport, which here also fails a write made after it was closed:
    a held piece must not outlive its connection."""

    def write(self, data):
        assert not self.closing, "written after it was closed"
        super().write(data)


def side_on(turn, transport, fd=-1):
    side = _core.WriteSide()
    side.transport, side.fd, side.turn = transport, fd, turn
    return side


def one_connection(loop):
    """A turn on `loop` and one connection writing through it: (turn, its transport, the connection)."""
    turn, transport = _core.WriteTurn(loop), RecordingTransport()
    return turn, transport, side_on(turn, transport)


def end_of_turn(loop):
    loop.run_until_complete(asyncio.sleep(0))  # the turn's call_soon callbacks run


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_writes_are_held_to_the_turns_end_and_keep_their_order(loop):
    turn = _core.WriteTurn(loop)
    first, second = RecordingTransport(), RecordingTransport()
    a, b = side_on(turn, first), side_on(turn, second)
    a.write(b"one")
    b.write(b"two")
    assert first.handed == [] and second.handed == []  # nothing sent while the turn goes on
    assert a.waiting == b"one" and b.waiting == b"two"
    end_of_turn(loop)
    assert first.handed == [b"one"] and second.handed == [b"two"]
    assert a.waiting is None and b.waiting is None and not turn.scheduled


def test_a_second_write_in_the_turn_sends_the_first_at_once(loop):
    turn, transport, side = one_connection(loop)
    side.write(b"head")
    side.write(b"body")
    assert transport.handed == [b"head"] and side.waiting == b"body"
    side.write(memoryview(b"tail"))  # not bytes: its owner might change it, so it goes now, last
    assert transport.handed == [b"head", b"body", b"tail"] and side.waiting is None
    end_of_turn(loop)
    assert transport.handed == [b"head", b"body", b"tail"]  # once each


def test_a_graceful_close_sends_the_held_piece_first(loop):
    turn, transport, side = one_connection(loop)
    side.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    side.close_when_written()
    assert transport.handed == [b"HTTP/1.1 400 Bad Request\r\n\r\n"] and transport.closed
    end_of_turn(loop)  # the turn's flush finds nothing left to send (and writes nothing after the close)
    assert transport.handed == [b"HTTP/1.1 400 Bad Request\r\n\r\n"]


def test_an_abort_drops_the_held_piece(loop):
    turn, transport, side = one_connection(loop)
    side.write(b"never")
    transport.abort()
    end_of_turn(loop)
    assert transport.handed == [] and side.waiting is None


def test_without_a_turn_every_write_goes_at_once():
    transport = RecordingTransport()
    side = side_on(None, transport)
    side.write(b"now")
    assert transport.handed == [b"now"] and side.waiting is None


def test_after_a_busy_turn_writes_are_held_again(loop):
    turn = _core.WriteTurn(loop)
    transports = [RecordingTransport() for _ in range(_core.WRITE_TURN_KNOBS[0])]
    sides = [side_on(turn, t) for t in transports]
    for i, side in enumerate(sides):
        side.write(b"%d" % i)
    end_of_turn(loop)  # QUIET_TURN_PIECES pieces in one turn: a busy loop
    sides[0].write(b"next")
    assert transports[0].handed == [b"0"] and turn.scheduled
    end_of_turn(loop)
    assert transports[0].handed == [b"0", b"next"]


def test_after_a_quiet_turn_writes_go_at_once_for_a_while(loop):
    """A turn that held fewer than QUIET_TURN_PIECES pieces saved no wake-up: the next WRITES_AT_ONCE_AFTER_QUIET writes
    go out at once (no callback a turn), then holding is tried again."""
    turn, transport, side = one_connection(loop)
    side.write(b"first")
    end_of_turn(loop)
    for i in range(_core.WRITE_TURN_KNOBS[1]):
        side.write(b"%d" % i)
        assert transport.handed[-1] == b"%d" % i and not turn.scheduled  # sent as it was made
    side.write(b"held again")
    assert side.waiting == b"held again" and turn.scheduled
    end_of_turn(loop)
    assert transport.handed == [b"first"] + [b"%d" % i for i in range(_core.WRITE_TURN_KNOBS[1])] + [b"held again"]


def test_one_connections_failure_leaves_the_others_sent(loop):
    turn = _core.WriteTurn(loop)
    reported = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))

    class Broken(RecordingTransport):
        def write(self, data):
            raise RuntimeError("broken transport")

    broken, fine = Broken(), RecordingTransport()
    side_on(turn, broken).write(b"lost")
    side_on(turn, fine).write(b"kept")
    end_of_turn(loop)
    assert fine.handed == [b"kept"]
    assert broken.aborted  # the failing connection is ended, as a write error ends it
    assert len(reported) == 1 and isinstance(reported[0]["exception"], RuntimeError)


def test_a_held_piece_never_reaches_the_connection_that_reuses_the_descriptor(loop):
    """An aborted connection's descriptor number is free at once; a connection accepted in the
    same turn may get it. The piece held for the aborted one must not go out on it."""
    reported = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    with socket.create_server(("127.0.0.1", 0)) as server:
        old = socket.create_connection(server.getsockname(), timeout=5)
        old_peer, _ = server.accept()
        old.setblocking(False)
        turn = _core.WriteTurn(loop)
        transport = RecordingTransport()
        side = side_on(turn, transport, fd=old.fileno())
        side.write(b"the old connection's answer")
        number = old.fileno()
        transport.abort()
        old.close()
        new = socket.create_connection(server.getsockname(), timeout=5)
        new_peer, _ = server.accept()
        reused = new.fileno() == number  # the kernel gives the lowest free number: usually this one
        if not reused:
            os.dup2(new.fileno(), number)  # the old number made to name the new connection
        try:
            end_of_turn(loop)
            new_peer.setblocking(False)
            with pytest.raises(BlockingIOError):  # nothing arrived on the new connection
                new_peer.recv(100)
            assert transport.handed == [] and reported == []
        finally:
            if not reused:
                os.close(number)
            for s in (new, new_peer, old_peer):
                s.close()


def test_a_backend_request_is_timed_from_when_it_is_sent(loop):
    """TTFB counts from the request's send: a request held to the turn's end is stamped again
    when it goes out (BackendConnection.on_sent)."""
    turn = _core.WriteTurn(loop)
    budget = _backend.ConnectionBudget(10)
    pool = _backend.Pool(loop, "127.0.0.1", 1, 4, _http1.Limits(), budget, None, turn)
    conn = _backend.BackendConnection(pool)
    transport = RecordingTransport()
    conn.connection_made(transport)

    class Transaction:
        def record(self, bytes=0, packets=0):
            pass

    class Exchange(_backend.ExchangeSide):
        def on_outcome(self, outcome, conn):
            pass

    exchange = Exchange()
    exchange.client = _backend.ClientSide()
    exchange.t = Transaction()
    conn.send(exchange, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 5.0, False, False, True)
    held_at = conn.sent_at
    assert transport.handed == [] and conn.waiting is not None
    time.sleep(0.01)
    end_of_turn(loop)
    assert transport.handed == [b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"]
    assert conn.sent_at >= held_at + 0.009 and conn.last_data == conn.sent_at


def test_an_always_held_sides_pieces_are_held_in_a_quiet_loop_too(loop):
    """A client's answers (always_held) wait for the turn's end even while the loop is quiet
    and a backend's requests go out at once."""
    turn = _core.WriteTurn(loop)
    to_backend, to_client = RecordingTransport(), RecordingTransport()
    backend, client = side_on(turn, to_backend), side_on(turn, to_client)
    client.always_held = True
    client.write(b"first answer")
    end_of_turn(loop)  # one piece held: a quiet turn
    assert to_client.handed == [b"first answer"]
    backend.write(b"request")
    assert to_backend.handed == [b"request"] and backend.waiting is None  # sent as it was made
    client.write(b"answer")
    assert to_client.handed == [b"first answer"] and client.waiting == b"answer" and turn.scheduled  # held
    end_of_turn(loop)
    assert to_client.handed == [b"first answer", b"answer"] and client.waiting is None


def test_a_proxys_client_connections_hold_their_answers_and_its_backend_connections_choose(backend_procs):
    procs = backend_procs(1)

    async def scenario():
        proxy = await started_proxy([procs[0].port])
        try:
            reader, writer = await asyncio.open_connection(*proxy.address)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            clients = list(proxy.clients)
            backends = [conn for pool in proxy.pools.values() for conn in pool.idle]
            writer.close()
            return head, clients, backends, proxy.core.turn
        finally:
            await proxy.close()
    head, clients, backends, turn = run_loop(scenario(), 30)
    assert head.startswith(b"HTTP/1.1 200 ")
    assert len(clients) == 1 and clients[0].always_held and clients[0].turn is turn
    assert backends and all(not conn.always_held and conn.turn is turn for conn in backends)
