"""`leastload proxy --config FILE`: the vservers of a NetScaler or TOML config, and live reloads.

Real backend processes (tests/servers.py) and real sockets on 127.0.0.1; every
load is a fixed number of requests, every wait bounded.
"""

import asyncio
import collections
import signal
import subprocess
import sys
import time

import httpx
import pytest

from leastload.config import ConfigError
from leastload.proxy._config import DEFAULT_PROBE, plan
from leastload.proxy._gateway import Gateway
from leastload.config import parse
from leastload_testkit.ports import free_port
from leastload_testkit.proxy_process import ProxyProcess
from servers import run_loop


def two_vservers(procs, web_port, api_port, *, web=("s1", "s2", "s3"), slow_start=True, weights=None):
    """Two vservers: web (HTTP monitor, slow start PER_SECOND) over `web`, api over s4 and s5."""
    weights = weights or {}
    lines = [f"add service s{i + 1} 127.0.0.1 HTTP {p.port}" for i, p in enumerate(procs)]
    lines += ['add lb monitor mon-http HTTP -respCode 200 -httpRequest "GET /" -interval 2 -resptimeout 1',
              f"add lb vserver web HTTP 127.0.0.1 {web_port} -lbMethod LEASTCONNECTION",
              f"add lb vserver api HTTP 127.0.0.1 {api_port} -lbMethod ROUNDROBIN"]
    if slow_start:
        lines.append("set lb vserver web -newServiceRequest 5 PER_SECOND -newServiceRequestIncrementInterval 0")
    for name in web:
        weight = f" -weight {weights[name]}" if name in weights else ""
        lines.append(f"bind lb vserver web {name}{weight}")
        lines.append(f"bind service {name} -monitorName mon-http")
    lines += ["bind lb vserver api s4", "bind lb vserver api s5"]
    return "\n".join(lines) + "\n"


# ---- the plan ------------------------------------------------------------------------------

def test_the_plan_of_a_netscaler_config():
    config = parse("\n".join([
        "add server srv1 10.0.0.7",
        "add service a srv1 HTTP 8001",
        "add service b 10.0.0.8 HTTP 8002",
        "add service c 10.0.0.9 HTTP 8003",
        "set service b -weight 3",
        "disable service c",
        'add lb monitor m HTTP -respCode 200-204 -httpRequest "HEAD /health" -interval 2 -resptimeout 1 '
        "-retries 4 -successRetries 2",
        "bind service a -monitorName m",
        "add lb vserver web HTTP 10.0.0.100 80 -lbMethod LEASTRESPONSETIME",
        "set lb vserver web -newServiceRequest 10 PER_SECOND -hashLength 40",
        "bind lb vserver web a -weight 2", "bind lb vserver web b", "bind lb vserver web c",
        "add lb vserver tcpvs TCP 10.0.0.101 81",
        "add lb vserver noaddr HTTP",
    ]), "lb.conf")
    plans, warnings = plan(config)
    assert [p.name for p in plans] == ["web"]
    web = plans[0]
    assert web.listen == ("10.0.0.100", 80) and web.method == "LEASTRESPONSETIME"
    assert web.settings == {"new_service_request": 10, "new_service_request_unit": "PER_SECOND",
                            "new_service_request_increment_interval": 0, "hashlength": 40}
    assert [(b.name, b.host, b.port, b.weight) for b in web.backends] == [
        ("a", "10.0.0.7", 8001, 2), ("b", "10.0.0.8", 8002, 3), ("c", "10.0.0.9", 8003, 1)]
    assert web.disabled == ["c"]
    probe = web.probes["a"]
    assert (probe.kind, probe.method, probe.path, probe.codes) == ("http", "HEAD", "/health", ((200, 204),))
    assert (probe.interval, probe.timeout, probe.fall, probe.rise) == (2.0, 1.0, 4, 2)
    assert web.probes["b"] == DEFAULT_PROBE and DEFAULT_PROBE.kind == "tcp"  # the vendor's default monitor
    assert any("tcpvs is TCP" in w for w in warnings) and any("noaddr has no IP and port" in w for w in warnings)


def test_what_the_proxy_cannot_serve_is_an_error_with_its_line():
    with pytest.raises(ConfigError, match="no HTTP lb vserver with an IP and port"):
        plan(parse("add lb vserver v TCP 10.0.0.1 80\n", "x.conf"))
    two = parse("add lb vserver a HTTP 10.0.0.1 80\nadd lb vserver b HTTP 10.0.0.1 81\n", "x.conf")
    with pytest.raises(ConfigError, match="--listen names one address, but the config has 2"):
        plan(two, ("127.0.0.1", 9000))
    same = parse("add lb vserver a HTTP 10.0.0.1 80\nadd lb vserver b HTTP 10.0.0.1 80\n", "x.conf")
    with pytest.raises(ConfigError, match=r"x.conf:2: lb vserver b listens on 10.0.0.1:80, as lb vserver a does"):
        plan(same)
    with pytest.raises(ConfigError, match=r"x.conf:1: lbMethod STATICPROXIMITY is not supported"):
        plan(parse("add lb vserver a HTTP 10.0.0.1 80 -lbMethod STATICPROXIMITY\n", "x.conf"))


