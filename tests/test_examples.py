"""The examples run, and say what they should (so they cannot rot)."""

import os
import pathlib
import subprocess
import sys

from servers import start_backend

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def run_example(name, *args):
    env = dict(os.environ, LEASTLOAD_IMPLEMENTATION="c")
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_asyncio_server_example_answers_everything_and_ejects_the_dead_backend():
    result = run_example("asyncio_server.py")
    assert result.returncode == 0, result.stderr
    assert "answers: {'200': 60}" in result.stdout
    assert "ejected until" in result.stdout and "'dead', 'ejected'" in result.stdout


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
