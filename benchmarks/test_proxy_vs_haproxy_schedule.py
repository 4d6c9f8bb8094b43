"""proxy_vs_haproxy.py's order of runs and its --pin split, which decide what each ratio compares."""

import math
import os
import time

from benchmarks.proxy_vs_haproxy import (QUANTILE_STEPS, groups_of, merged_percentile, paired, parse_wrk, pin_sets,
                              print_cpu_split, ratios, schedule, sleeps, turn_interval)


def test_each_leastload_run_is_next_to_the_haproxy_run_it_is_compared_with():
    proxies = [("leastload", 1), ("leastload", 2), ("haproxy", 1), ("haproxy", 2)]
    assert paired(proxies) == [("leastload", 1), ("haproxy", 1), ("leastload", 2), ("haproxy", 2)]
    runs = schedule(proxies, [32, 256], rounds=2)
    assert len(runs) == 16
    for first, second in zip(runs[::2], runs[1::2]):  # the pairs: same round, connections and N
        assert first[:2] == second[:2] and first[3] == second[3]
        assert {first[2], second[2]} == {"leastload", "haproxy"}
    # who goes first alternates between rounds
    assert [r[2] for r in runs[:2]] == ["leastload", "haproxy"]
    assert [r[2] for r in runs[8:10]] == ["haproxy", "leastload"]


def test_pin_gives_the_proxy_the_last_cpu_and_the_rest_to_everyone_else():
    assert pin_sets({0, 1}) == ({1}, {0})
    assert pin_sets({3, 0, 5, 2}) == ({5}, {0, 2, 3})
    assert pin_sets({0}) is None  # nothing left for wrk and the backends


def test_slices_measure_each_pair_together():
    """--slices: the runs of one round, connection count and N are one group, started together."""
    runs = schedule([("leastload", 1), ("haproxy", 1), ("leastload", 2), ("haproxy", 2)], [32, 256], rounds=2)
    groups = groups_of(runs)
    assert len(groups) == 8 and all(len(g) == 2 for g in groups)
    assert sum(groups, []) == runs  # every run once, in the schedule's order
    for group in groups:
        assert len({(rnd, c, n) for rnd, c, _, n in group}) == 1
        assert {kind for _, _, kind, _ in group} == {"leastload", "haproxy"}


def test_merged_percentiles_weigh_each_slice_by_its_requests():
    one = [float(i) for i in range(1, QUANTILE_STEPS + 1)]   # quantiles of 1..999 us
    assert merged_percentile([(500, one)], 99) == 0.99      # alone: its own 99th quantile, in ms
    assert merged_percentile([(500, one)], 50) == 0.5
    slow = [q + 1000.0 for q in one]
    # three times as many requests in the slower slice: the median lies in it
    assert merged_percentile([(1000, one), (3000, slow)], 50) == 1.333
    assert merged_percentile([(3000, one), (1000, slow)], 50) == 0.666  # 2000 of 4000: its 666th quantile
    assert merged_percentile([], 99) is None


def test_wrk_output_with_the_quantile_script_is_read():
    out = ("Running 2s test @ http://127.0.0.1:1/\n  Latency Distribution\n     50%    2.95ms\n"
           "     75%    3.10ms\n     90%    3.50ms\n     99%   61.04ms\n"
           "  15310 requests in 2.00s, 16.01MB read\nRequests/sec:   7655.00\nTransfer/sec:      8.00MB\n"
           "\nquantiles_us: 1200 1300 61040\n")
    parsed = parse_wrk(out)
    assert parsed["requests"] == 15310 and parsed["elapsed_s"] == 2.0
    assert parsed["p99_ms"] == 61.04
    assert parsed["quantiles_us"] == [1200.0, 1300.0, 61040.0]
    assert parse_wrk(out.split("\nquantiles_us")[0])["quantiles_us"] == []  # without the script


