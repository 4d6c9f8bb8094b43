"""ORCA load reports in an HTTP response header (`endpoint-load-metrics`), as Envoy
reads them: the TEXT form (`TEXT cpu_utilization=0.3, rps_fractional=120,
named_metrics.queue=4`) and the JSON form (`JSON {"cpu_utilization": 0.3, ...}`). The
binary form (`BIN`, a protobuf) is refused: no protobuf dependency here.

Fields (all numbers >= 0, finite): cpu_utilization, mem_utilization,
application_utilization, rps_fractional, eps, and named_metrics.NAME. Other names
are ignored, as the proto's unknown fields are. A bad header raises ValueError
naming what is wrong; the caller drops the report and keeps the response.
"""

import json
import math
from dataclasses import dataclass, field
from typing import Dict

HEADER = "endpoint-load-metrics"
FIELDS = ("cpu_utilization", "mem_utilization", "application_utilization", "rps_fractional", "eps")
MAX_HEADER = 8192  # bytes of one report


@dataclass(frozen=True)
class LoadReport:
    cpu_utilization: float = 0.0
    mem_utilization: float = 0.0
    application_utilization: float = 0.0
    rps_fractional: float = 0.0
    eps: float = 0.0
    named_metrics: Dict[str, float] = field(default_factory=dict)

    @property
    def utilization(self) -> float:
        """What gRPC's weighted round robin divides by: application_utilization when set, else cpu's."""
        return self.application_utilization if self.application_utilization > 0 else self.cpu_utilization


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{HEADER}: {name} must be a number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{HEADER}: {name} must be a number, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{HEADER}: {name} must be a finite number >= 0, got {value!r}")
    return number


def _report(pairs: Dict[str, object], named: Dict[str, object]) -> LoadReport:
    values = {name: _number(name, pairs[name]) for name in FIELDS if name in pairs}
    metrics = {str(k): _number("named_metrics." + str(k), v) for k, v in named.items()}
    return LoadReport(named_metrics=metrics, **values)


def parse(value: str) -> LoadReport:
    """The report in one `endpoint-load-metrics` header value."""
    if len(value) > MAX_HEADER:
        raise ValueError(f"{HEADER}: longer than {MAX_HEADER} bytes")
    form, _, body = value.strip().partition(" ")
    form = form.upper()
    if form == "TEXT":
        pairs: Dict[str, object] = {}
        named: Dict[str, object] = {}
        for item in body.split(","):
            if not item.strip():
                continue
            name, eq, number = item.strip().partition("=")
            if not eq or not name:
                raise ValueError(f"{HEADER}: TEXT items are NAME=VALUE, got {item.strip()!r}")
            if name.startswith("named_metrics."):
                named[name[len("named_metrics."):]] = number.strip()
            else:
                pairs[name] = number.strip()
        return _report(pairs, named)
    if form == "JSON":
        try:
            data = json.loads(body)
        except ValueError:
            raise ValueError(f"{HEADER}: the JSON form is not JSON") from None
        if not isinstance(data, dict):
            raise ValueError(f"{HEADER}: the JSON form must be an object")
        named_data = data.get("named_metrics", {})
        if not isinstance(named_data, dict):
            raise ValueError(f"{HEADER}: named_metrics must be an object")
        return _report(data, named_data)
    if form == "BIN":
        raise ValueError(f"{HEADER}: the BIN (protobuf) form is not read here; send TEXT or JSON")
    raise ValueError(f"{HEADER}: the form must be TEXT, JSON or BIN, got {form!r}")


def format_text(report: LoadReport) -> str:
    """The TEXT form of a report (what `leastload backends --report-load` sends)."""
    items = [f"{name}={getattr(report, name):g}" for name in FIELDS if getattr(report, name)]
    items += [f"named_metrics.{k}={v:g}" for k, v in report.named_metrics.items()]
    return "TEXT " + ", ".join(items)


UTILIZATIONS = ("cpu_utilization", "mem_utilization", "application_utilization")  # fractions: as percents
NO_THRESHOLD = 1 << 62  # a metric table entry without a threshold never makes a service ineligible


def check_metric_table(table: object) -> Dict[str, "tuple[int, int]"]:
    """A CUSTOMLOAD metric table for the reports: {field or named_metrics.NAME: (weight 1..100,
    threshold >= 1)}; ValueError/TypeError naming the entry."""
    if not isinstance(table, dict) or not table:
        raise TypeError(f"load_metrics must be a non-empty dict {{metric: (weight, threshold)}}, got {table!r}")
    out = {}
    for name, spec in table.items():
        if not isinstance(name, str) or not (name in FIELDS or (name.startswith("named_metrics.")
                                                                 and len(name) > len("named_metrics."))):
            raise ValueError(f"load_metrics: {name!r} is not a report field ({', '.join(FIELDS)}) "
                             "or named_metrics.NAME")
        if not (isinstance(spec, tuple) and len(spec) == 2 and all(type(v) is int for v in spec)
                and 1 <= spec[0] <= 100 and spec[1] >= 1):
            raise ValueError(f"load_metrics[{name!r}] must be (weight 1..100, threshold >= 1), got {spec!r}")
        out[name] = spec
    return out


def custom_load(report: LoadReport, table: Dict[str, "tuple[int, int]"]) -> Dict[str, "tuple[int, int, int]"]:
    """The report as CUSTOMLOAD's report_load() takes it, by the metric table: each value an
    integer (utilizations in percent, rounded; the rest rounded), with its weight and threshold.
    A named metric the report does not carry is left out."""
    out = {}
    for name, (weight, threshold) in table.items():
        if name.startswith("named_metrics."):
            value = report.named_metrics.get(name[len("named_metrics."):])
            if value is None:
                continue
        else:
            value = getattr(report, name)
        out[name] = (round(value * 100) if name in UTILIZATIONS else round(value), weight, threshold)
    return out
