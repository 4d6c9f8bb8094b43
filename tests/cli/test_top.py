"""`leastload top`: its figures from two readings of /metrics (top_model.py), its tables, and the
live view itself in a real terminal (tmux: new-session, send-keys, capture-pane) against a real
`leastload proxy --workers 2` in front of real backends."""

import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

pytest.importorskip("rich", reason="leastload top needs rich (the top extra)")

from rich.console import Console  # noqa: E402

from leastload.cli import top  # noqa: E402
from leastload.cli.top_model import ExpositionError, Snapshot, rate, read_samples, views, workers_line  # noqa: E402
from leastload_testkit.backends import start_backend  # noqa: E402
from leastload_testkit.ports import free_ports  # noqa: E402
from leastload_testkit.proxy_process import ProxyProcess  # noqa: E402

# one vserver, two services, as one process's /metrics gives them (a few families)
ONE = """\
# HELP leastload_service_requests_total Requests sent to the service.
# TYPE leastload_service_requests_total counter
leastload_service_requests_total{{vserver="web",service="a"}} {a}
leastload_service_requests_total{{vserver="web",service="b"}} {b}
leastload_service_active_transactions{{vserver="web",service="a"}} 3
leastload_service_active_transactions{{vserver="web",service="b"}} 0
leastload_service_state{{vserver="web",service="a",state="UP"}} 1
leastload_service_state{{vserver="web",service="a",state="DOWN"}} 0
leastload_service_state{{vserver="web",service="b",state="UP"}} 0
leastload_service_state{{vserver="web",service="b",state="DOWN"}} 1
leastload_service_weight{{vserver="web",service="a"}} 1
leastload_service_weight{{vserver="web",service="b"}} 4
leastload_service_load{{vserver="web",service="a"}} 3
leastload_service_load{{vserver="web",service="b"}} 0
leastload_service_ttfb_average_seconds{{vserver="web",service="a"}} 0.0025
leastload_service_slow_start_cap{{vserver="web",service="b"}} 10
leastload_service_slow_start_held{{vserver="web",service="b"}} 1
leastload_service_ejections_total{{vserver="web",service="a"}} 0
leastload_service_ejections_total{{vserver="web",service="b"}} 2
leastload_service_ejected{{vserver="web",service="a"}} 0
leastload_service_ejected{{vserver="web",service="b"}} 1
leastload_service_draining{{vserver="web",service="a"}} 0
leastload_service_draining{{vserver="web",service="b"}} 0
leastload_vserver_info{{vserver="web",method="LEASTCONNECTION"}} 1
leastload_vserver_picks_total{{vserver="web"}} {picks}
leastload_vserver_clients{{vserver="web"}} 7
"""


def snapshot(when, a, b, text=ONE):
    return Snapshot(text.format(a=a, b=b, picks=a + b), when)


def test_the_rate_is_the_counters_increase_a_second_and_none_when_it_cannot_be_told():
    assert rate(100, 250, 2.0) == 75.0
    assert rate(100, 100, 1.0) == 0.0
    assert rate(None, 5, 1.0) is None and rate(5, None, 1.0) is None
    assert rate(5, 6, 0.0) is None  # the first reading: no time between
    assert rate(500, 20, 1.0) is None  # went down: restarted, or a worker missed the scrape


def test_views_give_each_service_its_figures_and_requests_a_second():
    (view,) = views(snapshot(10.0, 100, 50), snapshot(12.0, 300, 51))
    assert (view.name, view.method, view.clients, view.requests_per_second) == ("web", "LEASTCONNECTION", "7", 100.5)
    a, b = view.rows
    assert a == ("a", "UP", "1", "3", 100.0, "3", "2.5ms", "-", "0")
    assert b == ("b", "DOWN, ejected", "4", "0", 0.5, "0", "-", "held 10/s", "2 (ejected)")
    (first,) = views(None, snapshot(10.0, 100, 50))  # the first reading: no rates yet
    assert [r.requests_per_second for r in first.rows] == [None, None] and first.requests_per_second is None
    assert views(None, snapshot(10.0, 1, 1), vserver="other") == []


