"""Request keys for the simulator's hash methods: generated, or read from a workload file.

A hash method picks by each request's key (`vs.select(key=...)`), so a
simulation of one needs a key per request. `Keys` holds them as an id per
request into a list of distinct values: a few bytes a request however long
the run.

Generated keys (`generated()`): `distinct` values of the method's form,
drawn per request from a Zipf law with exponent `skew` (value k, counted
from 0, with probability proportional to 1 / (k + 1) ** skew; 0: uniform),
seeded, so a seed gives the same keys every time:

    SOURCEIPHASH       client addresses 10.0.0.1, 10.0.0.2, ...
    DESTINATIONIPHASH  destination addresses 172.16.0.1, 172.16.0.2, ...
    SRCIPDESTIPHASH    (client 10.0.0.k, destination 172.16.0.(k mod 16 + 1))
    SRCIPSRCPORTHASH   (client 10.0.0.(k div 16 + 1), port 1024 + (k mod 16)): 16 connections a client
    URLHASH            /item/0, /item/1, ...
    DOMAINHASH         site0.example.com, site1.example.com, ...
    CALLIDHASH         00000000@sim.example, 00000001@sim.example, ...
    TOKEN              session-000000, session-000001, ...

A workload file's `key` column is read with `parse()`: an address; two
addresses separated by blanks (SRCIPDESTIPHASH); `ADDRESS:PORT`, an IPv6
address in brackets (SRCIPSRCPORTHASH); text for the others. A JSON file may
also give the pairs as two-element lists.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np
import numpy.typing as npt

from ..engine.methods import TABLE

HASHED = frozenset(m.name for m in TABLE if m.family == "hash")
DEFAULT_DISTINCT = 1000
DEFAULT_SKEW = 1.0
MAX_DISTINCT = 10**7
_KEY_STREAM = 0x6B657973  # "keys": the generated keys' own random stream, apart from the trace's


class KeySequence(Protocol):
    """What the replay and simulate() take as keys: a key per request number (a Keys, a list)."""

    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> Any: ...


@dataclass(frozen=True)
class Keys:
    """A key per request: `values[ids[i]]`, None where `ids[i]` is -1 (no key)."""

    values: tuple[Any, ...]
    ids: npt.NDArray[np.int32]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> Any:
        k = int(self.ids[i])
        return None if k < 0 else self.values[k]


@dataclass(frozen=True)
class KeyStats:
    """How the keys of a run spread: `distinct` keys served, `on_one` of them always by
    the same service, `on_several` by two or more (events and failures move keys)."""

    distinct: int
    on_one: int
    on_several: int


def _ip(base: int, k: int) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(base + 1 + k)


def values(method: str, distinct: int) -> tuple[Any, ...]:
    """`distinct` different keys of the form `method` takes (see the module's table)."""
    client, dest = 0x0A000000, 0xAC100000
    if method == "SOURCEIPHASH":
        return tuple(_ip(client, k) for k in range(distinct))
    if method == "DESTINATIONIPHASH":
        return tuple(_ip(dest, k) for k in range(distinct))
    if method == "SRCIPDESTIPHASH":
        return tuple((_ip(client, k), _ip(dest, k % 16)) for k in range(distinct))
    if method == "SRCIPSRCPORTHASH":
        return tuple((_ip(client, k // 16), 1024 + k % 16) for k in range(distinct))
    if method == "URLHASH":
        return tuple(f"/item/{k}" for k in range(distinct))
    if method == "DOMAINHASH":
        return tuple(f"site{k}.example.com" for k in range(distinct))
    if method == "CALLIDHASH":
        return tuple(f"{k:08x}@sim.example" for k in range(distinct))
    if method == "TOKEN":
        return tuple(f"session-{k:06d}" for k in range(distinct))
    raise ValueError(f"method must be a hash method ({', '.join(sorted(HASHED))}), got {method!r}")


def generated(method: str, n_requests: int, distinct: int = DEFAULT_DISTINCT, skew: float = DEFAULT_SKEW,
              seed: int = 0) -> Keys:
    """`n_requests` keys drawn from `distinct` values with a Zipf law of exponent `skew`, seeded."""
    if isinstance(distinct, bool) or not isinstance(distinct, int) or not 1 <= distinct <= MAX_DISTINCT:
        raise ValueError(f"distinct must be an int in 1..{MAX_DISTINCT}, got {distinct!r}")
    if isinstance(skew, bool) or not isinstance(skew, (int, float)) or not 0 <= skew <= 10:
        raise ValueError(f"skew must be a number in 0..10, got {skew!r}")
    weights = 1.0 / np.arange(1, distinct + 1, dtype=np.float64) ** float(skew)
    cumulative = np.cumsum(weights)
    rng = np.random.default_rng([int(seed), _KEY_STREAM])
    ids = np.searchsorted(cumulative, rng.random(n_requests) * cumulative[-1], side="right")
    return Keys(values(method, distinct), np.minimum(ids, distinct - 1).astype(np.int32))


def _address(text: str) -> Any:
    return ipaddress.ip_address(text.strip())


def _address_and_port(raw: Any) -> tuple[Any, int]:
    if isinstance(raw, list):
        if len(raw) != 2 or not isinstance(raw[0], str):
            raise ValueError
        address, port = _address(raw[0]), raw[1]
    else:
        host, colon, port_text = str(raw).strip().rpartition(":")
        if not colon or not port_text.isdigit():
            raise ValueError
        address, port = _address(host[1:-1] if host.startswith("[") and host.endswith("]") else host), int(port_text)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError
    return address, port


_FORMS = {
    "SOURCEIPHASH": "an IP address",
    "DESTINATIONIPHASH": "an IP address",
    "SRCIPDESTIPHASH": "two IP addresses separated by a blank (source, destination)",
    "SRCIPSRCPORTHASH": "ADDRESS:PORT (an IPv6 address in brackets)",
    "URLHASH": "a URL", "DOMAINHASH": "a domain name", "CALLIDHASH": "a Call-ID", "TOKEN": "a token",
}


def parse(method: str, raw: Any) -> Any:
    """A workload file's key cell -> the key `method` takes; None for a blank cell.
    ValueError saying what the method wants otherwise."""
    if raw is None or isinstance(raw, str) and not raw.strip():
        return None
    try:
        if method in ("SOURCEIPHASH", "DESTINATIONIPHASH"):
            if not isinstance(raw, str):
                raise ValueError
            return _address(raw)
        if method == "SRCIPDESTIPHASH":
            parts = raw if isinstance(raw, list) else str(raw).split()
            if len(parts) != 2 or not all(isinstance(p, str) for p in parts):
                raise ValueError
            return _address(parts[0]), _address(parts[1])
        if method == "SRCIPSRCPORTHASH":
            return _address_and_port(raw)
        if not isinstance(raw, (str, int)) or isinstance(raw, bool):
            raise ValueError
        text = str(raw)
        if method == "DOMAINHASH":  # one key per domain as the engine sees it
            text = text.strip().lower()
            text = text[:-1] if text.endswith(".") else text
            return text or None
        return text
    except ValueError:
        raise ValueError(f"key: lbMethod {method} takes {_FORMS[method]}, got {raw!r}") from None


def from_cells(method: str, cells: Sequence[Any]) -> Keys:
    """The keys of a workload file's cells (parsed: `parse`), ids in order of first appearance."""
    index: dict[Any, int] = {}
    ids = np.full(len(cells), -1, dtype=np.int32)
    for i, cell in enumerate(cells):
        key = parse(method, cell)
        if key is not None:
            ids[i] = index.setdefault(key, len(index))
    return Keys(tuple(index), ids)


def stats(ids: npt.NDArray[np.int32], picks: npt.NDArray[np.int32]) -> KeyStats:
    """How the keys spread over the services (`picks`: the service index per request, -1 dropped)."""
    served = (ids >= 0) & (picks >= 0)
    width = int(picks.max(initial=0)) + 1
    pairs = np.unique(ids[served].astype(np.int64) * width + picks[served])
    per_key = np.bincount((pairs // width).astype(np.int64))
    per_key = per_key[per_key > 0]
    return KeyStats(int(len(per_key)), int((per_key == 1).sum()), int((per_key > 1).sum()))