def test_paired_turns_give_the_ratio_and_its_95_percent_interval():
    # turns that agree: their ratio, and no width
    mean, low, high = turn_interval([200.0, 300.0, 400.0], [100.0, 150.0, 200.0])
    assert (round(mean, 12), round(low, 12), round(high, 12)) == (2.0, 2.0, 2.0)
    # two turns whose ratios are e^0.1 and e^-0.1: mean of the logs 0, their sd 0.1 * sqrt(2),
    # half-width t(1 df) * sd / sqrt(2) = 12.706 * 0.1
    mean, low, high = turn_interval([math.exp(0.1), math.exp(-0.1)], [1.0, 1.0])
    assert math.isclose(mean, 1.0)
    assert math.isclose(low, math.exp(-1.2706)) and math.isclose(high, math.exp(1.2706))
    # the other way round: the reciprocal interval
    back = turn_interval([1.0, 1.0], [math.exp(0.1), math.exp(-0.1)])
    assert math.isclose(back[1], 1 / high) and math.isclose(back[2], 1 / low)
    # more turns of the same spread: a narrower interval around the same mean
    wide = turn_interval([1.02, 0.98, 1.02, 0.98], [1.0] * 4)
    narrow = turn_interval([1.02, 0.98] * 8, [1.0] * 16)
    assert math.isclose(wide[0], narrow[0])
    assert narrow[2] - narrow[1] < wide[2] - wide[1]
    # nothing to say: one turn, unequal counts, a turn with no requests
    assert turn_interval([1.0], [1.0]) is None
    assert turn_interval([1.0, 1.0], [1.0]) is None
    assert turn_interval([1.0, 0.0], [1.0, 1.0]) is None


def test_ratios_carry_the_turns_interval_only_when_turns_were_paired():
    def row(kind, rps, turns):
        return {"round": 1, "kind": kind, "workers_or_threads": 1, "connections": 32, "requests_per_s": rps,
                "cpu_us_per_request": 10.0, "turn_requests_per_s": turns}

    sliced = ratios([row("leastload", 99.0, [100.0, 98.0]), row("haproxy", 100.0, [100.0, 100.0])])
    assert len(sliced) == 1 and math.isclose(sliced[0]["ratio"], 0.99)
    assert math.isclose(sliced[0]["turns"]["geometric_mean"], math.sqrt(0.98))
    assert sliced[0]["turns"]["low_95"] < 0.98 and sliced[0]["turns"]["high_95"] > 1.0
    whole = ratios([row("leastload", 99.0, [99.0]), row("haproxy", 100.0, [100.0])])
    assert whole[0]["turns"] is None  # one run each (no --slices): no turns to pair


def test_sleeps_counts_each_time_a_thread_waited():
    before = sleeps([os.getpid()])
    for _ in range(3):
        time.sleep(0.002)  # each sleep is a voluntary context switch of this thread
    assert sleeps([os.getpid()]) >= before + 3
    assert sleeps([2 ** 22 + 1]) == 0  # above Linux's largest PID: no such process, nothing counted


def test_cpu_split_gives_the_peers_cost_beside_the_proxys(capsys):
    row = {"connections": 32, "proxy": "leastload-1w", "cpu_user_us_per_request": 13.0,
           "cpu_system_us_per_request": 25.0, "backends_cpu_us_per_request": 52.0,
           "backends_sleeps_per_request": 0.45, "wrk_cpu_us_per_request": 19.0, "machine_cpu_us_per_request": 109.0}
    print_cpu_split([row, {**row, "machine_cpu_us_per_request": 111.0}, {**row, "proxy": "haproxy-1t",
                                                                          "backends_sleeps_per_request": None}])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[1].split() == ["32", "connections", "haproxy-1t", "13.0", "+", "25.0", "backends", "52.0", "(nan)",
                                "wrk", "19.0", "all", "109.0"]
    # the median of the two rounds
    assert lines[2].split()[-2:] == ["all", "110.0"] and "(0.450)" in lines[2]
