"""Child processes for the tests and the benchmarks: started in their own process group (so
that a supervisor's workers stop with it), stopped with SIGTERM and then SIGKILL, every wait
bounded; and the /proc readings of a process tree."""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from typing import IO, Any, Deque, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from .ports import HOST

START_TIMEOUT = 30.0   # seconds for a server to say it is ready
STOP_TIMEOUT = 5.0     # seconds for a server to exit after SIGTERM, then SIGKILL


class Server:
    """A server process in its own process group.

    A thread reads its stdout (keeping the last lines and, as `listening`, the address of
    the first `listening on HOST:PORT` line); its stderr goes to a file (in `workdir`, or a temporary
    one), shown by diagnosis() when it fails. `stdin`: subprocess.DEVNULL, or
    subprocess.PIPE for a child that exits when its parent's end closes.
    """

    def __init__(self, name: str, cmd: Sequence[str], workdir: Optional[str] = None,
                 env: Optional[Mapping[str, str]] = None, stdin: int = subprocess.DEVNULL) -> None:
        self.name, self.cmd = name, list(cmd)
        self.lines: Deque[str] = deque(maxlen=50)
        self.listening: Optional[Tuple[str, int]] = None
        self.cond = threading.Condition()
        self.stderr_path: Optional[str] = os.path.join(workdir, f"{name}.stderr") if workdir else None
        self._stderr: IO[bytes] = (open(self.stderr_path, "w+b") if self.stderr_path
                                   else tempfile.TemporaryFile())
        self._stderr_kept: Optional[str] = None  # all of it, read when stopped
        child_env = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(self.cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=child_env, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def port(self) -> int:
        """The port of its `listening on` line (waited for, bounded)."""
        return self.wait_listening()[1]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            m = re.search(r"listening on (\S+):(\d+)", line)
            with self.cond:
                self.lines.append(line)
                if m and self.listening is None:
                    self.listening = (m[1], int(m[2]))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_listening(self, timeout: float = START_TIMEOUT) -> Tuple[str, int]:
        """(host, port) from the first `listening on HOST:PORT` line; RuntimeError otherwise."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.listening is None and self.proc.poll() is None and time.monotonic() < deadline:
                self.cond.wait(min(deadline - time.monotonic(), 0.2))
            if self.listening is not None:
                return self.listening
        what = "exited before it said" if self.proc.poll() is not None else f"did not say in {timeout:.0f} s"
        raise RuntimeError(f"{self.name} {what} `listening on`\n{self.diagnosis()}")

    def wait_port(self, port: int, timeout: float = START_TIMEOUT) -> None:
        """Waits until HOST:port accepts a connection (for servers that print nothing)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with socket.create_connection((HOST, port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        what = "exited before accepting" if self.proc.poll() is not None else f"did not accept in {timeout:.0f} s"
        raise RuntimeError(f"{self.name} {what} connections on {HOST}:{port}\n{self.diagnosis()}")

    def stderr_text(self) -> str:
        """All it wrote to stderr so far (kept when it is stopped)."""
        if self._stderr_kept is not None:
            return self._stderr_kept
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", "replace")
            self._stderr.seek(0, os.SEEK_END)
            return text
        except (OSError, ValueError):  # closed: stopped meanwhile
            return ""

    def errors(self) -> str:
        """The tail of what it wrote to stderr."""
        return self.stderr_text()[-3000:]

    def diagnosis(self) -> str:
        """Exit status and the tail of its output, for an error message."""
        code = self.proc.poll()
        state = "running" if code is None else f"exited with {code}"
        with self.cond:
            out = "\n".join(self.lines)
        return f"  {self.name} ({' '.join(self.cmd)}): {state}\n  stdout: {out[-2000:]}\n  stderr: {self.errors()}"

    def kill(self) -> None:
        """SIGKILL to its process group (its connections are reset); reaped, bounded."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after STOP_TIMEOUT; bounded."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                continue
            if sig == signal.SIGTERM:
                try:  # workers left behind by a parent that exited
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            break
        self.reader.join(timeout=2)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        if self._stderr_kept is None:
            self._stderr_kept = self.stderr_text()
        self._stderr.close()


def stop_child(proc: "subprocess.Popen[str]", timeout: float = 20.0) -> Tuple[Optional[int], str]:
    """SIGTERM to a child started with text pipes, then its output read to the end; SIGKILL
    when it has not exited within `timeout`. Returns (exit status, what it wrote to stderr)."""
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=10)
    return proc.returncode, err or ""


def kit_module(module: str, *args: str) -> Tuple[List[str], Dict[str, str]]:
    """(command, environment) that run `python -m leastload_testkit.<module> ARGS` in a child
    process, with this kit importable there wherever the parent runs from."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return [sys.executable, "-m", f"{__package__}.{module}", *args], dict(os.environ, PYTHONPATH=path)



class KitServer(Server):
    """One of this kit's servers (`python -m leastload_testkit.MODULE --listen 127.0.0.1:PORT`)
    in a child process, started and waited for until it says `listening on`: `.port`, `.stop()`."""

    MODULE = ""  # set by each kind

    def __init__(self, port: int = 0, name: str = "", workdir: Optional[str] = None) -> None:
        cmd, env = kit_module(self.MODULE, "--listen", f"127.0.0.1:{port}")
        super().__init__(name or self.MODULE, cmd, workdir, env)
        try:
            self.wait_listening()
        except RuntimeError:
            self.stop()
            raise


def listen_main(description: str, serve: Any, argv: Optional[Sequence[str]] = None) -> int:
    """The command line of a kit server: `--listen HOST:PORT` (default 127.0.0.1:0), then
    `asyncio.run(serve(host, port))` until Ctrl-C or SIGTERM."""
    import argparse
    import asyncio

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT")
    args = p.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    try:
        asyncio.run(serve(host, int(port)))
    except KeyboardInterrupt:
        pass
    return 0

# ---- /proc ----------------------------------------------------------------------------------

def stat_fields(pid: int) -> List[str]:
    """The fields of /proc/PID/stat after the command name (index 0 is the state)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        text = f.read().decode("ascii", "replace")
    return text[text.rindex(")") + 2:].split()


def is_alive(pid: int) -> bool:
    """The process exists and is neither a zombie nor dead."""
    try:
        return stat_fields(pid)[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def children(pid: int) -> Set[int]:
    """PIDs whose parent is pid (all of the process's threads' children, zombies too)."""
    kids: Set[int] = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.update(int(k) for k in f.read().split())
        return kids
    except OSError:
        pass
    for entry in os.listdir("/proc"):  # kernels without the children file
        if entry.isdigit():
            try:
                if int(stat_fields(int(entry))[1]) == pid:
                    kids.add(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return kids


def process_tree(pid: int) -> List[int]:
    """pid and all its live descendants (the workers of `leastload proxy --workers N`)."""
    out: List[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        if p not in out and is_alive(p):
            out.append(p)
            todo.extend(sorted(children(p)))
    return out


def get_json(port: int, path: str, timeout: float = 5.0) -> Any:
    """GET http://127.0.0.1:port/path, its JSON body; RuntimeError on another status than 200."""
    import http.client
    import json
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"GET {path} on port {port}: {response.status}")
        return json.loads(body)
    finally:
        conn.close()
