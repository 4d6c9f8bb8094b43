"""leastload.integrations.litellm.Strategy in LiteLLM's real Router, against real replicas.

The replicas are leastload_testkit/llm_replica.py processes on 127.0.0.1 (OpenAI-compatible
chat completions, streamed or not, with set delays, token counts and error
rates), started once for the module and set per test; what they served is
read from their own counters. Every test ends by checking that no pick's
transaction is left open (the `strategies` fixture). Time-dependent rules
(ejection, slow start) run on a ManualClock: no test waits for them.
Shares are bounded loosely (a busy machine): each bound is far from what the
method would give if it were ignored.
"""
import asyncio
import gc
import multiprocessing
import os
import warnings

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM fetches no price list
litellm = pytest.importorskip("litellm", reason="LiteLLM is not installed here (pip install leastload[litellm]): "
                                                "the Router integration's tests skip")

from litellm import Router  # noqa: E402

from leastload.integrations.litellm import STAMP, Strategy, segment_name  # noqa: E402
from leastload_testkit.llm_replica import start_replica  # noqa: E402

GROUP = "replicas"
MESSAGES = [{"role": "user", "content": "one two three four"}]  # 4 prompt tokens, as the replica counts
BATCH = 8  # calls started together in the least response time test


@pytest.fixture(scope="module")
def replicas():
    started = [start_replica() for _ in range(3)]
    yield started
    for r in started:
        r.stop()


@pytest.fixture
def reps(replicas):
    """The module's replicas, reset to quick answers without errors."""
    for r in replicas:
        r.set(delay=0.01, ttfb=0.005, completion_tokens=8, error_rate=0.0, slots=0, seed=0)
    return replicas


@pytest.fixture
def strategies(c_impl):
    """make(method, **settings) -> a Strategy on the C engine; after the test, each must have no
    transaction open."""
    made = []

    def make(method="LEASTCONNECTION", **kwargs):
        kwargs.setdefault("engine", c_impl.VirtualServer)
        s = Strategy(method, **kwargs)
        made.append(s)
        return s

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # LiteLLM's notes on its older names
        yield make
    gc.collect()
    for s in made:
        assert set(s.open_transactions().values()) <= {0}, s.open_transactions()


def deployment(replica, ident, group=GROUP):
    return {"model_name": group, "model_info": {"id": ident},
            "litellm_params": {"model": "openai/replica", "api_base": replica.url, "api_key": "none"}}


def router_for(reps, **kwargs):
    kwargs.setdefault("num_retries", 0)
    return Router(model_list=[deployment(r, f"r{i + 1}") for i, r in enumerate(reps)], **kwargs)


def served(reps):
    return [r.stats()["requests"] for r in reps]


async def calls(router, total, concurrency, stream=False, **kwargs):
    """`total` chat completions from `concurrency` tasks; returns the exceptions raised."""
    left, errors = [total], []

    async def caller():
        while left[0] > 0:
            left[0] -= 1
            try:
                response = await router.acompletion(model=GROUP, messages=MESSAGES, stream=stream, **kwargs)
                if stream:
                    async for _ in response:
                        pass
            except Exception as exc:  # the tests look at which
                errors.append(exc)

    await asyncio.gather(*(caller() for _ in range(concurrency)))
    await asyncio.sleep(0.05)  # LiteLLM runs its success callbacks as tasks of their own
    return errors


async def until_ended(strategy, limit=10.0):
    """Waits (at most `limit` s) until no pick of `strategy` is open; returns the open counts."""
    for _ in range(int(limit / 0.05)):
        if set(strategy.open_transactions().values()) <= {0}:
            break
        await asyncio.sleep(0.05)
    return strategy.open_transactions()


def run(coro):
    return asyncio.run(coro)


# ---- the package ----------------------------------------------------------------------------------

def test_bad_arguments_are_named(strategies):
    with pytest.raises(ValueError, match="NOSUCH"):
        strategies("NOSUCH")
    with pytest.raises(ValueError, match="outlier_failures"):
        strategies(outlier_failures=-1)
    with pytest.raises(ValueError, match="shared"):
        strategies(shared="a/b")
    assert segment_name("gw", "gpt-4o") == "gw.gpt-4o"
    assert segment_name("gw", "openai/gpt-4o") != segment_name("gw", "openai_gpt-4o")


# ---- the methods --------------------------------------------------------------------------------

def test_least_connection_avoids_a_slow_replica(reps, strategies):
    reps[2].set(delay=3.0)
    router = router_for(reps)
    strategies("LEASTCONNECTION").install(router)
    before = served(reps)
    assert run(calls(router, 96, 32)) == []
    split = [a - b for a, b in zip(served(reps), before)]
    assert sum(split) == 96
    # in-flight counts even out: the slow replica holds its calls far longer, so it gets few
    # (a third of the first 32 and few after; taken in turn it would get a third of all)
    assert split[2] < 0.25 * 96, split


