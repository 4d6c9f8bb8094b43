"""Client-side load balancing with httpx and leastload.

Start two toy backends first, in another shell:

    leastload backends --listen 127.0.0.1:9001 --listen 127.0.0.1:9002

then run `python examples/httpx_client.py` (needs `pip install leastload[httpx]`;
other addresses: `python examples/httpx_client.py HOST:PORT HOST:PORT`).
It sends 200 requests from 16 asyncio tasks over both backends, drains the
first one and sends 50 more, and prints who served what and the vserver.
"""
import asyncio
import sys
from collections import Counter
from typing import Dict

import httpx

from leastload.httpx import Transport


async def send(client: httpx.AsyncClient, count: int, tasks: int = 16) -> Dict[str, int]:
    served: "Counter[str]" = Counter()
    left = [count]

    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            r = await client.get("/items", params={"delay": 0.005})  # the toy backend waits 5 ms
            served[r.extensions["leastload_backend"]] += 1

    await asyncio.gather(*(worker() for _ in range(tasks)))
    return dict(served)


async def main() -> None:
    first, second = sys.argv[1:3] if len(sys.argv) >= 3 else ("127.0.0.1:9001", "127.0.0.1:9002")
    transport = Transport([f"app1={first}", f"app2={second}"], method="LEASTCONNECTION")
    # base_url names the service: it is the Host header the backends see
    async with httpx.AsyncClient(transport=transport, base_url="http://api.internal") as client:
        print("both backends:", await send(client, 200))
        transport.drain_backend("app1")  # no new requests; unbound once its last one ends
        print("app1 drained: ", await send(client, 50))
    print(transport.vserver.show())


if __name__ == "__main__":
    asyncio.run(main())
