"""The lingering close (_linger.py), end to end over real sockets: an answer the proxy, its admin
port or the fan-out gives last on a connection reaches the client whole, even when the client
is still sending (the rest of a refused body, requests pipelined behind a close); and a client
that neither closes nor stops sending is cut off once LINGER_SECONDS have passed, and one that
sends more than the byte bound after the answer (linger_bytes) is reset."""

import asyncio
import socket
import time

import pytest

from leastload.proxy import Proxy, _admin, _linger
from leastload.proxy._fanout import start_fanout
from leastload.proxy._one_request import OneRequestConnection
from leastload_testkit.waits import wait_until_async
from servers import run_loop

BODY = 8 * 1024 * 1024  # far more than the socket buffers hold: most of it arrives after the answer


def upload(address, head, body_size=BODY, timeout=20.0):
    """Sends head and body_size bytes of body, then half-closes and reads to the end. Every
    byte must go out: without a lingering close the proxy's reset breaks the upload."""
    with socket.create_connection(address, timeout=timeout) as s:
        s.sendall(head)
        piece = b"x" * 65536
        left = body_size
        while left > 0:
            s.sendall(piece[:left])
            left -= len(piece)
        s.shutdown(socket.SHUT_WR)
        return read_to_end(s, timeout)


def read_to_end(s, timeout):
    data = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        chunk = s.recv(65536)
        if not chunk:
            return bytes(data)
        data += chunk
    raise AssertionError(f"no end of stream within {timeout} s; got {bytes(data[:200])!r}")


def too_large(size=BODY):
    return b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size


async def started_proxy(ports, **settings):
    proxy = Proxy([f"b{i}=127.0.0.1:{p}" for i, p in enumerate(ports)], listen=("127.0.0.1", 0),
                  health_check="none", **settings)
    await proxy.start()
    return proxy


def test_a_413_reaches_a_client_that_goes_on_sending_its_body(backend_procs):
    procs = backend_procs(1)

    async def scenario():
        proxy = await started_proxy([procs[0].port], max_body=1000, linger_bytes=2 * BODY)  # within the bound
        try:
            answer = await asyncio.to_thread(upload, proxy.address, too_large())
            closed = await wait_until_async(lambda: not proxy.clients, 5)
            return answer, closed, proxy.stats.answered_by_proxy[413]
        finally:
            await proxy.close()
    answer, closed, counted = run_loop(scenario(), 60)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"Connection: close\r\n" in answer
    assert closed, "the connection stayed open after the client closed its side"
    assert counted == 1


def test_an_answer_with_close_survives_requests_pipelined_behind_it(backend_procs):
    procs = backend_procs(1)
    first = b"GET /first HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    behind = b"GET /second HTTP/1.1\r\nHost: x\r\n\r\n" * 20000  # about 700 KB the proxy never serves

    def exchange(address):
        with socket.create_connection(address, timeout=20) as s:
            s.sendall(first + behind)
            s.shutdown(socket.SHUT_WR)
            return read_to_end(s, 20)

    async def scenario():
        proxy = await started_proxy([procs[0].port])
        try:
            return await asyncio.to_thread(exchange, proxy.address)
        finally:
            await proxy.close()
    answer = run_loop(scenario(), 60)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert answer.count(b"HTTP/1.1 ") == 1, "a request behind the close was served"


def test_a_client_that_never_closes_is_cut_off_after_the_linger(backend_procs, monkeypatch):
    monkeypatch.setattr(_linger, "LINGER_SECONDS", 0.5)
    procs = backend_procs(1)

    async def scenario():
        proxy = await started_proxy([procs[0].port], max_body=1000, header_timeout=1.0, body_timeout=1.0,
                                    client_timeout=1.0)  # the sweep looks every 0.1 s
        reader, writer = await asyncio.open_connection(*proxy.address)
        try:
            writer.write(too_large(10_000))
            answer = await asyncio.wait_for(reader.read(), 10)  # the answer, then the proxy's FIN
            started = time.monotonic()
            held = len(proxy.clients)
            while proxy.clients and time.monotonic() - started < 10:  # it goes on sending, never closes
                writer.write(b"x" * 1000)
                await asyncio.sleep(0.01)
            cut_after = time.monotonic() - started if not proxy.clients else None
            return answer, held, cut_after
        finally:
            writer.close()
            await proxy.close()
    answer, held, cut_after = run_loop(scenario(), 60)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert held == 1, "the connection closed at once instead of lingering"
    assert cut_after is not None, "the lingering connection was never cut off"
    assert cut_after >= 0.3  # not before the linger (less the time the answer took to read)


