"""numpy is optional: the engine never imports it, and what needs it says what to install.

`pip install leastload` brings no numpy; `leastload[sim]` does. Each check runs
in a fresh interpreter, so modules the rest of the suite imported cannot hide
an import. "Without numpy" is simulated by a None in sys.modules["numpy"],
which makes `import numpy` raise ImportError as a missing package does.
"""
import importlib.util
import os
import subprocess
import sys

import pytest

HINT = "pip install leastload[sim]"
BLOCK_NUMPY = "import sys; sys.modules['numpy'] = None\n"


def run_python(code, tmp_path, implementation="c"):
    env = dict(os.environ, LEASTLOAD_IMPLEMENTATION=implementation)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path)


@pytest.fixture
def c_engine(request):
    if request.config.getoption("--no-c-extensions"):
        pytest.skip("C-extension tests disabled by --no-c-extensions")


def test_importing_leastload_imports_no_numpy(tmp_path, c_engine):
    code = "import leastload, leastload.reference, leastload.engine.native, sys; assert 'numpy' not in sys.modules"
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("module, needs", [
    ("leastload.net.upstream", None),
    ("leastload.net.tcpinfo", None),
    ("leastload.integrations.httpx", "httpx"),
    ("leastload.proxy", "httptools"),
])
def test_the_engine_s_users_import_no_numpy(tmp_path, c_engine, module, needs):
    if needs and importlib.util.find_spec(needs) is None:
        pytest.skip(f"{module} needs {needs}")
    result = run_python(f"import sys, {module}; assert 'numpy' not in sys.modules, '{module}'", tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("implementation", ["c", "python"])
def test_the_engine_works_without_numpy(tmp_path, request, implementation):
    if implementation == "c" and request.config.getoption("--no-c-extensions"):
        pytest.skip("C-extension tests disabled by --no-c-extensions")
    code = BLOCK_NUMPY + (
        "import leastload\n"
        "vs = leastload.VirtualServer('LEASTCONNECTION', clock=leastload.ManualClock(0.0))\n"
        "vs.bind('S1'); vs.bind('S2')\n"
        "assert vs.select() == 'S1' and vs.select() == 'S2' and vs.services == ('S1', 'S2')\n"
        "print(leastload.IMPLEMENTATION)\n")
    result = run_python(code, tmp_path, implementation)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == implementation


def test_leastload_sim_without_numpy_says_what_to_install(tmp_path):
    code = BLOCK_NUMPY + (
        "try:\n"
        "    import leastload.sim.workloads\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('imported without numpy')\n")
    result = run_python(code, tmp_path, "python")
    assert result.returncode == 0, result.stderr
    assert HINT in result.stdout


@pytest.mark.parametrize("command", ["simulate", "demo", "bench"])
def test_commands_needing_numpy_print_the_hint_without_a_traceback(tmp_path, command):
    code = BLOCK_NUMPY + f"from leastload.__main__ import main\nsys.exit(main([{command!r}]))\n"
    result = run_python(code, tmp_path, "python")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert HINT in result.stderr and result.stderr.startswith(f"leastload {command}: ")
    assert len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr
