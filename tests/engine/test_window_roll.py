"""The second boundary on a vserver with many services and sparse traffic.

The C engine rolls the window over its live slots only (those with traffic in
the window or selections in this or the last second) and refreshes just the
keys that move, with one rebuild instead when most slots are live. The
differential state machine has five services, so it nearly always takes the
rebuild; here hundreds of services and a few requests a second take the
other path, against the reference, step by step.
"""

import random

import pytest

METHODS = ["LEASTBANDWIDTH", "LEASTPACKETS", "LEASTCONNECTION", "ROUNDROBIN", "LEASTRESPONSETIME"]
STEPS = [0.2, 0.5, 1.0, 1.0, 2.0, 3.0, 13.0, 14.0, 40.0]


def pair(c_impl, ref_impl, method, n):
    made = []
    for impl in (c_impl, ref_impl):
        clock = impl.ManualClock(1000.0)
        vs = impl.VirtualServer(method, clock=clock)
        for i in range(n):
            vs.bind(f"s{i}", weight=1 + i % 7)
        made.append((vs, clock))
    return made


def same(vservers):
    c, ref = (vs for vs, _ in vservers)
    assert c.snapshot() == ref.snapshot()
    assert c._totals() == ref._totals()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", range(3))
def test_sparse_traffic_over_many_seconds_matches_the_reference(c_impl, ref_impl, method, seed):
    rng = random.Random(seed)
    n = 300
    vservers = pair(c_impl, ref_impl, method, n)
    names = [f"s{i}" for i in range(n)]
    busy = []
    for step in range(400):
        op = rng.random()
        if op < 0.35:
            chosen = [vs.select() for vs, _ in vservers]
            assert chosen[0] == chosen[1], (step, chosen)
            busy.append(chosen[0])
            size = rng.choice([0, 1, 100, 1500, 10**6])
            for vs, _ in vservers:
                vs.record(chosen[0], bytes=size, packets=size // 1000 + 1)
        elif op < 0.5 and busy:
            name = busy.pop(rng.randrange(len(busy)))
            if name in vservers[0][0]:
                ttfb = rng.choice([None, 0.001, 0.05])
                for vs, _ in vservers:
                    vs.finish(name, ttfb=ttfb)
        elif op < 0.6:
            name = rng.choice(names)
            if name in vservers[0][0]:
                size, packets = rng.randrange(0, 5000), rng.randrange(0, 5)
                for vs, _ in vservers:
                    vs.record(name, bytes=size, packets=packets)
        elif op < 0.7:
            name = rng.choice(names)
            if name in vservers[0][0]:
                cap = rng.choice([None, 0, 1, 2])
                for vs, _ in vservers:
                    vs._set_cap(name, cap)
        elif op < 0.75:
            # unbind a run of services: holes, and now and then the compaction that closes them
            for name in rng.sample(names, 40):
                if name in vservers[0][0]:
                    for vs, _ in vservers:
                        vs.unbind(name)
            busy = [b for b in busy if b in vservers[0][0]]
        elif op < 0.8:
            for name in rng.sample(names, 40):
                if name not in vservers[0][0]:
                    weight = rng.randrange(1, 8)
                    for vs, _ in vservers:
                        vs.bind(name, weight=weight)
        else:
            seconds = rng.choice(STEPS)
            for _, clock in vservers:
                clock.advance(seconds)
        same(vservers)