def test_the_admin_port_answers_413_to_a_client_that_goes_on_sending(backend_procs, monkeypatch):
    monkeypatch.setattr(_linger, "LINGER_BYTES", 2 * BODY)  # the body within the bound
    procs = backend_procs(1)

    async def scenario():
        proxy = await started_proxy([procs[0].port], admin=("127.0.0.1", 0))
        try:
            head = b"POST /leastload/command HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % BODY
            return await asyncio.to_thread(upload, proxy.admin_address, head)
        finally:
            await proxy.close()
    answer = run_loop(scenario(), 60)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert _admin.ADMIN_LIMITS.max_body < BODY


def test_the_fanout_answers_413_to_a_client_that_goes_on_sending(monkeypatch):
    monkeypatch.setattr(_linger, "LINGER_BYTES", 2 * BODY)  # the body within the bound
    with start_fanout("127.0.0.1", 0, lambda: [], None) as fanout:
        head = b"POST /leastload/command HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % BODY
        answer = upload(fanout.address, head)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


@pytest.mark.parametrize("where", ["admin", "fanout"])
def test_a_one_request_port_closes_once_the_client_has_its_answer(backend_procs, where):
    """The ordinary case: a GET, its answer, the client closes, and the connection is gone. Twice as
    many GETs in a row as the port keeps connections open: one that lingered on would refuse the last."""
    def gets(address):
        answers = []
        for _ in range(2 * _admin.MAX_ADMIN_CONNECTIONS):
            with socket.create_connection(address, timeout=10) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                answers.append(read_to_end(s, 10))
        return answers

    if where == "fanout":
        with start_fanout("127.0.0.1", 0, lambda: [], None) as fanout:
            answers = gets(fanout.address)
    else:
        procs = backend_procs(1)

        async def scenario():
            proxy = await started_proxy([procs[0].port], admin=("127.0.0.1", 0))
            try:
                return await asyncio.to_thread(gets, proxy.admin_address)
            finally:
                await proxy.close()
        answers = run_loop(scenario(), 60)
    assert all(a.startswith((b"HTTP/1.1 200 ", b"HTTP/1.1 503 ")) for a in answers), [a[:40] for a in answers]


