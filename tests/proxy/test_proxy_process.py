"""The harness's `leastload proxy` starter (leastload_testkit.proxy_process), on the paths the
other tests do not take: a proxy that cannot start fails with what it wrote, and is gone."""
import urllib.error
import urllib.request

import pytest

from leastload_testkit.processes import is_alive
from leastload_testkit.proxy_process import ProxyProcess


def test_a_proxy_that_cannot_start_fails_with_its_output():
    with pytest.raises(RuntimeError) as failed:
        ProxyProcess(["--listen", "127.0.0.1:0", "--backend", "x=nowhere"])
    message = str(failed.value)
    assert "exited before it said `listening on`" in message
    assert "nowhere" in message  # its stderr: the argument it refused


def test_a_start_not_waited_for_is_still_stopped_and_its_output_kept():
    proxy = ProxyProcess(["--listen", "127.0.0.1:0", "--health-check", "none", "--backend", "x=nowhere"],
                         ready=False)
    proxy.proc.wait(timeout=60)  # it refuses the backend and exits by itself
    code = proxy.stop()
    assert code == 2, proxy.err()
    assert "nowhere" in proxy.err()  # read after stop(): kept
    assert not is_alive(proxy.pid)


def test_a_started_proxy_reports_its_port_and_stops_cleanly():
    proxy = ProxyProcess(["--listen", "127.0.0.1:0", "--health-check", "none", "--backend", "x=127.0.0.1:9"])
    try:
        assert proxy.listening_line.startswith("listening on 127.0.0.1:")
        assert proxy.listening_line.endswith(f":{proxy.port}")
        # one request answered (the backend's port is closed: 502 or 503): the proxy is serving
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(f"http://127.0.0.1:{proxy.port}/", timeout=10)
        assert answer.value.code in (502, 503)
    finally:
        code = proxy.stop()
    assert code == 0, proxy.err()
    assert not is_alive(proxy.pid)
