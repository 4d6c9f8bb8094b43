"""The module's directives under `nginx -t` (bad values are nginx's usual emerg naming the
directive and the value), and what a running nginx leaves to Python: `leastload show
--shared NAME` on the live vserver."""
import os
import subprocess
import sys

import pytest

from nginxrun import nginx_t, unique
from leastload_testkit.nginx_conf import upstream_block

SERVERS = ["127.0.0.1:1 weight=2", "127.0.0.1:2"]


def check(module, *directives, servers=SERVERS):
    return nginx_t(module, "u", upstream_block("u", servers, *directives))


def test_nginx_t_accepts_every_directive_and_touches_no_segment(nginx_module):
    shared = unique("t.conf")
    rc, out = check(nginx_module, "leastload LEASTBANDWIDTH", "leastload_slow_start 10 percent interval=5",
                    "leastload_outlier_failures 3", "leastload_outlier_ejection_time 2.5",
                    "leastload_outlier_max_ejection_percent 30", "leastload_window_seconds 20",
                    "leastload_startup_rr_factor 7", "leastload_slow_start_handover caught_up",
                    "leastload_slow_start_guard 2", f"leastload_shared {shared} capacity=64", "keepalive 4")
    assert rc == 0, out
    assert "test is successful" in out
    assert not os.path.exists(f"/dev/shm/leastload.{shared}")


@pytest.mark.parametrize("method,key", [("URLHASH", None), ("SOURCEIPHASH", None), ("TOKEN", "$http_x_token"),
                                        ("P2C", None), ("PEAKEWMA", None), ("leastconnection", None)])
def test_every_method_nginx_can_feed(nginx_module, method, key):
    rc, out = check(nginx_module, f"leastload {method}" + (f" {key}" if key else ""))
    assert rc == 0, out


@pytest.mark.parametrize("directive,value,must", [
    ("leastload", "FASTEST", "it must be one of LEASTCONNECTION"),
    ("leastload", "LRTM", "LRTM needs a monitor's probes"),
    ("leastload_slow_start", "101 percent", "0..100 with percent"),
    ("leastload_slow_start", "5 per_minute", "per_second, percent or interval=SECONDS"),
    ("leastload_slow_start", "5 interval=86401", "interval=SECONDS, 0..86400"),
    ("leastload_slow_start", "4294967295", "0..4294967294 of requests per second"),
    ("leastload_outlier_failures", "-1", "0..4294967295"),
    ("leastload_outlier_ejection_time", "0", "above 0 and at most 300"),
    ("leastload_outlier_ejection_time", "301", "above 0 and at most 300"),
    ("leastload_outlier_max_ejection_percent", "101", "0..100"),
    ("leastload_window_seconds", "61", "1..60"),
    ("leastload_slow_start_guard", "0.5", "0 (off), or a number from 1 to 100"),
    ("leastload_slow_start_handover", "late", "vendor or caught_up"),
    ("leastload_shared", "a/b", "A-Z a-z 0-9 . _ -"),
])
def test_bad_values_are_emerg_naming_directive_and_value(nginx_module, directive, value, must):
    lines = ["leastload LEASTCONNECTION"] if directive != "leastload" else []
    rc, out = check(nginx_module, *lines, f"{directive} {value}")
    assert rc != 0
    words = value.split()
    bad = words[-1] if words[-1] not in ("percent", "per_second") else words[0]
    assert f'[emerg] invalid value "{bad}" in "{directive}" directive' in out, out
    assert must in out, out


def test_weight_over_the_engines_range_and_backup_are_refused(nginx_module):
    rc, out = check(nginx_module, "leastload LEASTCONNECTION", servers=["127.0.0.1:1 weight=101"])
    assert rc != 0 and 'invalid value "weight=101"' in out and "1..100" in out, out
    # after the directive nginx itself refuses the parameter; before it, the module does
    rc, out = check(nginx_module, "leastload LEASTCONNECTION", servers=["127.0.0.1:1", "127.0.0.1:2 backup"])
    assert rc != 0 and 'does not support parameter "backup"' in out, out
    upstream = '    upstream u {\n        server 127.0.0.1:1;\n        server 127.0.0.1:2 backup;\n' \
               '        leastload LEASTCONNECTION;\n    }\n'
    rc, out = nginx_t(nginx_module, "u", upstream)
    assert rc != 0 and '"backup" servers are not supported' in out, out


