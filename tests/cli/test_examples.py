"""The examples run, and say what they should (so they cannot rot)."""

import os
import pathlib
import re
import subprocess
import sys

from leastload_testkit.backends import start_backend

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def run_example(name, *args):
    env = dict(os.environ, LEASTLOAD_IMPLEMENTATION="c")
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_asyncio_server_example_answers_everything_and_ejects_the_dead_backend():
    result = run_example("asyncio_server.py")
    assert result.returncode == 0, result.stderr
    assert "answers: {'200': 60}" in result.stdout
    assert re.search(r"ejected, \d+\.\d s left", result.stdout) and "'dead', 'ejected'" in result.stdout


def test_httpx_client_example_balances_then_drains():
    backends = [start_backend(), start_backend()]
    try:
        result = run_example("httpx_client.py", backends[0].address, backends[1].address)
        served = [b.stats()["requests"] for b in backends]
    finally:
        for b in backends:
            b.stop()
    assert result.returncode == 0, result.stderr
    assert "both backends:" in result.stdout and "app1 drained:  {'app2': 50}" in result.stdout, result.stdout
    assert sum(served) == 250 and min(served) > 0, served


def test_the_proxy_config_example_is_what_its_comments_say():
    from leastload.config import load
    from leastload.proxy._config import plan

    plans, warnings = plan(load(EXAMPLES / "proxy.conf"))
    assert warnings == []
    web, api = plans
    assert (web.name, web.listen, web.method) == ("web", ("127.0.0.1", 8080), "LEASTCONNECTION")
    assert (api.name, api.listen, api.method) == ("api", ("127.0.0.1", 8081), "ROUNDROBIN")
    assert [(b.name, b.port, b.weight) for b in web.backends] == [("web1", 9001, 1), ("web2", 9002, 1),
                                                                  ("web3", 9003, 2)]
    assert [b.name for b in api.backends] == ["api1", "api2"]
    assert all(web.probes[s].kind == "http" and web.probes[s].path == "/health" for s in ("web1", "web2", "web3"))
    assert api.probes["api1"].kind == "tcp"  # no monitor bound: the vendor's default
    assert web.settings["new_service_request"] == 10 and web.settings["new_service_request_unit"] == "PER_SECOND"


def test_the_systemd_unit_starts_the_proxy_with_flags_it_has(tmp_path):
    import shlex

    from leastload.proxy import _cli

    unit = (EXAMPLES / "leastload-proxy.service").read_text()
    start = unit.split("ExecStart=", 1)[1].split("\nExecReload=", 1)[0].replace("\\\n", " ")
    words = shlex.split(start)
    assert words[:2] == ["/opt/leastload/bin/leastload", "proxy"]
    args = _cli._parser().parse_args(words[2:])  # every flag exists and takes its value
    assert args.config == "/etc/leastload/proxy.conf" and args.workers == 2 and args.log_format == "json"
    assert "ExecReload=/bin/kill -HUP $MAINPID" in unit
