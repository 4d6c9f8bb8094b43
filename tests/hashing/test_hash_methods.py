"""The hash methods on both engines: key forms, settings, rendezvous stability and spread.

docs/semantics.md ("Hash methods") is the contract. The spread and stability
figures the docs state are measured here, over 100,000 keys and 10 services.
tests/data/hash_expected.json is a fixed key set's mapping computed with the
reference formula (src/leastload/hashing/rendezvous.py, run this file as a script to
write it again); both engines must reproduce it, on every platform.
"""
import ipaddress
import json
import pathlib

import pytest

from leastload.hashing import rendezvous as _hash
from leastload.engine.errors import NoServiceAvailable

EXPECTED_FILE = pathlib.Path(__file__).parents[1] / "data" / "hash_expected.json"
TEXT_METHODS = ("URLHASH", "DOMAINHASH", "CALLIDHASH", "TOKEN")
N_KEYS = 100_000


def make(impl, method, n=10, weights=None, **settings):
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer(method, clock, **settings)
    for i in range(n):
        vs.bind(f"s{i}", weights[i] if weights else 1)
    return vs, clock


def pick(vs, key, exclude=None):
    name = vs.select(exclude, key=key)
    vs.finish(name)
    return name


def mapping(vs, keys):
    return [pick(vs, k) for k in keys]


# ---- the committed expectation ------------------------------------------------------

EXPECTED_SERVICES = [("web-a", 1), ("web-b", 2), ("web-c", 3), ("web-d", 1), ("web-e", 5)]
EXPECTED_SEEDS = [0, 12345, 2**64 - 1]


def expected_keys():
    """(method, key as JSON can hold it) pairs: every method, several forms."""
    out = []
    for i in range(12):
        out.append(("SOURCEIPHASH", f"10.{i}.{i * 7 % 256}.{i * 13 % 256}"))
        out.append(("SOURCEIPHASH", f"2001:db8::{i:x}:{i * 31:x}"))
        out.append(("URLHASH", f"/shop/item/{i * 977}?color=red"))
        out.append(("DOMAINHASH", f"host{i}.example.com"))
        out.append(("CALLIDHASH", f"a84b4c76e66710@pc{i}.example.com"))
        out.append(("TOKEN", f"session-{i * 104729:x}"))
        out.append(("SRCIPSRCPORTHASH", [f"192.0.2.{i}", 1024 + i]))
        out.append(("SRCIPDESTIPHASH", [f"198.51.100.{i}", f"203.0.113.{255 - i}"]))
    return out


def as_key(method, key):
    return tuple(key) if isinstance(key, list) else key


def by_formula(seed, method, key):
    """The reference formula, written out: the bytes, XXH64, the least rank."""
    data = _hash.key_bytes(method, as_key(method, key), 0xFFFFFFFF, 128, 80)
    key_h = _hash.xxh64(data, seed)
    ranks = [_hash.rendezvous_rank(key_h, _hash.name_hash(name), w, i)
             for i, (name, w) in enumerate(EXPECTED_SERVICES)]
    return EXPECTED_SERVICES[ranks.index(min(ranks))][0]


def test_every_hash_method_of_the_registry_has_a_key_form(impl):
    from leastload.engine.methods import HASH_METHODS, TABLE
    hashed = [m.name for m in TABLE if m.family == "hash"]
    assert list(HASH_METHODS) == hashed and set(_hash.KEY_FORMS) == set(hashed)
    for method in hashed:  # and each engine picks by it: one key, one service, every time
        vs = impl.VirtualServer(method, clock=impl.ManualClock(1.0))
        for k in range(5):
            vs.bind(f"S{k}")
        key = {"SRCIPDESTIPHASH": (ipaddress.ip_address("10.0.0.1"), ipaddress.ip_address("10.0.0.2")),
               "SRCIPSRCPORTHASH": (ipaddress.ip_address("10.0.0.1"), 4000),
               "SOURCEIPHASH": ipaddress.ip_address("10.0.0.1"),
               "DESTINATIONIPHASH": ipaddress.ip_address("10.0.0.1")}.get(method, "example.com/a/b")
        assert len({vs.select(key=key) for _ in range(8)}) == 1, method


