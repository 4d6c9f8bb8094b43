"""Checks of single values, shared by the NetScaler and the TOML parsers.

Each raises ValueError("ARG: must be ..., got VALUE"); the parsers add the
file and line.
"""
from __future__ import annotations

import ipaddress
import math
import re
from typing import Sequence

# The vendor's rule for entity names: an ASCII letter, digit or underscore
# first, then those and # . space : @ = -; at most 127 characters.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_#. :@=\-]{0,126}")


def fail(arg: str, expected: str, value: object) -> ValueError:
    return ValueError(f"{arg}: must be {expected}, got {value!r}" if isinstance(value, str)
                      else f"{arg}: must be {expected}, got {value}")


def name(arg: str, value: object) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise fail(arg, "a name of 1..127 characters (letters, digits, _ first; then also # . space : @ = -)",
                   value)
    return value


def integer(arg: str, value: object, low: int, high: int) -> int:
    """An int from a CLI token (decimal digits) or a TOML int, in low..high."""
    if isinstance(value, str):
        if not re.fullmatch(r"[+-]?[0-9]+", value.strip()):
            raise fail(arg, f"an integer in {low}..{high}", value)
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise fail(arg, f"an integer in {low}..{high}", value)
    if not low <= number <= high:
        raise fail(arg, f"an integer in {low}..{high}", number)
    return number


def number(arg: str, value: object, low: float, high: float, low_inclusive: bool = False) -> float:
    """A finite float (a CLI token or a TOML number), above low (or at it) and at most high."""
    if isinstance(value, str):
        try:
            result = float(value)
        except ValueError:
            raise fail(arg, f"a number in ({low:g}, {high:g}]", value) from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        result = float(value)
    else:
        raise fail(arg, f"a number in ({low:g}, {high:g}]", value)
    above = result >= low if low_inclusive else result > low
    if not (math.isfinite(result) and above and result <= high):
        bracket = "[" if low_inclusive else "("
        raise fail(arg, f"a number in {bracket}{low:g}, {high:g}]", value)
    return result


def choice(arg: str, value: object, choices: Sequence[str]) -> str:
    """One of `choices`, matched case-insensitively as the vendor's CLI does; returns its spelling."""
    if isinstance(value, str):
        for c in choices:
            if c.lower() == value.lower():
                return c
    raise fail(arg, "one of " + ", ".join(choices), value)


def address(arg: str, value: object) -> str:
    """An IPv4 or IPv6 address, in its canonical spelling."""
    if isinstance(value, str):
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            pass
    raise fail(arg, "an IPv4 or IPv6 address", value)


def port(arg: str, value: object) -> int:
    """0..65535; `*` (any port) is 65535, as the vendor stores it."""
    if value == "*":
        return 65535
    return integer(arg, value, 0, 65535)


def netmask(arg: str, value: object) -> str:
    """A contiguous IPv4 netmask such as 255.255.255.0."""
    if isinstance(value, str):
        try:
            mask = ipaddress.IPv4Address(value)
        except ValueError:
            mask = None
        if mask is not None:
            bits = int(mask)
            inverted = ~bits & 0xFFFFFFFF
            if inverted & (inverted + 1) == 0:  # ones then zeros
                return str(mask)
    raise fail(arg, "an IPv4 netmask such as 255.255.255.0", value)
