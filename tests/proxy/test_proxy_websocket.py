"""WebSocket through `leastload proxy`, end to end: a `websockets` client and a real `websockets`
echo backend (leastload_testkit.ws_backend, a child process), the proxy as a real process with 1
and 2 workers, on both per-request paths (compiled and LEASTLOAD_IMPLEMENTATION=python), plain
and over TLS (wss). Checked: 10,000 messages each way arrive in order and unchanged; while a
tunnel is open its transaction is active (LEASTCONNECTION's active is 1) and its bytes are in
the service's window (LEASTBANDWIDTH's N rises by at least the bytes pushed, read from /metrics
before the tunnel closes); after either side closes the transaction ends (active 0) and the
tunnel is counted."""

import asyncio
import ssl

import pytest

from certs import OPENSSL, make_cert
from edge_helpers import metrics
from leastload_testkit.ports import free_ports
from leastload_testkit.proxy_process import ProxyProcess
from leastload_testkit.waits import wait_until

websockets = pytest.importorskip("websockets", reason="the websockets package (the test extra) is not installed")
from websockets.asyncio.client import connect  # noqa: E402

MESSAGES = 10_000
BATCH = 100  # messages sent before their echoes are read (bounded: at most this many in flight)
PATHS = [(1, "c"), (2, "c"), (1, "python"), (2, "python")]
PATH_IDS = [f"{w}-worker{'s' * (w > 1)}-{'compiled' if i == 'c' else 'python'}" for w, i in PATHS]
TIMEOUT = 60.0  # any one exchange of the tests, at most


@pytest.fixture(scope="module")
def ws_backend():
    from leastload_testkit.ws_backend import WsBackend

    b = WsBackend()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    if OPENSSL is None:
        pytest.skip("the openssl command is not installed: no certificate for the wss test")
    return make_cert(tmp_path_factory.mktemp("ws-certs"), "ws", "ws.test", ["DNS:ws.test"])


def start(tmp_path, port, workers, implementation, *more):
    admin = free_ports(workers + 1 if workers > 1 else 1)
    args = ["--listen", "127.0.0.1:0", "--backend", f"ws=127.0.0.1:{port}", "--health-check", "none",
            "--admin", f"127.0.0.1:{admin}", "--workers", str(workers), *more]
    proxy = ProxyProcess(args, implementation, workdir=str(tmp_path))
    proxy.admin = admin
    return proxy


