"""The hash methods from the command line: `leastload proxy` and `leastload simulate` carry each
request's key; what they cannot do is refused in one line."""
import os
import re
import subprocess
import sys
import urllib.request

from leastload_testkit.backends import start_backend
from leastload_testkit.processes import stop_child
from leastload_testkit.waits import first_line


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "leastload", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def test_simulate_runs_a_config_whose_method_needs_a_key(tmp_path):
    conf = tmp_path / "hash.conf"
    conf.write_text("add service S1 10.0.0.1 HTTP 80\nadd service S2 10.0.0.2 HTTP 80\n"
                    "add lb vserver v1 HTTP 10.0.0.100 80 -lbMethod URLHASH -hashLength 7\n"
                    "bind lb vserver v1 S1\nbind lb vserver v1 S2\n")
    result = run("simulate", str(conf), "--duration", "2", "--keys", "50", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "lb vserver v1 (URLHASH)" in result.stdout
    # -hashLength 7: /item/1 and /item/10 ... /item/19 hash alike (one engine key); each still on one service
    served = re.search(r"keys: (\d+) distinct served, (\d+) always by one service\n", result.stdout)
    assert served and served[1] == served[2] and 20 < int(served[1]) <= 50, result.stdout


def test_simulate_domainhash_without_keys_picks_as_least_connection(tmp_path):
    conf = tmp_path / "d.conf"
    conf.write_text("add service S1 10.0.0.1 HTTP 80\nadd service S2 10.0.0.2 HTTP 80\n"
                    "add lb vserver v1 HTTP 10.0.0.100 80 -lbMethod DOMAINHASH\n"
                    "bind lb vserver v1 S1\nbind lb vserver v1 S2\n")
    workload = tmp_path / "w.csv"
    workload.write_text("time\n" + "".join(f"{i / 10}\n" for i in range(20)))
    result = run("simulate", str(conf), "--workload", str(workload), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "keys:" not in result.stdout  # no key column: no keys
    assert "20 requests served" in result.stdout


def test_proxy_token_flags_are_checked_in_one_line(tmp_path):
    for args, words in ((["--method", "TOKEN"], "--token-header"),
                        (["--method", "URLHASH", "--token-header", "X-Session"], "only with --method TOKEN"),
                        (["--method", "TOKEN", "--token-header", "X Session"], "token_header"),
                        (["--method", "URLHASH", "--hash-length", "0"], "hashlength"),
                        (["--method", "SOURCEIPHASH", "--netmask", "255.0.255.0"], "netmask")):
        result = run("proxy", *args, "--backend", "a=127.0.0.1:9", "--listen", "127.0.0.1:0", cwd=tmp_path)
        assert result.returncode == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_proxy_workers_share_the_url_mapping(tmp_path):
    """Two workers, two engines: the hash mapping depends on names, weights and seed only, so a URL
    reaches the same backend whichever worker takes its connection."""
    procs = [start_backend(0.0, size) for size in (100, 101, 102)]
    env = dict(os.environ, LEASTLOAD_IMPLEMENTATION="c")
    proxy = subprocess.Popen(
        [sys.executable, "-m", "leastload", "proxy", "--listen", "127.0.0.1:0", "--workers", "2",
         "--method", "URLHASH", "--hash-length", "3", "--health-check", "none",
         *(f"--backend=b{i}=127.0.0.1:{p.port}" for i, p in enumerate(procs))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        line = first_line(proxy.stdout, 60)
        assert line.startswith("listening on "), (line, proxy.stderr.read() if proxy.poll() is not None else "")
        port = int(line.rsplit(":", 1)[1])
        seen = {}
        for i in range(40):  # a new connection each time: the kernel spreads them over the workers
            path = f"/k{i % 8}/{i}"  # --hash-length 3: /k3/3, /k3/11, ... are one key, "/k3"
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
                seen.setdefault(path[:3], set()).add(len(r.read()))
    finally:
        _, err = stop_child(proxy)
        for p in procs:
            p.stop()
    assert proxy.returncode == 0, err
    assert all(len(sizes) == 1 for sizes in seen.values()), seen  # each key on one backend
    assert len(set().union(*seen.values())) >= 2, seen
