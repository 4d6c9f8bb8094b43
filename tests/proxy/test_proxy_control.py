"""The runtime API: its commands (Control), the admin port's token, and `leastload ctl`.

Real backend processes and real sockets on 127.0.0.1 for what goes over
the network; every wait bounded.
"""

import asyncio
import collections
import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import httpx
import pytest

from leastload.proxy import Proxy
from leastload.proxy._control import Control
from leastload_testkit.backends import start_backend
from servers import run_loop


def proxies(**more):
    web = Proxy(["a=127.0.0.1:1", "b=127.0.0.1:2"], "ROUNDROBIN", listen=("127.0.0.1", 0), health_check="none", name="web",
                **more)
    api = Proxy(["b=127.0.0.1:2", "c=127.0.0.1:3:2"], listen=("127.0.0.1", 0), health_check="none", name="api",
                **more)
    return {"web": web, "api": api}


def test_disable_and_enable_a_service_in_every_vserver_that_binds_it():
    site = proxies()
    control = Control(site)
    status, answer = control.run(["disable", "service", "b"])
    assert status == 200 and answer["ok"] and answer["vservers"] == ["web", "api"] and answer["delay"] == 0
    assert site["web"].vserver.state("b") == site["api"].vserver.state("b") == "OUT_OF_SERVICE"
    assert {site["web"].vserver.select() for _ in range(10)} == {"a"}  # no new picks of b, at once
    status, answer = control.run(["enable", "service", "b"])
    assert status == 200 and site["web"].vserver.state("b") == "UP"
    assert {site["web"].vserver.select() for _ in range(10)} == {"a", "b"}
    assert control.run(["disable", "service", "b", "30"])[1]["delay"] == 30


def test_weights_binds_and_drains():
    site = proxies(new_service_request=5)
    control = Control(site)
    assert control.run(["set", "service", "b", "-weight", "7"])[0] == 200
    assert site["web"].vserver.weight("b") == site["api"].vserver.weight("b") == 7
    assert control.run(["add", "service", "d", "127.0.0.1", "HTTP", "4"])[0] == 200
    status, answer = control.run(["bind", "lb", "vserver", "web", "d", "-weight", "3"])
    assert status == 200 and answer["slow_start"] is True  # a new service under the vserver's slow start
    assert site["web"].vserver.weight("d") == 3 and site["web"].vserver.slow_start("d") is not None
    assert control.run(["bind", "lb", "vserver", "api", "a"])[0] == 200  # a service another vserver has
    assert site["api"].vserver.services == ("b", "c", "a")
    assert control.run(["unbind", "lb", "vserver", "web", "d"])[0] == 200
    assert "d" not in site["web"].vserver  # nothing in flight: unbound at once
    assert control.run(["drain", "service", "a"])[1]["vservers"] == ["web", "api"]
    assert "a" not in site["web"].vserver and "a" not in site["api"].vserver


def test_show_and_stat():
    site = proxies()
    control = Control(site)
    status, answer = control.run(["show", "lb", "vserver", "api"])
    assert status == 200 and list(answer["vservers"]) == ["api"]
    assert [s["name"] for s in answer["vservers"]["api"]["services"]] == ["b", "c"]
    assert set(control.run(["show", "lb", "vserver"])[1]["vservers"]) == {"web", "api"}
    assert Control.is_read(["show", "lb", "vserver"]) and not Control.is_read(["disable", "service", "a"])


