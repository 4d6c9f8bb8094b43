"""benchmarks/proxy_ws_vs_haproxy.py in its quick mode (CI's benchmark stage runs it so that it
cannot rot): 4 clients x 200 WebSocket messages (again until the proxy's CPU is resolved)
through leastload and through HAProxy, one round; every message echoed (the script checks
each), and a row per proxy. Skipped, saying why, without haproxy or the websockets package."""

import argparse
import shutil

import pytest


def test_the_websocket_echo_row_in_quick_mode():
    pytest.importorskip("websockets", reason="the websockets package (the test extra) is not installed")
    pytest.importorskip("httptools", reason="the proxy needs httptools (pip install leastload[proxy])")
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed: the WebSocket row has no other side")
    from benchmarks import proxy_vs_haproxy as pvh
    from benchmarks import proxy_ws_vs_haproxy as bench

    args = argparse.Namespace(clients=4, messages=200, size=64, rounds=1)
    result = bench.run(args)
    assert [row["proxy"] for row in result["rows"]] == ["leastload", "haproxy"]
    # whole runs of 4 x 200, repeated until the proxy's CPU is resolved (20 clock ticks)
    assert all(row["messages"] % (4 * 200) == 0 and row["mps"] > 0 for row in result["rows"])
    least = 1e6 * bench.MIN_CPU_TICKS / pvh.CLK_TCK  # microseconds of CPU
    assert all(row["cpu_us"] * row["messages"] >= least * 0.999 for row in result["rows"]), result["rows"]
    assert len(result["ratios"]) == 1 and all(r > 0 for r in result["medians"])