# ---- a gateway in this process: serving, reloading ------------------------------------------------

def test_two_vservers_served_and_a_reload_applied_in_place(backend_procs, tmp_path):
    procs = backend_procs(6)
    web_port, api_port = free_port(), free_port()
    path = tmp_path / "lb.conf"
    path.write_text(two_vservers(procs, web_port, api_port))

    async def go():
        gateway = await Gateway(str(path), settings={"health_check": "http"}).start()
        try:
            async with httpx.AsyncClient(timeout=20) as client:
                for port in (web_port, api_port):
                    for _ in range(10):
                        assert (await client.get(f"http://127.0.0.1:{port}/")).status_code == 200
            web, api = gateway.proxies["web"], gateway.proxies["api"]
            assert web.vserver.services == ("s1", "s2", "s3") and api.vserver.services == ("s4", "s5")
            assert web.monitors["s1"].kind == "http" and web.monitors["s1"].interval == 2.0
            assert api.monitors["s4"].kind == "tcp"  # no monitor bound: the default TCP one
            # the file changes: s6 bound, s2 unbound, s3's weight 4, api round robin -> least connection
            path.write_text(two_vservers(procs, web_port, api_port, web=("s1", "s3", "s6"), weights={"s3": 4})
                            .replace("api HTTP 127.0.0.1 %d -lbMethod ROUNDROBIN" % api_port,
                                     "api HTTP 127.0.0.1 %d -lbMethod LEASTCONNECTION" % api_port))
            changes = gateway.reload()
            assert "web: s2 draining (no longer bound)" in changes
            assert any(c.startswith("web: s6 bound at 127.0.0.1:") and c.endswith("(slow start)") for c in changes)
            assert "web: s3 weight 1 -> 4" in changes and "api: method ROUNDROBIN -> LEASTCONNECTION" in changes
            assert web.vserver.slow_start("s6") is not None  # the new service ramps
            assert web.vserver.weight("s3") == 4 and api.vserver.method == "LEASTCONNECTION"
            assert "s2" not in web.vserver.services and "s2" not in web.monitors  # nothing in flight: unbound
            assert web.monitors["s6"].kind == "http"
            async with httpx.AsyncClient(timeout=20) as client:
                statuses = collections.Counter()
                for _ in range(30):
                    statuses[(await client.get(f"http://127.0.0.1:{web_port}/")).status_code] += 1
            assert statuses == {200: 30}
            # a file with an error is refused whole; what runs stays
            good = path.read_text()
            path.write_text(good + "bind lb vserver web nosuchservice\n")
            with pytest.raises(ConfigError, match="lb.conf:"):
                gateway.reload()
            path.write_text(good.replace(f"127.0.0.1 {web_port}", f"127.0.0.1 {free_port()}"))
            with pytest.raises(ValueError, match="lb vserver web moved from"):
                gateway.reload()
            assert web.vserver.services == ("s1", "s3", "s6") and gateway.reloads == 1
            path.write_text(good)
            assert gateway.reload() == []  # the same file again: nothing to do
        finally:
            await gateway.close(grace=1)
    run_loop(go(), 90)


# ---- the command line -----------------------------------------------------------------------

@pytest.mark.parametrize("workers", [1, 2])
def test_sighup_adds_and_removes_services_under_load_without_losing_a_request(backend_procs, tmp_path, workers):
    procs = backend_procs(6)
    web_port, api_port = free_port(), free_port()
    path = tmp_path / "lb.conf"
    path.write_text(two_vservers(procs, web_port, api_port))
    # (the suite's per-request path: the wheel's stage runs this on the compiled one)
    proxy = ProxyProcess(["--config", str(path), "--workers", str(workers), "--health-check", "http"],
                         implementation=None)
    assert len(proxy.listening_line.split(", ")) == 2, proxy.listening_line  # one line naming both vservers
    try:
        total = 10_000
        outcome = collections.Counter()
        before = {}

        async def load():
            limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
            jobs = iter(range(total))
            async with httpx.AsyncClient(timeout=20, limits=limits) as client:
                async def worker():
                    for i in jobs:
                        port = web_port if i % 4 else api_port
                        try:
                            r = await client.get(f"http://127.0.0.1:{port}/{i}")
                            outcome[r.status_code] += 1
                        except httpx.HTTPError as exc:
                            outcome[type(exc).__name__] += 1
                        if i == total // 3:  # a third of the way: the file changes, SIGHUP
                            before.update({f"s{k + 1}": p.stats()["requests"] for k, p in enumerate(procs)})
                            path.write_text(two_vservers(procs, web_port, api_port, web=("s1", "s3", "s6")))
                            proxy.proc.send_signal(signal.SIGHUP)
                await asyncio.gather(*(worker() for _ in range(16)))
        started = time.monotonic()
        run_loop(load(), 240)
        elapsed = time.monotonic() - started
        after = {f"s{k + 1}": p.stats()["requests"] for k, p in enumerate(procs)}
    finally:
        code, err = proxy.stop(), proxy.err()
    assert outcome == {200: total}, (outcome, err[-2000:])
    assert code == 0 and "Traceback" not in err, err[-2000:]
    assert "reloaded" in err and "s6 bound" in err and "s2 draining" in err
    gained = {name: after[name] - before[name] for name in after}
    assert gained["s6"] > 0  # the added service serves
    # the removed one took at most the requests in flight when the reload came (16 clients)
    assert gained["s2"] <= 16 * workers, gained
    # slow start: s6 is capped at 5 requests a second per worker while it ramps by hand (interval 0)
    assert gained["s6"] <= 5 * workers * (elapsed + 2) + 5, (gained, elapsed)
    assert gained["s1"] > gained["s6"] and gained["s3"] > gained["s6"]


