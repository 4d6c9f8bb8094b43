"""The admin port's `GET /metrics` (Prometheus text format 0.0.4) and `GET /healthz`, end to end.

Real backend processes (tests/servers.py), a real Proxy on 127.0.0.1, real requests
(tests/proxy/test_proxy.py's helpers), then a scrape over a real socket. The scraped text is
read by a strict parser written here to the format's rules (below), its figures are
compared with the engine's `info()` and the proxy's counters, and `promtool check
metrics` judges it too when promtool is installed. The vserver's clock is a
ManualClock: the engine's 14 s window never rolls, so its bytes equal the totals.
"""

import asyncio
import http.client
import json
import math
import re
import shutil
import subprocess

import pytest

from leastload.proxy import Proxy, _admin, _metrics
from leastload.proxy._proxy import TTFB_BUCKETS
from leastload_testkit.backends import start_backend
from leastload_testkit.ports import free_port
from servers import run_loop
from test_proxy import C, backends  # noqa: F401 (fixtures: the C engine; backend processes, stopped after the test)
from test_proxy import RUN_TIMEOUT, assert_nothing_active, load, settle, specs, url_of, wait_for_async

VSERVER = "edge-1"
WEIRD = 'we"ird\\name'  # a backend name the label escaping must carry: a double quote and a backslash


# ---- a strict reader of the text format, version 0.0.4 ----------------------------------------------

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Inf|NaN")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}


class Family:
    def __init__(self, name):
        self.name = name
        self.help = None
        self.type = None
        self.samples = []  # (sample name, {label: value}, float)