@pytest.mark.parametrize("words, status, says", [
    (["disable", "service", "nosuch"], 404, "service 'nosuch' is not bound to any lb vserver"),
    (["disable", "service", "b", "soon"], 400, "DELAY must be whole seconds in 0..86400, got 'soon'"),
    (["set", "service", "b", "-weight", "101"], 400, "weight must be a whole number in 1..100, got '101'"),
    (["set", "service", "b", "-weight"], 400, "usage: set service NAME -weight W"),
    (["bind", "lb", "vserver", "nosuch", "a"], 404, "no lb vserver 'nosuch' (there are: web, api)"),
    (["bind", "lb", "vserver", "web", "zz"], 404, "no service 'zz': add service zz IP HTTP PORT first"),
    (["bind", "lb", "vserver", "web", "a"], 400, "service 'a' is bound to 'web' already"),
    (["add", "service", "a", "127.0.0.1", "HTTP", "9"], 400, "service 'a' exists already"),
    (["add", "service", "e", "127.0.0.1", "TCP", "9"], 400, "the proxy forwards HTTP, got 'TCP'"),
    (["add", "service", "e", "127.0.0.1", "HTTP", "99999"], 400, "port must be in 1..65535"),
    (["unbind", "lb", "vserver", "web", "c"], 404, "service 'c' is not bound to lb vserver 'web'"),
    (["reboot"], 400, "unknown command 'reboot'"),
])
def test_a_wrong_command_says_what_and_changes_nothing(words, status, says):
    site = proxies()
    before = {name: (p.vserver.services, [p.vserver.weight(s) for s in p.vserver.services],
                     [p.vserver.state(s) for s in p.vserver.services]) for name, p in site.items()}
    got, answer = Control(site).run(words)
    assert got == status and answer["ok"] is False and says in answer["error"]
    after = {name: (p.vserver.services, [p.vserver.weight(s) for s in p.vserver.services],
                    [p.vserver.state(s) for s in p.vserver.services]) for name, p in site.items()}
    assert after == before


# ---- over the admin port: the token, and leastload ctl ----------------------------------------

