"""Load reported by the backends (ORCA's endpoint-load-metrics) through `leastload proxy
--weights-from-utilization`: a backend reporting cpu_utilization=0.9 among peers at 0.3
gets less traffic once the 10 s blackout is over. Real proxy and `leastload backends
--report-load` processes on 127.0.0.1; every wait is bounded."""
import json
import sys
import time
import urllib.request

import pytest

from leastload_testkit.backends import start_backend
from leastload_testkit.ports import free_ports
from leastload_testkit.proxy_process import ProxyProcess
from test_proxy_shared_workers import busy, requests_in

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the workers' harness reads /proc")


def test_a_backend_reporting_high_utilization_gets_less_traffic(tmp_path):
    hot = start_backend(0.0, 100, args=("--report-load", "0.9"))
    cool = [start_backend(0.0, 100, args=("--report-load", "0.3")) for _ in range(2)]
    admin = free_ports(1)
    cli = None
    try:
        cli = ProxyProcess(["--listen", "127.0.0.1:0", "--method", "ROUNDROBIN", "--weights-from-utilization",
                            "--health-check", "none", "--admin", f"127.0.0.1:{admin}",
                            "--backend", f"hot={hot.address}", "--backend", f"cool1={cool[0].address}",
                            "--backend", f"cool2={cool[1].address}"])
        with busy(cli.port, clients=4):
            time.sleep(2.0)
            early = requests_in((hot, *cool), 2.0)
            time.sleep(9.0)  # the blackout (10 s from the first reports) is over
            late = requests_in((hot, *cool), 3.0)
        # before the blackout's end: plain round robin, a third each
        assert min(early) > 0 and max(early) <= 1.2 * min(early) + 5, early
        # after: the hot one's weight is qps/0.9 against qps/0.3: far less traffic
        assert late[0] * 2 < min(late[1:]), late
        with urllib.request.urlopen(f"http://127.0.0.1:{admin}/leastload/status", timeout=10) as r:
            status = json.loads(r.read())
        assert "hot" in json.dumps(status)
    finally:
        if cli is not None:
            assert cli.stop() == 0
        for b in (hot, *cool):
            b.stop()


def test_reports_feed_customload_by_the_metric_table(tmp_path):
    hot = start_backend(0.0, 100, args=("--report-load", "0.9"))
    cool = start_backend(0.0, 100, args=("--report-load", "0.3"))
    cli = None
    try:
        cli = ProxyProcess(["--listen", "127.0.0.1:0", "--method", "CUSTOMLOAD", "--health-check", "none",
                            "--load-metric", "cpu_utilization=1:80",
                            "--backend", f"hot={hot.address}", "--backend", f"cool={cool.address}"])
        with busy(cli.port, clients=4):
            time.sleep(1.0)  # every backend has answered with its report by now
            served = requests_in((hot, cool), 2.0)
        # 90 % is at the threshold of 80: the hot backend is left out; the cool one takes it all
        assert served[0] == 0 and served[1] > 100, served
    finally:
        if cli is not None:
            assert cli.stop() == 0
        for b in (hot, cool):
            b.stop()
