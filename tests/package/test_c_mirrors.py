"""tools/check_c_mirrors.py: the .pxd declares what the C headers declare, and the
check notices when it does not. Needs the source tree (CI also runs the tests from a
copy outside it, against an installed wheel: there they skip, saying so)."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PXD = ROOT / "src" / "leastload" / "engine" / "_cengine.pxd"
TOOL = ROOT / "tools" / "check_c_mirrors.py"
if not (TOOL.exists() and PXD.exists()):
    pytest.skip(f"no {TOOL} or {PXD}: not run from the source tree", allow_module_level=True)


@pytest.fixture(scope="module")
def mirrors():
    spec = importlib.util.spec_from_file_location("check_c_mirrors", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pxd_agrees_with_the_headers(mirrors):
    assert mirrors.check(PXD) == []
    structs, functions = mirrors.read_pxd(PXD)["leastload.h"]
    assert structs["ll_info"]["active"] == "uint32_t"   # read at all
    assert functions["ll_service_info"] == ("int", ["ll_vserver*", "uint32_t", "ll_info*"])


@pytest.mark.parametrize("old, new, expected", [
    ("        uint32_t active\n", "        uint64_t active\n", "ll_info.active is 'uint32_t' in C, 'uint64_t'"),
    ("        uint64_t packets\n", "        uint64_t packet_count\n", "ll_info.packet_count is None in C"),
    ("    int ll_service_info(const ll_vserver *vs, uint32_t slot, ll_info *out)",
     "    int ll_service_info(const ll_vserver *vs, uint64_t slot, ll_info *out)", "ll_service_info is"),
    ("    size_t ll_memory_bytes(const ll_vserver *vs)", "    uint32_t ll_memory_bytes(const ll_vserver *vs)",
     "ll_memory_bytes is"),
])
def test_a_difference_is_reported(mirrors, tmp_path, old, new, expected):
    text = PXD.read_text()
    assert text.count(old) == 1, old
    changed = tmp_path / "_cengine.pxd"
    changed.write_text(text.replace(old, new))
    problems = mirrors.check(changed)
    assert len(problems) == 1 and expected in problems[0], problems


def test_the_settings_table_mirrors_ll_settings(mirrors, tmp_path):
    assert mirrors.check_settings() == []
    table = tmp_path / "settings.py"  # a row the C struct has not: the check says so
    table.write_text(mirrors.SETTINGS_PY.read_text().replace('"peakewma_decay")', '"peakewma_decay", "name")'))
    assert "ll_settings has" in mirrors.check_settings(table=table)[0]