def test_a_hash_method_that_needs_a_key(nginx_module):
    rc, out = check(nginx_module, "leastload CALLIDHASH")
    assert rc != 0 and "needs a key" in out, out
    rc, out = check(nginx_module, "leastload LEASTCONNECTION $request_uri")
    assert rc != 0 and "only the hash methods take a key" in out, out


def test_show_shared_prints_the_live_vserver(nginx, backends):
    bs = backends(2)
    shared = unique("t.show")
    ng = nginx("sh", upstream_block("sh", [f"{bs[0].address} weight=3", bs[1].address], "leastload LEASTBANDWIDTH",
                                    f"leastload_shared {shared}"))
    for _ in range(4):
        assert ng.get()[0] == 200
    run = subprocess.run([sys.executable, "-m", "leastload", "show", "--shared", shared], capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, LEASTLOAD_IMPLEMENTATION="c"))
    assert run.returncode == 0, run.stderr
    assert f"{shared} - Method: LEASTBANDWIDTH" in run.stdout
    lines = {line.split()[1]: line.split() for line in run.stdout.splitlines() if line.strip().startswith(("1)", "2)"))}
    assert lines[bs[0].address][3] == "3" and lines[bs[1].address][3] == "1"  # the weights
    assert int(lines[bs[0].address][4]) > 0 and int(lines[bs[1].address][4]) > 0  # both carried bytes
    missing = subprocess.run([sys.executable, "-m", "leastload", "show", "--shared", shared + ".none"],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no shared vserver of that name" in missing.stderr
    assert not os.path.exists(f"/dev/shm/leastload.{shared}.none")


def test_a_segment_of_another_layout_is_a_clear_error(nginx, backends):
    """A segment left by another build or version: nginx refuses to start, saying what to do."""
    bs = backends(1)
    shared = unique("t.proto")
    path = f"/dev/shm/leastload.{shared}"
    with open(path, "wb") as f:  # "SHARED1", version 999, ready: what no build of this layout wrote
        f.write((0x31444552414853).to_bytes(8, "little") + (999).to_bytes(4, "little") + (1).to_bytes(4, "little")
                + bytes(65536 - 16))
    try:
        with pytest.raises(RuntimeError) as err:
            nginx("p", upstream_block("p", [bs[0].address], "leastload LEASTCONNECTION", f"leastload_shared {shared}"))
        assert f'cannot open shared vserver "{shared}"' in str(err.value)
        assert "made by another build or version of leastload" in str(err.value)
    finally:
        os.unlink(path)


def test_a_full_segment_refuses_the_reload_and_the_old_configuration_goes_on(nginx, backends):
    """capacity=2 counts holes: a reload that replaces a server needs a third slot. nginx logs
    why and keeps serving with the configuration it had."""
    import signal
    import time
    from leastload_testkit.waits import wait_until
    bs = backends(3)
    shared = unique("t.full")
    lines = ("leastload LEASTCONNECTION", f"leastload_shared {shared} capacity=2")
    ng = nginx("f", upstream_block("f", [bs[0].address, bs[1].address], *lines))
    workers = ng.worker_pids()
    ng.write(upstream_block("f", [bs[0].address, bs[2].address], *lines))
    ng.proc.send_signal(signal.SIGHUP)
    assert wait_until(lambda: "is full: its segment holds 2 services" in ng.log(), 10.0), ng.log()[-2000:]
    time.sleep(0.5)
    assert ng.worker_pids() == workers
    assert {ng.get()[1] for _ in range(4)} == {bs[0].address, bs[1].address}


@pytest.mark.parametrize("param", ["max_fails=3", "fail_timeout=5s", "max_conns=10"])
def test_nginx_own_failure_and_connection_limits_are_refused(nginx_module, param):
    upstream = f"    upstream u {{\n        server 127.0.0.1:1 {param};\n        leastload LEASTCONNECTION;\n    }}\n"
    rc, out = nginx_t(nginx_module, "u", upstream)
    assert rc != 0 and "which the engine does not take" in out, out