def test_the_committed_mapping_is_the_reference_formula():
    data = json.loads(EXPECTED_FILE.read_text())
    assert data["services"] == [list(s) for s in EXPECTED_SERVICES]
    for seed_s, rows in data["mappings"].items():
        for method, key, service in rows:
            assert by_formula(int(seed_s), method, key) == service, (seed_s, method, key)


def test_both_engines_reproduce_the_committed_mapping(impl):
    data = json.loads(EXPECTED_FILE.read_text())
    for seed_s, rows in data["mappings"].items():
        vss = {}
        for method, key, service in rows:
            if method not in vss:
                vs = impl.VirtualServer(method, impl.ManualClock(0.0), hash_seed=int(seed_s))
                for name, w in EXPECTED_SERVICES:
                    vs.bind(name, w)
                vss[method] = vs
            assert pick(vss[method], as_key(method, key)) == service, (seed_s, method, key)


def test_the_mapping_uses_every_service_and_the_seed_changes_it():
    data = json.loads(EXPECTED_FILE.read_text())
    maps = list(data["mappings"].values())
    for rows in maps:
        assert {r[2] for r in rows} == {name for name, _ in EXPECTED_SERVICES}
    assert sum(a[2] != b[2] for a, b in zip(maps[0], maps[1])) > len(maps[0]) // 3


# ---- spread and stability: 100,000 keys, 10 services -------------------------------------

@pytest.fixture(scope="module")
def spread_and_moves(impl):
    """Per engine: the shares of 10 equal services, then what removing one moved."""
    keys = [f"/object/{i}" for i in range(N_KEYS)]
    vs, _ = make(impl, "URLHASH")
    before = mapping(vs, keys)
    vs.unbind("s3")
    after = mapping(vs, keys)
    return keys, before, after


def test_spread_over_ten_services_is_even(spread_and_moves):
    _, before, _ = spread_and_moves
    counts = [before.count(f"s{i}") for i in range(10)]
    # 10,000 expected each; a binomial's sd is 95: 5 % is more than 5 sd
    assert max(counts) / min(counts) < 1.10, counts
    assert all(9_500 <= c <= 10_500 for c in counts), counts


def test_removing_one_of_ten_moves_its_keys_only(spread_and_moves):
    keys, before, after = spread_and_moves
    moved = [i for i in range(len(keys)) if before[i] != after[i]]
    assert all(before[i] == "s3" for i in moved)  # no other key moved
    assert len(moved) == before.count("s3")  # every key of s3 moved
    assert 9_500 <= len(moved) <= 10_500  # about 1/10 of them
    # its keys spread over the nine others
    landed = [after[i] for i in moved]
    assert all(700 <= landed.count(f"s{i}") <= 1_500 for i in range(10) if i != 3)


@pytest.mark.parametrize("how", ["DOWN", "OUT_OF_SERVICE", "drain", "exclude"])
def test_a_service_leaving_moves_only_its_keys_and_they_come_back(impl, how):
    keys = [ipaddress.IPv4Address(0x0A000000 + 7919 * i) for i in range(3000)]
    vs, _ = make(impl, "SOURCEIPHASH", n=6)
    before = mapping(vs, keys)
    exclude = None
    if how == "exclude":
        exclude = ["s2"]
    elif how == "drain":
        vs.drain("s2")  # idle: unbound at once
    else:
        vs.set_state("s2", how)
    after = [pick(vs, k, exclude) for k in keys]
    assert "s2" not in after
    assert all(a == b for a, b in zip(before, after) if a != "s2")
    if how in ("DOWN", "OUT_OF_SERVICE", "exclude"):
        vs.set_state("s2", "UP")
        assert mapping(vs, keys) == before


def test_binding_a_service_takes_keys_from_the_others_only_for_itself(impl):
    keys = [f"tok-{i}" for i in range(5000)]
    vs, _ = make(impl, "TOKEN", n=5)
    before = mapping(vs, keys)
    vs.bind("new")
    after = mapping(vs, keys)
    changed = [i for i in range(len(keys)) if before[i] != after[i]]
    assert all(after[i] == "new" for i in changed)
    assert 700 <= len(changed) <= 1_000  # about 1/6


