"""The leastload proxy under attack: hostile clients and a misbehaving backend, end to end.

Each test starts `python -m leastload proxy --listen 127.0.0.1:0` as a real
process, with 1 worker and with `--workers 2`, in front of real backend
processes or the rogue backend (leastload_testkit),
and runs one attack of benchmarks/proxy_attacks.py, which says what each
attack does and how it is bounded (`python -m benchmarks.proxy_attacks` runs
the same attacks against HAProxy too). An attack's own checks are the
specification's answers (431, 408, 502, ...); around every attack the
harness checks its "done when": the normal GETs sent meanwhile answered 200
at >= 99 %, no proxy process grown more than 64 MiB over its idle RSS, every
process alive, and the transactions in flight back to 0 (the admin port's
GET /leastload/status). The timeouts are short here (2 s) to keep the file
to a minute or two; only the settings an attack relies on are passed. The
attacks of issue 45 (the descriptor limit, the endless heads, request lines
without a version) run on both per-request paths, the compiled one and the
pure-Python one (LEASTLOAD_IMPLEMENTATION=python); the others on the compiled one.
"""

import collections
import dataclasses
import os
import signal
import sys
import time

import pytest

from benchmarks import proxy_attacks as attacks
from leastload_testkit.backends import start_backend
from leastload_testkit.rogue_backend import RogueProcess
from leastload_testkit.waits import wait_until

if not sys.platform.startswith("linux"):
    pytest.skip("the hostile-proxy tests read /proc and set RLIMIT_NOFILE: Linux only", allow_module_level=True)


QUICK = attacks.Settings(header_timeout=2.0, body_timeout=2.0, timeout=2.0)


@pytest.fixture(scope="module")
def backend_ports():
    """Two `leastload backends` processes (1 KiB answers), shared by the module's tests."""
    started = [start_backend(0.0, 1024), start_backend(0.0, 1024)]
    yield {"a": started[0].port, "b": started[1].port}
    for b in started:
        b.stop()


@pytest.fixture(scope="module")
def rogue():
    r = RogueProcess()
    yield r
    r.stop()


def topology(attack, backend_ports, rogue, victim):
    if attack.topology == "rogue":
        return {"rogue": rogue.port}
    if attack.topology == "victim":
        return {"a": backend_ports["a"], "victim": victim.port}
    return dict(backend_ports)


def hitter(workers, implementation, backend_ports, rogue, tmp_path):
    """hit(name) -> Result: a fresh proxy for the attack (and a victim backend if it kills one)."""
    def run(name):
        attack = attacks.ATTACKS[name]
        victim = RogueProcess() if attack.topology == "victim" else None
        settings = dataclasses.replace(attack.settings(QUICK), implementation=implementation)
        try:
            target = attacks.start_leastload(topology(attack, backend_ports, rogue, victim), settings,
                                             workers, str(tmp_path), victim)
            try:
                result = attacks.run_attack(attack, target)
                result.diagnosis = target.diagnosis() if result.problems else ""
                return result
            finally:
                target.stop()
        finally:
            if victim is not None:
                victim.stop()
    return run


@pytest.fixture(params=[1, 2], ids=["1-worker", "2-workers"])
def hit(request, backend_ports, rogue, tmp_path):
    """hit(name) -> Result, on the compiled per-request path."""
    return hitter(request.param, "c", backend_ports, rogue, tmp_path)


PATHS = [(1, "c"), (2, "c"), (1, "python"), (2, "python")]


@pytest.fixture(params=PATHS, ids=[f"{w}-worker{'s' * (w > 1)}-{'compiled' if i == 'c' else 'python'}"
                                   for w, i in PATHS])
def hit_paths(request, backend_ports, rogue, tmp_path):
    """hit(name) -> Result, on both per-request paths (LEASTLOAD_IMPLEMENTATION=c and python): the
    attacks of issue 45 (the descriptor limit, the linger's byte bound, request lines without a version)."""
    return hitter(*request.param, backend_ports, rogue, tmp_path)


