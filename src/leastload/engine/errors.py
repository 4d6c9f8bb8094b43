"""Exceptions and the messages of bad input, shared by both implementations.

Both engines raise through these helpers, so a test can demand the same
exception type *and* the same message from the C engine and the reference.
"""
import math
import operator
from typing import List, Sequence, Tuple

from .methods import ALL_METHODS as ALL_METHODS, METHODS as METHODS  # re-exported: callers check against them


class NoServiceAvailable(LookupError):
    """select() found no service that is UP and eligible."""


class UnknownService(KeyError):
    """The name is not bound to this vserver."""

    def __str__(self) -> str:  # KeyError would repr() the whole message
        return str(self.args[0]) if self.args else ""


class DuplicateService(ValueError):
    """bind() of a name that is already bound."""


class TransactionEnded(RuntimeError):
    """A transaction handle was ended twice, or used after its end."""


def transaction_ended(name: str) -> TransactionEnded:
    return TransactionEnded(f"the transaction on service {name!r} has already ended")


def unknown_service(name: str) -> UnknownService:
    return UnknownService(f"unknown service {name!r}")


def duplicate_service(name: str) -> DuplicateService:
    return DuplicateService(f"service {name!r} is already bound")


def bad_value(arg: str, value: object, expected: str) -> ValueError:
    return ValueError(f"{arg} must be {expected}, got {value!r}")


def bad_type(arg: str, value: object, expected: str) -> TypeError:
    return TypeError(f"{arg} must be {expected}, got {type(value).__name__} {value!r}")


def too_large(arg: str, value: object, limit: str) -> OverflowError:
    return OverflowError(f"{arg}={value!r} would take {limit} past its 64-bit range")


SHARED_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
SHARED_NAME_MAX = 180         # characters of a shared vserver's name (its segment's name is longer)
SHARED_SERVICE_NAME_MAX = 240  # UTF-8 bytes of a service name in a shared vserver's segment
SHARED_CAPACITY_MAX = 1 << 20


def check_shared_name(name: object) -> str:
    """shared=: a name for the segment, or None (checked by the caller)."""
    if type(name) is not str:
        raise bad_type("shared", name, "None or a str")
    if not 1 <= len(name) <= SHARED_NAME_MAX or not set(name) <= SHARED_NAME_CHARS:
        raise bad_value("shared", name, f"1 to {SHARED_NAME_MAX} of the characters A-Z a-z 0-9 . _ -")
    return name


def check_shared_capacity(capacity: object) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, int):
        raise bad_type("shared_capacity", capacity, "an int")
    if not 1 <= capacity <= SHARED_CAPACITY_MAX:
        raise bad_value("shared_capacity", capacity, f"an int in 1..{SHARED_CAPACITY_MAX}")
    return int(capacity)


def check_shared_service_name(name: str) -> str:
    if len(name.encode("utf-8", "surrogatepass")) > SHARED_SERVICE_NAME_MAX:
        raise bad_value("name", name, f"at most {SHARED_SERVICE_NAME_MAX} bytes of UTF-8 in a shared vserver")
    return name


def shared_full(shared: str, capacity: int) -> ValueError:
    return ValueError(f"shared vserver {shared!r} is full: its segment holds {capacity} slots (holes included;"
                      " shared_capacity= when it is created)")


def shared_fixed(what: str) -> ValueError:
    return ValueError(f"{what}: a shared vserver's settings are fixed when its segment is created")


def check_name(name: object) -> str:
    """Returns name if it is a non-empty str, else raises TypeError/ValueError."""
    if type(name) is not str:
        raise bad_type("name", name, "a str")
    if not name:
        raise bad_value("name", name, "a non-empty str")
    return name


def check_count(arg: str, value: object) -> int:
    """A byte or packet count: an integer (not bool, not float) in 0 .. 2**64 - 1."""
    if type(value) is not int:
        if isinstance(value, bool):
            raise bad_type(arg, value, "an int")
        try:
            count = operator.index(value)  # type: ignore[arg-type]  # numpy integers are welcome
        except TypeError:
            raise bad_type(arg, value, "an int") from None
    else:
        count = value
    if count < 0:
        raise bad_value(arg, count, "a non-negative int")
    if count > 0xFFFFFFFFFFFFFFFF:
        raise too_large(arg, count, "the window total")
    return count