def send_past_the_bound(address, head, limit=64 << 20, timeout=20.0):
    """Sends head, then bytes until the connection breaks (at most `limit`); (what came back, bytes
    sent after head, whether it ended with a reset)."""
    with socket.create_connection(address, timeout=timeout) as s:
        s.sendall(head)
        sent, piece = 0, b"x" * 65536
        try:
            while sent < limit:
                s.sendall(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = bytearray()
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return bytes(data), sent, False
                data += chunk
        except ConnectionResetError:
            return bytes(data), sent, True


@pytest.mark.parametrize("what", ["413", "431", "414"])
def test_a_client_sending_past_the_byte_bound_is_reset(backend_procs, what):
    """After the answer, linger_bytes (a quarter of it after 414 or 431) are read and dropped;
    past them the connection is reset, long before the time bound, and counted."""
    procs = backend_procs(1)
    heads = {"413": too_large(1 << 40), "431": b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 40000,
             "414": b"GET /" + b"a" * 10000}

    async def scenario():
        proxy = await started_proxy([procs[0].port], linger_bytes=200_000, max_body=100_000)
        try:
            started = time.monotonic()
            answer, sent, _ = await asyncio.to_thread(send_past_the_bound, proxy.address, heads[what])
            took = time.monotonic() - started
            gone = await wait_until_async(lambda: not proxy.clients, 5)
            return answer, sent, took, gone, proxy.stats.linger_resets
        finally:
            await proxy.close()
    answer, sent, took, gone, resets = run_loop(scenario(), 60)
    assert sent < 64 << 20, "the client sent 64 MiB without being cut off"
    assert took < _linger.LINGER_SECONDS, f"cut off after {took:.1f} s: by the time bound, not the byte bound"
    assert gone and resets == 1, (gone, resets)
    # (the answer itself may be lost to the reset, as HAProxy's is: the client went on sending)
    assert not answer or answer.startswith(b"HTTP/1.1 %s " % what.encode()), answer[:100]


def test_the_byte_bounds():
    assert _linger.LINGER_BYTES == 256 << 10
    assert _linger.byte_bound(413, 1000) == 1000 and _linger.byte_bound(400, 1000) == 1000
    assert _linger.byte_bound(414, 1000) == 250 and _linger.byte_bound(431, 1000) == 250
    # after a 413, the declared body too (an upload client sends it whole), up to 4 x max_body
    assert _linger.byte_bound(413, 1000, 5000, 2000) == 6000
    assert _linger.byte_bound(413, 1000, 1 << 60, 2000) == 9000
    assert _linger.byte_bound(414, 1000, 5000, 2000) == 250


def test_a_408_closes_at_once(backend_procs):
    """A client too slow for its head is not waited for: its descriptor is freed with the answer."""
    procs = backend_procs(1)

    async def scenario():
        proxy = await started_proxy([procs[0].port], header_timeout=0.5)
        reader, writer = await asyncio.open_connection(*proxy.address)
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost:")  # and nothing more; the client never closes
            answer = await asyncio.wait_for(reader.read(), 10)
            gone = await wait_until_async(lambda: not proxy.clients, 2.0)  # the linger would be 5 s
            return answer, gone
        finally:
            writer.close()
            await proxy.close()
    answer, gone = run_loop(scenario(), 60)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert gone, "the connection lingered after a 408"


class _Large(OneRequestConnection):
    """Answers every request with LARGE bytes: more than the socket buffers hold."""

    def connection_made(self, transport):
        super().connection_made(transport)
        # a small kernel buffer: the answer waits in the transport, where the linger can see it
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)

    def serve(self, head, body):
        self.answer(200, b"application/octet-stream", b"y" * LARGE)


LARGE = 16 * 1024 * 1024


def test_a_large_last_answer_is_read_whole_by_a_slow_reader_and_cut_off_when_reading_stops(monkeypatch):
    """The linger counts from each time the answer's backlog drains: a client reading on gets all
    of it, however much longer than LINGER_SECONDS that takes; one that stops reading is cut off."""
    monkeypatch.setattr(_linger, "LINGER_SECONDS", 0.3)

    def fetch(address, stop_after):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # the answer backs up in the server
        s.settimeout(20)
        with s:
            s.connect(address)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            got = 0
            started = time.monotonic()
            try:
                while True:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    got += len(chunk)
                    if stop_after is not None and got >= stop_after:
                        time.sleep(2.0)  # stops reading for longer than the linger
                        stop_after = None
                    else:
                        time.sleep(0.006)  # a slow reader: the whole answer takes about a second
            except ConnectionResetError:
                pass
            return got, time.monotonic() - started

    async def scenario():
        open_set = set()
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Large(_admin.ADMIN_LIMITS, open_set, 4, 10.0), "127.0.0.1", 0)
        try:
            address = server.sockets[0].getsockname()[:2]
            return (await asyncio.to_thread(fetch, address, None),
                    await asyncio.to_thread(fetch, address, 1 << 20))
        finally:
            server.close()
    (whole, took), (cut, _) = run_loop(scenario(), 120)
    assert whole > LARGE, "a slow reader lost part of the answer"
    assert took > 0.6, "the answer came faster than twice the linger: this test shows nothing"
    assert cut < LARGE, "a client that stopped reading was not cut off"
