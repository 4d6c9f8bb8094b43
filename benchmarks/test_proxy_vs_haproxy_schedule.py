"""proxy_vs_haproxy.py's order of runs and its --pin split, which decide what each ratio compares."""

from proxy_vs_haproxy import (QUANTILE_STEPS, groups_of, merged_percentile, paired, parse_wrk, pin_sets,
                              schedule)


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