def check_weight(weight: object) -> int:
    if isinstance(weight, bool) or not isinstance(weight, int):
        raise bad_type("weight", weight, "an int")
    if not 1 <= weight <= 100:
        raise bad_value("weight", weight, "an int in 1..100")
    return int(weight)


def check_choice(arg: str, value: object, choices: Sequence[str]) -> str:
    if type(value) is not str:
        raise bad_type(arg, value, "a str, one of " + ", ".join(choices))
    if value not in choices:
        raise bad_value(arg, value, "one of " + ", ".join(choices))
    return value


def check_method(method: object) -> str:
    """A method this engine implements; the vendor's others are named as such."""
    if type(method) is str and method in ALL_METHODS and method not in METHODS:
        raise ValueError(f"method: {method} is the vendor's, but not supported by this engine yet "
                         f"(supported: {', '.join(METHODS)})")
    return check_choice("method", method, METHODS)


def check_ttfb(ttfb: object, arg: str = "ttfb") -> int:
    """A time in seconds (0..3600: a TTFB, a probe's response time) -> integer
    microseconds, rounded half up."""
    if isinstance(ttfb, bool) or not isinstance(ttfb, (int, float)):
        raise bad_type(arg, ttfb, "a number of seconds")
    seconds = float(ttfb)
    if not (0.0 <= seconds <= 3600.0):  # also rejects NaN
        raise bad_value(arg, seconds, "a number of seconds in 0..3600")
    return int(math.floor(seconds * 1e6 + 0.5))


def check_window_seconds(seconds: object) -> int:
    """The bytes/packets window's length: an int in 1..60 seconds."""
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise bad_type("window_seconds", seconds, "an int in 1..60")
    if not 1 <= seconds <= 60:
        raise bad_value("window_seconds", seconds, "an int in 1..60")
    return int(seconds)


MAX_CUSTOM_LOAD = 2**63 - 1  # the C engine keeps a flag in the top bit


def check_custom_metrics(metrics: object) -> Tuple[int, bool]:
    """CUSTOMLOAD's report {metric: (value, weight, threshold)} -> (load, over):
    load = sum of value * weight; over when a value is at or over its threshold."""
    if not isinstance(metrics, dict):
        raise bad_type("metrics", metrics, "a dict {name: (value, weight, threshold)}")
    load, over = 0, False
    for key, spec in metrics.items():
        if type(key) is not str:
            raise bad_type("metrics", key, "str metric names")
        if not (isinstance(spec, tuple) and len(spec) == 3):
            raise bad_type(f"metrics[{key!r}]", spec, "a (value, weight, threshold) tuple")
        value, weight, threshold = spec
        value = check_count(f"metrics[{key!r}] value", value)
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise bad_value(f"metrics[{key!r}] weight", weight, "an int in 1..100")
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise bad_value(f"metrics[{key!r}] threshold", threshold, "an int >= 1")
        load += value * weight
        over = over or value >= threshold
    if load > MAX_CUSTOM_LOAD:
        raise OverflowError(f"metrics: the load (sum of value * weight) must stay below 2**63, got {load}")
    return load, over


def check_status(status: object) -> int:
    if isinstance(status, bool) or not isinstance(status, int):
        raise bad_type("status", status, "an int HTTP status")
    if not 100 <= status <= 599:
        raise bad_value("status", status, "an HTTP status in 100..599")
    return int(status)


MAX_CLOCK = 2.0**53  # clock values stay below this, so floor() fits a C int64 exactly


def check_peakewma_decay(value: object) -> int:
    """PEAKEWMA's decay time: seconds in 0.001..3600 -> integer microseconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_type("peakewma_decay", value, "a number of seconds")
    seconds = float(value)
    if not (0.001 <= seconds <= 3600.0):  # also rejects NaN
        raise bad_value("peakewma_decay", seconds, "a number of seconds in 0.001..3600")
    return int(math.floor(seconds * 1e6 + 0.5))


def check_seconds(arg: str, value: object) -> float:
    """A number of seconds (int or float, not bool) a ManualClock can hold -> float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_type(arg, value, "a number of seconds")
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        seconds = math.inf
    if not abs(seconds) < MAX_CLOCK:  # also rejects NaN
        raise bad_value(arg, value, "a finite number of seconds below 2**53")
    return seconds


