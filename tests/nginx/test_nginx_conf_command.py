"""`leastload nginx-conf CONFIG`'s blocks are what nginx with the module accepts (nginx -t),
for every example config whose vservers the module can feed."""
import subprocess
import sys
from pathlib import Path

import pytest

from nginxrun import nginx_t

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("example", ["weighted.conf", "slowstart.toml", "two-vservers.toml", "urlhash.conf"])
def test_the_blocks_pass_nginx_t(nginx_module, example):
    run = subprocess.run([sys.executable, "-m", "leastload", "nginx-conf", str(EXAMPLES / example)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    first = next(line.split()[1] for line in run.stdout.splitlines() if line.startswith("upstream "))
    blocks = "".join(f"    {line}\n" for line in run.stdout.splitlines())
    rc, out = nginx_t(nginx_module, first, blocks)
    assert rc == 0, out + run.stdout