def test_weights_give_proportional_shares(impl):
    weights = [1, 2, 3, 4]
    vs, _ = make(impl, "CALLIDHASH", n=4, weights=weights)
    got = mapping(vs, [f"call-{i}@example.net" for i in range(20_000)])
    for i, w in enumerate(weights):
        share = got.count(f"s{i}") / len(got)
        assert abs(share - w / 10) < 0.015, (i, share)


def test_a_weight_change_moves_keys_towards_or_away_from_that_service_only(impl):
    keys = [f"/w/{i}" for i in range(5000)]
    vs, _ = make(impl, "URLHASH", n=4)
    before = mapping(vs, keys)
    vs.set_weight("s1", 3)
    after = mapping(vs, keys)
    changed = [i for i in range(len(keys)) if before[i] != after[i]]
    assert changed and all(after[i] == "s1" for i in changed)


def test_equal_and_unequal_weight_paths_agree_with_the_formula(impl):
    # the C engine skips the logarithm between equal weights: a mix exercises both paths
    services = [("a", 1), ("b", 1), ("c", 7), ("d", 7), ("e", 100), ("f", 1)]
    vs = impl.VirtualServer("TOKEN", impl.ManualClock(0.0), hash_seed=99)
    for name, w in services:
        vs.bind(name, w)
    for i in range(1500):
        key = f"k{i}"
        key_h = _hash.xxh64(key.encode(), 99)
        ranks = [_hash.rendezvous_rank(key_h, _hash.name_hash(n), w, j) for j, (n, w) in enumerate(services)]
        assert pick(vs, key) == services[ranks.index(min(ranks))][0], key


def test_the_mapping_depends_on_names_and_weights_only(impl):
    # a vserver switched to URLHASH after its binds, and one that unbound many (its slots
    # compacted), map like a fresh one with the same services in the same order
    keys = [f"/m/{i}" for i in range(2000)]
    fresh, _ = make(impl, "URLHASH", n=8)
    switched, _ = make(impl, "LEASTCONNECTION", n=8)
    switched.set_method("URLHASH")
    churned = impl.VirtualServer("URLHASH", impl.ManualClock(0.0))
    for i in range(40):
        churned.bind(f"x{i}")
        if i < 8:
            churned.bind(f"s{i}")
    for i in range(40):
        churned.unbind(f"x{i}")
    assert churned.services == fresh.services
    expected = mapping(fresh, keys)
    assert mapping(switched, keys) == expected
    assert mapping(churned, keys) == expected


# ---- the defining behaviour of each method ----------------------------------------------

def test_the_same_key_always_goes_to_the_same_service_whatever_the_load(impl):
    vs, _ = make(impl, "URLHASH", n=5)
    first = vs.select(key="/a")
    for _ in range(20):
        assert vs.select(key="/a") == first  # never finished: its load grows, the key stays


@pytest.mark.parametrize("method", ["SOURCEIPHASH", "DESTINATIONIPHASH"])
def test_ip_key_forms_are_one_key(impl, method):
    vs, _ = make(impl, method)
    for i in range(50):
        text = f"172.16.{i}.{(i * 37) % 256}"
        addr = ipaddress.IPv4Address(text)
        forms = [text, addr, addr.packed, bytearray(addr.packed),
                 ipaddress.IPv6Address(f"::ffff:{text}"), f"::ffff:{text}"]
        assert len({pick(vs, f) for f in forms}) == 1, text
        six = ipaddress.IPv6Address(f"2001:db8:{i:x}::1")
        assert pick(vs, six) == pick(vs, str(six)) == pick(vs, six.packed)


def test_netmask_groups_the_addresses_of_a_subnet(impl):
    vs, _ = make(impl, "SOURCEIPHASH", netmask="255.255.255.0")
    for net in range(30):
        picks = {pick(vs, f"10.1.{net}.{host}") for host in (1, 2, 77, 254)}
        assert len(picks) == 1, net
    # whole subnets still spread
    assert len({pick(vs, f"10.1.{net}.1") for net in range(60)}) >= 8
    vs.set(netmask="255.255.255.255")
    assert vs.netmask == "255.255.255.255"
    assert len({pick(vs, f"10.1.0.{host}") for host in range(60)}) >= 8


