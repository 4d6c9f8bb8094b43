"""The retry-and-accounting rule the proxy and the httpx transport share (issue 20).

`leastload.net.upstream.after_attempt()` says, after an attempt on a backend went
wrong, whether the backend is to blame and whether the request goes on. The
table below is the rule written out case by case (not computed from it); the
end-to-end tests put a real resetting backend in front of each integration and
check both that its decision is the rule's (a spy sees the call) and that it
obeys the rule (a rule patched to say otherwise changes what it does).
"""

import asyncio
import collections

import pytest

httpx = pytest.importorskip("httpx")

from leastload.net import upstream  # noqa: E402
from leastload.integrations.httpx import Transport  # noqa: E402
from leastload.proxy import Proxy  # noqa: E402
from leastload.net.upstream import IDEMPOTENT, Outcome, Verdict, after_attempt  # noqa: E402
from leastload_testkit.backends import start_backend
from leastload_testkit.ports import free_port
from servers import RawServer, run_loop  # noqa: E402  (RawServer: a resetting backend)

# ---- the rule itself ---------------------------------------------------------------------------

F, R = Verdict(failure=True), Verdict(failure=True, retry=True)  # a failure; a failure sent elsewhere
N = Verdict(failure=False)                                        # not the backend's failure
S = Verdict(failure=False, reconnect=True)                        # same backend, new connection

# outcome, method, replayable, backends left -> verdict (reused=False, wanted=True)
TABLE = """
NOT_SENT         GET  replayable  left  R
NOT_SENT         GET  replayable  none  F
NOT_SENT         GET  one-shot    left  R
NOT_SENT         GET  one-shot    none  F
NOT_SENT         POST replayable  left  R
NOT_SENT         POST replayable  none  F
NOT_SENT         POST one-shot    left  R
NOT_SENT         POST one-shot    none  F
NO_RESPONSE      GET  replayable  left  R
NO_RESPONSE      GET  replayable  none  F
NO_RESPONSE      GET  one-shot    left  F
NO_RESPONSE      GET  one-shot    none  F
NO_RESPONSE      POST replayable  left  F
NO_RESPONSE      POST replayable  none  F
NO_RESPONSE      POST one-shot    left  F
NO_RESPONSE      POST one-shot    none  F
FAILED           GET  replayable  left  F
FAILED           GET  replayable  none  F
FAILED           GET  one-shot    left  F
FAILED           GET  one-shot    none  F
FAILED           POST replayable  left  F
FAILED           POST replayable  none  F
FAILED           POST one-shot    left  F
FAILED           POST one-shot    none  F
NOT_THE_BACKEND  GET  replayable  left  N
NOT_THE_BACKEND  GET  replayable  none  N
NOT_THE_BACKEND  GET  one-shot    left  N
NOT_THE_BACKEND  GET  one-shot    none  N
NOT_THE_BACKEND  POST replayable  left  N
NOT_THE_BACKEND  POST replayable  none  N
NOT_THE_BACKEND  POST one-shot    left  N
NOT_THE_BACKEND  POST one-shot    none  N
"""
VERDICTS = {"F": F, "R": R, "N": N, "S": S}
ROWS = [line.split() for line in TABLE.strip().splitlines()]


def test_the_table_covers_every_case():
    cases = {tuple(row[:4]) for row in ROWS}
    assert len(cases) == len(ROWS) == len(Outcome) * 2 * 2 * 2
    assert {row[0] for row in ROWS} == {o.name for o in Outcome}


@pytest.mark.parametrize("outcome, method, body, left, expected", ROWS, ids=["-".join(r[:4]) for r in ROWS])
def test_the_rule_case_by_case(outcome, method, body, left, expected):
    # "left": this is the first backend tried, two others allowed; "none": the third of three
    tried, retries = (1, 2) if left == "left" else (3, 2)
    verdict = after_attempt(Outcome[outcome], method, replayable=body == "replayable", tried=tried, retries=retries)
    assert verdict == VERDICTS[expected]
    assert not (verdict.retry and not verdict.failure)  # a retry is always charged a failure first


@pytest.mark.parametrize("outcome, method, replayable, wanted, expected", [
    # a pooled connection that closed under the request: once more, same backend, no failure...
    ("NO_RESPONSE", "GET", True, True, S),
    ("NO_RESPONSE", "PUT", True, True, S),
    # ... for an idempotent, replayable request whose client still waits; else the usual rule
    ("NO_RESPONSE", "POST", True, True, F),
    ("NO_RESPONSE", "GET", False, True, F),
    ("NO_RESPONSE", "GET", True, False, F),
    # a reused connection changes nothing for the other outcomes
    ("NOT_SENT", "POST", True, True, R),
    ("FAILED", "GET", True, True, F),
    ("NOT_THE_BACKEND", "GET", True, True, N),
])
def test_a_reused_connection(outcome, method, replayable, wanted, expected):
    verdict = after_attempt(Outcome[outcome], method, replayable=replayable, tried=1, retries=2,
                            reused=True, wanted=wanted)
    assert verdict == expected