def _unescape(text, allowed, lineno):
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            assert i + 1 < len(text) and text[i + 1] in allowed, f"line {lineno}: bad escape in {text!r}"
            out.append("\n" if text[i + 1] == "n" else text[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _parse_labels(line, pos, lineno):
    """The label set starting after '{' at pos -> ({name: value}, the position after '}')."""
    labels = {}
    while True:
        if line[pos] == "}":
            return labels, pos + 1
        m = LABEL_NAME.match(line, pos)
        assert m, f"line {lineno}: a label name expected at {pos}: {line!r}"
        name = m.group()
        assert not name.startswith("__"), f"line {lineno}: reserved label name {name}"
        assert name not in labels, f"line {lineno}: label {name} twice"
        pos = m.end()
        assert line.startswith('="', pos), f"line {lineno}: '=\"' expected after {name}: {line!r}"
        pos += 2
        raw = []
        while True:
            assert pos < len(line), f"line {lineno}: unterminated label value: {line!r}"
            c = line[pos]
            if c == "\\":
                assert pos + 1 < len(line) and line[pos + 1] in '\\"n', f"line {lineno}: bad escape: {line!r}"
                raw.append(line[pos:pos + 2])
                pos += 2
            elif c == '"':
                pos += 1
                break
            else:
                raw.append(c)
                pos += 1
        labels[name] = _unescape("".join(raw), '\\"n', lineno)
        assert pos < len(line) and line[pos] in ",}", f"line {lineno}: ',' or '}}' expected: {line!r}"
        if line[pos] == ",":
            pos += 1


def _family_of(name, families, lineno):
    family = families.get(name)
    if family is not None and family.type not in SUFFIXES:
        return family
    for kind, suffixes in SUFFIXES.items():
        for suffix in suffixes:
            base = name[: -len(suffix)]
            if name.endswith(suffix) and base in families and families[base].type == kind:
                return families[base]
    raise AssertionError(f"line {lineno}: sample {name} of no family declared by a TYPE line before it")


def parse_exposition(text):
    """{family name: Family}, or AssertionError naming the first line that breaks the format's
    rules (or this exporter's stricter habits: no blank lines, comments, timestamps or empty families)."""
    assert text.endswith("\n"), "the last line must end with a line feed"
    families = {}
    current, closed = None, set()
    series = set()

    def enter(name, lineno):
        nonlocal current
        if name != current:
            assert name not in closed, f"line {lineno}: {name} continues after another family began"
            if current is not None:
                closed.add(current)
            current = name

    for lineno, line in enumerate(text[:-1].split("\n"), start=1):
        assert line, f"line {lineno}: blank line"
        if line.startswith("#"):
            m = re.fullmatch(r"# (HELP|TYPE) (\S+) (.*)", line)
            assert m, f"line {lineno}: a comment other than HELP or TYPE: {line!r}"
            what, name, rest = m.groups()
            assert METRIC_NAME.fullmatch(name), f"line {lineno}: bad metric name {name!r}"
            enter(name, lineno)
            family = families.setdefault(name, Family(name))
            assert not family.samples, f"line {lineno}: {what} of {name} after its samples"
            if what == "HELP":
                assert family.help is None, f"line {lineno}: a second HELP for {name}"
                family.help = _unescape(rest, "\\n", lineno)
                assert family.help.strip(), f"line {lineno}: empty HELP for {name}"
            else:
                assert family.type is None, f"line {lineno}: a second TYPE for {name}"
                assert rest in TYPES, f"line {lineno}: unknown type {rest!r}"
                family.type = rest
            continue
        m = METRIC_NAME.match(line)
        assert m, f"line {lineno}: a metric name expected: {line!r}"
        name, pos = m.group(), m.end()
        labels = {}
        if pos < len(line) and line[pos] == "{":
            labels, pos = _parse_labels(line, pos + 1, lineno)
        rest = line[pos:]
        assert rest.startswith(" "), f"line {lineno}: a space expected before the value: {line!r}"
        value_text = rest[1:]
        assert FLOAT.fullmatch(value_text), f"line {lineno}: bad value {value_text!r} (or a timestamp)"
        family = _family_of(name, families, lineno)
        enter(family.name, lineno)
        key = (name, tuple(sorted(labels.items())))
        assert key not in series, f"line {lineno}: series given twice: {key}"
        series.add(key)
        family.samples.append((name, labels, float(value_text.replace("Inf", "inf"))))
    for family in families.values():
        assert family.help is not None and family.type is not None, f"{family.name}: HELP and TYPE wanted"
        assert family.samples, f"{family.name}: HELP and TYPE without samples"
        _check_family(family)
    return families


def _check_family(family):
    if family.type == "counter":
        assert family.name.endswith("_total"), f"counter {family.name} without _total"
        for name, labels, value in family.samples:
            assert value >= 0 and not math.isnan(value) and value == int(value), (name, labels, value)
    else:
        assert not family.name.endswith("_total"), f"{family.type} {family.name} ends in _total"
    if family.type != "histogram":
        assert all(name == family.name for name, _, _ in family.samples), family.name
        return
    groups = {}
    for name, labels, value in family.samples:
        assert name != family.name, f"histogram {family.name}: a sample without a suffix"
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        group = groups.setdefault(rest, {"buckets": [], "sum": None, "count": None})
        if name.endswith("_bucket"):
            assert "le" in labels, f"{name} without le"
            group["buckets"].append((float(labels["le"].replace("Inf", "inf")), value))
        else:
            assert "le" not in labels, f"{name} with le"
            group[name.rsplit("_", 1)[1]] = value
    for rest, group in groups.items():
        bounds = [le for le, _ in group["buckets"]]
        counts = [count for _, count in group["buckets"]]
        assert bounds == sorted(set(bounds)), f"{family.name}{rest}: le not increasing: {bounds}"
        assert bounds and bounds[-1] == math.inf, f"{family.name}{rest}: no le=\"+Inf\" bucket"
        assert counts == sorted(counts), f"{family.name}{rest}: buckets not cumulative: {counts}"
        assert group["count"] == counts[-1], f"{family.name}{rest}: +Inf {counts[-1]} != _count {group['count']}"
        assert group["sum"] is not None, f"{family.name}{rest}: no _sum"


def value(families, name, **labels):
    """The one sample `name` whose labels include `labels` (`vserver` is VSERVER unless given)."""
    labels.setdefault("vserver", VSERVER)
    family = families[name] if name in families else _family_of(name, families, 0)
    found = [v for n, ls, v in family.samples if n == name and all(ls.get(k) == w for k, w in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def absent(families, name, **labels):
    labels.setdefault("vserver", VSERVER)
    family = families.get(name)
    return family is None or not any(all(ls.get(k) == w for k, w in labels.items()) for _, ls, _ in family.samples)


def check_labels(families, services):
    """Every series names the vserver; a service's series name a known service."""
    for family in families.values():
        for name, labels, _ in family.samples:
            assert labels.get("vserver") == VSERVER, (name, labels)
            assert name.startswith("leastload_"), name
            if name.startswith("leastload_service_"):
                assert labels.get("service") in services, (name, labels)
            else:
                assert "service" not in labels, (name, labels)


# ---- the admin port over a real socket -------------------------------------------------------------


def _request(address, method, path):
    conn = http.client.HTTPConnection(*address, timeout=10)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type"), r.read()
    finally:
        conn.close()


async def admin(proxy, path, method="GET"):
    """(status, content type, body) of one request to the admin port (a thread: the loop keeps serving)."""
    return await asyncio.get_running_loop().run_in_executor(None, _request, proxy.admin_address, method, path)


async def scrape(proxy):
    status, content_type, body = await admin(proxy, "/metrics")
    assert status == 200, (status, body)
    assert content_type == _metrics.CONTENT_TYPE.decode()
    return body.decode("utf-8")


def snapshot(proxy):
    """The engine's and the proxy's figures now, copied."""
    vs = proxy.vserver
    infos = {name: vs.info(name) for name in vs.services}
    counters = {name: dict(c.as_dict(), bytes_in=c.bytes_in, bytes_out=c.bytes_out, ttfb_sum=c.ttfb_sum,
                           ttfb_buckets=list(c.ttfb_buckets), packets=c.packets)
                for name, c in proxy.stats.backends.items()}
    ejections = {name: vs.ejection(name) for name in vs.services}
    return infos, counters, ejections


def check_against(families, infos, counters):
    """The series equal the engine's info() and the proxy's counters, service by service."""
    for name, info in infos.items():
        c = counters.get(name)
        requests = value(families, "leastload_service_requests_total", service=name)
        assert requests == info["selected"] == (c["requests"] if c else 0), (name, requests, info, c)
        failures = value(families, "leastload_service_failures_total", service=name)
        assert failures == info["failures"] == (c["failures"] if c else 0), (name, failures, info, c)
        assert value(families, "leastload_service_active_transactions", service=name) == info["active"]
        assert value(families, "leastload_service_weight", service=name) == info["weight"]
        assert value(families, "leastload_service_load", service=name) == info["load"]
        assert value(families, "leastload_service_consecutive_failures", service=name) == info["consecutive_failures"]
        assert value(families, "leastload_service_ejected", service=name) == int(info["ejected"])
        assert value(families, "leastload_service_draining", service=name) == int(info["draining"])
        assert value(families, "leastload_service_bound", service=name) == 1
        for state in ("UP", "DOWN", "OUT_OF_SERVICE"):
            expected = 1 if info["state"] == state else 0
            assert value(families, "leastload_service_state", service=name, state=state) == expected
        window_bytes = value(families, "leastload_service_window_bytes", service=name)
        assert window_bytes == info["bytes"]
        assert value(families, "leastload_service_window_packets", service=name) == info["packets"]
        if info["cap"] is None:
            assert absent(families, "leastload_service_slow_start_cap", service=name)
        else:
            assert value(families, "leastload_service_slow_start_cap", service=name) == info["cap"]
        if info["ttfb"] is None:
            assert absent(families, "leastload_service_ttfb_average_seconds", service=name)
        else:
            assert value(families, "leastload_service_ttfb_average_seconds", service=name) == info["ttfb"]
        c = c or {"retries": 0, "stale": 0, "bytes_in": 0, "bytes_out": 0, "ttfb_sum": 0.0, "packets": 0,
                  "ttfb_buckets": [0] * (len(TTFB_BUCKETS) + 1), **{f"{k}xx": 0 for k in range(1, 6)}}
        assert value(families, "leastload_service_retries_total", service=name) == c["retries"]
        assert value(families, "leastload_service_stale_connections_total", service=name) == c["stale"]
        sent = value(families, "leastload_service_request_bytes_total", service=name)
        got = value(families, "leastload_service_response_bytes_total", service=name)
        assert (sent, got) == (c["bytes_in"], c["bytes_out"])
        assert window_bytes == sent + got  # the clock stands still: the window holds every byte
        packets = value(families, "leastload_service_packets_total", service=name)
        assert packets == c["packets"] == info["packets"]  # and every packet
        for k in range(1, 6):
            assert value(families, "leastload_service_responses_total", service=name, code=f"{k}xx") == c[f"{k}xx"]
        running = 0
        for bound, count in zip(TTFB_BUCKETS, c["ttfb_buckets"]):
            running += count
            assert value(families, "leastload_service_ttfb_seconds_bucket", service=name, le=repr(bound)) == running
        running += c["ttfb_buckets"][-1]
        assert value(families, "leastload_service_ttfb_seconds_bucket", service=name, le="+Inf") == running
        assert value(families, "leastload_service_ttfb_seconds_count", service=name) == running
        assert value(families, "leastload_service_ttfb_seconds_sum", service=name) == c["ttfb_sum"]


def run(coro):
    return run_loop(coro, RUN_TIMEOUT)


# ---- clean traffic, either engine ----------------------------------------------------------------------


N = 300


def test_metrics_after_real_traffic_equal_the_engine_and_the_counters(backends, impl):
    procs = [backends(0.001, 1024), backends(0.001, 2048), backends(0.001, 4096)]
    names = ["a", "b", WEIRD]

    async def main():
        async with Proxy(specs(names, procs), "LEASTCONNECTION", listen=("127.0.0.1", 0),
                         admin=("127.0.0.1", 0), health_check="none", name=VSERVER,
                         engine=impl.VirtualServer, clock=impl.ManualClock(1000.0)) as proxy:
            outcome = await load(url_of(proxy), N, 4)
            await settle(proxy)
            assert_nothing_active(proxy)
            assert await wait_for_async(lambda: not proxy.clients, 10)  # the client's connections closed
            text = await scrape(proxy)
            return outcome, text, snapshot(proxy), proxy.listener.accepted
    outcome, text, (infos, counters, _), accepted = run(main())
    assert outcome == {200: N}
    families = parse_exposition(text)
    check_labels(families, set(names))
    assert sorted(infos) == sorted(names)
    check_against(families, infos, counters)
    total = sum(value(families, "leastload_service_requests_total", service=n) for n in names)
    assert total == N == value(families, "leastload_vserver_picks_total")
    assert sum(value(families, "leastload_service_responses_total", service=n, code="2xx") for n in names) == N
    assert sum(value(families, "leastload_service_ttfb_seconds_count", service=n) for n in names) == N
    assert all(value(families, "leastload_service_requests_total", service=n) > 0 for n in names)
    assert value(families, "leastload_vserver_info", method="LEASTCONNECTION") == 1
    assert value(families, "leastload_vserver_window_seconds") == 14
    assert value(families, "leastload_vserver_no_service_available_total") == 0
    for code in ("502", "503", "504"):
        assert value(families, "leastload_vserver_proxy_responses_total", code=code) == 0
    assert value(families, "leastload_vserver_clients") == 0
    assert value(families, "leastload_vserver_accepted_connections_total") == accepted >= 1
    assert "leastload_service_health_probes_total" not in families  # health_check="none": no monitors
    assert families["leastload_service_ttfb_seconds"].type == "histogram"
    assert families["leastload_service_state"].type == "gauge"


# ---- failures, ejection, slow start, no backend: one run, read by several tests -------------------------


FAILING_N = 60


@pytest.fixture(scope="module")
def eventful(c_impl):
    """A run with a refusing backend (ejected after 3 failures, its requests retried), a backend
    added under slow start, then every backend DOWN (503s): two scrapes and what they should say."""
    procs = [start_backend(0.0, 512), start_backend(0.0, 1024), start_backend(0.0, 256)]
    dead = f"dead=127.0.0.1:{free_port()}"  # nothing listens: refused

    async def main():
        async with Proxy(specs(["a", WEIRD], procs[:2]) + [dead], "ROUNDROBIN", listen=("127.0.0.1", 0),
                         admin=("127.0.0.1", 0), health_check="none", name=VSERVER, outlier_failures=3,
                         new_service_request=5, engine=c_impl.VirtualServer,
                         clock=c_impl.ManualClock(1000.0)) as proxy:
            vs = proxy.vserver
            outcome = await load(url_of(proxy), FAILING_N, 1)
            proxy.add_backend(f"late=127.0.0.1:{procs[2].port}")  # slow start: a cap, manual mode
            await settle(proxy)
            health_up = await admin(proxy, "/healthz")
            first = await scrape(proxy), snapshot(proxy)
            for name in ("a", WEIRD, "late"):  # "dead" stays UP but ejected: nothing is eligible
                vs.set_state(name, "DOWN")
            refused = await load(url_of(proxy), 2, 1)
            await settle(proxy)
            health_down = await admin(proxy, "/healthz")
            second = await scrape(proxy), snapshot(proxy)
            return outcome, refused, health_up, health_down, first, second
    try:
        return run(main())
    finally:
        for p in procs:
            p.stop()


def test_failures_retries_and_an_ejection_are_counted_as_the_engine_counts_them(eventful):
    outcome, _, _, _, (text, (infos, counters, ejections)), _ = eventful
    assert outcome == {200: FAILING_N}  # every refused attempt was retried elsewhere
    families = parse_exposition(text)
    check_labels(families, {"a", WEIRD, "dead", "late"})
    check_against(families, infos, counters)
    assert infos["dead"]["ejected"] and ejections["dead"]["ejections"] == 1
    assert value(families, "leastload_service_ejections_total", service="dead") == 1
    assert value(families, "leastload_service_ejected", service="dead") == 1
    assert value(families, "leastload_service_failures_total", service="dead") == 3 == infos["dead"]["failures"]
    assert value(families, "leastload_service_retries_total", service="dead") == 3
    assert value(families, "leastload_service_requests_total", service="dead") == 3
    assert value(families, "leastload_service_responses_total", service="dead", code="2xx") == 0
    for name in ("a", WEIRD, "late"):
        assert value(families, "leastload_service_ejections_total", service=name) == 0
    # picks: every client request once, and the refused attempts once more
    assert value(families, "leastload_vserver_picks_total") == FAILING_N + 3
    assert sum(value(families, "leastload_service_responses_total", service=n, code="2xx")
               for n in ("a", WEIRD)) == FAILING_N


def test_the_slow_start_cap_is_a_gauge_while_it_lasts(eventful):
    _, _, _, _, (text, (infos, _, _)), (text2, (infos2, _, _)) = eventful
    first, second = parse_exposition(text), parse_exposition(text2)
    assert infos["late"]["cap"] == 5
    assert value(first, "leastload_service_slow_start_cap", service="late") == 5
    assert value(first, "leastload_service_requests_total", service="late") == 0  # not picked yet: zeros
    assert value(first, "leastload_service_ttfb_seconds_count", service="late") == 0
    for name in ("a", WEIRD, "dead"):
        assert absent(first, "leastload_service_slow_start_cap", service=name)
    assert infos2["late"]["cap"] is None  # every other service went DOWN: the ramp ended
    assert absent(second, "leastload_service_slow_start_cap", service="late")


def test_no_backend_available_is_counted_and_states_are_gauges(eventful):
    _, refused, _, _, _, (text, (infos, counters, _)) = eventful
    assert refused == {503: 2}
    families = parse_exposition(text)
    check_against(families, infos, counters)
    assert value(families, "leastload_vserver_no_service_available_total") == 2
    assert value(families, "leastload_vserver_proxy_responses_total", code="503") == 2
    assert value(families, "leastload_vserver_proxy_responses_total", code="502") == 0
    assert value(families, "leastload_vserver_picks_total") == FAILING_N + 3  # a 503 is no pick
    for name in ("a", WEIRD, "late"):
        assert value(families, "leastload_service_state", service=name, state="DOWN") == 1
        assert value(families, "leastload_service_state", service=name, state="UP") == 0
    assert value(families, "leastload_service_state", service="dead", state="UP") == 1
    # a second scrape counts the ejection once, not again
    assert value(families, "leastload_service_ejections_total", service="dead") == 1


def test_label_values_are_escaped(eventful):
    text = eventful[4][0]
    assert 'service="we\\"ird\\\\name"' in text  # as written: \" and \\
    families = parse_exposition(text)
    assert value(families, "leastload_service_weight", service=WEIRD) == 1  # and read back


def test_healthz_sees_an_ejected_backend_as_not_up(eventful):
    _, _, health_up, health_down, _, _ = eventful
    assert health_up == (200, "text/plain", b"ok\n")
    status, content_type, body = health_down
    assert status == 503 and content_type == "text/plain" and body.startswith(b"no backend is UP"), health_down


def test_promtool_check_metrics_passes(eventful, backends, C):
    promtool = shutil.which("promtool")
    if promtool is None:
        reason = "promtool is not on PATH (Debian package prometheus): the strict parser's checks stand alone"
        print(reason)
        pytest.skip(reason)
    procs = [backends(0.001), backends(0.001)]

    async def main():
        async with Proxy(specs(["a", WEIRD], procs), listen=("127.0.0.1", 0), admin=("127.0.0.1", 0),
                         health_check="tcp", health_interval=0.05, name=VSERVER, engine=C) as proxy:
            await load(url_of(proxy), 50, 2)
            assert await wait_for_async(lambda: all(m.probes for m in proxy.monitors.values()), 10)
            return await scrape(proxy)
    texts = [eventful[4][0], eventful[5][0], run(main())]
    assert "leastload_service_health_probes_total" in texts[2]
    for text in texts:
        result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0, (result.stdout, result.stderr, text)
        assert not result.stdout.strip() and not result.stderr.strip(), (result.stdout, result.stderr)


# ---- /healthz, 404, the status JSON ---------------------------------------------------------------------


def test_healthz_follows_the_backends_states(C):
    async def main():
        async with Proxy(["a=127.0.0.1:9", "b=127.0.0.1:9"], listen=("127.0.0.1", 0), admin=("127.0.0.1", 0),
                         health_check="none", name=VSERVER, engine=C) as proxy:
            vs = proxy.vserver
            seen = [await admin(proxy, "/healthz")]
            vs.set_state("a", "DOWN")
            seen.append(await admin(proxy, "/healthz"))  # b is still UP
            vs.set_state("b", "OUT_OF_SERVICE")
            seen.append(await admin(proxy, "/healthz"))
            vs.set_state("b", "UP")
            seen.append(await admin(proxy, "/healthz"))
            proxy.drain_backend("b")  # nothing in flight: unbound at once
            seen.append(await admin(proxy, "/healthz"))
            text = await scrape(proxy)
            return seen, text, "b" in vs
    seen, text, b_bound = run(main())
    assert [s[0] for s in seen] == [200, 200, 503, 200, 503], seen
    assert seen[0][2] == b"ok\n" and all(s[1] == "text/plain" for s in seen)
    assert not b_bound
    families = parse_exposition(text)
    check_labels(families, {"a", "b"})
    # an unbound backend keeps its counters and says it is unbound; the engine's gauges go
    assert value(families, "leastload_service_bound", service="b") == 0
    assert value(families, "leastload_service_requests_total", service="b") == 0
    assert absent(families, "leastload_service_state", service="b")
    assert value(families, "leastload_service_state", service="a", state="DOWN") == 1


def test_other_paths_are_404_and_the_status_json_still_works(C):
    async def main():
        async with Proxy(["a=127.0.0.1:9"], listen=("127.0.0.1", 0), admin=("127.0.0.1", 0),
                         health_check="none", name=VSERVER, engine=C) as proxy:
            answers = {}
            for method, path in (("GET", "/nope"), ("GET", "/metrics/"), ("GET", "/healthz/x"),
                                 ("POST", "/metrics"), ("HEAD", "/healthz"), ("GET", "/leastload")):
                answers[method, path] = await admin(proxy, path, method)
            query = await admin(proxy, "/metrics?name[]=x")
            status = await admin(proxy, "/leastload/status")
            text = await admin(proxy, "/leastload/status?format=text")
            return answers, query, status, text
    answers, query, status, text = run(main())
    for (method, path), (code, content_type, body) in answers.items():
        assert code == 404, (method, path, code)
        if method != "HEAD":
            assert body == _admin.NOT_FOUND, (method, path, body)
    assert query[0] == 200 and query[1] == _metrics.CONTENT_TYPE.decode()  # the query is ignored
    parse_exposition(query[2].decode())
    assert status[0] == 200 and status[1] == "application/json"
    doc = json.loads(status[2])
    assert doc["vserver"]["method"] == "LEASTCONNECTION" and set(doc["backends"]) == {"a"}
    assert text[0] == 200 and text[1] == "text/plain" and b"LEASTCONNECTION" in text[2]


# ---- the writer's pieces -------------------------------------------------------------------------------


def test_escaping_and_values_follow_the_format():
    assert _metrics.escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    assert _metrics.escape_help("x\\y\nz\"") == 'x\\\\y\\nz"'
    assert [_metrics.format_value(v) for v in (3, True, False, 0.25, 1.0, float("nan"), math.inf, -math.inf)] == \
        ["3", "1", "0", "0.25", "1.0", "NaN", "+Inf", "-Inf"]
    for v in (1e-9, 12345678901234.5, 0.1 + 0.2):
        assert FLOAT.fullmatch(_metrics.format_value(v)) and float(_metrics.format_value(v)) == v
    # a label value with a line feed survives the round trip through the parser
    line = 'x_total{vserver="' + _metrics.escape_label_value('l1\nl2 "q" \\') + '"} 1\n'
    families = parse_exposition("# HELP x_total h\n# TYPE x_total counter\n" + line)
    assert families["x_total"].samples == [("x_total", {"vserver": 'l1\nl2 "q" \\'}, 1.0)]


def test_the_parser_refuses_what_the_format_forbids():
    good = "# HELP x_total h\n# TYPE x_total counter\nx_total{a=\"b\"} 1\n"
    parse_exposition(good)
    for bad in (good[:-1],                                             # no final line feed
                "x_total 1\n",                                         # no TYPE
                good.replace("# HELP x_total h\n", ""),                # no HELP
                good + "# HELP y h\n# TYPE y gauge\ny 1\nx_total{a=\"c\"} 1\n",  # a family split
                good.replace('a="b"', 'a="b\\t"'),                    # a bad escape
                good.replace('a="b"', "a=b"),                          # an unquoted value
                good.replace(" 1\n", " one\n"),                        # not a number
                good.replace(" 1\n", " 1 123\n"),                      # a timestamp (not written here)
                good.replace("counter", "gauge"),                      # a gauge ending in _total
                good + 'x_total{a="b"} 2\n'):                           # a series twice
        with pytest.raises(AssertionError):
            parse_exposition(bad)
    hist = ("# HELP h_seconds h\n# TYPE h_seconds histogram\n"
            'h_seconds_bucket{le="1.0"} 2\nh_seconds_bucket{le="+Inf"} 3\nh_seconds_sum 1.5\nh_seconds_count 3\n')
    parse_exposition(hist)
    for bad in (hist.replace("_count 3", "_count 4"),                 # +Inf != _count
                hist.replace('"1.0"} 2', '"1.0"} 4'),                  # not cumulative
                hist.replace('h_seconds_bucket{le="+Inf"} 3\n', ""),   # no +Inf
                hist.replace("h_seconds_sum 1.5\n", "")):              # no _sum
        with pytest.raises(AssertionError):
            parse_exposition(bad)
