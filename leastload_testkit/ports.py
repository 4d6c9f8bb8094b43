"""Free ports on 127.0.0.1, for a server started later (each was free a moment ago)."""
import contextlib
import socket

HOST = "127.0.0.1"


def free_port() -> int:
    """A port that was free a moment ago."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def free_ports(n: int) -> int:
    """A port p with p .. p + n - 1 all free a moment ago (the admin ports of a supervisor and
    its workers). Bound as the proxy binds (SO_REUSEADDR): a port that a closed connection
    keeps in TIME_WAIT counts as free."""
    for _ in range(200):
        with contextlib.ExitStack() as stack:
            socks = [stack.enter_context(socket.socket()) for _ in range(n)]
            for s in socks:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                socks[0].bind((HOST, 0))
                base = int(socks[0].getsockname()[1])
                for i, s in enumerate(socks[1:], 1):
                    s.bind((HOST, base + i))
            except OSError:
                continue
            return base
    raise RuntimeError(f"no {n} adjacent free ports found")
