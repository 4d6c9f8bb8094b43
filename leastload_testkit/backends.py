"""The toy backends (`python -m leastload.cli.backends`), each a Server process on 127.0.0.1."""
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .ports import HOST
from .processes import Server, get_json


class BackendProcess(Server):
    """One backend: `.port`, `.address`, `.stats()` (what it served, over HTTP), `.kill()`
    (SIGKILL: its connections are reset) and `.stop()`. `args`: more flags of
    `leastload backends` (--report-load U, say)."""

    def __init__(self, delay: float = 0.0, size: int = 1024, port: int = 0, args: Sequence[str] = (),
                 name: str = "backend", workdir: Optional[str] = None) -> None:
        super().__init__(name, [sys.executable, "-m", "leastload.cli.backends", "--listen", f"{HOST}:{port}",
                                "--delay", repr(delay), "--size", str(size), *args], workdir)
        try:
            self.wait_listening()
        except RuntimeError:
            self.stop()
            raise

    @property
    def address(self) -> str:
        """HOST:PORT, as --backend takes it."""
        return f"{HOST}:{self.port}"

    def stats(self) -> Any:
        return backend_stats(self.port)


def start_backend(delay: float = 0.0, size: int = 1024, port: int = 0, args: Sequence[str] = ()) -> BackendProcess:
    return BackendProcess(delay, size, port, args)


def start_backends(specs: Sequence[Tuple[str, float]], size: int, workdir: str,
                   servers: List[Server]) -> Dict[str, int]:
    """One process per (name, delay); returns {name: port}. Started servers are appended to
    `servers` (the caller stops them)."""
    ports = {}
    for name, delay in specs:
        server = BackendProcess(delay, size, name=f"backend-{name}", workdir=workdir)
        servers.append(server)
        ports[name] = server.port
    return ports


def backend_stats(port: int) -> Any:
    """A backend's GET /__stats."""
    return get_json(port, "/__stats")
