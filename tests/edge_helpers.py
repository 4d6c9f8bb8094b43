"""What the end-to-end tests of the proxy's edge share (tests/proxy/test_proxy_tls.py,
tests/proxy/test_proxy_accept_proxy.py): backends that answer with their name and what
they were sent, HAProxy sending the PROXY header, and the admin port's metrics. The proxy
itself is started by leastload_testkit.proxy_process."""

import http.server
import shutil
import socket
import subprocess
import threading
import time
import urllib.request


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


HAPROXY = shutil.which("haproxy")

# HAProxy in TCP mode sending the PROXY header: frontend v2 with send-proxy-v2, v1 with send-proxy,
# both to 127.0.0.1:{server}; a test appends frontends and backends of its own
HAPROXY_SENDERS = """\
defaults
    mode tcp
    timeout connect 5s
    timeout client 20s
    timeout server 20s

frontend v2
    bind 127.0.0.1:{v2}
    default_backend v2
backend v2
    server s 127.0.0.1:{server} send-proxy-v2

frontend v1
    bind 127.0.0.1:{v1}
    default_backend v1
backend v1
    server s 127.0.0.1:{server} send-proxy
"""


def start_haproxy(tmp_path, config_text, ready_port):
    """HAProxy on `config_text` (checked with -c first), returned once `ready_port` accepts."""
    config = tmp_path / "haproxy.cfg"
    config.write_text(config_text)
    check = subprocess.run([HAPROXY, "-c", "-f", str(config)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    with open(tmp_path / "haproxy.err", "w") as err:
        proc = subprocess.Popen([HAPROXY, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 20
    while True:  # until its frontends accept
        try:
            socket.create_connection(("127.0.0.1", ready_port), timeout=1).close()
            return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"haproxy did not start: {(tmp_path / 'haproxy.err').read_text()}")
            time.sleep(0.05)


def metrics(port):
    """The admin port's /metrics text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def sample(text, name, **labels):
    """The value of the first sample of `name` whose labels include `labels`; fails naming them."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(name + "{") and want in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in:\n{text}")