def sample(text, name, **labels):
    """The value of one series (summed over the workers' series when the fan-out shows each)."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith(name + "{") and all(w in line for w in want)]
    assert values, f"no {name} {labels} in:\n{text}"
    return sum(values)


def client_tls():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # a self-signed test certificate
    return context


async def exchange_messages(uri, ssl_context=None):
    """MESSAGES text and binary messages, BATCH at a time, each echo checked; then a clean close."""
    async with asyncio.timeout(TIMEOUT * 2):
        async with connect(uri, ssl=ssl_context, compression=None, open_timeout=TIMEOUT,
                           server_hostname="ws.test" if ssl_context else None) as ws:
            for start_at in range(0, MESSAGES, BATCH):
                sent = [f"message {i}" if i % 2 else f"binary {i}".encode() * (1 + i % 7)
                        for i in range(start_at, start_at + BATCH)]
                for message in sent:
                    await ws.send(message)
                for message in sent:
                    assert await ws.recv() == message
            return MESSAGES


@pytest.mark.parametrize("tls", [False, True], ids=["ws", "wss"])
@pytest.mark.parametrize("workers,implementation", PATHS, ids=PATH_IDS)
def test_10000_messages_through_the_proxy(tmp_path, ws_backend, cert, workers, implementation, tls):
    more = ["--tls-cert", cert[0], "--tls-key", cert[1]] if tls else []
    log = tmp_path / "access.log"
    proxy = start(tmp_path, ws_backend.port, workers, implementation, "--access-log", str(log), *more)
    try:
        scheme = "wss" if tls else "ws"
        done = asyncio.run(exchange_messages(f"{scheme}://127.0.0.1:{proxy.port}/chat",
                                             client_tls() if tls else None))
        assert done == MESSAGES
        # the transaction ended with the tunnel, as a 1xx answer, never a failure
        wait_until(lambda: sample(metrics(proxy.admin), "leastload_service_active_transactions",
                                  service="ws") == 0, 10)
        text = metrics(proxy.admin)
        assert sample(text, "leastload_vserver_tunnels_total") == 1
        assert sample(text, "leastload_vserver_tunnels_open") == 0
        assert sample(text, "leastload_service_responses_total", service="ws", code="1xx") == 1
        assert sample(text, "leastload_service_failures_total", service="ws") == 0
        # both ways: at least the messages' payloads
        assert sample(text, "leastload_service_request_bytes_total", service="ws") > 100_000
        assert sample(text, "leastload_service_response_bytes_total", service="ws") > 100_000
        # the tunnel's backend connection was never pooled: the one opened, none idle after
        assert sample(text, "leastload_service_connections_opened_total", service="ws") == 1
        assert sample(text, "leastload_service_idle_connections", service="ws") == 0
        # one access-log line, written when the tunnel ended: its 101 and the backend
        wait_until(lambda: log.exists() and " 101 " in log.read_text(), 10)
        lines = log.read_text().splitlines()
        assert len(lines) == 1 and '"GET /chat HTTP/1.1" 101 ' in lines[0] and "ws" in lines[0], lines
    finally:
        proxy.stop()


PUSHED = 64 * 16384  # bytes echoed through an open tunnel before the window is read (each way)


async def push_and_read(uri, read_while_open, close_from_backend):
    """Pushes PUSHED bytes through a tunnel and has them echoed; calls read_while_open() with the
    tunnel still open and returns what it gave and what it gives after the close."""
    async with asyncio.timeout(TIMEOUT):
        ws = await connect(uri, compression=None, open_timeout=TIMEOUT, max_size=1 << 20)
        piece = b"b" * 16384
        for _ in range(PUSHED // len(piece)):
            await ws.send(piece)
            assert await ws.recv() == piece
        during = await asyncio.to_thread(read_while_open)
        if close_from_backend:
            await ws.send("close")  # the backend closes (the echo backend's word for it)
            await ws.wait_closed()
        else:
            await ws.close()
        return during


def test_leastbandwidth_counts_the_tunnels_bytes_while_it_is_open(tmp_path, ws_backend):
    proxy = start(tmp_path, ws_backend.port, 1, "c", "--method", "LEASTBANDWIDTH")
    try:
        before = metrics(proxy.admin)
        window_before = sample(before, "leastload_service_window_bytes", service="ws")

        def while_open():
            text = metrics(proxy.admin)
            return (sample(text, "leastload_service_window_bytes", service="ws"),
                    sample(text, "leastload_service_load", service="ws"),
                    sample(text, "leastload_service_active_transactions", service="ws"))

        window, load, active = asyncio.run(push_and_read(f"ws://127.0.0.1:{proxy.port}/", while_open, False))
        assert window - window_before >= 2 * PUSHED, (window_before, window)
        assert load > 0
        assert active == 1
    finally:
        proxy.stop()


@pytest.mark.parametrize("close_from_backend", [False, True], ids=["client-closes", "backend-closes"])
@pytest.mark.parametrize("workers,implementation", PATHS, ids=PATH_IDS)
def test_the_transaction_is_active_while_the_tunnel_lives(tmp_path, ws_backend, workers, implementation,
                                                         close_from_backend):
    proxy = start(tmp_path, ws_backend.port, workers, implementation, "--method", "LEASTCONNECTION")

    def active():
        return sample(metrics(proxy.admin), "leastload_service_active_transactions", service="ws")

    try:
        during = asyncio.run(push_and_read(f"ws://127.0.0.1:{proxy.port}/", active, close_from_backend))
        assert during == 1
        wait_until(lambda: active() == 0, 10)
        text = metrics(proxy.admin)
        assert sample(text, "leastload_vserver_tunnels_open") == 0
        assert sample(text, "leastload_service_failures_total", service="ws") == 0
    finally:
        proxy.stop()


def test_an_upgrade_the_backend_refuses_is_an_ordinary_answer(tmp_path, ws_backend):
    """The websockets server answers a plain GET (no upgrade asked) 426; asking for an unknown
    upgrade gets its ordinary answer too, and the connection goes on."""
    proxy = start(tmp_path, ws_backend.port, 1, "c")
    try:
        import socket
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: nothing-known\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                assert chunk, data
                data += chunk
            assert data.split(b"\r\n")[0].split(b" ")[1] != b"101", data
    finally:
        proxy.stop()


def test_leastpackets_counts_the_tunnels_segments_while_it_is_open(tmp_path, ws_backend):
    """TCP_INFO is read every 16 chunks of a tunnel: its window's segments rise before the close."""
    proxy = start(tmp_path, ws_backend.port, 1, "c", "--method", "LEASTPACKETS")
    try:
        before = sample(metrics(proxy.admin), "leastload_service_window_packets", service="ws")

        def while_open():
            return sample(metrics(proxy.admin), "leastload_service_window_packets", service="ws")

        during = asyncio.run(push_and_read(f"ws://127.0.0.1:{proxy.port}/", while_open, False))
        # 64 messages each way: 128 chunks at least, 8 readings at least, each a segment or more
        assert during - before >= 8, (before, during)
    finally:
        proxy.stop()
