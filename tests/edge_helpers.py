"""What the end-to-end tests of the proxy's edge share (tests/proxy/test_proxy_tls.py,
tests/proxy/test_proxy_accept_proxy.py): `leastload proxy ARGS` as a process on either
per-request path, and backends that answer with their name and what they were sent."""

import http.server
import os
import signal
import subprocess
import sys
import threading

from leastload_testkit.waits import first_line


class ProxyProcess:
    """`python -m leastload proxy ARGS` (LEASTLOAD_IMPLEMENTATION=`implementation`); stderr to a file."""

    def __init__(self, tmp_path, args, implementation="c"):
        if implementation == "python" and "--workers" in args and args[args.index("--workers") + 1] != "1":
            args = [*args, "--private-engines"]  # the pure-Python engine shares no vserver between processes
        self.err_path = tmp_path / f"proxy-{os.getpid()}-{id(self)}.err"
        with open(self.err_path, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "leastload", "proxy", *args],
                                         stdout=subprocess.PIPE, stderr=err, text=True,
                                         env=dict(os.environ, LEASTLOAD_IMPLEMENTATION=implementation))
        line = first_line(self.proc.stdout, 60)
        if not line.startswith("listening on 127.0.0.1:"):
            self.stop()
            raise AssertionError(f"proxy did not start: {line!r} {self.err()!r}")
        self.port = int(line.rsplit(":", 1)[1])

    def err(self):
        return self.err_path.read_text()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        return self.proc.returncode


class _Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = f"{self.server.name} {self.headers.get('X-Forwarded-For', '-')} " \
               f"{self.headers.get('X-Forwarded-Proto', '-')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class EchoBackend:
    """A backend in a thread of the test: answers every GET with `NAME XFF PROTO` (X-Forwarded-For
    and X-Forwarded-Proto as it got them)."""

    def __init__(self, name):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
        self.server.daemon_threads = True
        self.server.name = name
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def admin_ports(n):
    """A port p with p .. p + n - 1 free a moment ago (a supervisor's admin port and its workers'),
    below the ephemeral range so the test's own many client connections do not take them; bound
    with SO_REUSEADDR as the admin ports are (a port in TIME_WAIT is free for them)."""
    import random
    import socket
    for _ in range(200):
        port = random.randrange(20000, 30000)
        socks = []
        try:
            for k in range(n):
                s = socket.socket()
                socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port + k))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {n} adjacent free ports found")