def advance_clock(t: float, seconds: object) -> float:
    """ManualClock.advance(): the new time, or a ValueError naming `seconds`."""
    step = check_seconds("seconds", seconds)
    if not abs(t + step) < MAX_CLOCK:
        raise bad_value("seconds", step, "seconds that keep the clock below 2**53")
    return t + step


def check_time(now: object) -> float:
    """A clock reading must be a finite float."""
    try:
        seconds = float(now)  # type: ignore[arg-type]  # anything float() takes
    except (TypeError, ValueError):
        raise bad_type("clock.now()", now, "a float") from None
    if not abs(seconds) < MAX_CLOCK:  # also rejects NaN
        raise bad_value("clock.now()", seconds, "a finite number of seconds below 2**53")
    return seconds


STATES = ("UP", "DOWN", "OUT_OF_SERVICE")


def no_service() -> NoServiceAvailable:
    return NoServiceAvailable("no service is UP and eligible")


def active_overflow(name: str) -> OverflowError:
    return OverflowError(f"service {name!r} already has 2**32 - 1 active transactions")


def window_overflow(arg: str, value: object) -> OverflowError:
    return too_large(arg, value, "the window total")


def nothing_active(name: str) -> ValueError:
    return ValueError(f"service {name!r} has no active transaction")


def check_bool(arg: str, value: object) -> bool:
    if type(value) is not bool:
        raise bad_type(arg, value, "a bool")
    return value


def check_startup_rr_factor(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_type("startup_rr_factor", value, "an int")
    if not 0 <= value <= 0xFFFFFFFFFFFFFFFF:
        raise bad_value("startup_rr_factor", value, "an int in 0..2**64-1")
    return int(value)


def check_cap(cap: object) -> int:
    """A slow-start cap: selections per second, 0 .. 2**32 - 2."""
    if isinstance(cap, bool) or not isinstance(cap, int):
        raise bad_type("cap", cap, "an int or None")
    if not 0 <= cap <= 0xFFFFFFFE:
        raise bad_value("cap", cap, "an int in 0..2**32-2")
    return int(cap)


def check_exclude(exclude: object) -> List[str]:
    """select()'s `exclude`: None or a collection of str names -> a list of them.

    Iterated exactly once. Unknown names are the caller's business (ignored);
    a single str is refused, as iterating it would exclude its characters.
    """
    if exclude is None:
        return []
    if isinstance(exclude, (str, bytes)):
        raise bad_type("exclude", exclude, "a collection of service names, not a single name")
    try:
        items = iter(exclude)  # type: ignore[call-overload]  # any iterable, checked here
    except TypeError:
        raise bad_type("exclude", exclude, "None or a collection of service names") from None
    names: List[str] = []
    for item in items:
        if type(item) is not str:
            raise bad_type("exclude", item, "a collection of str service names")
        names.append(item)
    return names


MAX_EJECTION_TIME = 300.0  # an ejection never lasts longer, however often it repeats


def check_outlier_failures(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise bad_type("outlier_failures", k, "an int")
    if not 0 <= k <= 0xFFFFFFFF:
        raise bad_value("outlier_failures", k, "an int in 0..2**32-1 (0: ejection off)")
    return int(k)


def check_ejection_time(seconds: object) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise bad_type("outlier_ejection_time", seconds, "a number of seconds")
    value = float(seconds)
    if not 0.0 < value <= MAX_EJECTION_TIME:  # also rejects NaN
        raise bad_value("outlier_ejection_time", seconds, "a number of seconds above 0 and at most 300")
    return value


def check_ejection_percent(percent: object) -> int:
    if isinstance(percent, bool) or not isinstance(percent, int):
        raise bad_type("outlier_max_ejection_percent", percent, "an int")
    if not 0 <= percent <= 100:
        raise bad_value("outlier_max_ejection_percent", percent, "an int in 0..100")
    return int(percent)
