"""The README's Python blocks run as written, in order, in one namespace (each block
goes on from the ones before it, as a reader would type them)."""
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_every_python_block_of_the_readme_runs():
    if not README.exists():
        pytest.skip("the README is not beside the tests (the suite runs from a copy without it)")
    blocks = BLOCK.findall(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 3  # the engine, the handle with retries, slow start
    namespace = {"__name__": "readme"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)
        except Exception as exc:  # the block's number and what it raised
            pytest.fail(f"README.md python block {i + 1} raised {type(exc).__name__}: {exc}")
    assert namespace["vs"].new_service_request == 4  # the last block set slow start


def test_the_docs_home_page_links_every_page_of_the_site():
    docs = README.parent / "docs"
    if not (docs / "index.md").exists():
        pytest.skip("the docs are not beside the tests")
    index = (docs / "index.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in docs.glob("*.md") if p.name != "index.md")
    assert [p for p in pages if f"({p})" not in index and f"({p}#" not in index] == []


def test_every_python_block_of_the_docs_home_page_runs():
    """docs/index.md's blocks (the engine, then a handle with `exclude=tried`) run as written,
    in order, in one namespace."""
    index = README.parent / "docs" / "index.md"
    if not index.exists():
        pytest.skip("the docs are not beside the tests")
    blocks = BLOCK.findall(index.read_text(encoding="utf-8"))
    assert len(blocks) >= 2
    namespace = {"__name__": "docs_index"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"docs/index.md python block {i + 1}", "exec"), namespace)
        except Exception as exc:
            pytest.fail(f"docs/index.md python block {i + 1} raised {type(exc).__name__}: {exc}")
    assert namespace["vs"].active("S1") + namespace["vs"].active("S2") == 0  # every transaction ended