def test_v6netmasklen_groups_the_addresses_of_a_prefix(impl):
    vs, _ = make(impl, "SOURCEIPHASH", v6netmasklen=64)
    for net in range(30):
        picks = {pick(vs, f"2001:db8:0:{net:x}::{host:x}") for host in (1, 2, 0xbeef, 0xffff)}
        assert len(picks) == 1, net
    assert len({pick(vs, f"2001:db8:0:{net:x}::1") for net in range(60)}) >= 8
    # the IPv4 mask is a separate setting: IPv4 keys are not grouped
    assert len({pick(vs, f"10.0.0.{host}") for host in range(60)}) >= 8


def test_a_zero_mask_sends_every_address_to_one_service(impl):
    vs, _ = make(impl, "SOURCEIPHASH", netmask="0.0.0.0", v6netmasklen=0)
    assert len({pick(vs, f"10.{i}.{i}.{i}") for i in range(40)}) == 1
    assert len({pick(vs, f"2001:db8::{i:x}") for i in range(40)}) == 1


def test_srcipdestiphash_hashes_both_addresses(impl):
    vs, _ = make(impl, "SRCIPDESTIPHASH")
    src = ipaddress.IPv4Address("192.0.2.1")
    by_dst = {pick(vs, (src, f"198.51.100.{i}")) for i in range(60)}
    by_src = {pick(vs, (f"192.0.2.{i}", "198.51.100.1")) for i in range(60)}
    assert len(by_dst) >= 8 and len(by_src) >= 8
    assert pick(vs, (src, "2001:db8::1")) == pick(vs, ("192.0.2.1", ipaddress.IPv6Address("2001:db8::1")))


def test_srcipsrcporthash_hashes_address_and_port(impl):
    vs, _ = make(impl, "SRCIPSRCPORTHASH", netmask="255.255.0.0")
    assert len({pick(vs, ("192.0.2.1", port)) for port in range(1000, 1060)}) >= 8
    # the mask applies to the address, not the port
    for port in (0, 80, 65535):
        assert pick(vs, ("192.0.2.1", port)) == pick(vs, ("192.0.99.200", port))


def test_urlhash_hashes_the_first_hashlength_bytes(impl):
    prefix = "/" + "p" * 79  # 80 bytes
    vs, _ = make(impl, "URLHASH")
    assert vs.hashlength == 80
    assert len({pick(vs, prefix + f"?q={i}") for i in range(40)}) == 1
    vs.set(hashlength=100)
    assert len({pick(vs, prefix + f"?q={i}") for i in range(40)}) >= 8
    # str is its UTF-8 bytes
    assert pick(vs, "/caf\u00e9") == pick(vs, "/caf\u00e9".encode()) == pick(vs, bytearray("/caf\u00e9".encode()))


def test_domainhash_ignores_case_and_the_root_dot(impl):
    vs, _ = make(impl, "DOMAINHASH")
    for i in range(30):
        name = f"shop{i}.example.com"
        assert len({pick(vs, k) for k in (name, name.upper(), name + ".", name.encode())}) == 1
    assert len({pick(vs, f"shop{i}.example.com") for i in range(60)}) >= 8


@pytest.mark.parametrize("no_domain", [None, "", b"", "."])
def test_domainhash_without_a_domain_is_leastconnection(impl, no_domain):
    vs, _ = make(impl, "DOMAINHASH", n=3)
    for _ in range(4):
        vs.begin("s0")
    vs.begin("s1")
    # least connections: s2 (0), then s1 and s2 tie at 1 ...
    got = [vs.select(key=no_domain) for _ in range(5)]
    assert got == ["s2", "s1", "s2", "s1", "s2"]
    assert vs.select() == "s1"  # no key at all: the same fallback