@pytest.fixture(scope="module", params=[1, 2], ids=["1-worker", "2-workers"])
def python_path_proxy(request, rogue, tmp_path_factory):
    """A proxy on the pure-Python per-request path, for the checks that must hold on both paths."""
    settings = dataclasses.replace(attacks.DEFAULTS, implementation="python")
    target = attacks.start_leastload({"rogue": rogue.port}, settings, request.param,
                                     str(tmp_path_factory.mktemp("python-path")))
    yield target
    target.stop()


@pytest.fixture(scope="module", params=[1, 2], ids=["1-worker", "2-workers"])
def hygiene_proxy(request, rogue, tmp_path_factory):
    """One proxy (all defaults) in front of the rogue for the header-hygiene checks, per worker count."""
    target = attacks.start_leastload({"rogue": rogue.port}, attacks.DEFAULTS, request.param,
                                     str(tmp_path_factory.mktemp("hygiene")))
    yield target
    target.stop()


def assert_clean(result):
    assert not result.problems, f"{result.summary()}\n{result.diagnosis[-3000:]}"


def check(hygiene_proxy, name):
    result = attacks.run_attack(attacks.ATTACKS[name], hygiene_proxy)
    result.diagnosis = hygiene_proxy.diagnosis() if result.problems else ""
    assert_clean(result)


# ---- process death: SIGPIPE and resets -----------------------------------------------------------


def test_clients_resetting_mid_response_do_not_kill_it(hit):
    assert_clean(hit("client resets mid-response (x40)"))


def test_a_backend_killed_while_a_15_mib_body_is_written_gives_502(hit):
    assert_clean(hit("backend killed mid-upload (15 MiB)"))


# ---- memory before a complete head ---------------------------------------------------------------


def test_an_endless_header_block_gets_431(hit):
    assert_clean(hit("endless header block"))


def test_endless_trailers_get_431(hit):
    assert_clean(hit("endless trailers"))


def test_an_endless_request_line_gets_414(hit):
    assert_clean(hit("endless request line"))


ENDLESS = ("endless header block", "endless trailers", "endless request line")


@pytest.mark.parametrize("workers", [1, 2], ids=["1-worker", "2-workers"])
def test_endless_heads_on_the_python_path(workers, backend_ports, tmp_path):
    """The three endless heads against one proxy on the pure-Python per-request path."""
    settings = attacks.ATTACKS[ENDLESS[0]].settings(dataclasses.replace(QUICK, implementation="python"))
    assert all(attacks.ATTACKS[name].settings(settings) == settings for name in ENDLESS)  # one proxy fits all three
    target = attacks.start_leastload(dict(backend_ports), settings, workers, str(tmp_path))
    try:
        results = [attacks.run_attack(attacks.ATTACKS[name], target) for name in ENDLESS]
        diagnosis = target.diagnosis() if any(r.problems for r in results) else ""
    finally:
        target.stop()
    for result in results:
        result.diagnosis = diagnosis
        assert_clean(result)


def test_30000_tiny_headers_get_431(hit):
    assert_clean(hit("30,000 tiny headers"))


def test_200000_pipelined_gets_written_without_reading(hit):
    assert_clean(hit("200,000 pipelined GETs, unread"))


def test_eight_pipelined_15_mib_posts(hit):
    assert_clean(hit("8 pipelined 15 MiB POSTs"))


# ---- slow clients ---------------------------------------------------------------------------------


def test_200_slow_headers_get_408_at_the_header_timeout(hit):
    assert_clean(hit("200 slow headers (1 byte/s)"))


def test_slow_connections_past_the_fd_limit_leave_service_and_probes_intact(hit_paths):
    assert_clean(hit_paths("slow connections past the fd limit (nofile 256)"))


def test_clients_that_never_read_are_not_charged_to_a_backend(hit):
    assert_clean(hit("15 clients never read a large answer"))


def test_a_request_body_that_stops_is_closed_at_the_body_timeout(hit):
    assert_clean(hit("a request body that stops"))


# ---- backend misbehaviour -------------------------------------------------------------------------


def test_bytes_after_a_complete_answer_never_reach_the_next_client(hit):
    assert_clean(hit("rogue: bytes after a complete answer"))


def test_a_204_or_304_with_a_body(hit):
    assert_clean(hit("rogue: a 204/304 with a body"))


