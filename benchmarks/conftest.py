"""pytest-benchmark suites: each row of the C engine [c-extension] beside the reference [pure-python].

Not part of the default test run (pyproject's testpaths is ["tests"]):

    python -m pytest benchmarks                                # full sizes: n = 3 .. 262144
    LEASTLOAD_BENCH_QUICK=1 python -m pytest benchmarks        # tiny sizes
    LEASTLOAD_BENCH_QUICK=1 python -m pytest benchmarks --benchmark-disable   # CI: every case once
    LEASTLOAD_BENCH_SIZES=3,64,10000 python -m pytest benchmarks/test_bench_percall.py  # chosen sizes

The states measured come from leastload.bench.cases, shared with
`python -m leastload bench`. Groups are split by n, so each table compares
the two engines at one size. The engines (`impl`: [c-extension] and
[pure-python], `c_impl`) are the repository's conftest.py's, shared with tests/.
"""
import os
from collections import defaultdict

import pytest

QUICK = os.environ.get("LEASTLOAD_BENCH_QUICK", "").strip() not in ("", "0")
SIZES = (3, 64) if QUICK else (3, 64, 1024, 16384, 262144)
if os.environ.get("LEASTLOAD_BENCH_SIZES"):  # e.g. "3,64,10000"
    SIZES = tuple(int(x) for x in os.environ["LEASTLOAD_BENCH_SIZES"].split(","))
# One reference operation scans every service: about half a second at 262144.
REFERENCE_MAX_N = 16384


@pytest.fixture(params=SIZES, ids=lambda n: f"n={n}")
def n(request):
    """Number of services; the reference is skipped past REFERENCE_MAX_N."""
    if "impl" in request.fixturenames:
        impl = request.getfixturevalue("impl")
        if impl.__name__ == "leastload.reference" and request.param > REFERENCE_MAX_N:
            pytest.skip(f"reference at n={request.param}: each operation scans all services "
                        f"(~0.5 s), too slow to benchmark; see `python -m leastload bench` for a scaled figure")
    return request.param


@pytest.fixture(scope="session")
def quick():
    """True under LEASTLOAD_BENCH_QUICK=1."""
    return QUICK


def pytest_generate_tests(metafunc):
    # `size` is n for suites that keep every size in one group (scaling)
    if "size" in metafunc.fixturenames:
        metafunc.parametrize("size", SIZES, ids=lambda n: f"size={n}")


def pytest_benchmark_group_stats(config, benchmarks, group_by):
    """Default grouping: the marker's group, split by n and sorted by n (not as text)."""
    if group_by != "group":
        return None  # the user chose a grouping: pytest-benchmark's own hook does it
    groups = defaultdict(list)
    for bench in benchmarks:
        size = (bench.get("params") or {}).get("n")
        groups[(bench["group"] or "", -1 if size is None else size)].append(bench)
    out = []
    for (group, size), benches in sorted(groups.items()):
        benches.sort(key=lambda b: b["name"])
        out.append((group if size < 0 else f"{group} n={size}", benches))
    return out
