"""The proxy's access log (`--access-log`, `--log-format`), its log messages, and exit 2 on a port in use.

Real backend processes and real sockets on 127.0.0.1; every load is a fixed
number of requests, every wait bounded.
"""

import asyncio
import datetime
import io
import json
import logging
import re
import socket
import subprocess
import sys

import httpx
import pytest

from leastload.proxy import AccessLog, Proxy
from leastload.proxy._accesslog import _quote
from leastload_testkit.waits import first_line, wait_until
from servers import run_loop

COMBINED = re.compile(
    r'(?P<client>\S+) - - \[(?P<time>\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\] "(?P<request>(?:[^"\\]|\\.)*)" '
    r'(?P<status>\d{3}) (?P<bytes>\d+|-) "(?P<referer>(?:[^"\\]|\\.)*)" "(?P<agent>(?:[^"\\]|\\.)*)" '
    r'(?P<backend>\S+) (?P<ttfb>[\d.]+|-) (?P<total>[\d.]+) (?P<retries>\d+)\Z')


def serve_and_send(procs, log, requests, **settings):
    """Starts a Proxy with `log` over `procs`, sends each (method, path, headers) request on
    one keep-alive connection, and returns the statuses."""
    async def go():
        proxy = Proxy([f"b{i}=127.0.0.1:{p.port}" for i, p in enumerate(procs)], listen=("127.0.0.1", 0),
                      health_check="none", access_log=log, **settings)
        await proxy.start()
        statuses = []
        try:
            host, port = proxy.address
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=20) as client:
                for method, path, headers in requests:
                    statuses.append((await client.request(method, path, headers=headers)).status_code)
        finally:
            await proxy.close()
        return statuses
    return run_loop(go(), 60)


def test_one_json_line_per_request_with_its_fields(backend_procs, tmp_path):
    procs = backend_procs(2)
    path = tmp_path / "access.log"
    log = AccessLog.open(str(path), "json")
    sent = [("GET", f"/item?id={i}", {"User-Agent": "tester/1", "Referer": "http://r.example/"}) for i in range(40)]
    sent += [("HEAD", "/h", {}), ("POST", "/p", {})]
    statuses = serve_and_send(procs, log, sent)
    log.close()
    assert statuses == [200] * len(sent)
    lines = path.read_text().splitlines()
    assert len(lines) == len(sent) == log.lines
    entries = [json.loads(line) for line in lines]
    for entry, (method, target, _) in zip(entries, sent):
        assert entry["method"] == method and entry["target"] == target and entry["version"] == "HTTP/1.1"
        assert entry["status"] == 200 and entry["client"] == "127.0.0.1" and entry["retries"] == 0
        assert entry["backend"] in ("b0", "b1") and entry["vserver"] == "leastload"
        assert entry["bytes"] > 0 and 0 <= entry["ttfb"] <= entry["total"] < 20
        when = datetime.datetime.fromisoformat(entry["time"])
        assert when.tzinfo is not None  # wall clock with its offset
        assert abs((datetime.datetime.now(datetime.timezone.utc) - when).total_seconds()) < 600
    assert {e["backend"] for e in entries} == {"b0", "b1"}  # both served: the log names who answered
    assert set(entries[0]) == {"time", "client", "method", "target", "version", "status", "bytes", "backend",
                               "ttfb", "total", "retries", "vserver"}


def test_combined_lines_and_the_proxys_own_answers(backend_procs, tmp_path):
    procs = backend_procs(1)
    path = tmp_path / "access.log"
    log = AccessLog.open(str(path))
    sent = [("GET", "/a", {"User-Agent": 'quote" and \\ back'}), ("GET", "/b", {})]
    statuses = serve_and_send(procs, log, sent, name="web")
    # a request refused by the proxy itself, and one with no backend left
    async def refused():
        proxy = Proxy([f"b0=127.0.0.1:{procs[0].port}"], listen=("127.0.0.1", 0), health_check="none",
                      access_log=log, max_body=10)
        await proxy.start()
        try:
            host, port = proxy.address
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=20) as client:
                big = await client.post("/upload", content=b"x" * 100)
                proxy.vserver.set_state("b0", "OUT_OF_SERVICE")
                none_left = await client.get("/nothing")
        finally:
            await proxy.close()
        return big.status_code, none_left.status_code
    assert run_loop(refused(), 60) == (413, 503)
    log.close()
    assert statuses == [200, 200]
    lines = path.read_text().splitlines()
    assert len(lines) == 4
    parsed = [COMBINED.match(line) for line in lines]
    assert all(parsed), lines
    first, second, big, none_left = (m.groupdict() for m in parsed)
    assert first["request"] == "GET /a HTTP/1.1" and first["agent"] == 'quote\\" and \\\\ back'
    assert first["status"] == "200" and first["backend"] == "b0" and first["ttfb"] != "-"
    assert second["agent"].startswith("python-httpx/") and second["referer"] == "-"
    assert big["request"] == "POST /upload HTTP/1.1" and big["status"] == "413" and big["backend"] == "-"
    assert none_left["status"] == "503" and none_left["backend"] == "-" and none_left["ttfb"] == "-"
    datetime.datetime.strptime(first["time"], "%d/%b/%Y:%H:%M:%S %z")


