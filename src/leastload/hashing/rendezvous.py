"""The hash methods' shared parts: XXH64, the key forms, the rendezvous score.

Both engines turn a request's key into bytes here (so they hash the same
bytes), and both score services with the integers defined here: the C
engine in csrc/ll_hash.c and csrc/ll_xxh64.c, the reference with the
functions below. docs/semantics.md ("Hash methods") states the rules.

Rendezvous (highest random weight) hashing, weighted, with integers only:
for key hash k and a service with name hash h and weight w,
    x = avalanche(k ^ h)                          64-bit score
    L = neg_log2(x)                               about -log2((x/2 + 1) / 2^63) * 2^20
and the pick is the eligible service with the least L / w, then the
greatest x, then the first in bind order. L / w is compared exactly
(cross-multiplied in C, scaled by the lcm of 1..100 here). L never grows
as x grows, so between services of equal weight the greatest x wins and L
need not be computed at all.
"""
import functools
import ipaddress
import math
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple, Union


__all__ = ["KEY_FORMS", "KeySettings", "xxh64", "name_hash", "score", "neg_log2",
           "rendezvous_rank", "key_bytes", "check_netmask", "check_v6netmasklen",
           "check_hashlength", "check_hash_seed"]


DEFAULT_NETMASK = "255.255.255.255"
DEFAULT_V6NETMASKLEN = 128
DEFAULT_HASHLENGTH = 80
MAX_HASHLENGTH = 4096
DEFAULT_HASH_SEED = 0

LOG_FRAC_BITS = 20  # fraction bits of neg_log2's fixed point
WEIGHT_LCM = math.lcm(*range(1, 101))  # L / w compared exactly as L * (WEIGHT_LCM // w)

_M64 = 0xFFFFFFFFFFFFFFFF
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5

# ---- XXH64, from its published specification ---------------------------------

def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _M64
    return (_rotl(acc, 31) * _P1) & _M64


def _merge(acc: int, v: int) -> int:
    acc ^= _round(0, v)
    return (acc * _P1 + _P4) & _M64


def avalanche(h: int) -> int:
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    return h ^ (h >> 32)


