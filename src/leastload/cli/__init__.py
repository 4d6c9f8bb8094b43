"""The `leastload` command's parts (leastload/__main__.py dispatches): the shared
argument plumbing (`args`), `demo`, `show` (showconfig), `ctl` (the proxy's
runtime API) and the toy `backends` (also importable as leastload.backends).
The proxy's and the simulator's commands live with them (proxy/_cli.py,
sim/simulate.py)."""