def test_a_failed_backend_is_named_and_the_retry_counted(backend_procs, tmp_path):
    procs = backend_procs(1)
    with socket.socket() as closed:  # a port nothing listens on: connections are refused
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]
    log = AccessLog(io.StringIO(), "json")

    async def go():
        proxy = Proxy({"dead": f"127.0.0.1:{dead_port}", "live": f"127.0.0.1:{procs[0].port}"},
                      method="ROUNDROBIN", listen=("127.0.0.1", 0), health_check="none", access_log=log,
                      outlier_failures=1000)
        await proxy.start()
        try:
            host, port = proxy.address
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=20) as client:
                return [(await client.get(f"/{i}")).status_code for i in range(6)]
        finally:
            await proxy.close()
    assert run_loop(go(), 60) == [200] * 6
    entries = [json.loads(line) for line in log.stream.getvalue().splitlines()]
    assert len(entries) == 6 and {e["backend"] for e in entries} == {"live"}
    # round robin: after "dead" failed and "live" answered, the cursor is back at "dead"
    assert [e["retries"] for e in entries] == [1] * 6


def test_the_cli_writes_one_line_per_request(backend_procs, tmp_path):
    procs = backend_procs(1)
    path = tmp_path / "access.json"
    proc = subprocess.Popen([sys.executable, "-m", "leastload", "proxy", "--listen", "127.0.0.1:0",
                             "--backend", f"a=127.0.0.1:{procs[0].port}", "--health-check", "none",
                             "--access-log", str(path), "--log-format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = first_line(proc.stdout, 30)
        assert line.startswith("listening on "), line
        port = int(line.rsplit(":", 1)[1])
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as client:
            statuses = [client.get(f"/n{i}").status_code for i in range(25)]
        assert statuses == [200] * 25
        wait_until(lambda: path.exists() and len(path.read_text().splitlines()) == 25, 10)
    finally:
        proc.terminate()
        proc.wait(30)
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["target"] for e in entries] == [f"/n{i}" for i in range(25)]
    assert proc.returncode == 0, proc.stderr.read()


def test_an_access_log_that_cannot_be_opened_is_a_usage_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "leastload", "proxy", "--listen", "127.0.0.1:0",
                          "--backend", "a=127.0.0.1:1", "--access-log", str(tmp_path / "no" / "such" / "dir")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--access-log" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("command", [["proxy", "--backend", "a=127.0.0.1:1", "--health-check", "none", "--listen"],
                                     ["backends", "--listen"]])
def test_a_port_in_use_is_one_line_and_exit_2(command):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "leastload", *command, f"127.0.0.1:{port}"],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "cannot listen" in out.stderr and "in use" in out.stderr


def test_the_same_outlier_news_is_logged_once(caplog):
    proxy = Proxy(["a=127.0.0.1:1", "b=127.0.0.1:2"], listen=("127.0.0.1", 0), health_check="none")
    events = proxy.vserver.outlier_events
    now = proxy.vserver.now()
    with caplog.at_level(logging.WARNING, logger="leastload.proxy"):
        for what in ["kept: max ejection percent"] * 5 + ["ejected", "returned"] + ["kept: max ejection percent"] * 2:
            events.append((now, "a", what))
            proxy._log_events()
    messages = [r.getMessage() for r in caplog.records]
    assert [m.split(": ", 1)[1].rsplit(" at ", 1)[0] for m in messages] == [
        "kept: max ejection percent", "ejected", "returned", "kept: max ejection percent"]
    stamp = messages[0].rsplit(" at ", 1)[1]
    assert datetime.datetime.fromisoformat(stamp).tzinfo is not None  # wall clock, not monotonic seconds


def test_quoting_as_apache_does():
    assert _quote('a"b\\c\x01\x7fd') == 'a\\"b\\\\c\\x01\\x7fd'
    with pytest.raises(ValueError, match="fmt must be one of combined, json, got 'xml'"):
        AccessLog(io.StringIO(), "xml")