def test_least_response_time_prefers_the_lower_ttfb(reps, strategies):
    for r in reps:
        r.set(delay=1.05, ttfb=0.01, completion_tokens=4)
    reps[1].set(ttfb=1.0)  # same length of call, first token 100x later (a loaded client adds its own time)
    router = router_for(reps[:2])
    strategy = strategies("LEASTRESPONSETIME")
    strategy.install(router)
    vs = strategy.vserver(GROUP)
    stream = dict(stream=True, stream_options={"include_usage": True})
    assert run(calls(router, 16, 8, **stream)) == []  # TTFBs measured (the first calls' take longer)
    fast, slow = vs.info("r1")["ttfb"], vs.info("r2")["ttfb"]
    # TTFB is the first token's, not the end of the stream (1.05 s)
    assert fast < 0.7 and 1.0 <= slow and slow > 2 * fast, (fast, slow)
    # Batches of BATCH calls started together: the picks of a batch come while its earlier calls
    # are in flight (each lasts 1.05 s), and a batch starts with none in flight, so its split is
    # the method's, not the machine's timing. Least response time gives a replica a call while its
    # active x TTFB is the lower, so the slow replica's last call of a batch came when its
    # (s - 1) x slow <= f x fast, with s + f = BATCH: s <= (slow + BATCH x fast) / (slow + fast),
    # from the TTFBs learned (the faster's highest, the slower's lowest, of before and after the
    # batch). Taken in turn, or by in-flight count alone, each replica would get half.
    slow_calls = []
    for _ in range(4):
        assert run(until_ended(strategy)) == {GROUP: 0}  # the streams' picks end in LiteLLM's callbacks
        before = served(reps[:2])
        ttfbs = [(vs.info("r1")["ttfb"], vs.info("r2")["ttfb"])]
        assert run(calls(router, BATCH, BATCH, **stream)) == []
        ttfbs.append((vs.info("r1")["ttfb"], vs.info("r2")["ttfb"]))
        fast, slow = max(t[0] for t in ttfbs), min(t[1] for t in ttfbs)
        split = [a - b for a, b in zip(served(reps[:2]), before)]
        assert sum(split) == BATCH and split[1] <= (slow + BATCH * fast) / (slow + fast), (split, ttfbs)
        slow_calls.append(split[1])
    assert sum(slow_calls) < 4 * BATCH / 2, slow_calls


def test_least_bandwidth_counts_tokens(reps, strategies):
    reps[0].set(completion_tokens=60)
    reps[1].set(completion_tokens=6)
    router = router_for(reps[:2])
    strategy = strategies("LEASTBANDWIDTH")
    strategy.install(router)
    before = [r.stats() for r in reps[:2]]
    assert run(calls(router, 30, 1)) == []
    after = [r.stats() for r in reps[:2]]
    vs = strategy.vserver(GROUP)
    for name, b, a in zip(("r1", "r2"), before, after):
        tokens = (a["prompt_tokens"] - b["prompt_tokens"]) + (a["completion_tokens"] - b["completion_tokens"])
        assert vs.info(name)["bytes"] == tokens  # prompt + completion tokens are the window's "bytes"
    split = [a["requests"] - b["requests"] for b, a in zip(before, after)]
    assert split[1] >= 4 * split[0], split  # 10x the tokens per call: far fewer calls


# ---- failures, cooldowns, calls that end otherwise -------------------------------------------------

def test_a_replica_of_500s_is_ejected_and_returns_after_its_time(reps, strategies, c_impl):
    clock = c_impl.ManualClock(100.0)
    reps[1].set(error_rate=1.0)
    router = router_for(reps[:2], disable_cooldowns=True)  # leastload's ejection alone
    strategy = strategies(clock=clock, outlier_failures=3, outlier_ejection_time=30)
    strategy.install(router)
    errors = run(calls(router, 12, 1))
    vs = strategy.vserver(GROUP)
    assert len(errors) == 3 and vs.info("r2")["ejected"], (errors, vs.info("r2"))
    before = served(reps[:2])
    assert run(calls(router, 6, 1)) == []
    assert [a - b for a, b in zip(served(reps[:2]), before)] == [6, 0]
    reps[1].set(error_rate=0.0)
    clock.advance(31)
    before = served(reps[:2])
    assert run(calls(router, 6, 1)) == []
    assert not vs.info("r2")["ejected"]
    assert [a - b for a, b in zip(served(reps[:2]), before)][1] >= 2


