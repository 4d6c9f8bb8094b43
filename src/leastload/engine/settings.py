"""The vserver's settings, once: one row per setting.

Each row says its name (the constructor's keyword, set()'s and the read-only
property's), its default, its check (validates and converts, raising the shared
messages of _errors/_hash), a one-line doc, and where else it appears: the
methods it matters to (show() prints it only for those), whether set() takes
it, the NetScaler `set lb vserver` option that says it in a config, and the
proxy's flag with that flag's help ({default} is filled in with the flag's
default). The facade's __init__ keeps its explicit keywords (the public
signature); tests/engine/test_settings_table.py holds them to this table.
"""

from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Tuple

from .errors import (METHODS, bad_type, bad_value, check_bool, check_choice, check_ejection_percent,
                     check_ejection_time, check_method, check_outlier_failures, check_peakewma_decay,
                     check_shared_capacity, check_shared_name, check_startup_rr_factor, check_window_seconds)
from .methods import HASH_METHODS
from ..hashing.rendezvous import (DEFAULT_HASH_SEED, DEFAULT_HASHLENGTH, DEFAULT_NETMASK, DEFAULT_V6NETMASKLEN,
                                  check_hash_seed, check_hashlength, check_netmask, check_v6netmasklen)

UNITS = ("PER_SECOND", "PERCENT")


class Setting(NamedTuple):
    name: str
    default: Any
    check: Callable[[Any], Any]  # the value as given -> the value kept; raises TypeError/ValueError
    doc: str
    methods: Tuple[str, ...] = ()  # the methods it matters to; (): all
    settable: bool = True          # set() takes it
    netscaler: Optional[str] = None  # its `set lb vserver` option in a config
    flag: Optional[str] = None       # its `leastload proxy` flag
    flag_help: Optional[str] = None  # that flag's help; {default}: the flag's default