PRIVATE = """\
leastload_service_requests_total{vserver="web",service="a"} 40
leastload_service_state{vserver="web",service="a",state="UP",worker="0"} 1
leastload_service_state{vserver="web",service="a",state="DOWN",worker="0"} 0
leastload_service_state{vserver="web",service="a",state="UP",worker="1"} 0
leastload_service_state{vserver="web",service="a",state="DOWN",worker="1"} 1
leastload_service_weight{vserver="web",service="a",worker="1"} 2
leastload_service_weight{vserver="web",service="a",worker="0"} 2
leastload_service_load{vserver="web",service="a",worker="1"} 5
leastload_service_load{vserver="web",service="a",worker="0"} 1
leastload_service_slow_start_cap{vserver="web",service="a",worker="0"} 10
leastload_service_slow_start_cap{vserver="web",service="a",worker="1"} 20
leastload_vserver_info{vserver="web",method="ROUNDROBIN",worker="0"} 1
leastload_vserver_info{vserver="web",method="ROUNDROBIN",worker="1"} 1
leastload_fanout_workers 2
leastload_fanout_workers_scraped 1
"""


def test_per_worker_series_show_once_when_equal_and_each_workers_in_order_when_not():
    now = Snapshot(PRIVATE, 1.0)
    (view,) = views(None, now)
    (row,) = view.rows
    assert view.method == "ROUNDROBIN"
    assert row.state == "UP/DOWN" and row.weight == "2"
    assert row.load == "1/5"  # worker 0's, then worker 1's, whatever the order of the lines
    assert row.slow_start == "ramp 10/20/s"
    assert workers_line(now) == "1 of 2 workers answered"
    assert workers_line(snapshot(1.0, 1, 1)) is None  # one process: no supervisor's line


def test_each_vserver_keeps_its_own_services_and_one_can_be_chosen():
    api = ONE.replace('vserver="web"', 'vserver="api"').replace('service="b"', 'service="c"')
    # the second vserver's samples in the same families (a family's HELP and TYPE come once)
    text = ONE + "".join(line + "\n" for line in api.splitlines() if not line.startswith("#"))
    before, now = Snapshot(text.format(a=10, b=20, picks=30), 0.0), Snapshot(text.format(a=14, b=20, picks=34), 2.0)
    web, api = views(before, now)
    assert (web.name, [r.name for r in web.rows]) == ("web", ["a", "b"])
    assert (api.name, [r.name for r in api.rows]) == ("api", ["a", "c"])
    assert [r.requests_per_second for r in api.rows] == [2.0, 0.0] and api.requests_per_second == 2.0
    assert [v.name for v in views(before, now, vserver="api")] == ["api"]


def test_the_reader_takes_escapes_timestamps_and_refuses_what_is_not_the_format():
    samples = read_samples('m{a="x\\"y",b="back\\\\slash\\n"} 2.5 1700000000000\nm 1e3\n# comment\n\n')
    assert samples["m"] == [(frozenset({("a", 'x"y'), ("b", "back\\slash\n")}), 2.5), (frozenset(), 1000.0)]
    for bad in ("m{a=x} 1", "m 1 2 3", "m{a=\"1\"} one", "{a=\"1\"} 1"):
        with pytest.raises(ExpositionError, match="line 1"):
            read_samples(bad)
    with pytest.raises(ExpositionError, match="not a leastload proxy's"):
        Snapshot("up 1\n", 0.0)


EDGE = """\
leastload_vserver_tunnels_total{{vserver="web",worker="0"}} 12
leastload_vserver_tunnels_total{{vserver="web",worker="1"}} 3
leastload_vserver_tunnels_open{{vserver="web",worker="0"}} 2
leastload_vserver_tunnels_open{{vserver="web",worker="1"}} 1
leastload_vserver_tunnel_timeouts_total{{vserver="web",worker="0"}} 1
leastload_vserver_tls_handshakes_total{{vserver="web",worker="0"}} 40
leastload_vserver_tls_handshakes_total{{vserver="web",worker="1"}} 60
leastload_vserver_tls_handshake_failures_total{{vserver="web",worker="0",reason="error"}} 2
leastload_vserver_tls_handshake_failures_total{{vserver="web",worker="1",reason="timeout"}} 1
"""