def test_litellm_cooldown_list_is_excluded(reps, strategies):
    router = router_for(reps)
    strategies().install(router)
    router.health().cooldowns.add_deployment_to_cooldown("r3", Exception("test"), 500, 60)
    before = served(reps)
    assert run(calls(router, 12, 3)) == []
    assert [a - b for a, b in zip(served(reps), before)][2] == 0


def test_timeouts_cancellations_and_dropped_streams_end_without_ttfb(reps, strategies):
    router = router_for(reps[:1])
    strategy = strategies("LEASTRESPONSETIME")
    strategy.install(router)
    reps[0].set(delay=3.0, ttfb=0.02, completion_tokens=30)

    async def scenarios():
        with pytest.raises(litellm.Timeout):
            await router.acompletion(model=GROUP, messages=MESSAGES, timeout=0.3)
        task = asyncio.ensure_future(router.acompletion(model=GROUP, messages=MESSAGES))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        stream = await router.acompletion(model=GROUP, messages=MESSAGES, stream=True)
        async for _ in stream:
            break
        await stream.aclose() if hasattr(stream, "aclose") else None
        del stream
        gc.collect()
        await asyncio.sleep(0.05)  # the finalizer hands the ends to the loop

    run(scenarios())
    gc.collect()
    info = strategy.vserver(GROUP).info("r1")
    assert strategy.open_transactions() == {GROUP: 0}
    assert info["selected"] == 3 and info["ttfb"] is None and info["failures"] == 0, info


def test_retries_end_each_attempt_once(reps, strategies):
    reps[1].set(error_rate=1.0)
    router = router_for(reps[:2], num_retries=3, retry_after=0, disable_cooldowns=True)
    strategy = strategies()
    strategy.install(router)
    errors_before = reps[1].stats()["errors"]
    assert run(calls(router, 8, 2)) == []  # a failed attempt's retry goes to the other replica
    failed = reps[1].stats()["errors"] - errors_before
    vs = strategy.vserver(GROUP)
    assert failed >= 1 and vs.info("r2")["failures"] == failed  # each failed attempt: one fail()
    assert vs.info("r1")["selected"] + vs.info("r2")["selected"] == 8 + failed


def test_an_answer_or_a_failure_ends_its_pick_in_the_call_task(reps, strategies):
    """The pick ends in LiteLLM's deployment hooks, before LiteLLM hands the outcome to its logging
    worker: a hook of LiteLLM's list after ours, run in the same task, already sees it ended.
    The logging callbacks that come later find it ended and count nothing twice."""
    from litellm.integrations.custom_logger import CustomLogger

    reps[0].set(delay=0.05)
    reps[1].set(error_rate=1.0)
    router = router_for(reps[:2], disable_cooldowns=True)
    strategy = strategies("LEASTRESPONSETIME")
    strategy.install(router)
    vs = strategy.vserver(GROUP)
    seen = []

    class After(CustomLogger):
        async def async_post_call_success_deployment_hook(self, request_data, response, call_type):
            seen.append(("ok", vs.info("r1")["active"], vs.info("r1")["ttfb"]))

        async def async_post_call_failure_deployment_hook(self, request_data, exception, call_type,
                                                          fallback_depth=None):
            seen.append(("failed", vs.info("r2")["active"], vs.info("r2")["failures"]))

    after = After()
    litellm.callbacks.append(after)
    try:
        errors = run(calls(router, 6, 1))
        run(asyncio.sleep(0.3))  # the logging callbacks of the last calls
    finally:
        litellm.callbacks.remove(after)
    assert len(errors) == 3 and len(seen) == 6, (errors, seen)
    answered = [s for s in seen if s[0] == "ok"]
    failed = [s for s in seen if s[0] == "failed"]
    assert [s[1] for s in seen] == [0] * 6, seen  # ended before the next hook ran
    assert all(ttfb is not None and ttfb >= 0.05 for _, _, ttfb in answered), answered  # the whole answer's time
    assert [f for _, _, f in failed] == [1, 2, 3], failed  # each failure counted as it happened
    assert vs.info("r2")["failures"] == 3 and vs.info("r1")["selected"] + vs.info("r2")["selected"] == 6


# ---- deployments added and removed at run time; the sync path ------------------------------------

def test_a_deployment_added_at_run_time_ramps_under_slow_start(reps, strategies, c_impl):
    from litellm.router_api import ChangeSet
    from litellm.types.router import Deployment

    clock = c_impl.ManualClock(50.0)
    router = router_for(reps[:2])
    strategy = strategies(clock=clock, new_service_request=2)
    strategy.install(router)
    assert run(calls(router, 4, 1)) == []
    router.apply(ChangeSet(upsert=[Deployment(**deployment(reps[2], "r3"))]))
    before = served(reps)
    assert run(calls(router, 20, 1)) == []
    assert [a - b for a, b in zip(served(reps), before)][2] == 2  # its cap this second, the rest elsewhere
    clock.advance(1)
    before = served(reps)
    assert run(calls(router, 9, 1)) == []
    assert [a - b for a, b in zip(served(reps), before)][2] == 2
    router.apply(ChangeSet(delete=["r1"]))
    assert run(calls(router, 3, 1)) == []
    assert "r1" not in strategy.vserver(GROUP).services  # drained, then unbound


