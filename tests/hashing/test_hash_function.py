"""XXH64, the hash methods' hash: the C core's and the reference's, against the published vectors.

The vectors (tests/data/xxh64_vectors.json) are xxHash's own sanity table;
the file names its source. Both implementations must give every one of
them, and must agree with each other on inputs of every length up to two
stripes past the 32-byte block, so every tail path is covered.
"""
import json
import pathlib
import random

import pytest

from leastload.hashing import rendezvous as _hash

VECTORS = json.loads((pathlib.Path(__file__).parents[1] / "data" / "xxh64_vectors.json").read_text())


def sanity_buffer(length):
    out = bytearray()
    g = 2654435761
    for _ in range(length):
        out.append(g >> 56)
        g = (g * 11400714785074694797) & 0xFFFFFFFFFFFFFFFF
    return bytes(out)


@pytest.fixture(scope="module")
def c_hash64(c_impl):
    from leastload.engine._engine import _hash64
    return _hash64


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: f"len{v['length']}-seed{v['seed']}")
def test_reference_xxh64_gives_the_published_vectors(vector):
    data = sanity_buffer(vector["length"])
    assert _hash.xxh64(data, vector["seed"]) == int(vector["xxh64"], 16)


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: f"len{v['length']}-seed{v['seed']}")
def test_c_xxh64_gives_the_published_vectors(c_hash64, vector):
    data = sanity_buffer(vector["length"])
    assert c_hash64(data, vector["seed"]) == int(vector["xxh64"], 16)


def test_c_and_reference_agree_on_every_length_and_on_extreme_seeds(c_hash64):
    rng = random.Random(20261201)
    for length in range(0, 100):
        data = bytes(rng.randrange(256) for _ in range(length))
        for seed in (0, 1, 2**63, 2**64 - 1, rng.getrandbits(64)):
            assert c_hash64(data, seed) == _hash.xxh64(data, seed), (length, seed)


def test_every_input_byte_and_the_seed_change_the_hash(c_hash64):
    data = bytearray(sanity_buffer(70))
    base = c_hash64(bytes(data), 7)
    assert c_hash64(bytes(data), 8) != base
    for i in range(len(data)):
        data[i] ^= 1
        assert c_hash64(bytes(data), 7) != base, i
        data[i] ^= 1


def test_neg_log2_is_close_to_the_real_logarithm_and_never_grows():
    import math
    rng = random.Random(5)
    xs = sorted([0, 1, 2**63, 2**64 - 1] + [rng.getrandbits(64) for _ in range(2000)]
                + [2**64 - 1 - rng.getrandbits(40) for _ in range(200)])
    previous = None
    for x in xs:
        got = _hash.neg_log2(x)
        exact = -math.log2(((x >> 1) + 1) / 2**63) * 2**_hash.LOG_FRAC_BITS
        assert abs(got - exact) <= 3, x  # a table interpolated linearly: a few units of 2**-20
        if previous is not None:
            assert got <= previous, x
        previous = got


def test_c_neg_log2_is_the_reference_one(c_impl):
    from leastload.engine._engine import _neg_log2
    rng = random.Random(11)
    xs = [0, 1, 2, 3, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1] + [rng.getrandbits(64) for _ in range(5000)]
    xs += [rng.getrandbits(b) for b in range(1, 65) for _ in range(20)]
    # every table point, where the interpolation's remainder is zero
    xs += [((1 << 10) + k) << 53 for k in range(1 << 10)]
    for x in xs:
        assert _neg_log2(x) == _hash.neg_log2(x), x