@pytest.mark.parametrize("method", ["CALLIDHASH", "TOKEN"])
def test_callid_and_token_hash_the_whole_value(impl, method):
    vs, _ = make(impl, method)
    long_prefix = "x" * 200
    assert len({pick(vs, long_prefix + str(i)) for i in range(60)}) >= 8  # no hashlength cut
    assert pick(vs, "abc") == pick(vs, b"abc")


# ---- keys and methods ----------------------------------------------------------------------

@pytest.mark.parametrize("method", ["LEASTCONNECTION", "ROUNDROBIN"])
def test_a_key_is_ignored_by_a_method_that_does_not_hash(impl, method):
    with_key, _ = make(impl, method, n=4)
    without, _ = make(impl, method, n=4)
    keys = ["/a", b"x", 5, None, ("1.2.3.4", 80), object()]
    for i in range(24):
        assert with_key.select(key=keys[i % len(keys)]) == without.select()


def test_switching_to_a_hash_method_and_back(impl):
    vs, _ = make(impl, "LEASTCONNECTION", n=5)
    vs.set_method("URLHASH")
    first = pick(vs, "/x")
    assert all(pick(vs, "/x") == first for _ in range(5))
    vs.set(method="LEASTCONNECTION")
    assert len({pick(vs, "/x") for _ in range(5)}) == 5  # the key is ignored: idle ties go round
    vs.set_method("URLHASH")
    assert pick(vs, "/x") == first


def test_acquire_takes_the_key_too(impl):
    vs, _ = make(impl, "URLHASH", n=5)
    expected = pick(vs, "/acq")
    with vs.acquire(key="/acq") as tx:
        assert tx.service == expected
    assert vs.active(expected) == 0


def test_no_eligible_service_raises(impl):
    vs, _ = make(impl, "URLHASH", n=2)
    vs.set_state("s0", "DOWN")
    with pytest.raises(NoServiceAvailable):
        vs.select(["s1"], key="/x")


# ---- slow start --------------------------------------------------------------------------

def test_a_ramping_service_takes_only_its_capped_share_and_the_other_keys_stay(impl):
    keys = [f"/ss/{i}" for i in range(400)]
    clock = impl.ManualClock(0.0)
    vs = impl.VirtualServer("URLHASH", clock)
    for i in range(4):
        vs.bind(f"s{i}")
    vs.set(new_service_request=5)  # slow start for the services bound from now on
    clock.advance(1.0)
    settled = mapping(vs, keys)  # no service is new: no caps
    clock.advance(1.0)
    vs.bind("new")  # in slow start: 5 selections a second
    clock.advance(0.1)
    got = mapping(vs, keys)
    assert got.count("new") == 5  # its capped share this second
    # keys that do not map to it stay where they were
    ideal = _ideal(keys, ["s0", "s1", "s2", "s3", "new"])
    for key, was, now, best in zip(keys, settled, got, ideal):
        if best != "new":
            assert now == was, key
        else:
            assert now in ("new", was), key  # the first 5 of them, then their old place


def _ideal(keys, names):
    out = []
    for k in keys:
        key_h = _hash.xxh64(_hash.key_bytes("URLHASH", k, 0xFFFFFFFF, 128, 80), 0)
        ranks = [_hash.rendezvous_rank(key_h, _hash.name_hash(n), 1, i) for i, n in enumerate(names)]
        out.append(names[ranks.index(min(ranks))])
    return out


# ---- settings and bad input -------------------------------------------------------------

def test_settings_defaults_and_show(impl):
    vs, _ = make(impl, "SOURCEIPHASH", n=1)
    assert (vs.netmask, vs.v6netmasklen, vs.hashlength, vs.hash_seed) == ("255.255.255.255", 128, 80, 0)
    vs.set(netmask=ipaddress.IPv4Address("255.255.240.0"), v6netmasklen=48, hashlength=4096, hash_seed=2**64 - 1)
    assert (vs.netmask, vs.v6netmasklen, vs.hashlength, vs.hash_seed) == ("255.255.240.0", 48, 4096, 2**64 - 1)
    shown = str(vs.show())
    assert "255.255.240.0" in shown and "v6netmasklen" in shown