def test_the_reconnect_is_not_bounded_by_retries():
    assert after_attempt(Outcome.NO_RESPONSE, "GET", replayable=True, tried=1, retries=0, reused=True) == S


@pytest.mark.parametrize("outcome", list(Outcome))
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_nothing_goes_on_for_a_client_that_left(outcome, method):
    """The proxy's client gone: a failure is still the backend's, but no other backend is tried."""
    verdict = after_attempt(outcome, method, replayable=True, tried=1, retries=2, wanted=False)
    assert verdict == (N if outcome is Outcome.NOT_THE_BACKEND else F)


@pytest.mark.parametrize("retries", [0, 1, 2, 5])
def test_at_most_retries_other_backends(retries):
    retried = [after_attempt(Outcome.NOT_SENT, "GET", replayable=True, tried=tried, retries=retries).retry
               for tried in range(1, retries + 3)]
    assert retried == [True] * retries + [False, False]


def test_the_idempotent_methods_are_rfc_9110s():
    assert IDEMPOTENT == {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"}
    for method in IDEMPOTENT:
        assert after_attempt(Outcome.NO_RESPONSE, method, replayable=True, tried=1, retries=1) == R
    for method in ("POST", "PATCH", "CONNECT", "get", "BREW"):  # methods are case-sensitive
        assert after_attempt(Outcome.NO_RESPONSE, method, replayable=True, tried=1, retries=1) == F


def test_an_outcome_that_is_not_one_is_refused():
    with pytest.raises(TypeError, match="Outcome"):
        after_attempt("reset", "GET", replayable=True, tried=1, retries=1)  # type: ignore[arg-type]


# ---- each integration decides through it ----------------------------------------------------------

class Spy:
    """Records the rule's calls; answers with the rule's verdict, or with `override`'s."""

    def __init__(self, monkeypatch, override=None):
        self.calls = []
        self.real = upstream.after_attempt
        self.override = override
        monkeypatch.setattr(upstream, "after_attempt", self)

    def __call__(self, outcome, method, **kw):
        verdict = self.real(outcome, method, **kw)
        self.calls.append((outcome, method, kw, verdict))
        return verdict if self.override is None else self.override


@pytest.fixture(scope="module")
def resetter():
    server = RawServer("reset")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def good():
    backend = start_backend(0.0, 64)
    yield backend
    backend.stop()


def test_proxy_a_reset_get_goes_to_the_other_backend_a_post_does_not(c_impl, resetter, good, monkeypatch):
    spy = Spy(monkeypatch)

    async def main():
        async with Proxy([f"reset={resetter.address}", f"good=127.0.0.1:{good.port}"], "ROUNDROBIN",
                         listen=("127.0.0.1", 0), health_check="none", outlier_failures=0,
                         engine=c_impl.VirtualServer) as proxy:
            host, port = proxy.address
            statuses = collections.Counter()
            async with httpx.AsyncClient(trust_env=False, timeout=20) as client:
                for method in ("GET", "POST", "POST"):  # round robin: the first two meet "reset" first
                    r = await client.request(method, f"http://{host}:{port}/", content=b"x" * 10)
                    statuses[method, r.status_code] += 1
            return statuses, proxy.vserver.info("reset")["failures"], proxy.stats.backends["reset"].retries
    statuses, failures, retries = run_loop(main(), 60)
    assert statuses == {("GET", 200): 1, ("POST", 502): 1, ("POST", 200): 1}
    assert failures == 2 and retries == 1
    # the decisions were the rule's, told what the proxy knows
    decided = [(o, m, kw["replayable"], kw["tried"], kw["reused"], kw["wanted"], v) for o, m, kw, v in spy.calls]
    assert decided == [(Outcome.NO_RESPONSE, "GET", True, 1, False, True, R),
                       (Outcome.NO_RESPONSE, "POST", True, 1, False, True, F)]


def test_proxy_obeys_the_rule(c_impl, resetter, good, monkeypatch):
    """A rule that says "a failure, but not sent again": the GET the proxy would retry gets a 502."""
    spy = Spy(monkeypatch, override=F)

    async def main():
        async with Proxy([f"reset={resetter.address}", f"good=127.0.0.1:{good.port}"], "ROUNDROBIN",
                         listen=("127.0.0.1", 0), health_check="none", outlier_failures=0,
                         engine=c_impl.VirtualServer) as proxy:
            host, port = proxy.address
            async with httpx.AsyncClient(trust_env=False, timeout=20) as client:
                r = await client.get(f"http://{host}:{port}/")
            return r.status_code, proxy.vserver.info("reset")["failures"]
    assert run_loop(main(), 60) == (502, 1)
    assert [(c[0], c[3]) for c in spy.calls] == [(Outcome.NO_RESPONSE, R)]


def test_proxy_a_refused_post_goes_to_the_other_backend(c_impl, good, monkeypatch):
    spy = Spy(monkeypatch)

    async def main():
        async with Proxy([f"refused=127.0.0.1:{free_port()}", f"good=127.0.0.1:{good.port}"], "ROUNDROBIN",
                         listen=("127.0.0.1", 0), health_check="none", outlier_failures=0,
                         engine=c_impl.VirtualServer) as proxy:
            host, port = proxy.address
            async with httpx.AsyncClient(trust_env=False, timeout=20) as client:
                r = await client.post(f"http://{host}:{port}/", content=b"hello")
            return r.status_code, proxy.vserver.info("refused")["failures"]
    assert run_loop(main(), 60) == (200, 1)
    assert [(c[0], c[1], c[3]) for c in spy.calls] == [(Outcome.NOT_SENT, "POST", R)]


def _transport(impl, *specs):
    return Transport(list(specs), method="ROUNDROBIN", engine=impl.VirtualServer, outlier_failures=0)


@pytest.mark.parametrize("method, content, retried", [
    ("GET", b"x" * 10, True),
    ("POST", b"x" * 10, False),                # may have had its effect: not sent twice
    ("GET", iter([b"one", b"shot"]), False),  # a one-shot body cannot be sent again
])
def test_httpx_a_reset_get_goes_to_the_other_backend_a_post_does_not(impl, resetter, good, monkeypatch,
                                                                     method, content, retried):
    spy = Spy(monkeypatch)
    t = _transport(impl, f"r={resetter.address}", f"g=127.0.0.1:{good.port}")  # round robin: "r" first
    with httpx.Client(transport=t, trust_env=False) as client:
        if retried:
            r = client.request(method, "http://app/", content=content)
            assert r.status_code == 200 and r.extensions["leastload_backend"] == "g"
        else:
            with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
                client.request(method, "http://app/", content=content)
    assert t.vserver.info("r")["failures"] == 1 and t.vserver.info("g")["failures"] == 0
    assert t.vserver.info("g")["selected"] == (1 if retried else 0)
    assert t.vserver.info("r")["active"] == t.vserver.info("g")["active"] == 0
    # the decision was the rule's, told what the transport knows (no reused=, no wanted=)
    assert [(o, m, kw, v) for o, m, kw, v in spy.calls] == [
        (Outcome.NO_RESPONSE, method, {"replayable": isinstance(content, bytes), "tried": 1, "retries": 2},
         R if retried else F)]


def test_httpx_obeys_the_rule(impl, resetter, good, monkeypatch):
    """A rule that says "a failure, but not sent again": the GET the transport would retry raises."""
    spy = Spy(monkeypatch, override=F)
    t = _transport(impl, f"r={resetter.address}", f"g=127.0.0.1:{good.port}")
    with httpx.Client(transport=t, trust_env=False) as client:
        with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
            client.get("http://app/")
    assert t.vserver.info("r")["failures"] == 1 and t.vserver.info("g")["selected"] == 0
    assert [(c[0], c[3]) for c in spy.calls] == [(Outcome.NO_RESPONSE, R)]


def test_httpx_async_refused_and_the_retry_budget(impl, monkeypatch):
    """Async path: every backend refuses; retries=1 allows two attempts, the rule says when to stop."""
    spy = Spy(monkeypatch)
    ports = [free_port() for _ in range(3)]
    t = Transport([f"d{k}=127.0.0.1:{p}" for k, p in enumerate(ports)], method="ROUNDROBIN",
                  engine=impl.VirtualServer, outlier_failures=0, retries=1)

    async def main():
        async with httpx.AsyncClient(transport=t, trust_env=False) as client:
            with pytest.raises(httpx.ConnectError):
                await client.post("http://app/", content=b"hello")
    asyncio.run(main())
    assert [(c[0], c[2]["tried"], c[3]) for c in spy.calls] == [(Outcome.NOT_SENT, 1, R), (Outcome.NOT_SENT, 2, F)]
    assert [t.vserver.info(f"d{k}")["failures"] for k in range(3)] == [1, 1, 0]


def test_httpx_a_cancelled_request_is_not_the_backends_failure(impl, good, monkeypatch):
    spy = Spy(monkeypatch)
    t = _transport(impl, f"g=127.0.0.1:{good.port}")

    async def main():
        async with httpx.AsyncClient(transport=t, trust_env=False) as client:
            task = asyncio.ensure_future(client.get("http://app/", params={"delay": 5}))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    asyncio.run(main())
    assert [(c[0], c[3]) for c in spy.calls] == [(Outcome.NOT_THE_BACKEND, N)]
    info = t.vserver.info("g")
    assert info["failures"] == 0 and info["active"] == 0


def test_the_rules_inputs_are_all_named():
    """after_attempt's arguments past the method are keyword-only: a caller cannot swap two flags."""
    with pytest.raises(TypeError):
        after_attempt(Outcome.NOT_SENT, "GET", True, 1, 2)  # type: ignore[misc]
    assert list(Outcome) == [Outcome.NOT_SENT, Outcome.NO_RESPONSE, Outcome.FAILED, Outcome.NOT_THE_BACKEND]
