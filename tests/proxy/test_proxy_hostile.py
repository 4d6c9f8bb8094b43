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

import asyncio
import collections
import dataclasses
import json
import os
import signal
import socket
import sys
import time
import urllib.request

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


# ---- tunnels (upgrades): the rogue's /rogue/tunnel, /rogue/101-length, /rogue/101-unasked ---------------


TUNNEL_SETTINGS = dataclasses.replace(QUICK, tunnel_timeout=2.0)
FLOOD = 64 << 20  # what the rogue sends down a tunnel whose client never reads
FLOOD_BOUND = 24 << 20  # what the kernel's buffers and the proxy's may take of it (a paused backend side)
READ_LIMIT = 10.0  # seconds any one read of these tests waits, at most


@pytest.fixture(scope="module", params=PATHS, ids=[f"{w}-worker{'s' * (w > 1)}-{'compiled' if i == 'c' else 'python'}"
                                                   for w, i in PATHS])
def tunnel_proxy(request, rogue, tmp_path_factory):
    """A proxy (2 s backend and tunnel timeouts) in front of the rogue, on both per-request paths."""
    workers, implementation = request.param
    settings = dataclasses.replace(TUNNEL_SETTINGS, implementation=implementation)
    target = attacks.start_leastload({"rogue": rogue.port}, settings, workers,
                                     str(tmp_path_factory.mktemp("tunnels")))
    yield target
    target.stop()


def upgrade(path, more=b""):
    return (b"GET " + path + b" HTTP/1.1\r\nHost: tunnel\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
            + more)


async def read_head(reader):
    """The head of the next answer, and the bytes after it that came in the same read."""
    return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_LIMIT)


async def read_exactly(reader, n):
    return await asyncio.wait_for(reader.readexactly(n), READ_LIMIT)


async def open_conn(target):
    return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", target.port), READ_LIMIT)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def tunnel_timeouts(target):
    """Tunnels ended by the tunnel timeout, summed over the workers (their admin status)."""
    return sum(attacks.get_json(port, "/leastload/status")["tunnel_timeouts"] for port in target.admin_ports)


def settled(target):
    """The transactions back to 0 and no failure charged to the rogue (summed over the workers)."""
    return wait_until(lambda: target.status()["rogue"]["active"] == 0, 10)


def test_a_tunnel_passes_bytes_both_ways_after_the_101(tunnel_proxy):
    async def go():
        reader, writer = await open_conn(tunnel_proxy)
        writer.write(upgrade(b"/rogue/tunnel"))
        head = await read_head(reader)
        assert head.startswith(b"HTTP/1.1 101 "), head
        assert b"\r\nUpgrade: websocket\r\n" in head and b"\r\nConnection: upgrade\r\n" in head
        assert await read_exactly(reader, 12) == b"hello tunnel"  # sent with the 101, after its head
        for size in (1, 1000, 300_000):
            payload = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
            writer.write(payload)
            assert await read_exactly(reader, len(payload)) == payload
        writer.close()
    failures = tunnel_proxy.status()["rogue"]["failures"]
    run(go())
    assert settled(tunnel_proxy)
    assert tunnel_proxy.status()["rogue"]["failures"] == failures


def test_bytes_sent_before_the_101_are_forwarded_after_it_never_parsed(tunnel_proxy, rogue):
    early = b"early GET /rogue/echo HTTP/1.1\r\nHost: x\r\n\r\n"

    async def go():
        reader, writer = await open_conn(tunnel_proxy)
        writer.write(upgrade(b"/rogue/tunnel?delay=0.3", early))  # one write: the request and what follows
        head = await read_head(reader)
        assert head.startswith(b"HTTP/1.1 101 "), head
        assert await read_exactly(reader, 12 + len(early)) == b"hello tunnel" + early  # echoed, in order
        writer.close()
    requests = rogue.stats()["requests"]
    run(go())
    assert rogue.stats()["requests"] == requests + 1  # the upgrade only: the GET inside was never a request
    assert settled(tunnel_proxy)