def xxh64(data: Union[bytes, bytearray], seed: int = 0) -> int:
    """XXH64 of `data` (bytes-like) with a 64-bit seed; input words are little-endian."""
    data = bytes(data)
    n = len(data)
    p = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _M64
        v2 = (seed + _P2) & _M64
        v3 = seed
        v4 = (seed - _P1) & _M64
        while p <= n - 32:
            v1 = _round(v1, int.from_bytes(data[p:p + 8], "little"))
            v2 = _round(v2, int.from_bytes(data[p + 8:p + 16], "little"))
            v3 = _round(v3, int.from_bytes(data[p + 16:p + 24], "little"))
            v4 = _round(v4, int.from_bytes(data[p + 24:p + 32], "little"))
            p += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M64
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while n - p >= 8:
        h ^= _round(0, int.from_bytes(data[p:p + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _M64
        p += 8
    if n - p >= 4:
        h ^= (int.from_bytes(data[p:p + 4], "little") * _P1) & _M64
        h = (_rotl(h, 23) * _P2 + _P3) & _M64
        p += 4
    while p < n:
        h ^= (data[p] * _P5) & _M64
        h = (_rotl(h, 11) * _P1) & _M64
        p += 1
    return avalanche(h)


# ---- the rendezvous score ------------------------------------------------------

def name_hash(name: str) -> int:
    """A service's fixed hash: XXH64 of its name in UTF-8, seed 0 (the vserver's seed goes into the key)."""
    return xxh64(name.encode("utf-8", "surrogatepass"), 0)


def score(key_h: int, name_h: int) -> int:
    """The 64-bit score x of one (key, service) pair."""
    return avalanche(key_h ^ name_h)


LOG_TABLE_BITS = 10  # neg_log2 interpolates in a table of 2**10 + 1 points


def _log2_fraction_bits(m: int) -> int:
    """log2 of a 1.31 fixed-point mantissa m in [2**31, 2**32), bit by bit (square it;
    past 2 the next bit is 1), LOG_FRAC_BITS bits, truncated."""
    frac = 0
    for _ in range(LOG_FRAC_BITS):
        m = (m * m) >> 31
        frac <<= 1
        if m >> 32:
            m >>= 1
            frac |= 1
    return frac


@functools.lru_cache(maxsize=None)
def log2_table() -> Tuple[int, ...]:
    """T[k] = log2(1 + k / 1024) in LOG_FRAC_BITS fixed point, k = 0 .. 1024; the C core
    has the same numbers (csrc/ll_log2_table.h, checked by the tests)."""
    shift = 31 - LOG_TABLE_BITS
    table = [_log2_fraction_bits(((1 << LOG_TABLE_BITS) + k) << shift) for k in range(1 << LOG_TABLE_BITS)]
    return tuple(table + [1 << LOG_FRAC_BITS])


def neg_log2(x: int) -> int:
    """-log2(u) in fixed point (LOG_FRAC_BITS fraction bits), u = (x // 2 + 1) / 2**63.

    Integer only, the same on every platform: the integer part of log2 from
    the bit length, the fraction from the 32-bit mantissa: its top 10 bits
    index log2_table(), the other 21 interpolate linearly between two
    neighbours. Never grows as x grows.
    """
    y = (x >> 1) + 1  # 1 .. 2**63
    e = y.bit_length() - 1
    m = y >> (e - 31) if e >= 31 else y << (31 - e)  # 1.31 fixed point, in [1, 2)
    shift = 31 - LOG_TABLE_BITS
    k = (m >> shift) - (1 << LOG_TABLE_BITS)
    r = m & ((1 << shift) - 1)
    t = log2_table()
    frac = t[k] + (((t[k + 1] - t[k]) * r) >> shift)
    return (63 << LOG_FRAC_BITS) - ((e << LOG_FRAC_BITS) | frac)


def rendezvous_rank(key_h: int, name_h: int, weight: int, order: int) -> Tuple[int, int, int]:
    """The sort key of one eligible service for one key: the least wins.

    (L / weight, exactly; then the greater score; then bind order.)
    """
    x = score(key_h, name_h)
    return (neg_log2(x) * (WEIGHT_LCM // weight), -x, order)


# ---- the key forms ----------------------------------------------------------------

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
_IP_FORMS = "an IPv4 or IPv6 address (an ipaddress object, its text, or 4 or 16 packed bytes)"
_TEXT_FORMS = "a str or bytes"


def _address(key: object, shown: object) -> Address:
    """key -> IPv4Address or IPv6Address; an IPv4-mapped IPv6 address counts as its IPv4 address."""
    addr: Address
    if isinstance(key, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        addr = key
    elif isinstance(key, str) or (isinstance(key, (bytes, bytearray)) and len(key) in (4, 16)):
        try:
            addr = ipaddress.ip_address(bytes(key) if isinstance(key, bytearray) else key)
        except ValueError:
            raise ValueError(f"key must be {_IP_FORMS}, got {shown!r}") from None
    elif isinstance(key, (bytes, bytearray)):
        raise ValueError(f"key must be {_IP_FORMS}, got {shown!r}")
    else:
        raise TypeError(f"key must be {_IP_FORMS}, got {type(key).__name__} {shown!r}")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def _address_bytes(key: object, shown: object, v4mask: int, v6len: int) -> bytes:
    """A tag byte (4 or 6) and the masked address, packed."""
    addr = _address(key, shown)
    if addr.version == 4:
        return b"\x04" + (int(addr) & v4mask).to_bytes(4, "big")
    v6mask = (((1 << v6len) - 1) << (128 - v6len)) if v6len else 0
    return b"\x06" + (int(addr) & v6mask).to_bytes(16, "big")


def _pair(key: object, second: str) -> Tuple[object, object]:
    if type(key) is not tuple or len(key) != 2:
        raise TypeError(f"key must be a tuple (an IP address, {second}), got {type(key).__name__} {key!r}")
    return key[0], key[1]


def _text(key: object) -> bytes:
    if isinstance(key, str):
        return key.encode("utf-8", "surrogatepass")
    if isinstance(key, (bytes, bytearray)):
        return bytes(key)
    raise TypeError(f"key must be {_TEXT_FORMS}, got {type(key).__name__} {key!r}")


class KeySettings(NamedTuple):
    """The vserver's settings the key forms read."""
    v4mask: int = 0xFFFFFFFF  # netmask as a 32-bit int
    v6len: int = DEFAULT_V6NETMASKLEN
    hashlength: int = DEFAULT_HASHLENGTH


# One function per method: the request's key -> the bytes hashed (None: no key, fall back).

def _one_address(key: object, cfg: KeySettings) -> Optional[bytes]:
    """SOURCEIPHASH, DESTINATIONIPHASH: the masked address."""
    return _address_bytes(key, key, cfg.v4mask, cfg.v6len)


def _two_addresses(key: object, cfg: KeySettings) -> Optional[bytes]:
    """SRCIPDESTIPHASH: (source, destination), each masked."""
    src, dst = _pair(key, "destination IP")
    return _address_bytes(src, key, cfg.v4mask, cfg.v6len) + _address_bytes(dst, key, cfg.v4mask, cfg.v6len)


def _address_and_port(key: object, cfg: KeySettings) -> Optional[bytes]:
    """SRCIPSRCPORTHASH: (source, source port); the mask applies to the address."""
    src, port = _pair(key, "source port")
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(f"key's port must be an int in 0..65535, got {type(port).__name__} {port!r}")
    if not 0 <= port <= 65535:
        raise ValueError(f"key's port must be an int in 0..65535, got {port!r}")
    return _address_bytes(src, key, cfg.v4mask, cfg.v6len) + int(port).to_bytes(2, "big")


def _url(key: object, cfg: KeySettings) -> Optional[bytes]:
    """URLHASH: the first hashlength bytes of the URL."""
    if key is None:
        raise TypeError(f"key must be {_TEXT_FORMS}, got NoneType None (URLHASH hashes the request's URL)")
    return _text(key)[:cfg.hashlength]


def _domain(key: object, cfg: KeySettings) -> Optional[bytes]:
    """DOMAINHASH: the domain, ASCII letters lowered, without the root's dot; None or
    empty: no domain (the pick falls back to LEASTCONNECTION)."""
    if key is None:
        return None
    data = _text(key).lower()  # ASCII letters only: the same for str and bytes
    if data.endswith(b"."):
        data = data[:-1]
    return data[:cfg.hashlength] if data else None


def _whole_value(key: object, cfg: KeySettings) -> Optional[bytes]:
    """CALLIDHASH (the SIP Call-ID), TOKEN: the whole value, never empty."""
    if key is None:
        raise TypeError(f"key must be {_TEXT_FORMS}, got NoneType None (the method hashes the request's value)")
    data = _text(key)
    if not data:
        raise ValueError(f"key must be a non-empty {_TEXT_FORMS}, got {key!r}")
    return data


KEY_FORMS: Dict[str, Callable[[object, KeySettings], Optional[bytes]]] = {
    "SOURCEIPHASH": _one_address,
    "DESTINATIONIPHASH": _one_address,
    "SRCIPDESTIPHASH": _two_addresses,
    "SRCIPSRCPORTHASH": _address_and_port,
    "URLHASH": _url,
    "DOMAINHASH": _domain,
    "CALLIDHASH": _whole_value,
    "TOKEN": _whole_value,
}


def key_bytes(method: str, key: object, v4mask: int, v6len: int, hashlength: int) -> Optional[bytes]:
    """The bytes `method` hashes for `key`, or None: DOMAINHASH without a domain.

    Raises TypeError/ValueError naming `key` for a form the method does not take.
    """
    return KEY_FORMS[method](key, KeySettings(v4mask, v6len, hashlength))


def example_keys(method: str, count: int) -> List[object]:
    """`count` distinct request keys of the form `method` takes (benchmarks, examples)."""
    if method in ("SOURCEIPHASH", "DESTINATIONIPHASH"):
        return [ipaddress.IPv4Address(0x0A000000 + 7919 * i) for i in range(count)]
    if method == "SRCIPDESTIPHASH":
        return [(ipaddress.IPv4Address(0x0A000000 + 7919 * i), ipaddress.IPv4Address(0xC0A80001)) for i in range(count)]
    if method == "SRCIPSRCPORTHASH":
        return [(ipaddress.IPv4Address(0x0A000000 + 7919 * (i >> 4)), 1024 + (i & 15)) for i in range(count)]
    if method == "DOMAINHASH":
        return [f"shop{i}.example.com" for i in range(count)]
    if method == "CALLIDHASH":
        return [f"{i:08x}@pc33.example.com" for i in range(count)]
    if method == "TOKEN":
        return [f"session-{i:012x}" for i in range(count)]
    return [f"/catalog/item/{i}?lang=en" for i in range(count)]


# ---- the settings -------------------------------------------------------------------

def check_netmask(netmask: object) -> Tuple[str, int]:
    """An IPv4 netmask (text or IPv4Address, contiguous ones) -> (text, 32-bit int)."""
    if isinstance(netmask, ipaddress.IPv4Address):
        value = int(netmask)
    elif isinstance(netmask, str):
        try:
            value = int(ipaddress.IPv4Address(netmask))
        except ValueError:
            raise ValueError(f"netmask must be an IPv4 netmask such as '255.255.255.0', got {netmask!r}") from None
    else:
        raise TypeError(f"netmask must be an IPv4 netmask (str or IPv4Address), "
                        f"got {type(netmask).__name__} {netmask!r}")
    host = ~value & 0xFFFFFFFF
    if host & (host + 1):
        raise ValueError(f"netmask must be contiguous ones then zeros, got {netmask!r}")
    return str(ipaddress.IPv4Address(value)), value


def _check_int(arg: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{arg} must be an int, got {type(value).__name__} {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{arg} must be an int in {low}..{high}, got {value!r}")
    return int(value)


def check_v6netmasklen(value: object) -> int:
    return _check_int("v6netmasklen", value, 0, 128)


def check_hashlength(value: object) -> int:
    return _check_int("hashlength", value, 1, MAX_HASHLENGTH)


def check_hash_seed(value: object) -> int:
    return _check_int("hash_seed", value, 0, _M64)