def test_the_edge_line_sums_the_workers_and_reasons_and_names_only_what_the_vserver_has():
    (view,) = views(None, snapshot(10.0, 1, 1, ONE + EDGE))
    assert view.edge == "tunnels 3 open, 15 opened, 1 timed out  TLS 100 handshakes, 3 failed"
    (plain,) = views(None, snapshot(10.0, 1, 1))  # no tunnel yet, no TLS, no PROXY protocol
    assert plain.edge == ""
    console = Console(record=True, width=160, color_system=None)
    console.print(top.table(view))
    assert "TLS 100 handshakes, 3 failed" in console.export_text()


def test_the_table_shows_every_column_of_every_row():
    console = Console(record=True, width=160, color_system=None)
    for view in views(snapshot(10.0, 100, 50), snapshot(11.0, 130, 50)):
        console.print(top.table(view))
    text = console.export_text()
    assert "lb vserver web  LEASTCONNECTION  30 req/s  7 clients" in text
    for column in top.COLUMNS:
        assert column in text
    lines = {line.split()[1]: line for line in text.splitlines() if line.startswith("│ ")}
    assert [c.strip() for c in lines["a"].split("│")[1:-1]] == ["a", "UP", "1", "3", "30", "3", "2.5ms", "-", "0"]
    assert [c.strip() for c in lines["b"].split("│")[1:-1]] == [
        "b", "DOWN, ejected", "4", "0", "0.0", "0", "-", "held 10/s", "2 (ejected)"]


# ---- the live view in a terminal, against a running proxy with two workers ---------------------

TMUX = shutil.which("tmux")


class Tmux:
    """A tmux server of the test's own (its own socket name), one session running bash."""

    def __init__(self, name):
        self.socket = f"leastload-top-{os.getpid()}-{name}"
        self.name = name
        env = dict(os.environ, PS1="$ ", TERM="xterm-256color")
        self.tmux(["new-session", "-d", "-s", name, "-x", "150", "-y", "40", "bash --norc --noprofile"], env=env)
        self.socket_path = self.tmux(["display-message", "-p", "#{socket_path}"]).strip()

    def tmux(self, args, env=None):
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=20,
                              env=env, check=True).stdout

    def send(self, *keys):
        self.tmux(["send-keys", "-t", self.name, *keys])

    def screen(self):
        return self.tmux(["capture-pane", "-p", "-t", self.name])

    def wait_for(self, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"not on the screen within {timeout} s: {what}\n{text}")
            time.sleep(0.2)

    def close(self):
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=20)
        if self.socket_path:
            try:
                os.unlink(self.socket_path)  # tmux may leave its socket file behind
            except FileNotFoundError:
                pass


def load(port, stop, limit=20000):
    """GETs through the proxy until `stop` is set (at most `limit` of them, and 120 s)."""
    deadline = time.monotonic() + 120
    for _ in range(limit):
        if stop.is_set() or time.monotonic() > deadline:
            return
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                r.read()
        except OSError:
            time.sleep(0.05)


def service_line(screen, name):
    for line in screen.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 9 and cells[1] == name:
            return cells[1:-1]
    return None