@pytest.mark.parametrize("setting,value,exc", [
    ("netmask", "255.0.255.0", ValueError), ("netmask", "300.0.0.0", ValueError), ("netmask", 24, TypeError),
    ("netmask", "ffff::", ValueError), ("v6netmasklen", 129, ValueError), ("v6netmasklen", -1, ValueError),
    ("v6netmasklen", True, TypeError), ("hashlength", 0, ValueError), ("hashlength", 4097, ValueError),
    ("hashlength", 8.0, TypeError), ("hash_seed", -1, ValueError), ("hash_seed", 2**64, ValueError),
    ("hash_seed", "1", TypeError),
])
def test_bad_settings_name_the_setting_and_change_nothing(impl, setting, value, exc):
    with pytest.raises(exc, match=setting):
        impl.VirtualServer("URLHASH", impl.ManualClock(0.0), **{setting: value})
    vs, _ = make(impl, "URLHASH", n=3)
    before = [pick(vs, f"/{i}") for i in range(20)]
    with pytest.raises(exc, match=setting):
        vs.set(**{"hash_seed": 7, "hashlength": 9, setting: value})  # nothing half-applied
    assert (vs.hash_seed, vs.hashlength) == (0, 80)
    assert [pick(vs, f"/{i}") for i in range(20)] == before


@pytest.mark.parametrize("method,key,exc", [
    ("SOURCEIPHASH", None, TypeError), ("SOURCEIPHASH", 167772161, TypeError),
    ("SOURCEIPHASH", "10.0.0.256", ValueError), ("SOURCEIPHASH", b"\x01\x02\x03", ValueError),
    ("SOURCEIPHASH", ("10.0.0.1", "10.0.0.2"), TypeError),
    ("SRCIPDESTIPHASH", "10.0.0.1", TypeError), ("SRCIPDESTIPHASH", ("10.0.0.1",), TypeError),
    ("SRCIPDESTIPHASH", ["10.0.0.1", "10.0.0.2"], TypeError), ("SRCIPDESTIPHASH", ("10.0.0.1", "x"), ValueError),
    ("SRCIPSRCPORTHASH", ("10.0.0.1", 65536), ValueError), ("SRCIPSRCPORTHASH", ("10.0.0.1", -1), ValueError),
    ("SRCIPSRCPORTHASH", ("10.0.0.1", "80"), TypeError), ("SRCIPSRCPORTHASH", ("10.0.0.1", True), TypeError),
    ("URLHASH", None, TypeError), ("URLHASH", 5, TypeError), ("DOMAINHASH", 5, TypeError),
    ("CALLIDHASH", "", ValueError), ("TOKEN", b"", ValueError), ("TOKEN", None, TypeError),
    ("TOKEN", ["a"], TypeError),
])
def test_a_bad_key_names_key_and_changes_nothing(impl, method, key, exc):
    vs, clock = make(impl, method, n=3)
    vs.begin("s1")
    before = vs.snapshot()
    with pytest.raises(exc, match="key"):
        vs.select(key=key)
    with pytest.raises(exc, match="key"):
        vs.acquire(key=key)
    assert vs.snapshot() == before


if __name__ == "__main__":  # writes tests/data/hash_expected.json from the reference formula
    keys = expected_keys()
    out = {"made_by": "python tests/hashing/test_hash_methods.py (the reference formula, src/leastload/hashing/rendezvous.py)",
           "services": [list(s) for s in EXPECTED_SERVICES],
           "mappings": {str(seed): [[m, k, by_formula(seed, m, k)] for m, k in keys] for seed in EXPECTED_SEEDS}}
    lines = ['{', f' "made_by": {json.dumps(out["made_by"])},', f' "services": {json.dumps(out["services"])},',
             ' "mappings": {']
    for j, (seed, rows) in enumerate(out["mappings"].items()):
        lines.append(f'  "{seed}": [')
        lines += [f"   {json.dumps(r)}" + ("," if i < len(rows) - 1 else "") for i, r in enumerate(rows)]
        lines.append("  ]" + ("," if j < len(out["mappings"]) - 1 else ""))
    EXPECTED_FILE.write_text("\n".join(lines + [" }", "}"]) + "\n")
