"""Debian's nginx with ngx_http_upstream_leastload_module, run by the tests (127.0.0.1 only).

`module_path()` builds the module once per session with nginx/build.sh (or takes
LEASTLOAD_NGINX_MODULE, a .so built before), and says why not when it cannot: the
tests skip with that reason. `Nginx(upstream, workers)` writes a configuration
around an upstream block with leastload_testkit.nginx_conf, the benchmark's writer
too (a location proxies to it and names the pick in an `X-Up` header), starts nginx in the foreground (master and workers), and has
`.get()`, `.reload(upstream)`, `.worker_pids()`, `.log()` and `.stop()`; every
wait is bounded. `attach(name)` is the live shared vserver, from Python.
"""
import http.client
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

from leastload_testkit.nginx_conf import nginx_conf
from leastload_testkit.ports import free_port
from leastload_testkit.waits import wait_until

ROOT = pathlib.Path(__file__).resolve().parents[2]
START_TIMEOUT = 15.0
_BUILT = {}


def module_path():
    """(path of the .so, None) or (None, why it cannot be had)."""
    if "result" in _BUILT:
        return _BUILT["result"]
    given = os.environ.get("LEASTLOAD_NGINX_MODULE")
    if given:
        result = (given, None) if os.path.exists(given) else (None, f"LEASTLOAD_NGINX_MODULE={given} does not exist")
    elif shutil.which("nginx") is None and os.geteuid() != 0:
        result = (None, "nginx is not installed (apt-get install nginx nginx-dev, as root)")
    else:
        out = tempfile.mkdtemp(prefix="leastload-nginx-module-")
        run = subprocess.run(["bash", str(ROOT / "nginx" / "build.sh"), out], capture_output=True, text=True,
                             timeout=900)
        so = os.path.join(out, "ngx_http_upstream_leastload_module.so")
        if run.returncode != 0 or not os.path.exists(so):
            result = (None, "the module did not build: " + (run.stderr.strip().splitlines() or ["?"])[-1])
        else:
            result = (so, None)
    _BUILT["result"] = result
    return result


LOCATION = ("add_header X-Up $upstream_addr always", "proxy_next_upstream error timeout http_502",
            "proxy_connect_timeout 2s", "proxy_read_timeout 10s")


def conf_text(module, workers, directory, port, upstream_name, upstream):
    """The tests' nginx.conf: the pick named in an X-Up header, retries on errors and 502s, and
    the listen socket with reuseport (the kernel spreads connections over the workers)."""
    return nginx_conf(directory, port, upstream_name, upstream, workers=workers, module=module,
                      listen=" reuseport", location=LOCATION)


class Nginx:
    def __init__(self, upstream_name, upstream, workers=1):
        self.module, why = module_path()
        if self.module is None:
            raise RuntimeError(why)
        self.dir = tempfile.mkdtemp(prefix="leastload-nginx-")
        self.port = free_port()
        self.workers = workers
        self.upstream_name = upstream_name
        self.write(upstream)
        env = dict(os.environ)
        if os.environ.get("LEASTLOAD_NGINX_PRELOAD"):  # a sanitizer runtime, for a module built with one
            env["LD_PRELOAD"] = os.environ["LEASTLOAD_NGINX_PRELOAD"]
        self.proc = subprocess.Popen(["nginx", "-p", self.dir, "-c", self.conf, "-e", f"{self.dir}/error.log"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        if not wait_until(self._ready, START_TIMEOUT) or self.proc.poll() is not None:
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            self.stop()
            raise RuntimeError(f"nginx did not start: {err} {self.log()[-2000:]}")

    @property
    def conf(self):
        return os.path.join(self.dir, "nginx.conf")

    def write(self, upstream):
        with open(self.conf, "w") as f:
            f.write(conf_text(self.module, self.workers, self.dir, self.port, self.upstream_name, upstream))

    def _ready(self):
        if self.proc.poll() is not None:
            return True  # exited: the caller sees it
        return len(self.worker_pids()) == self.workers and _accepts(self.port)

    def get(self, path="/", timeout=10.0):
        """(status, X-Up, body) of one request on a new connection."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            return r.status, r.getheader("X-Up"), body
        finally:
            c.close()

    def worker_pids(self):
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                return [int(p) for p in f.read().split()]
        except OSError:
            return []

    def reload(self, upstream, wait_old=True):
        """Writes the new configuration, HUPs the master, and waits until the new workers run
        (and, with wait_old, until the old ones have finished their requests and exited)."""
        old = set(self.worker_pids())
        self.write(upstream)
        self.proc.send_signal(signal.SIGHUP)

        def swapped():
            now = set(self.worker_pids())
            return len(now - old) >= self.workers and not (wait_old and now & old)
        if not wait_until(swapped, START_TIMEOUT):
            raise RuntimeError(f"nginx did not reload: {self.log()[-2000:]}")

    def log(self):
        try:
            return pathlib.Path(self.dir, "error.log").read_text()
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def nginx_t(module, upstream_name, upstream):
    """`nginx -t` of a configuration around this upstream block: (returncode, output)."""
    where = tempfile.mkdtemp(prefix="leastload-nginx-t-")
    try:
        conf = os.path.join(where, "nginx.conf")
        with open(conf, "w") as f:
            f.write(conf_text(module, 1, where, free_port(), upstream_name, upstream))
        run = subprocess.run(["nginx", "-t", "-p", where, "-c", conf, "-e", f"{where}/error.log"],
                             capture_output=True, text=True, timeout=60)
        return run.returncode, run.stdout + run.stderr
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _accepts(port):
    import socket
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def attach(name):
    """The live shared vserver `name` (the settings its maker recorded), from Python; leave it
    with .close_shared()."""
    from leastload.engine import native
    from leastload.engine._engine import Engine

    probe = Engine()
    record = probe._open_shared(name, 1, b"")
    probe._close_shared()
    assert record is not None, f"no shared vserver {name!r}"
    return native.VirtualServer(shared=name, name=name, **json.loads(record))


def unique(prefix):
    """A shared vserver name no other test (or run) has."""
    return f"{prefix}.{os.getpid()}.{time.monotonic_ns() % 10**9}"
