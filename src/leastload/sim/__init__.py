"""leastload.sim: the simulation harness, built on numpy (`pip install leastload[sim]`).

- `leastload.sim.workloads`: seeded appliance-like request traces (`Trace`, `make_trace`).
- `leastload.sim.replay`: a trace replayed through a vserver, inside C for the C engine.
- `leastload.sim.simulate`: a steady request rate on a virtual clock, requests per service per second
  (the simulation in `leastload.sim.steady`, the `leastload simulate` command here).
- `leastload.sim.sweep`: configs x workloads x seeds on any concurrent.futures executor.
- `leastload.sim.replicas`: the replica study, R replicas each with an engine against one
  global engine (`python -m leastload.sim.replicas`, docs/replicas.md); one cell's
  discrete-event simulation (backends as queues, the spreader, the engines) in
  `leastload.sim.replica_sim`.

The engine itself (`import leastload`) needs none of this and never imports numpy.
"""

try:
    import numpy  # noqa: F401
except ImportError as exc:
    raise ImportError("leastload.sim needs numpy: pip install leastload[sim]") from exc
