"""`leastload nginx-conf CONFIG`: the upstream blocks of a config's vservers (their nginx
-t through the module is in tests/nginx/test_nginx_conf_command.py), and its bad input.
`leastload show --shared NAME` with no such vserver."""
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args):
    return subprocess.run([sys.executable, "-m", "leastload", *args], capture_output=True, text=True, timeout=120)


def test_a_weighted_vserver_becomes_an_upstream_block():
    result = run("nginx-conf", str(EXAMPLES / "weighted.conf"))
    assert result.returncode == 0, result.stderr
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert lines[1:6] == ["upstream web {", "leastload LEASTBANDWIDTH;", "server 10.0.1.1:8080 weight=2;  # app1",
                          "server 10.0.1.2:8080 weight=1;  # app2", "server 10.0.1.3:8080 weight=4;  # app3"]
    assert "proxy_pass http://web;" in lines[7]


def test_slow_start_disabled_services_and_ipv6(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("add service a 10.0.0.1 HTTP 80\nadd service b 2001:db8::2 HTTP 8080\n"
                    "add service c 10.0.0.3 HTTP 80\ndisable service c\n"
                    "add lb vserver v1 HTTP 10.0.0.100 80 -lbMethod LEASTRESPONSETIME -newServiceRequest 20 "
                    "-newServiceRequestUnit PERCENT -newServiceRequestIncrementInterval 5\n"
                    "bind lb vserver v1 a\nbind lb vserver v1 b -weight 3\nbind lb vserver v1 c\n")
    result = run("nginx-conf", str(conf))
    assert result.returncode == 0, result.stderr
    body = result.stdout
    assert "leastload_slow_start 20 percent interval=5;" in body
    assert "server [2001:db8::2]:8080 weight=3;  # b" in body
    assert "server 10.0.0.3:80 weight=1 down;  # c" in body


def test_a_method_the_module_cannot_feed_is_an_error_naming_the_vserver(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("add service a 10.0.0.1 HTTP 80\nadd lb vserver v1 HTTP 10.0.0.100 80 -lbMethod LRTM\n"
                    "bind lb vserver v1 a\n")
    result = run("nginx-conf", str(conf))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("leastload nginx-conf: lb vserver v1: -lbMethod LRTM is not one the nginx module")


def test_an_unknown_vserver_and_a_missing_shared_vserver():
    result = run("nginx-conf", str(EXAMPLES / "weighted.conf"), "--vserver", "nope")
    assert result.returncode == 2 and "--vserver nope: no such lb vserver" in result.stderr
    result = run("show", "--shared", "leastload-test-no-such-vserver")
    assert result.returncode == 2 and "no shared vserver of that name" in result.stderr
    result = run("show", "--shared", "a/b")
    assert result.returncode == 2 and "--shared" in result.stderr
    result = run("show")
    assert result.returncode == 2 and "a CONFIG, or --shared NAME, is needed" in result.stderr
