"""The commands refuse the hash methods that need each request's key, in one line:
simulate's workloads and the proxy carry no keys yet."""
import subprocess
import sys


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "leastload", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def test_simulate_refuses_a_config_whose_method_needs_a_key(tmp_path):
    conf = tmp_path / "hash.conf"
    conf.write_text("add service S1 10.0.0.1 HTTP 80\n"
                    "add lb vserver v1 HTTP 10.0.0.100 80 -lbMethod URLHASH\n"
                    "bind lb vserver v1 S1\n")
    result = run("simulate", str(conf), "--duration", "2", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (f"{conf}:2: lbMethod URLHASH picks by each request's key (an address, "
                                     "a URL, a token), which simulate's workloads do not carry yet")
    assert "Traceback" not in result.stderr


def test_simulate_and_proxy_flags_refuse_a_method_that_needs_a_key(tmp_path):
    result = run("simulate", "--method", "SOURCEIPHASH", "--duration", "2", cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--method" in result.stderr and "Traceback" not in result.stderr
    result = run("proxy", "--method", "URLHASH", "--backend", "a=127.0.0.1:9", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--method" in result.stderr