def test_a_body_after_head(hit):
    assert_clean(hit("rogue: a body after HEAD"))


def test_an_invalid_content_length_gives_502_and_a_clean_next_answer(hit):
    assert_clean(hit("rogue: an invalid Content-Length"))


def test_pipelined_expect_100_continue_waits_for_the_earlier_answer(hit):
    assert_clean(hit("pipelined Expect: 100-continue while an answer streams"))


def test_a_content_length_over_max_body_gets_413_before_any_100_continue(hit):
    assert_clean(hit("413 before 100 Continue"))


def test_a_chunked_body_past_max_body_gets_413_while_it_arrives(hit):
    assert_clean(hit("chunked body past --max-body"))


def test_a_413_survives_the_body_sent_on_after_it(hit):
    assert_clean(hit("a body sent on after its 413"))


# ---- header hygiene (one proxy per worker count, the rogue echoing what it received) ---------------


def test_a_trailer_host_never_becomes_a_header(hygiene_proxy):
    check(hygiene_proxy, "trailer Host never becomes a header")


def test_two_host_headers_or_none_get_400(hygiene_proxy):
    check(hygiene_proxy, "two Host headers / none")


def test_absolute_form_targets(hygiene_proxy):
    check(hygiene_proxy, "absolute-form target")


def test_connection_never_removes_host_or_the_framing(hygiene_proxy):
    check(hygiene_proxy, "Connection naming Host / Content-Length / Transfer-Encoding")


def test_two_connection_headers_are_both_honoured(hygiene_proxy):
    check(hygiene_proxy, "two Connection headers both honoured")


def test_two_x_forwarded_for_headers_are_kept_in_order(hygiene_proxy):
    check(hygiene_proxy, "two X-Forwarded-For kept in order")


def test_response_hop_by_hop_headers_are_stripped(hygiene_proxy):
    check(hygiene_proxy, "response hop-by-hop headers stripped")


def test_http_10_clients_are_answered_and_never_get_chunked(hygiene_proxy):
    check(hygiene_proxy, "HTTP/1.0 clients: answered, never chunked")


def test_a_request_line_without_http_1x_gets_400_at_once(hygiene_proxy):
    check(hygiene_proxy, "request line without HTTP/1.x")


def test_a_request_line_without_http_1x_gets_400_at_once_on_the_python_path(python_path_proxy):
    check(python_path_proxy, "request line without HTTP/1.x")


def test_the_strict_request_framing_stays(hygiene_proxy):
    check(hygiene_proxy, "strict request framing (CL.TE, TE.CL, ...)")


def test_the_head_limits_at_their_edges(hygiene_proxy):
    check(hygiene_proxy, "head limits at their edges")


def test_xff_replace_drops_the_clients_x_forwarded_for(hit):
    assert_clean(hit("--xff replace"))


# ---- the admin port ---------------------------------------------------------------------------------


def test_a_40_mib_admin_request_line_is_refused_early(hit):
    assert_clean(hit("admin: 40 MiB request line"))


def test_a_slow_admin_client_is_closed_by_the_header_timeout(hit):
    assert_clean(hit("admin: slow client"))


# ---- workers ----------------------------------------------------------------------------------------


def test_a_killed_worker_is_restarted(backend_ports, tmp_path):
    """Only with --workers: SIGKILL one worker; the parent starts another, and the port keeps serving."""
    target = attacks.start_leastload(backend_ports, attacks.DEFAULTS, 2, str(tmp_path))
    try:
        parent = target.server.pid
        workers = [pid for pid in target.pids() if pid != parent]
        assert len(workers) == 2, target.pids()
        os.kill(workers[0], signal.SIGKILL)
        replaced = wait_until(
            lambda: len([p for p in target.pids() if p not in (parent, workers[0])]) == 2, 15)
        time.sleep(0.5)  # the new worker listens
        outcome = collections.Counter(attacks.one_get(target.port)[1] for _ in range(40))
        diagnosis = target.diagnosis()
    finally:
        target.stop()
    assert replaced, f"no new worker within 15 s: processes {target.pids()}\n{diagnosis[-2000:]}"
    assert outcome == {"200": 40}, outcome
