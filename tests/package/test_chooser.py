"""`import leastload` picks its engine from LEASTLOAD_IMPLEMENTATION, in a fresh interpreter."""
import os
import subprocess
import sys

import pytest

PROBE = "import leastload; print(leastload.IMPLEMENTATION, leastload.VirtualServer.__module__)"

# A finder that makes the compiled engine unimportable, as a broken build would.
BLOCK_ENGINE = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "leastload.engine._engine":
            raise ImportError("simulated missing build")
sys.meta_path.insert(0, Block())
"""


def run(code, value):
    env = dict(os.environ)
    env.pop("LEASTLOAD_IMPLEMENTATION", None)
    if value is not None:
        env["LEASTLOAD_IMPLEMENTATION"] = value
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("value, expected", [
    (None, "c leastload.engine.native"),
    ("c", "c leastload.engine.native"),
    ("python", "python leastload.engine.reference"),  # the twin of engine.native (public name: leastload.reference)
])
def test_the_variable_picks_the_engine(value, expected):
    done = run(PROBE, value)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


@pytest.mark.parametrize("value", [None, "c"])
def test_a_missing_c_engine_fails_loudly(value):
    done = run(BLOCK_ENGINE + PROBE, value)
    assert done.returncode != 0
    assert "C engine is not importable" in done.stderr and "LEASTLOAD_IMPLEMENTATION=python" in done.stderr


def test_the_reference_needs_no_c_engine():
    done = run(BLOCK_ENGINE + PROBE, "python")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "python leastload.engine.reference"


def test_an_unknown_value_is_refused():
    done = run(PROBE, "fortran")
    assert done.returncode != 0 and "'fortran'" in done.stderr
