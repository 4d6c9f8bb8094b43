"""Free ports on 127.0.0.1, for a server started later (each was free a moment ago).

They are drawn below the kernel's ephemeral range (ip_local_port_range), where no outgoing
connection takes its local port: a port of that range found free is often taken a moment
later by some client socket on a busy machine, and the server started on it then fails
with "address already in use"."""
import contextlib
import random
import socket
from typing import Tuple

HOST = "127.0.0.1"
LOWEST = 10000  # below it, the well-known and registered ports that services listen on


def _draw_range() -> Tuple[int, int]:
    """[low, high): ports below the ephemeral range (or, where it cannot be read, 10000-32768)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            first = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32768
    return (LOWEST, first) if first - LOWEST >= 1000 else (LOWEST, 32768)


def free_port() -> int:
    """A port that was free a moment ago."""
    return free_ports(1)


def free_ports(n: int) -> int:
    """A port p with p .. p + n - 1 all free a moment ago (the admin ports of a supervisor and
    its workers). Bound as the proxy binds (SO_REUSEADDR): a port that a closed connection
    keeps in TIME_WAIT counts as free."""
    low, high = _draw_range()
    for _ in range(200):
        base = random.randrange(low, high - n)
        with contextlib.ExitStack() as stack:
            socks = [stack.enter_context(socket.socket()) for _ in range(n)]
            for s in socks:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                for i, s in enumerate(socks):
                    s.bind((HOST, base + i))
            except OSError:
                continue
            return base
    raise RuntimeError(f"no {n} adjacent free ports found")
