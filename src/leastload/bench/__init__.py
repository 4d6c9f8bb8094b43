"""`python -m leastload bench` and what it measures, apart from the engine.

`command` is the command line and the run, `cases` the states and loops it
measures (shared with the pytest-benchmark suites in benchmarks/), `report`
the table, JSON and plot. The command needs numpy (the sim extra) for its
traces: importing this package without numpy fails with numpy's ImportError,
which `python -m leastload` turns into a line naming what to install.
"""
from .command import main

__all__ = ["main"]