def test_sync_completion(reps, strategies):
    router = router_for(reps)
    strategy = strategies()
    strategy.install(router)
    before = served(reps)
    for _ in range(6):
        router.completion(model=GROUP, messages=MESSAGES)
    assert sum(served(reps)) - sum(before) == 6
    assert all(strategy.vserver(GROUP).info(n)["selected"] == 2 for n in ("r1", "r2", "r3"))


# ---- two processes, one count ---------------------------------------------------------------------

def _hold_picks(name, urls, count, conn):
    """A second process: its own Router and Strategy(shared=name), `count` picks held open."""
    import leastload.engine.native as native

    class _Rep:
        def __init__(self, url):
            self.url = url

    router = Router(model_list=[deployment(_Rep(u), f"r{i + 1}") for i, u in enumerate(urls)])
    strategy = Strategy("LEASTCONNECTION", shared=name, engine=native.VirtualServer)
    strategy.install(router)
    held = [{"model": GROUP, "messages": MESSAGES} for _ in range(count)]
    picked = [asyncio.run(router.select(GROUP, request)) for request in held]
    conn.send([p["model_info"]["id"] for p in picked])
    conn.recv()  # until told: the requests (and their picks) go when this process ends
    held.clear()
    gc.collect()
    strategy.reap()  # what the dropped requests queued (this process has no running loop to hand it to)
    conn.send("released")


def test_two_processes_with_shared_keep_one_count(reps, strategies, c_impl):
    from leastload import unlink_shared

    name = f"ll-litellm-test-{os.getpid()}"
    segment = segment_name(name, GROUP)
    unlink_shared(segment)
    try:
        router = router_for(reps)
        strategy = strategies(shared=name)
        strategy.install(router)
        parent, child = multiprocessing.get_context("fork").Pipe()
        proc = multiprocessing.get_context("fork").Process(
            target=_hold_picks, args=(name, [r.url for r in reps], 4, child))
        proc.start()
        try:
            assert parent.poll(60), "the second process did not pick"
            held = parent.recv()
            vs = strategy.vserver(GROUP)
            assert sum(vs.info(n)["active"] for n in vs.services) == 4  # its picks, counted here
            # this process's picks go where the other's are fewest
            mine = [run(router.select(GROUP, {"model": GROUP, "messages": MESSAGES}))["model_info"]["id"]
                    for _ in range(2)]
            counts = {n: held.count(n) for n in ("r1", "r2", "r3")}
            assert all(counts[m] == min(counts.values()) for m in mine[:1]), (held, mine)
            parent.send("go")
            assert parent.poll(60) and parent.recv() == "released"
            assert sum(vs.info(n)["active"] for n in vs.services) == 0
        finally:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join(10)
    finally:
        unlink_shared(segment)


def test_the_pick_rides_in_the_request_metadata(reps, strategies):
    router = router_for(reps[:1])
    strategy = strategies()
    strategy.install(router)
    request = {"model": GROUP, "messages": MESSAGES}
    picked = run(router.select(GROUP, request))
    assert request["metadata"][STAMP] == picked["model_info"]["id"] == "r1"
    assert strategy.open_transactions() == {GROUP: 1}
    del request
    gc.collect()
    assert strategy.open_transactions() == {GROUP: 0}


# ---- the comparison's script, in miniature (so that it cannot rot) ---------------------------------

def test_the_comparison_benchmark_runs(capsys):
    from benchmarks import litellm_compare as compare

    compare.main(["--calls", "12", "--rounds", "2", "--concurrency", "4", "--delay", "0.02", "--picks", "5",
                  "--strategies", "least-busy,LEASTRESPONSETIME"])
    from leastload.integrations.litellm import OUTCOMES
    assert not set(vars(OUTCOMES)) & {"_answered", "_success", "_failure"}  # the script's timers are gone
    out = capsys.readouterr().out.splitlines()
    rows = [line.split(" | ")[0] for line in out if line.startswith("| ")]
    assert rows[1:] == ["| LiteLLM least-busy", "| leastload LEASTRESPONSETIME"], rows
    assert len([line for line in out if line.startswith("# round ")]) == 2, out
    assert any(line.startswith("# Done-when: PASS") or line.startswith("# Done-when: MISS") for line in out), out
