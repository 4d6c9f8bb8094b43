"""A WebSocket echo backend (the `websockets` package) for the tunnel tests and benchmark (127.0.0.1 only).

    python -m leastload_testkit.ws_backend --listen 127.0.0.1:0   # prints `listening on HOST:PORT`

or, from a test, `WsBackend()` (a child process: `.port`, `.stop()`). Every message it gets is
sent back as it came; a message `close` makes it close the connection (code 1000). Plain
HTTP requests that ask for no upgrade get 426 (the server's own refusal). Bounded: messages of
at most 1 MiB, per-connection flow control as the package does it.
"""

import sys
from typing import Any, Optional, Sequence

from .processes import KitServer, listen_main

MAX_MESSAGE = 1 << 20


async def echo(ws: Any) -> None:
    async for message in ws:
        if message == "close":
            await ws.close(1000, "asked")
            return
        await ws.send(message)


async def serve(host: str, port: int) -> None:
    from websockets.asyncio.server import serve as ws_serve

    async with ws_serve(echo, host, port, max_size=MAX_MESSAGE, compression=None) as server:
        bound = next(iter(server.sockets)).getsockname()
        print(f"listening on {bound[0]}:{bound[1]}", flush=True)
        await server.serve_forever()


def main(argv: Optional[Sequence[str]] = None) -> int:
    return listen_main("A WebSocket echo backend (see the module docstring).", serve, argv)


class WsBackend(KitServer):
    """The WebSocket echo backend in a child process: a Server with `.port`."""

    MODULE = "ws_backend"


if __name__ == "__main__":
    sys.exit(main())