def test_a_tunnel_whose_client_never_reads_pauses_the_backend_and_ends_at_the_tunnel_timeout(tunnel_proxy, rogue):
    def tunnels():
        with urllib.request.urlopen(f"http://127.0.0.1:{rogue.port}/__tunnels", timeout=5) as r:
            return json.loads(r.read())

    async def go():
        reader, writer = await open_conn(tunnel_proxy)
        flooded_before = (await asyncio.to_thread(tunnels))["flooded"]
        # a small receive buffer: the client reads the 101's head and then nothing
        writer.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        rss_before = sum(attacks.rss_mib(pid) or 0.0 for pid in tunnel_proxy.pids())
        writer.write(upgrade(b"/rogue/tunnel?flood=%d" % FLOOD))
        head = await read_head(reader)
        assert head.startswith(b"HTTP/1.1 101 "), head
        writer.transport.pause_reading()
        await asyncio.sleep(1.0)
        first = (await asyncio.to_thread(tunnels))["flooded"] - flooded_before
        await asyncio.sleep(0.5)
        second = (await asyncio.to_thread(tunnels))["flooded"] - flooded_before
        # the backend side is paused: what it could send stopped growing, far below the flood
        assert second == first and second < FLOOD_BOUND, (first, second)
        rss_after = sum(attacks.rss_mib(pid) or 0.0 for pid in tunnel_proxy.pids())
        assert rss_after - rss_before < attacks.RSS_BUDGET_MIB, (rss_before, rss_after)
        # still not reading: no byte passes either way, and the tunnel timeout (2 s) ends it
        ended = await asyncio.to_thread(wait_until, lambda: tunnel_timeouts(tunnel_proxy) == timeouts + 1, 10)
        assert ended, "the tunnel outlived its timeout"
        writer.transport.resume_reading()
        while True:  # what the kernel held, then the end (EOF or reset)
            try:
                chunk = await asyncio.wait_for(reader.read(1 << 20), READ_LIMIT)
            except ConnectionError:
                break
            if not chunk:
                break
        writer.close()
    timeouts = tunnel_timeouts(tunnel_proxy)
    failures = tunnel_proxy.status()["rogue"]["failures"]
    run(go())
    assert settled(tunnel_proxy)
    assert tunnel_proxy.status()["rogue"]["failures"] == failures  # the client's stall, not the backend's


def test_a_101_with_a_content_length_gets_502_and_never_a_tunnel(tunnel_proxy):
    async def go():
        reader, writer = await open_conn(tunnel_proxy)
        writer.write(upgrade(b"/rogue/101-length"))
        head = await read_head(reader)
        writer.close()
        return head
    head = run(go())
    assert head.startswith(b"HTTP/1.1 502 "), head
    assert settled(tunnel_proxy)


def test_a_101_to_a_request_that_asked_for_no_upgrade_gets_502(tunnel_proxy):
    async def go():
        reader, writer = await open_conn(tunnel_proxy)
        writer.write(b"GET /rogue/101-unasked HTTP/1.1\r\nHost: tunnel\r\n\r\n")
        head = await read_head(reader)
        rest = await asyncio.wait_for(reader.read(), READ_LIMIT) if b"close" in head.lower() else b""
        writer.close()
        return head, rest
    head, rest = run(go())
    assert head.startswith(b"HTTP/1.1 502 "), head
    assert b"hello tunnel" not in rest
    assert settled(tunnel_proxy)


def test_an_upgrade_the_backend_refuses_is_an_ordinary_answer_and_the_connection_goes_on(tunnel_proxy):
    async def go():
        reader, writer = await open_conn(tunnel_proxy)
        writer.write(upgrade(b"/?size=5"))
        first = await read_head(reader) + await read_exactly(reader, 5)
        writer.write(b"GET /?size=3 HTTP/1.1\r\nHost: tunnel\r\n\r\n")
        second = await read_head(reader) + await read_exactly(reader, 3)
        writer.close()
        return first, second
    first, second = run(go())
    assert first.startswith(b"HTTP/1.1 200 ") and first.endswith(b"xxxxx"), first
    assert second.startswith(b"HTTP/1.1 200 ") and second.endswith(b"xxx"), second
    assert settled(tunnel_proxy)


