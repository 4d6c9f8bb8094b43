"""In-process helpers of the end-to-end tests (127.0.0.1 only); the harness they share with
the benchmarks (ports, waits, backend processes) is leastload_testkit.

`run_loop(coro, timeout)` runs a test's event loop, bounded, and fails the test on
any error the loop reports.

`tcp_pair()` connects two sockets over 127.0.0.1 in the test's own process,
and `exchange_over(near, far, size)` passes a small request and a `size`-byte
answer over them (for the TCP_INFO tests).

`RawServer(mode)` is a threaded server in the test's own process, for a backend
that has to behave one way on cue: "echo" answers with the request's head,
"reset" reads a request and resets the connection.
"""

import asyncio
import io
import socket
import struct
import threading

CLEANUP_TIMEOUT = 10.0  # what the tasks left at the end get to finish once cancelled


LOOPS = ["asyncio", "uvloop"]  # the loops the proxy runs on (uvloop where it is installed)


def new_loop(kind="asyncio"):
    """A new event loop of `kind` (LOOPS); the test skips, saying why, without uvloop."""
    if kind == "uvloop":
        import pytest
        return pytest.importorskip("uvloop", reason="uvloop is not installed: asyncio's loop only").new_event_loop()
    return asyncio.new_event_loop()


def run_loop(coro, timeout, loop_kind="asyncio"):
    """Runs an end-to-end test's event loop (of `loop_kind`: new_loop()), bounded by
    `timeout` seconds; any error the loop reports (a
    callback or task that raised) fails the test. The tasks still running at the end
    are cancelled, as asyncio.run() does, but given CLEANUP_TIMEOUT seconds: one that
    ignores its cancellation fails the test, its stack printed, instead of hanging the run."""
    errors = []
    loop = new_loop(loop_kind)
    loop.set_exception_handler(lambda loop, context: errors.append(context))
    asyncio.set_event_loop(loop)
    stuck = []
    try:
        return_value = loop.run_until_complete(asyncio.wait_for(coro, timeout))
    finally:
        try:
            stuck = _cancel_the_rest(loop, errors)
            loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), CLEANUP_TIMEOUT))
            loop.run_until_complete(asyncio.wait_for(loop.shutdown_default_executor(), CLEANUP_TIMEOUT))
        finally:
            asyncio.set_event_loop(None)
            loop.close()
    assert not stuck, "tasks that ignored their cancellation:\n" + "\n".join(stuck)
    assert not errors, errors
    return return_value


def _cancel_the_rest(loop, errors):
    """Cancels the loop's unfinished tasks and waits for them (bounded); returns the
    stacks of those still running. What the others raised goes to `errors`."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if not tasks:
        return []
    for task in tasks:
        task.cancel()
    done, pending = loop.run_until_complete(asyncio.wait(tasks, timeout=CLEANUP_TIMEOUT))
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            errors.append({"message": "a task raised while it was cancelled at the end",
                           "exception": task.exception(), "task": task})
    stacks = []
    for task in pending:
        out = io.StringIO()
        task.print_stack(file=out)
        stacks.append(out.getvalue())
    return stacks


class RawServer:
    """A threaded one-purpose HTTP/1.1 server: "echo" answers 200 with the request
    head as its body; "reset" reads a request and resets the connection."""

    def __init__(self, mode):
        self.mode = mode
        self.requests = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def _serve(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # timeout: look at the flag again
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        with conn:
            conn.settimeout(5)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    piece = conn.recv(65536)
                    if not piece:
                        return
                    data += piece
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(body) < length:
                    body += conn.recv(65536)
            except OSError:
                return
            self.requests += 1
            if self.mode == "reset":  # linger 0: close() sends RST
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                         % (len(head), head))

    def stop(self):
        self.stopped.set()
        self.thread.join(timeout=5)
        self.sock.close()


def tcp_pair():
    """(near, far): the two ends of a TCP connection on 127.0.0.1, blocking with a 5 s
    timeout. The caller closes them."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        near = socket.create_connection(server.getsockname(), timeout=5)
        far, _ = server.accept()
    far.settimeout(5)
    return near, far


def exchange_over(near, far, size):
    """A 10-byte request from `near`, read by `far`; `size` bytes back, all read by `near`."""
    near.sendall(b"q" * 10)
    assert far.recv(10) == b"q" * 10
    far.sendall(b"r" * size)
    got = 0
    while got < size:
        got += len(near.recv(65536))
