"""tools/check_c_calls.py: the C files of csrc/ call each other one way, and the check
finds a circle when there is one."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "check_c_calls.py"

if not (ROOT / "csrc").is_dir() or not TOOL.is_file():
    pytest.skip("no csrc/ or tools/ here (not run from the source tree)", allow_module_level=True)


def run(csrc):
    return subprocess.run([sys.executable, str(TOOL), str(csrc)], capture_output=True, text=True, timeout=60)


def test_csrc_has_no_circle_of_calls():
    done = run(ROOT / "csrc")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no circle of calls" in done.stdout


def test_a_circle_is_found_and_named(tmp_path):
    (tmp_path / "ll_a.c").write_text("int ll_b_thing(void);\nint ll_a_thing(void)\n{\n    return ll_b_thing();\n}\n")
    (tmp_path / "ll_b.c").write_text("int ll_a_thing(void);\nint ll_b_thing(void)\n{\n    return ll_a_thing() + 1;\n}\n"
                                     "static int ll_b_private(void) { return 0; }\n")
    done = run(tmp_path)
    assert done.returncode == 1, done.stdout
    assert "ll_a.c -> ll_b.c: ll_b_thing" in done.stdout and "ll_b.c -> ll_a.c: ll_a_thing" in done.stdout
