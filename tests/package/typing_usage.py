"""The public API as a user's code calls it, checked by `mypy --strict` in CI
(not collected by pytest: test_public_api.py and the rest of the suite run
these calls). A wrong argument type here, e.g. `vs.record(name, bytes="1500")`,
fails that check; .ci/run also makes sure mypy reports exactly that call."""
from typing import List, Optional, Tuple, Union

import leastload
from leastload import (DuplicateService, ManualClock, NoServiceAvailable, Transaction, TransactionEnded,
                       UnknownService, VirtualServer)
from leastload.reference import VirtualServer as ReferenceVirtualServer


def one_request(vs: VirtualServer, tried: List[str]) -> Optional[str]:
    try:
        with vs.acquire(exclude=tried) as t:
            handle: Transaction = t  # the public name of what acquire() returns
            handle.record(bytes=512, packets=1)
            t.finish(ttfb=0.004, status=200)
            return t.service
    except NoServiceAvailable:
        return None


def main() -> Tuple[str, Union[int, float], float]:
    clock = ManualClock(0.0)
    vs = VirtualServer("LEASTBANDWIDTH", clock=clock, new_service_request=4,
                       new_service_request_increment_interval=10, outlier_failures=5)
    vs.bind("S1", weight=2)
    vs.bind("S2")
    name: str = vs.select()
    vs.record(name, bytes=1500, packets=2)
    vs.finish(name, ttfb=0.002, status=200)
    vs.begin("S2")
    vs.fail("S2")
    vs.set_state("S2", "DOWN")
    vs.set(method="LEASTCONNECTION", startup_rr_factor=2)
    clock.advance(1.5)
    services: Tuple[str, ...] = vs.services
    assert one_request(vs, list(services[1:])) == "S1"
    with vs.atomic():
        loads = {n: vs.load(n) for n in vs.services}
    print(vs.show(), vs.info("S1")["active"], vs.snapshot()["method"], len(vs), "S1" in vs)
    print(vs.slow_start("S1"), vs.ejection("S1"), vs.weight("S1"), vs.state("S1"), vs.active("S1"))
    vs.drain("S1")
    ref = ReferenceVirtualServer("ROUNDROBIN", clock=ManualClock(3.0))
    ref.bind("A")
    for exc in (UnknownService, DuplicateService, TransactionEnded):
        assert issubclass(exc, Exception)
    return ref.select(), loads["S1"], clock.now()


if __name__ == "__main__":
    print(leastload.__version__, main())
