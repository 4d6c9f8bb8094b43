"""`leastload proxy ARGS` as a child process, for the tests that drive the command: started
on either per-request path, ready once it says `listening on`, its output kept for failure
messages, always stopped (the supervisor and its workers)."""
import os
import signal
import subprocess
import sys
from typing import Mapping, Optional, Sequence

from .processes import Server

STARTUP_TIMEOUT = 60.0  # a proxy with workers on a loaded 2-core machine
EXIT_TIMEOUT = 30.0     # for the proxy to exit after the signal stop() sends, before SIGKILL


class ProxyProcess(Server):
    """`python -m leastload proxy ARGS` with LEASTLOAD_IMPLEMENTATION=`implementation` (None:
    the parent's); stdout read by a thread, stderr to a file (in `workdir`, or a temporary one).

    Ready when it printed its `listening on` line (`listening_line`, and `port`: the first
    address's), waited for unless `ready=False` (a test of a start that fails); a proxy that
    exits or stays silent fails with its output, stopped. `stop(sig)` signals
    the proxy's own process (the supervisor, which stops its workers), waits, then kills the
    process group whatever is left: it returns the exit status; `err()` is all it wrote to
    stderr, before or after stop()."""

    def __init__(self, args: Sequence[str], implementation: Optional[str] = "c", workdir: Optional[str] = None,
                 env: Optional[Mapping[str, str]] = None, ready: bool = True,
                 timeout: float = STARTUP_TIMEOUT) -> None:
        args = list(args)
        if implementation == "python" and "--workers" in args and args[args.index("--workers") + 1] != "1":
            args.append("--private-engines")  # the pure-Python engine shares no vserver between processes
        child_env = dict(os.environ if env is None else env)
        if implementation is not None:
            child_env["LEASTLOAD_IMPLEMENTATION"] = implementation
        super().__init__("leastload-proxy", [sys.executable, "-m", "leastload", "proxy", *args], workdir,
                         env=child_env)
        self.listening_line = ""
        if ready:
            self.wait_ready(timeout)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Until its `listening on` line (bounded); stopped and RuntimeError when it does not come."""
        try:
            self.wait_listening(timeout)  # then `port` (Server's) is the first address's
        except BaseException:
            self.stop()
            raise
        with self.cond:
            self.listening_line = next(line for line in self.lines if "listening on" in line)

    def err(self) -> str:
        """Everything the proxy wrote to stderr so far (all of it once stopped)."""
        return self.stderr_text()

    def stop(self, sig: int = signal.SIGTERM) -> Optional[int]:  # type: ignore[override]
        """`sig` to the proxy's process, EXIT_TIMEOUT for it to exit, then its process group
        stopped (Server.stop: what is left gets SIGTERM, then SIGKILL); its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        super().stop()
        return self.proc.returncode
