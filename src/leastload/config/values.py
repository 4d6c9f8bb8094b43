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


def resp_code_range(arg: str, value: object, low: int, high: int) -> tuple[int, int]:
    """An HTTP status code or a range of them: 200, "200" or "200-299" (low <= high)."""
    expected = f"a status code in {low}..{high} or a range such as 200-299"
    if isinstance(value, int) and not isinstance(value, bool):
        first = last = value
    elif isinstance(value, str) and re.fullmatch(r"[0-9]+(-[0-9]+)?", value.strip()):
        parts = value.strip().split("-")
        first, last = int(parts[0]), int(parts[-1])
    else:
        raise fail(arg, expected, value)
    if not (low <= first <= high and low <= last <= high and first <= last):
        raise fail(arg, expected, value)
    return first, last


# RFC 9110's token: the characters of a method's name
_METHOD = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def http_request(arg: str, value: object) -> tuple[str, str]:
    """`METHOD PATH` such as "HEAD /" or "GET /health" -> (method, path); PATH starts with /."""
    if isinstance(value, str):
        parts = value.split()
        if (len(parts) == 2 and _METHOD.fullmatch(parts[0]) and parts[1].startswith("/")
                and parts[1].isprintable() and parts[1].isascii()):
            return parts[0], parts[1]
    raise fail(arg, 'a method and a path such as "GET /health"', value)


def seconds_in_unit(arg: str, value: str, unit: str, high: int) -> float:
    """A CLI token: a whole number of `unit`s (SEC, MSEC or MIN), at least 1 and at most
    `high` seconds -> seconds (milliseconds exact to the millisecond: n / 1000)."""
    top = {"SEC": high, "MSEC": high * 1000, "MIN": high // 60}[unit]
    expected = f"an integer in 1..{top}" + ("" if unit == "SEC" else f" with {unit}")
    if not re.fullmatch(r"[+-]?[0-9]+", value.strip()):
        raise fail(arg, expected, value)
    count = int(value)
    if not 1 <= count <= top:
        raise fail(arg, expected, count)
    return count / 1000 if unit == "MSEC" else float(count * 60 if unit == "MIN" else count)


def milliseconds(arg: str, value: object, high: float) -> float:
    """A TOML number of seconds in (0, high], whole milliseconds (0.5, 2, 0.001)."""
    expected = f"a number of seconds in [0.001, {high:g}], whole milliseconds"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(arg, expected, value)
    ms = value * 1000
    if not math.isfinite(ms) or abs(ms - round(ms)) > 1e-6 or not 1 <= round(ms) <= high * 1000:
        raise fail(arg, expected, value)
    return round(ms) / 1000