def post(port, path, body, token=None):
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def ctl(port, *words, token_file=None, env_token=None):
    env = {k: v for k, v in os.environ.items() if k != "LEASTLOAD_ADMIN_TOKEN"}
    if env_token is not None:
        env["LEASTLOAD_ADMIN_TOKEN"] = env_token
    extra = ["--token-file", str(token_file)] if token_file is not None else []
    return subprocess.run([sys.executable, "-m", "leastload", "ctl", f"http://127.0.0.1:{port}", *extra, *words],
                          capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture
def two_backends():
    procs = [start_backend(), start_backend()]
    yield procs
    for p in procs:
        p.stop()


def test_writes_need_the_token_and_ctl_disables_and_enables(two_backends, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")

    async def go():
        proxy = Proxy([f"b1=127.0.0.1:{two_backends[0].port}", f"b2=127.0.0.1:{two_backends[1].port}"],
                      "ROUNDROBIN", listen=("127.0.0.1", 0), health_check="none", admin=("127.0.0.1", 0),
                      admin_token="s3cret-token")
        await proxy.start()
        loop = asyncio.get_running_loop()
        try:
            admin_port = proxy.admin_address[1]
            url = f"http://127.0.0.1:{proxy.address[1]}/"
            async with httpx.AsyncClient(timeout=20) as client:
                async def picks(n):
                    before = [p.stats()["requests"] for p in two_backends]
                    for _ in range(n):
                        assert (await client.get(url)).status_code == 200
                    return [p.stats()["requests"] - b for p, b in zip(two_backends, before)]
                assert await picks(10) == [5, 5]
                # without the token, or with a wrong one: 401, nothing changes
                for token in (None, "wrong"):
                    status, answer = await loop.run_in_executor(
                        None, post, admin_port, "/leastload/command", {"command": ["disable", "service", "b1"]}, token)
                    assert status == 401 and answer["ok"] is False and "token" in answer["error"]
                assert proxy.vserver.state("b1") == "UP"
                wrong = await loop.run_in_executor(None, lambda: ctl(admin_port, "disable", "service", "b1",
                                                                     env_token="wrong"))
                assert wrong.returncode == 1 and "401" in wrong.stderr
                # reads need no token
                status, answer = await loop.run_in_executor(
                    None, post, admin_port, "/leastload/command", {"command": ["show", "lb", "vserver"]})
                assert status == 200 and answer["vservers"]["leastload"]["method"] == "ROUNDROBIN"
                # leastload ctl with the token file: b1 gets no new request at once
                out = await loop.run_in_executor(None, lambda: ctl(admin_port, "disable", "service", "b1",
                                                                   token_file=token_file))
                assert out.returncode == 0, out.stderr
                assert json.loads(out.stdout)["done"] == "b1 OUT_OF_SERVICE"
                assert await picks(10) == [0, 10]
                out = await loop.run_in_executor(None, lambda: ctl(admin_port, "enable", "service", "b1",
                                                                   env_token="s3cret-token"))
                assert out.returncode == 0, out.stderr
                assert await picks(10) == [5, 5]
                # a wrong command: exit 1 and the proxy's reason; nothing to reload without --config
                out = await loop.run_in_executor(None, lambda: ctl(admin_port, "set", "service", "b1", "-weight",
                                                                   "0", token_file=token_file))
                assert out.returncode == 1 and "weight must be a whole number in 1..100" in out.stdout
                out = await loop.run_in_executor(None, lambda: ctl(admin_port, "reload", token_file=token_file))
                assert out.returncode == 1 and "started without --config" in out.stdout
                status, answer = await loop.run_in_executor(
                    None, post, admin_port, "/leastload/command", {"command": "disable service b1"}, "s3cret-token")
                assert status == 400 and "the body must be JSON" in answer["error"]
        finally:
            await proxy.close(grace=0)
    run_loop(go(), 120)


def test_an_admin_port_without_a_token_is_read_only_and_loopback_only(two_backends):
    with pytest.raises(ValueError, match="admin address '0.0.0.0' is not loopback: .* needs an admin token"):
        Proxy(["b1=127.0.0.1:1"], admin=("0.0.0.0", 0))
    Proxy(["b1=127.0.0.1:1"], admin=("0.0.0.0", 0), admin_token="t")  # with a token: allowed
    with pytest.raises(ValueError, match="admin_token must be a non-empty str"):
        Proxy(["b1=127.0.0.1:1"], admin=("127.0.0.1", 0), admin_token=" ")

    async def go():
        proxy = Proxy([f"b1=127.0.0.1:{two_backends[0].port}"], listen=("127.0.0.1", 0), health_check="none",
                      admin=("127.0.0.1", 0))
        await proxy.start()
        try:
            loop = asyncio.get_running_loop()
            status, answer = await loop.run_in_executor(
                None, post, proxy.admin_address[1], "/leastload/command", {"command": ["drain", "service", "b1"]},
                "anything")
            assert status == 401 and proxy.vserver.state("b1") == "UP" and "b1" in proxy.vserver
        finally:
            await proxy.close(grace=0)
    run_loop(go(), 60)


def test_ctl_usage_errors_exit_2(tmp_path):
    out = ctl(1, "disable", "service", "x", token_file=tmp_path / "missing")
    assert out.returncode == 2 and "--token-file" in out.stderr
    out = subprocess.run([sys.executable, "-m", "leastload", "ctl", "http://127.0.0.1:1"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "a command is needed" in out.stderr
    with socket_port() as port:  # nothing listens: no answer
        out = ctl(port, "show", "lb", "vserver")
    assert out.returncode == 2 and "no answer" in out.stderr


class socket_port:
    """A port that refuses connections (bound, never listening), for the duration of a with block."""

    def __enter__(self):
        import socket
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]

    def __exit__(self, *exc):
        self.sock.close()


def test_a_bare_admin_port_is_on_loopback():
    from leastload.proxy import _cli

    parse = _cli._parser().parse_args
    assert parse(["--backend", "a=127.0.0.1:1", "--admin", "9100"]).admin == ("127.0.0.1", 9100)
    assert parse(["--backend", "a=127.0.0.1:1", "--admin", "0.0.0.0:9100"]).admin == ("0.0.0.0", 9100)
    out = subprocess.run([sys.executable, "-m", "leastload", "proxy", "--backend", "a=127.0.0.1:1",
                          "--admin", "0.0.0.0:0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "needs an admin token" in out.stderr and out.stderr.count("\n") == 1


def test_a_command_sent_with_expect_100_continue_gets_its_100_then_its_answer(two_backends):
    """A client that waits for 100 Continue before its body (curl does for larger bodies) is not left
    waiting by the admin port: the 100 comes once the head is in, the answer once the body is."""
    body = json.dumps({"command": ["show", "lb", "vserver"]}).encode()
    head = (b"POST /leastload/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))

    def exchange(port):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(head)
            interim = s.recv(65536)  # nothing of the body is sent before the 100
            s.sendall(body)
            rest = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return interim, rest
                rest += chunk

    async def go():
        proxy = Proxy([f"b1=127.0.0.1:{two_backends[0].port}"], listen=("127.0.0.1", 0), health_check="none",
                      admin=("127.0.0.1", 0))
        await proxy.start()
        try:
            return await asyncio.to_thread(exchange, proxy.admin_address[1])
        finally:
            await proxy.close(grace=0)
    interim, rest = run_loop(go(), 60)
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert rest.startswith(b"HTTP/1.1 200 OK\r\n"), rest[:200]
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["ok"] is True