@pytest.fixture
def proxy_with_two_workers(tmp_path):
    backends = [start_backend(0.001, 200), start_backend(0.001, 200)]
    admin = free_ports(3)  # the supervisor's admin port, then worker 0's and worker 1's
    token = tmp_path / "token"
    token.write_text("secret-of-the-test\n")
    proxy = None
    try:
        proxy = ProxyProcess(["--listen", "127.0.0.1:0", "--workers", "2", "--health-check", "none",
                              "--admin", f"127.0.0.1:{admin}", "--admin-token-file", str(token),
                              "--backend", f"a={backends[0].address}",
                              "--backend", f"b={backends[1].address}:3"])  # compiled: one shared engine
        proxy.token_file = str(token)
        yield proxy, f"http://127.0.0.1:{admin}"
    finally:
        if proxy is not None:
            proxy.stop()
        for b in backends:
            b.stop()


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux): the live view is not tested")
@pytest.mark.parametrize("quit_key", ["q", "C-c"])
def test_the_live_view_in_a_terminal_shows_both_workers_traffic_and_quits_cleanly(proxy_with_two_workers, quit_key):
    proxy, url = proxy_with_two_workers
    stop = threading.Event()
    loader = threading.Thread(target=load, args=(proxy.port, stop), daemon=True)
    loader.start()
    term = Tmux(f"top-{quit_key.replace('-', '')}")
    try:
        term.send(f"{sys.executable} -m leastload top {url}; echo EX''IT=$?", "Enter")  # typed: no EXIT=

        def busy(screen):  # both services shown, with a rate above zero, and the supervisor's line
            a, b = service_line(screen, "a"), service_line(screen, "b")
            return (a is not None and b is not None and "2 of 2 workers answered" in screen
                    and a[4] not in ("-", "0", "0.0") and b[4] not in ("-", "0", "0.0"))

        screen = term.wait_for(busy, 30, "both services with requests a second, 2 of 2 workers")
        assert "lb vserver leastload  LEASTCONNECTION" in screen
        a, b = service_line(screen, "a"), service_line(screen, "b")
        assert a[1:3] == ["UP", "1"] and b[1:3] == ["UP", "3"]  # state, weight
        assert a[7] == b[7] == "-" and a[8] == b[8] == "0"  # no slow start, no ejection
        assert a[6].endswith("ms") or a[6].endswith("us")  # the engine's TTFB average
        assert "q quits" in screen
        # refreshed: the clock on the status line moves on
        clock = [w for w in screen.split() if w.count(":") == 2 and len(w) == 8]
        term.wait_for(lambda s: clock and clock[0] not in s, 10, "a later refresh")
        # a change made meanwhile shows at the next refresh: b disabled through the runtime API
        ctl = subprocess.run([sys.executable, "-m", "leastload", "ctl", url, "--token-file", proxy.token_file,
                              "disable", "service", "b"], capture_output=True, text=True, timeout=60)
        assert ctl.returncode == 0, ctl.stdout + ctl.stderr
        screen = term.wait_for(lambda s: (service_line(s, "b") or [""] * 2)[1] == "OUT_OF_SERVICE", 15,
                               "b OUT_OF_SERVICE")
        assert service_line(screen, "a")[1] == "UP"

        term.send(quit_key)
        screen = term.wait_for(lambda s: "EXIT=" in s, 15, "top to exit")
        assert "EXIT=0" in screen and "Traceback" not in screen
        # the terminal is back as it was: canonical mode and echo on
        term.send("stty -a | tr ' ' '\\n' | grep -x -e -icanon -e icanon -e -echo -e echo | tr '\\n' ' '; "
                  "echo MO''DES", "Enter")
        screen = term.wait_for(lambda s: "MODES" in s, 10, "stty's answer")
        (modes,) = [line for line in screen.splitlines() if line.endswith("MODES")]
        assert modes.split() == ["icanon", "echo", "MODES"], modes
    finally:
        term.close()
        stop.set()
        loader.join(timeout=30)


def test_once_prints_one_table_from_the_supervisor_and_no_answer_is_one_line(proxy_with_two_workers):
    proxy, url = proxy_with_two_workers
    for _ in range(20):
        with urllib.request.urlopen(f"http://127.0.0.1:{proxy.port}/", timeout=5) as r:
            r.read()
    result = subprocess.run([sys.executable, "-m", "leastload", "top", url, "--once", "--interval", "0.2"],
                            capture_output=True, text=True, timeout=60, env=dict(os.environ, COLUMNS="150"))
    assert result.returncode == 0, result.stderr
    assert "2 of 2 workers answered" in result.stdout
    a, b = service_line(result.stdout, "a"), service_line(result.stdout, "b")
    assert a[1] == b[1] == "UP" and (a[2], b[2]) == ("1", "3")
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        requests = sum(v for _, v in read_samples(r.read().decode())["leastload_service_requests_total"])
    assert requests == 20  # the supervisor's sum of both workers' counters
    proxy.stop()
    result = subprocess.run([sys.executable, "-m", "leastload", "top", url], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith(f"leastload top: no answer from {url}: ") and result.stderr.count("\n") == 1
