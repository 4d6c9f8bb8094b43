"""The C engine's rendezvous pick takes shortcuts; each must give the formula's answer.

The pick scans the slots in bind order: while the eligible weights equal
the first one's it compares scores only; from the first weight that differs
on, a slot is first tested against a lower bound of its logarithm, and only
the few that pass compute it (csrc/ll_hash.c), in the build of the scan
chosen for the processor (SSE2, AVX2, AVX-512). These tests drive every
branch of that, in every build the processor has, with many keys against
the reference formula
(_hash.rendezvous_rank), and check the bound itself on the reference's
integers, which the C engine's equal (tests/hashing/test_hash_function.py).
"""
import ipaddress
import random

import pytest

from leastload.hashing import rendezvous as _hash

# the bound's constant in csrc/ll_hash.c: K = 14195655 / 10000 >= 2048 ln 2
BOUND_K_NUM, BOUND_K_DEN = 14195655, 10000
M64 = 2**64 - 1


def test_the_bound_constant_is_at_least_2048_ln_2():
    import math
    assert BOUND_K_NUM / BOUND_K_DEN >= 2048 * math.log(2)
    assert BOUND_K_NUM / BOUND_K_DEN - 2048 * math.log(2) < 1e-3  # and close: the bound stays sharp


def bound_inputs():
    rng = random.Random(7)
    xs = [0, 1, 2, 3, 2**63 - 1, 2**63, 2**64 - 2, M64]
    xs += [rng.getrandbits(64) for _ in range(20000)]
    # x near 2**64 (small L, where the winners are), for every count of leading ones
    xs += [M64 - rng.getrandbits(b) for b in range(0, 64) for _ in range(40)]
    xs += [M64 ^ (1 << b) for b in range(64)]
    # the table's points, where the interpolation's remainder is zero
    xs += [((1 << 10) + k) << 53 for k in range(1 << 10)]
    xs += [(((1 << 10) + k) << 53) - 1 for k in range(1, 1 << 10)]
    return xs


def test_the_logarithm_is_never_below_the_bound_the_pick_skips_by():
    # L >= g / K - 4 with g = ~x >> 33, in integers: (L + 4) * K_NUM >= g * K_DEN
    for x in bound_inputs():
        g = (~x & M64) >> 33
        assert (_hash.neg_log2(x) + 4) * BOUND_K_NUM >= g * BOUND_K_DEN, x


def by_formula(key_h, services):
    """The eligible service the reference formula picks: services are (name, weight, eligible)."""
    ranks = [(_hash.rendezvous_rank(key_h, _hash.name_hash(name), w, i), name)
             for i, (name, w, ok) in enumerate(services) if ok]
    return min(ranks)[1]


def build(impl, method, services, seed):
    vs = impl.VirtualServer(method, impl.ManualClock(0.0), hash_seed=seed)
    for name, w, _ in services:
        vs.bind(name, w)
    for name, _, ok in services:
        if not ok:
            vs.set_state(name, "DOWN")
    return vs


def check_keys(vs, services, seed, n_keys, rng, exclude_some=False):
    for i in range(n_keys):
        key = f"/k/{rng.getrandbits(48):x}/{i}"
        expected_services = services
        exclude = None
        if exclude_some and i % 3 == 0:
            eligible = [name for name, _, ok in services if ok]
            exclude = set(rng.sample(eligible, min(len(eligible) - 1, rng.randint(1, 3))))
            expected_services = [(n, w, ok and n not in exclude) for n, w, ok in services]
        key_h = _hash.xxh64(key.encode(), seed)
        name = vs.select(exclude, key=key)
        vs.finish(name)
        assert name == by_formula(key_h, expected_services), (key, exclude)


LAYOUTS = {
    # name -> weights of n services: each takes a different way through the pick
    "all equal": lambda rng, n: [7] * n,
    "random 1..100": lambda rng, n: [rng.randint(1, 100) for _ in range(n)],
    "a long equal run, then others": lambda rng, n: [3] * (n - n // 4) + [rng.randint(1, 100) for _ in range(n // 4)],
    "equal but the last": lambda rng, n: [50] * (n - 1) + [51],
    "equal but the first": lambda rng, n: [1] + [100] * (n - 1),
    "two weights alternating": lambda rng, n: [1 if i % 2 else 2 for i in range(n)],
    "the extremes": lambda rng, n: [rng.choice((1, 100)) for _ in range(n)],
}


PATHS = {"sse2": 1, "avx2": 2, "avx512": 3}  # the packed scan's builds (ll_hash_force_path)


@pytest.fixture(params=list(PATHS))
def scan_build(request, c_impl):
    """Each build of the packed scan this processor has, one after the other (a
    vserver uses the best one; every other hash test runs that)."""
    from leastload.engine._engine import _hash_force_path
    if not _hash_force_path(PATHS[request.param]):
        pytest.skip(f"this processor or build has no {request.param} scan")
    yield request.param
    _hash_force_path(0)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 64, 129])
