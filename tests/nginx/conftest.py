"""Fixtures of the nginx tests: the module (built once, or the tests skip saying why) and
backends that are always stopped."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # servers.py
sys.path.insert(0, os.path.dirname(__file__))  # nginxrun.py

from nginxrun import Nginx, module_path  # noqa: E402
from leastload_testkit.backends import start_backend  # noqa: E402


@pytest.fixture(scope="session")
def nginx_module():
    path, why = module_path()
    if path is None:
        print(f"\nnginx tests skipped: {why}")
        pytest.skip(why)
    return path


@pytest.fixture
def backends():
    """start(n, delay=, size=) -> n backends, stopped after the test."""
    started = []

    def start(n, delay=0.0, size=1024):
        new = [start_backend(delay=delay, size=size) for _ in range(n)]
        started.extend(new)
        return new
    yield start
    for b in started:
        b.stop()


@pytest.fixture
def nginx(nginx_module):
    """run(upstream_name, upstream_block, workers=1) -> a running Nginx, stopped after the test."""
    running = []

    def run(name, upstream, workers=1):
        n = Nginx(name, upstream, workers)
        running.append(n)
        return n
    yield run
    for n in running:
        n.stop()
