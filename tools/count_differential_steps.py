"""How many runs of the differential state machine make 50+ steps.

    python tools/count_differential_steps.py [examples]

Runs tests/engine/test_differential.py's machine with an extra invariant that counts
steps (invariants run once after initialize and once after every rule).
"""
import collections
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "engine"))

import test_differential as td  # noqa: E402
from hypothesis import settings  # noqa: E402
from hypothesis.stateful import invariant, run_state_machine_as_test  # noqa: E402

import leastload.engine.native as c_engine  # noqa: E402
import leastload.reference as reference  # noqa: E402

counts = []


class Counted(td.EnginesAgree):
    modules = (c_engine, reference)

    def __init__(self):
        super().__init__()
        self.checks = 0

    @invariant()
    def count(self):
        self.checks += 1

    def teardown(self):
        counts.append(self.checks - 1)  # rule steps


examples = int(sys.argv[1]) if len(sys.argv) > 1 else td.SETTINGS.max_examples
run_state_machine_as_test(Counted, settings=settings(td.SETTINGS, max_examples=examples, database=None))
print(f"{len(counts)} runs, {sum(c >= 50 for c in counts)} of them with 50 or more steps; "
      f"steps by tens: {dict(sorted(collections.Counter(c // 10 * 10 for c in counts).items()))}")
