"""benchmarks/nginx_compare.py's Done-when lines judge the targets of issue 47 from the
ratios it measured: PASS at the bound, MISS past it, LEASTBANDWIDTH's miss with its reason
and round robin's ratio, and "not judged" when a needed proxy was not run. No nginx here."""
from benchmarks import nginx_compare as compare


def ratio(proxy, workers, rps, cpu):
    return {"workers": workers, "connections": 256, "proxy": proxy, "rps_ratio_median": rps, "rps_ratios": [rps],
            "cpu_ratio_median": cpu, "cpu_ratios": [cpu]}


def lines_for(ratios, workers="2"):
    return compare.done_when(ratios, compare.parse_args(["--workers", workers, "--connections", "256"]))


def test_leastconnection_passes_at_the_bounds_and_misses_past_them():
    at = lines_for([ratio("leastload-lc", 2, 0.95, 1.1)])
    assert at[0].startswith("# Done-when: PASS: 2 workers, 256 connections: LEASTCONNECTION req/s x0.950")
    assert at[1].startswith("# Done-when: PASS: 2 workers, 256 connections: LEASTCONNECTION CPU/request x1.100")
    past = lines_for([ratio("leastload-lc", 2, 0.949, 1.101)])
    assert past[0].startswith("# Done-when: MISS:") and "x0.949" in past[0]
    assert past[1].startswith("# Done-when: MISS:") and "x1.101" in past[1]


def test_leastbandwidth_miss_says_why_and_shows_round_robin():
    lines = lines_for([ratio("leastload-lb", 1, 0.5, 1.6), ratio("nginx-round_robin", 1, 0.92, 0.9)], workers="1")
    lb = [line for line in lines if "LEASTBANDWIDTH" in line]
    assert len(lb) == 1 and lb[0].startswith("# Done-when: MISS: 1 worker, 256 connections: LEASTBANDWIDTH")
    assert "equal bytes mean equal request counts" in lb[0] and "nginx round robin" in lb[0] and "x0.920" in lb[0]
    passed = lines_for([ratio("leastload-lb", 1, 0.9, 1.0)], workers="1")
    assert [line for line in passed if "LEASTBANDWIDTH" in line][0].startswith("# Done-when: PASS:")


def test_a_target_without_its_proxies_is_not_judged():
    lines = lines_for([])
    assert len(lines) == 2 and all(line.startswith("# Done-when: not judged:") for line in lines)
