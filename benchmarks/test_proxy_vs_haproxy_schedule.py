"""proxy_vs_haproxy.py's order of runs and its --pin split, which decide what each ratio compares."""

from proxy_vs_haproxy import paired, pin_sets, schedule


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