def test_bytes_after_a_refused_upgrade_are_never_a_next_request(tunnel_proxy, rogue):
    async def go():
        reader, writer = await open_conn(tunnel_proxy)
        writer.write(upgrade(b"/?size=5&delay=0.2", b"GET /rogue/echo HTTP/1.1\r\nHost: x\r\n\r\n"))
        answer = await read_head(reader) + await read_exactly(reader, 5)
        rest = await asyncio.wait_for(reader.read(), READ_LIMIT)  # then the proxy closes
        writer.close()
        return answer, rest
    requests = rogue.stats()["requests"]
    answer, rest = run(go())
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert rest == b""
    assert rogue.stats()["requests"] == requests + 1


def test_no_byte_of_one_tunnel_reaches_another_and_a_reset_costs_the_backend_nothing(tunnel_proxy):
    async def one(i):
        reader, writer = await open_conn(tunnel_proxy)
        writer.write(upgrade(b"/rogue/tunnel"))
        await read_head(reader)
        assert await read_exactly(reader, 12) == b"hello tunnel"
        mine = (b"<%d>" % i) * 5000
        for _ in range(5):
            writer.write(mine)
            assert await read_exactly(reader, len(mine)) == mine
        if i % 2:
            writer.transport.abort()  # reset mid-tunnel
        else:
            writer.close()

    async def go():
        await asyncio.gather(*(one(i) for i in range(8)))
    failures = tunnel_proxy.status()["rogue"]["failures"]
    run(go())
    assert settled(tunnel_proxy)
    assert tunnel_proxy.status()["rogue"]["failures"] == failures  # a tunnel's end is never the backend's failure


def test_an_upgrade_request_with_a_body_is_forwarded_as_an_ordinary_request(tunnel_proxy):
    """As HAProxy does: its body by its framing, no Upgrade for the backend, never a tunnel."""
    async def go():
        reader, writer = await open_conn(tunnel_proxy)
        writer.write(b"POST /rogue/echo HTTP/1.1\r\nHost: tunnel\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                     b"Content-Length: 5\r\n\r\nhelloGET /rogue/echo HTTP/1.1\r\nHost: tunnel\r\n\r\n")
        answers = []
        for _ in range(2):
            head = await read_head(reader)
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            answers.append((head, json.loads(await read_exactly(reader, length))))
        writer.close()
        return answers
    (head, echo), (head2, echo2) = run(go())
    assert head.startswith(b"HTTP/1.1 200 ") and echo["method"] == "POST" and echo["body_length"] == 5
    assert not [v for n, v in echo["headers"] if n.lower() in ("upgrade", "connection")]
    assert head2.startswith(b"HTTP/1.1 200 ") and echo2["method"] == "GET"  # the next request, on the same connection
    assert settled(tunnel_proxy)


def test_a_client_half_close_reaches_the_backend_and_its_answer_still_comes_back(tunnel_proxy):
    """The client ends its input (shutdown SHUT_WR) after sending: the backend gets the end of input
    after the bytes, its echo still reaches the client, and then the tunnel closes."""
    async def go():
        reader, writer = await open_conn(tunnel_proxy)
        writer.write(upgrade(b"/rogue/tunnel"))
        await read_head(reader)
        assert await read_exactly(reader, 12) == b"hello tunnel"
        payload = b"half-closed" * 10000
        writer.write(payload)
        writer.write_eof()
        echoed = await asyncio.wait_for(reader.read(), READ_LIMIT)  # up to the end the backend's close gives
        writer.close()
        return payload, echoed
    payload, echoed = run(go())
    assert echoed == payload
    assert settled(tunnel_proxy)