def _rate(value: object) -> int:
    """The rate's type; its range depends on the unit: check_rate()."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_type("new_service_request", value, "an int")
    return int(value)


def _unit(value: object) -> str:
    return check_choice("new_service_request_unit", value, UNITS)


def _interval(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_type("new_service_request_increment_interval", value, "an int (seconds)")
    if not 0 <= value <= 86400:
        raise bad_value("new_service_request_increment_interval", value, "an int in 0..86400 (seconds)")
    return int(value)


def _rtsp_nat(value: object) -> bool:
    return check_bool("rtsp_nat", value)


def _name(value: object) -> str:
    if type(value) is not str:
        raise bad_type("name", value, "a str")
    return value


def _netmask(value: object) -> str:
    return check_netmask(value)[0]


HANDOVERS = ("vendor", "caught_up")
WINDOWED = ("LEASTBANDWIDTH", "LEASTPACKETS")  # the methods whose N is a window's: a ramp's end can be a cliff


def _handover(value: object) -> str:
    return check_choice("slow_start_handover", value, HANDOVERS)


def _guard(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_type("slow_start_guard", value, "a number: 0 (off), or 1 to 100")
    if not (value == 0 or 1 <= value <= 100):
        raise bad_value("slow_start_guard", value, "0 (off), or a number from 1 to 100")
    return float(value)


def _by_utilization(value: object) -> bool:
    return check_bool("weights_from_utilization", value)


def _shared(value: object) -> Optional[str]:
    return None if value is None else check_shared_name(value)


def _peakewma_decay(value: object) -> float:
    check_peakewma_decay(value)
    return float(value)  # type: ignore[arg-type]  # checked: an int or a float


SETTINGS: Tuple[Setting, ...] = (
    Setting("method", "LEASTCONNECTION", check_method, "The load-balancing method.",
            netscaler="lbMethod", flag="--method",
            flag_help="load-balancing method: " + ", ".join(METHODS) + " (default {default})"),
    Setting("new_service_request", 0, _rate,
            "Slow start's step: requests per second, or a percentage (0: slow start off).",
            netscaler="newServiceRequest", flag="--new-service-request",
            flag_help="requests (per second, or percent) a new backend gets (default {default}: off)"),
    Setting("new_service_request_unit", "PER_SECOND", _unit, '"PER_SECOND" or "PERCENT".',
            netscaler="newServiceRequestUnit", flag="--new-service-request-unit"),
    Setting("new_service_request_increment_interval", 0, _interval,
            "Seconds between slow-start steps (0: manual mode).",
            netscaler="newServiceRequestIncrementInterval", flag="--new-service-request-increment-interval",
            flag_help="0: manual slow start; else the automated ramp's step (default {default})"),
    Setting("startup_rr_factor", 0, check_startup_rr_factor,
            "Selections made by plain round robin after the method is set (0: none).",
            flag="--startup-rr-factor"),
    Setting("rtsp_nat", False, _rtsp_nat, "Whether record(control=True) traffic counts (the RTSP NAT option)."),
    Setting("outlier_failures", 0, check_outlier_failures,
            "Failures in a row that eject a service (0: ejection off).",
            flag="--outlier-failures", flag_help="failures in a row that eject a backend (default {default}; 0: off)"),
    Setting("outlier_ejection_time", 30, check_ejection_time,
            "Seconds of the first ejection; each repeat adds as much, up to 300.",
            flag="--outlier-ejection-time",
            flag_help="ejection length, times the ejection count, capped at 300 (default {default})"),
    Setting("outlier_max_ejection_percent", 50, check_ejection_percent,
            "At most this share of the bound services is ejected at once.",
            flag="--outlier-max-ejection-percent",
            flag_help="at most this share of the backends ejected at once (default {default})"),
    Setting("window_seconds", 14, check_window_seconds,
            "Seconds of traffic LEASTBANDWIDTH and LEASTPACKETS count (1..60, default 14)."),
    Setting("name", "vserver", _name, "The vserver's name, shown by show().", settable=False),
    Setting("netmask", DEFAULT_NETMASK, _netmask, "Hash methods: the IPv4 mask applied to addresses before hashing.",
            methods=HASH_METHODS, netscaler="netmask", flag="--netmask",
            flag_help="IP hash methods: IPv4 addresses masked with this first (default {default})"),
    Setting("v6netmasklen", DEFAULT_V6NETMASKLEN, check_v6netmasklen,
            "Hash methods: the IPv6 prefix length kept before hashing (0..128).",
            methods=HASH_METHODS, flag="--v6-netmask-length",
            flag_help="IP hash methods: IPv6 prefix length kept (0..128, default {default})"),
    Setting("hashlength", DEFAULT_HASHLENGTH, check_hashlength,
            "URLHASH, DOMAINHASH: the leading bytes hashed (1..4096).",
            methods=HASH_METHODS, netscaler="hashLength", flag="--hash-length",
            flag_help="URLHASH, DOMAINHASH: bytes of the URL or domain hashed (1..4096, default {default})"),
    Setting("hash_seed", DEFAULT_HASH_SEED, check_hash_seed,
            "Hash methods: the XXH64 seed of the request keys (0..2**64-1).",
            methods=HASH_METHODS, flag="--hash-seed",
            flag_help="seed of every hash method: another seed, another mapping (default {default})"),
    Setting("slow_start_handover", "vendor", _handover,
            'The end of an automated ramp: "vendor" (its exits, as the vendor\'s), or "caught_up" (windowed '
            "methods: the cap holds at the fair share until the new service's Nw reached its peers' mean).",
            methods=WINDOWED, flag="--slow-start-handover",
            flag_help="vendor: a ramp ends at its exits; caught_up (LEASTBANDWIDTH, LEASTPACKETS): it ends when "
                      "the new backend's window caught up with the others' (default {default})"),
    Setting("slow_start_guard", 0.0, _guard,
            "Closed-loop slow start (not the vendor's): an automated ramp steps up only while the new service's "
            "TTFB average and failure rate are within this factor of its peers', and steps back one increment "
            "when not (0: off).",
            flag="--slow-start-guard",
            flag_help="closed-loop slow start: a ramp steps up only while the new backend's TTFB and failure "
                      "rate stay within this factor of the others' (e.g. 2; default {default}: off)"),
    Setting("weights_from_utilization", False, _by_utilization,
            "Weights from the load the services report (report_utilization(), ORCA), by gRPC's weighted round "
            "robin formula, applied once a second (not the vendor's).",
            flag="--weights-from-utilization",
            flag_help="weights from the backends' endpoint-load-metrics reports, after gRPC's weighted round "
                      "robin (default: off)"),
    Setting("peakewma_decay", 10.0, _peakewma_decay,
            "PEAKEWMA: seconds for the latency estimate to decay to 1/e (default 10).", methods=("PEAKEWMA",)),
    Setting("shared", None, _shared,
            "A name: the vserver lives in shared memory, one for every process that names it (C engine).",
            settable=False),
    Setting("shared_capacity", 1024, check_shared_capacity,
            "Shared vservers: the services (holes included) its segment has room for (1..2**20).", settable=False),
)
CONSTRUCTOR_ONLY = tuple(s.name for s in SETTINGS if not s.settable)
# what a shared vserver's segment keeps of its creator's settings, for later openers to compare
SHARED_RECORD = tuple(s.name for s in SETTINGS if s.name not in ("name", "shared"))

SETTING: Dict[str, Setting] = {s.name: s for s in SETTINGS}
# the settings the C core's ll_settings holds (csrc/leastload.h), in its order: the policy's,
# and those every process of a shared vserver reads from the segment (check_c_mirrors.py)
C_SETTINGS = ("new_service_request", "new_service_request_unit", "new_service_request_increment_interval",
              "slow_start_handover", "slow_start_guard", "weights_from_utilization", "outlier_failures",
              "outlier_ejection_time", "outlier_max_ejection_percent", "window_seconds", "startup_rr_factor",
              "rtsp_nat", "netmask", "v6netmasklen", "hashlength", "hash_seed", "peakewma_decay")
SETTABLE = tuple(s.name for s in SETTINGS if s.settable)


def check_settings(values: Mapping[str, object]) -> Dict[str, Any]:
    """The settings of `values` checked and converted, in the table's order (the first bad one raises)."""
    return {s.name: s.check(values[s.name]) for s in SETTINGS if s.name in values}


def check_rate(rate: int, unit: str) -> None:
    """new_service_request's range, which its unit decides."""
    limit = 100 if unit == "PERCENT" else 0xFFFFFFFE
    if not 0 <= rate <= limit:
        raise bad_value("new_service_request", rate, f"an int in 0..{limit} ({unit})")


def flag_dest(setting: Setting) -> str:
    """The argparse dest of the setting's flag: --hash-length -> hash_length."""
    assert setting.flag is not None
    return setting.flag[2:].replace("-", "_")
