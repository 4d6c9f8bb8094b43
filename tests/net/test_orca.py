"""ORCA load reports in `endpoint-load-metrics` (leastload.net.orca): the TEXT and JSON
forms read, everything else refused with a message naming what is wrong."""
import pytest

from leastload.net import orca


def test_the_text_form():
    r = orca.parse("TEXT cpu_utilization=0.3, mem_utilization=0.8, rps_fractional=120, eps=2.5, "
                   "named_metrics.queue=4, application_utilization=0")
    assert (r.cpu_utilization, r.mem_utilization, r.rps_fractional, r.eps) == (0.3, 0.8, 120.0, 2.5)
    assert r.named_metrics == {"queue": 4.0} and r.utilization == 0.3  # no application_utilization: cpu's


def test_the_json_form_and_application_utilization_first():
    r = orca.parse('JSON {"cpu_utilization": 0.3, "application_utilization": 0.5, "rps_fractional": 10, '
                   '"named_metrics": {"gpu": 0.25}, "unknown_field": 1}')
    assert r.utilization == 0.5 and r.named_metrics == {"gpu": 0.25} and r.rps_fractional == 10.0


def test_the_text_form_round_trips():
    r = orca.LoadReport(cpu_utilization=0.9, rps_fractional=7, named_metrics={"q": 2})
    assert orca.format_text(r) == "TEXT cpu_utilization=0.9, rps_fractional=7, named_metrics.q=2"
    assert orca.parse(orca.format_text(r)) == r


@pytest.mark.parametrize("value, message", [
    ("BIN CgkJAAAAAAAA", "the BIN (protobuf) form is not read here"),
    ("XML <a/>", "the form must be TEXT, JSON or BIN, got 'XML'"),
    ("TEXT cpu_utilization", "TEXT items are NAME=VALUE, got 'cpu_utilization'"),
    ("TEXT cpu_utilization=-1", "cpu_utilization must be a finite number >= 0, got '-1'"),
    ("TEXT eps=nan", "eps must be a finite number >= 0, got 'nan'"),
    ("TEXT rps_fractional=lots", "rps_fractional must be a number, got 'lots'"),
    ("JSON [1]", "the JSON form must be an object"),
    ("JSON {", "the JSON form is not JSON"),
    ('JSON {"cpu_utilization": true}', "cpu_utilization must be a number, got True"),
    ('JSON {"named_metrics": 3}', "named_metrics must be an object"),
    ("TEXT " + "a=1," * 3000, "longer than 8192 bytes"),
])
def test_a_bad_report_is_refused_by_name(value, message):
    with pytest.raises(ValueError) as refused:
        orca.parse(value)
    assert message in str(refused.value) and str(refused.value).startswith("endpoint-load-metrics: ")


def test_a_report_as_customload_s_metrics():
    table = orca.check_metric_table({"cpu_utilization": (2, 80), "rps_fractional": (1, orca.NO_THRESHOLD),
                                     "named_metrics.queue": (5, 10), "named_metrics.absent": (1, 1)})
    r = orca.parse("TEXT cpu_utilization=0.907, rps_fractional=12.4, named_metrics.queue=3")
    assert orca.custom_load(r, table) == {"cpu_utilization": (91, 2, 80), "rps_fractional": (12, 1, orca.NO_THRESHOLD),
                                          "named_metrics.queue": (3, 5, 10)}


@pytest.mark.parametrize("table, message", [
    ({"gpu": (1, 1)}, "'gpu' is not a report field"),
    ({"named_metrics.": (1, 1)}, "is not a report field"),
    ({"eps": (0, 1)}, "load_metrics['eps'] must be (weight 1..100, threshold >= 1), got (0, 1)"),
    ({"eps": (1, 0)}, "got (1, 0)"),
    ({"eps": [1, 1]}, "got [1, 1]"),
])
def test_a_bad_metric_table_is_refused_by_name(table, message):
    with pytest.raises(ValueError) as refused:
        orca.check_metric_table(table)
    assert message in str(refused.value)
