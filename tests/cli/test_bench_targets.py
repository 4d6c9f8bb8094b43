"""`leastload bench`'s targets say what each measures, and why a missed one is missed.

Built from made-up results (no timing here): one target of each kind missed or met on purpose."""
import pytest

pytest.importorskip("numpy")  # leastload.bench needs the sim extra

from leastload.bench import report  # noqa: E402
from leastload.bench.targets import NOTES, targets  # noqa: E402


def results(select_over_noop_64: float, urlhash_over_lc: float = 2.5) -> dict:
    def row(n: int, select_over_noop: float) -> dict:
        method = {"replay_over_floor": 1.2, "replay_speedup": 500.0, "percall_speedup": 200.0}
        return {"n": n, "select_over_noop": select_over_noop, "tied_over_random": 0.9,
                "bytes_per_service": 300.0, "bytes_per_service_reserved": 300.0,
                "methods": {"LEASTCONNECTION": dict(method), "LEASTBANDWIDTH": dict(method)}}
    return {"rows": [row(64, select_over_noop_64), row(16384, 3.0)],
            "methods_n64": [{"method": "LEASTCONNECTION", "over_lc": 1.0}, {"method": "URLHASH", "over_lc": urlhash_over_lc}]}


def test_every_target_says_what_it_measures_and_why_it_can_be_missed():
    rows = targets(results(2.5))
    assert {t["kind"] for t in rows} <= set(NOTES)
    for t in rows:
        assert t["what"] == NOTES[t["kind"]][1] and t["why_missed"] == NOTES[t["kind"]][2]
    # the replay's absolute ns targets are gone: replay / floor, measured in the same run, replaced them
    assert not any("ns/request" in t["target"] for t in rows)
    missed = {t["target"] for t in rows if t["met"] is False}
    assert missed == {"select() / _noop(1) at n=64", "per-call pair of every method / LEASTCONNECTION's at n=64"}


def test_the_notes_give_the_reason_of_each_missed_kind_only():
    lines = report.notes(targets(results(2.5)))
    text = "\n".join(lines)
    assert text.count("MISSED (") == 2
    assert "MISSED (n=64): a pick climbs the tournament tree" in text
    assert "MISSED (worst: URLHASH): a hash method hashes" in text
    assert "- replay / floor: a trace replayed" in text and "the per-call state machine" not in text
    assert lines[-1].startswith("2 of 11 targets missed.") and "unless --strict" in lines[-1]
    assert max(len(line) for line in lines) <= report.WIDTH


def test_a_missed_row_is_named_in_its_kinds_reason():
    r = results(1.5, urlhash_over_lc=1.5)
    r["rows"][1]["methods"]["LEASTBANDWIDTH"]["replay_over_floor"] = 1.7
    r["rows"][1]["methods"]["LEASTCONNECTION"]["replay_over_floor"] = 1.6
    text = "\n".join(report.notes(targets(r)))
    assert "MISSED (LEASTCONNECTION n=16384, LEASTBANDWIDTH n=16384): the replay keeps" in text


def test_all_met_says_none_missed():
    lines = report.notes(targets(results(1.5, urlhash_over_lc=1.5)))
    assert "MISSED" not in "\n".join(lines) and lines[-1].startswith("0 of 11 targets missed.")