def test_config_errors_and_refused_flags_exit_2(tmp_path):
    bad = tmp_path / "bad.conf"
    bad.write_text("add lb vserver web HTTP 127.0.0.1 0\nbind lb vserver web nosuch\n")
    out = subprocess.run([sys.executable, "-m", "leastload", "proxy", "--config", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and f"{bad}:2:" in out.stderr and "Traceback" not in out.stderr
    good = tmp_path / "good.conf"
    good.write_text("add service a 127.0.0.1 HTTP 9\nadd lb vserver web HTTP 127.0.0.1 0\nbind lb vserver web a\n")
    for extra, says in ((["--backend", "a=127.0.0.1:9"], "--backend and --config"),
                        (["--method", "ROUNDROBIN"], "--method and --config")):
        out = subprocess.run([sys.executable, "-m", "leastload", "proxy", "--config", str(good), *extra],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and says in out.stderr, out.stderr
    out = subprocess.run([sys.executable, "-m", "leastload", "proxy"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--backend" in out.stderr and "--config" in out.stderr


def test_a_service_bound_by_a_reload_ramps_as_the_vendors_automated_slow_start(tmp_path):
    """examples/proxy.conf's slow start (10 PER_SECOND, +10 every 10 s) for a service a reload
    binds: the vendor's automated mode starts its cap at 0 and adds the increment at the end of
    each interval, so it gets nothing for 10 s, then 10 a second, then 20, while its fair share
    (40 of 120 a second) is above its cap (the engine under a manual clock; no sockets: the
    gateway is not started)."""
    from leastload import ManualClock

    clock = ManualClock(1000.0)
    base = ["add service s1 127.0.0.1 HTTP 9001", "add service s2 127.0.0.1 HTTP 9002",
            "add service s3 127.0.0.1 HTTP 9003", "add lb vserver web HTTP 127.0.0.1 8080 -lbMethod ROUNDROBIN",
            "bind lb vserver web s1", "bind lb vserver web s2",
            "set lb vserver web -newServiceRequest 10 PER_SECOND -newServiceRequestIncrementInterval 10"]
    path = tmp_path / "lb.conf"
    path.write_text("\n".join(base) + "\n")
    gateway = Gateway(str(path), settings={"clock": clock, "health_check": "none"})
    vs = gateway.proxies["web"].vserver
    path.write_text("\n".join(base + ["bind lb vserver web s3"]) + "\n")
    assert any(c.startswith("web: s3 bound at") and c.endswith("(slow start)") for c in gateway.reload())

    def one_second(rate):
        """`rate` picks spread over the next second; how many went to s3."""
        got = 0
        for _ in range(rate):
            clock.advance(1.0 / rate)
            got += vs.select() == "s3"
        return got

    assert vs.slow_start("s3")["cap"] == 0
    assert [one_second(120) for _ in range(10)] == [0] * 10  # its first interval: nothing
    # from t = 10 s: the first increment (the engine applies it at the first pick that sees the time)
    assert one_second(120) == 10  # its fair share is 40 a second: the cap holds it at 10
    assert vs.slow_start("s3")["cap"] == 10
    for _ in range(9):
        one_second(120)
    assert one_second(120) == 20  # from t = 20 s: the second increment
    assert vs.slow_start("s3")["cap"] == 20


def test_each_vserver_of_a_config_shows_under_its_own_name(tmp_path):
    """The status page's `show` and `ctl show lb vserver` name the config's vservers, not
    "vserver" (the engine's default name): the proxy gives its engine its own name."""
    from leastload.proxy._control import Control

    path = tmp_path / "lb.conf"
    path.write_text("add service s1 127.0.0.1 HTTP 9001\nadd service s2 127.0.0.1 HTTP 9002\n"
                    "add lb vserver web HTTP 127.0.0.1 8080\nadd lb vserver api HTTP 127.0.0.1 8081\n"
                    "bind lb vserver web s1\nbind lb vserver api s2\n")
    gateway = Gateway(str(path), settings={"health_check": "none"})
    for name, proxy in gateway.proxies.items():
        assert proxy.vserver.show().name == name
        assert name in str(proxy.vserver.show()).splitlines()[0]
    status, answer = Control(gateway.proxies).run(["show", "lb", "vserver"])
    assert status == 200 and {vs: answer["vservers"][vs]["name"] for vs in answer["vservers"]} == {
        "web": "web", "api": "api"}
