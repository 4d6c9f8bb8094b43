"""The harness that the tests (tests/) and the benchmarks (benchmarks/) share: ports,
waits, child processes, backends. Imported as `leastload_testkit.<module>`.

Where it is found: under pytest, the repository's conftest.py (at the root, beside this
folder) puts the root on sys.path; the benchmarks' scripts run from the root as modules
(`python -m benchmarks.proxy_vs_haproxy`), which puts the root there too.

- ports.py: free_port(), free_ports(n) on 127.0.0.1;
- waits.py: wait_until() (and its raising and asyncio forms), first_line();
- processes.py: Server, a child process in its own process group that says
  `listening on HOST:PORT`, stopped with SIGTERM then SIGKILL, every wait bounded;
- backends.py: the toy backends (`python -m leastload.cli.backends`) as Server processes;
- rogue_backend.py, llm_replica.py: a misbehaving HTTP/1.1 backend and an
  OpenAI-compatible replica, each a script its own process runs.
"""