def test_the_pick_is_the_formula_for_every_weight_layout(c_impl, scan_build, layout, n):
    rng = random.Random(f"{layout}/{n}")
    seed = rng.getrandbits(64)
    services = [(f"svc-{i}", w, True) for i, w in enumerate(LAYOUTS[layout](rng, n))]
    vs = build(c_impl, "URLHASH", services, seed)
    check_keys(vs, services, seed, 300 if n < 64 else 600, rng)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_ineligible_and_excluded_services_are_skipped_on_every_path(c_impl, scan_build, layout):
    rng = random.Random(f"down/{layout}")
    n = 70
    seed = rng.getrandbits(64)
    weights = LAYOUTS[layout](rng, n)
    # the first services DOWN too, so the pick's first eligible slot is not slot 0
    services = [(f"svc-{i}", w, i >= 3 and rng.random() > 0.3) for i, w in enumerate(weights)]
    vs = build(c_impl, "URLHASH", services, seed)
    check_keys(vs, services, seed, 900, rng, exclude_some=True)


def test_a_weight_changed_between_picks_is_read_on_the_next_pick(c_impl):
    rng = random.Random(3)
    seed = 99
    services = [(f"svc-{i}", 10, True) for i in range(40)]
    vs = build(c_impl, "TOKEN", services, seed)
    check_keys(vs, services, seed, 200, rng)
    for _ in range(8):  # equal -> mixed -> equal again, one service at a time
        i = rng.randrange(len(services))
        w = rng.choice((10, rng.randint(1, 100)))
        vs.set_weight(services[i][0], w)
        services[i] = (services[i][0], w, True)
        check_keys(vs, services, seed, 150, rng)
    for i, (name, w, _) in enumerate(services):
        if w != 10:
            vs.set_weight(name, 10)
            services[i] = (name, 10, True)
    check_keys(vs, services, seed, 200, rng)


def test_ip_keys_take_the_same_pick(c_impl):
    # SOURCEIPHASH's key path in the binding (address objects, text, packed) feeds the same pick
    rng = random.Random(11)
    services = [(f"svc-{i}", rng.randint(1, 100), True) for i in range(64)]
    vs = build(c_impl, "SOURCEIPHASH", services, 0)
    for _ in range(500):
        addr = ipaddress.IPv4Address(rng.getrandbits(32))
        data = _hash.key_bytes("SOURCEIPHASH", addr, 0xFFFFFFFF, 128, 80)
        expected = by_formula(_hash.xxh64(data, 0), services)
        for key in (addr, str(addr), addr.packed, ipaddress.IPv6Address(f"::ffff:{addr}")):
            name = vs.select(key=key)
            vs.finish(name)
            assert name == expected, key


def test_binding_and_unbinding_other_weights_switch_between_the_scans(c_impl):
    # the C engine counts the bound weights: one weight reads none in the scan; the
    # counts must follow bind, unbind and holes (a DOWN service keeps its weight counted)
    rng = random.Random(17)
    seed = 5
    services = [(f"svc-{i}", 4, True) for i in range(30)]
    vs = build(c_impl, "CALLIDHASH", services, seed)
    check_keys(vs, services, seed, 150, rng)
    vs.bind("odd-one", 90)
    services.append(("odd-one", 90, True))
    check_keys(vs, services, seed, 150, rng)
    vs.set_state("odd-one", "DOWN")  # bound, of another weight, not eligible
    services[-1] = ("odd-one", 90, False)
    check_keys(vs, services, seed, 150, rng)
    vs.unbind("odd-one")
    del services[-1]
    for name in ("svc-0", "svc-13", "svc-29"):  # holes at the start, middle and end
        vs.unbind(name)
    services = [s for s in services if s[0] not in ("svc-0", "svc-13", "svc-29")]
    check_keys(vs, services, seed, 150, rng)
    vs.bind("svc-0", 4)
    vs.bind("heavy", 100)
    services += [("svc-0", 4, True), ("heavy", 100, True)]
    check_keys(vs, services, seed, 150, rng)


@pytest.mark.parametrize("v6len", [0, 1, 7, 8, 63, 64, 65, 100, 127, 128])
def test_ipv6_keys_are_masked_as_the_reference_masks_them(c_impl, v6len):
    # the binding reads an IPv6Address's int in two halves and masks it itself
    rng = random.Random(v6len)
    services = [(f"svc-{i}", 1, True) for i in range(16)]
    vs = c_impl.VirtualServer("SOURCEIPHASH", c_impl.ManualClock(0.0), v6netmasklen=v6len, hash_seed=3)
    for name, w, _ in services:
        vs.bind(name, w)
    keys = [ipaddress.IPv6Address(rng.getrandbits(128)) for _ in range(150)]
    keys += [ipaddress.IPv6Address(f"::ffff:{ipaddress.IPv4Address(rng.getrandbits(32))}") for _ in range(20)]
    keys += [ipaddress.IPv6Address((0xFFFF << 32) | (1 << 48) | rng.getrandbits(32)) for _ in range(20)]  # not mapped
    keys += [ipaddress.IPv6Address(f"fe80::{rng.getrandbits(16):x}%eth0")]  # a scope id is not hashed
    for key in keys:
        data = _hash.key_bytes("SOURCEIPHASH", key, 0xFFFFFFFF, v6len, 80)
        name = vs.select(key=key)
        vs.finish(name)
        assert name == by_formula(_hash.xxh64(data, 3), services), key
