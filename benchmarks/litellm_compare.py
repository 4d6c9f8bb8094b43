"""leastload's picks in LiteLLM's Router against LiteLLM's own strategies, on the same replicas.

    pip install -e ".[litellm]"
    python -m benchmarks.litellm_compare                  # the comparison of docs/litellm.md (about 14 min)
    python -m benchmarks.litellm_compare --calls 400      # a quick look

Three OpenAI-compatible replicas (leastload_testkit/llm_replica.py, each its own process
on 127.0.0.1): two answer in `--delay` seconds, one `--slow` times slower,
each generating at most `--slots` calls at once (the others wait in line, as
on an LLM server whose batch is full). `--concurrency` callers share one
event loop and one Router and make chat completions one after another each.

Each strategy makes `--calls` calls in all, in `--rounds` rounds: every round
runs each strategy once (a fresh Router over the same replicas, a warm-up of
`--concurrency` calls first), in an order turned by one each round, so that a
busy spell of a shared machine falls on all of them. The table gives the
median over the rounds of each figure:

- p50, p99: the callers' latency; split: each replica's share of the calls;
- "ll code": leastload's own CPU time per call (leastload's strategies only),
  timed inside the run with the thread's CPU clock: the pick, plus the hooks
  and callbacks that end it (each weighted by how often it ran per call; the
  logging callbacks that find the pick ended already count too), medians per
  entry point, the timer's own cost (measured the same way on an empty
  function) taken off;
- "end lag": when the pick's transaction ended, relative to the caller
  getting its answer (median and p99 over the calls; negative: before);
- "pick": the mean time of the router's whole selection (`router.select()`,
  the same entry point for all strategies) over `--picks` picks after the run.

The last line says whether the Done-when of issue 50 holds on this run:
leastload's LEASTRESPONSETIME or LEASTCONNECTION has a p99 at most the best
LiteLLM strategy's, and its own code costs under 50 us per call.
"""
import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price list fetched
from leastload_testkit.llm_replica import start_replica  # noqa: E402  (after the environment above)

BUILT_IN = ("simple-shuffle", "least-busy", "latency-based-routing")
LEASTLOAD = ("LEASTCONNECTION", "LEASTRESPONSETIME")
STRATEGIES = BUILT_IN + LEASTLOAD
MODEL = "replicas"
BUDGET_US = 50.0  # the Done-when's bound on leastload's code per call
ENDS = ("_answered", "_success", "_failure")  # the callback object's methods that end picks


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered) + 0.5)) - 1))]


class Probe:
    """Times leastload's code in a run and notes when each call's pick ended. The pick and the
    end are wrapped on the Strategy itself; the ending methods on the one callback object that
    serves every Strategy, until `close()`. Instrumentation only: nothing here changes a pick."""

    clock = staticmethod(time.thread_time)  # CPU time of this thread: other threads may run meanwhile

    def __init__(self, strategy):
        from leastload.integrations import litellm as integration

        self.outcomes = integration.OUTCOMES
        self.stamp = integration.STAMP
        self.times = {name: [] for name in ("_pick",) + ENDS}
        self.handles = {}  # the benchmark's number of a call -> its pick's transaction
        self.ended = {}  # call number -> perf_counter() when its pick ended
        self.returned = {}  # call number -> perf_counter() when its caller got the answer
        strategy._pick = self._picked(self._timed(strategy._pick, self.times["_pick"]))
        for name in ENDS:
            setattr(self.outcomes, name, self._noted(self._timed(getattr(self.outcomes, name), self.times[name])))
        self.timer_cost = self._timer_cost()

    def close(self):
        for name in ENDS:
            vars(self.outcomes).pop(name, None)

    def clear(self):
        for values in self.times.values():
            del values[:]
        self.handles.clear(), self.ended.clear(), self.returned.clear()

    def _timed(self, fn, into):
        clock = self.clock

        def timed(*args, **kwargs):
            started = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                into.append(clock() - started)
        return timed

    def _timer_cost(self):
        into = []
        empty = self._timed(lambda: None, into)
        for _ in range(2000):
            empty()
        return statistics.median(into)

    def _picked(self, fn):
        def pick(model, request):
            deployment = fn(model, request)
            metadata = (request or {}).get("metadata") or {}
            pick = metadata.get(self.stamp)
            if pick is not None and "bench_call" in metadata:
                self.handles[metadata["bench_call"]] = pick.handle
            return deployment
        return pick

    def _noted(self, fn):
        """After a hook or callback (outside its timing): the time its call's pick ended, if it did."""
        def end(kwargs, *args, **more):
            try:
                return fn(kwargs, *args, **more)
            finally:
                now = time.perf_counter()
                metadata = kwargs.get("metadata") or (kwargs.get("litellm_params") or {}).get("metadata") or {}
                handle = self.handles.get(metadata.get("bench_call"))
                if handle is not None and handle.done:
                    self.ended.setdefault(metadata["bench_call"], now)
        return end

    def per_call(self, calls):
        """leastload's CPU seconds per call: median per entry point, times its runs per call,
        less the timer's own cost; and the plain mean (garbage collections included)."""
        median = mean = 0.0
        for values in self.times.values():
            if values:
                median += len(values) / calls * max(0.0, statistics.median(values) - self.timer_cost)
                mean += sum(values) / calls
        return median, mean

    def lags(self):
        lags = [self.ended[c] - t for c, t in self.returned.items() if c in self.ended]
        return (statistics.median(lags), percentile(lags, 99)) if lags else None


def make_router(name, replicas):
    import litellm
    from litellm import Router

    model_list = [{"model_name": MODEL,
                   "litellm_params": {"model": "openai/replica", "api_base": r.url, "api_key": "none"},
                   "model_info": {"id": f"replica{i + 1}"}} for i, r in enumerate(replicas)]
    litellm.callbacks = []
    if name in BUILT_IN:
        return Router(model_list=model_list, routing_strategy=name, num_retries=0), None
    from leastload.integrations.litellm import Strategy

    router = Router(model_list=model_list, num_retries=0)
    strategy = Strategy(name)
    strategy.install(router)
    return router, strategy


async def run(router, calls, concurrency, stream, probe=None):
    latencies = []
    left = [calls]
    messages = [{"role": "user", "content": "say something about load balancing"}]

    async def caller():
        while left[0] > 0:
            left[0] -= 1
            call = left[0]
            started = time.perf_counter()
            if stream:
                response = await router.acompletion(model=MODEL, messages=messages, stream=True,
                                                    metadata={"bench_call": call})
                async for _ in response:
                    pass
            else:
                await router.acompletion(model=MODEL, messages=messages, metadata={"bench_call": call})
            now = time.perf_counter()
            latencies.append(now - started)
            if probe is not None:
                probe.returned[call] = now

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return latencies, time.perf_counter() - started


async def pick_cost(router, picks):
    """Mean seconds per router.select() (requests dropped at once: a leastload pick ends then)."""
    started = time.perf_counter()
    for _ in range(picks):
        await router.select(MODEL, {"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
    return (time.perf_counter() - started) / max(1, picks)


def measure(name, replicas, calls, args):
    """One strategy's run of `calls` calls on a fresh Router: its figures."""
    router, strategy = make_router(name, replicas)
    probe = Probe(strategy) if strategy is not None else None

    async def main():
        await run(router, min(calls, args.concurrency), args.concurrency, args.stream)  # warm-up
        await asyncio.sleep(0.3)  # the warm-up's last logging callbacks
        warm = [r.stats()["requests"] for r in replicas]
        if probe is not None:
            probe.clear()
        latencies, wall = await run(router, calls, args.concurrency, args.stream, probe)
        after = [r.stats()["requests"] for r in replicas]
        await asyncio.sleep(0.3)  # the last logging callbacks (their cost is leastload's too)
        own = probe.per_call(calls) if probe is not None else None
        lags = probe.lags() if probe is not None else None
        pick = await pick_cost(router, args.picks)
        gc.collect()
        await asyncio.sleep(0.05)
        if strategy is not None:
            open_now = strategy.open_transactions()
            assert set(open_now.values()) == {0}, f"{name}: transactions left open: {open_now}"
        return latencies, wall, [a - w for a, w in zip(after, warm)], own, lags, pick

    try:
        latencies, wall, split, own, lags, pick = asyncio.run(main())
    finally:
        if probe is not None:
            probe.close()
    return {"p50": percentile(latencies, 50), "p99": percentile(latencies, 99), "rate": calls / wall,
            "shares": [n / max(1, sum(split)) for n in split], "own": own, "lags": lags, "pick": pick}


def median_of(rounds, key, index=None):
    values = [r[key] if index is None else r[key][index] for r in rounds if r[key] is not None]
    return statistics.median(values) if values else None


def verdict(results):
    """The Done-when line: PASS or MISS, with the figures it compares."""
    builtin = {n: median_of(results[n], "p99") for n in BUILT_IN if n in results}
    ours = {n: (median_of(results[n], "p99"), median_of(results[n], "own", 0)) for n in LEASTLOAD if n in results}
    if not builtin or not ours:
        return "# Done-when: not judged (it needs a LiteLLM strategy and a leastload one)"
    best_builtin = min(builtin, key=builtin.get)
    best = min(ours, key=lambda n: ours[n][0])
    p99, own = ours[best]
    ok = p99 <= builtin[best_builtin] and own * 1e6 < BUDGET_US
    return (f"# Done-when: {'PASS' if ok else 'MISS'}: leastload {best} p99 {p99 * 1000:.0f} ms "
            f"{'<=' if p99 <= builtin[best_builtin] else '>'} LiteLLM {best_builtin} p99 "
            f"{builtin[best_builtin] * 1000:.0f} ms; its code {own * 1e6:.1f} us per call "
            f"({'<' if own * 1e6 < BUDGET_US else '>='} {BUDGET_US:.0f} us)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per strategy, over all rounds")
    parser.add_argument("--rounds", type=int, default=4, help="rounds, each strategy once per round")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay", type=float, default=1.0, help="the fast replicas' answer time, s")
    parser.add_argument("--slow", type=float, default=3.0, help="how many times slower the third is")
    parser.add_argument("--slots", type=int, default=16, help="calls each replica generates at once")
    parser.add_argument("--tokens", type=int, default=16, help="completion tokens per call")
    parser.add_argument("--stream", action="store_true", help="streamed completions (TTFB = first token)")
    parser.add_argument("--picks", type=int, default=300, help="router.select() calls timed per run")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # LiteLLM's deprecation notes
    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        parser.error(f"--strategies: unknown {unknown}; choose from {', '.join(STRATEGIES)}")
    if args.rounds < 1 or args.calls < args.rounds:
        parser.error(f"--rounds must be 1 to --calls, got --rounds {args.rounds} --calls {args.calls}")

    ttfb = args.delay / 4
    settings = [dict(delay=args.delay, ttfb=ttfb), dict(delay=args.delay, ttfb=ttfb),
                dict(delay=args.delay * args.slow, ttfb=ttfb * args.slow)]
    replicas = [start_replica(completion_tokens=args.tokens, slots=args.slots, **s) for s in settings]
    per_round = args.calls // args.rounds
    results = {name: [] for name in names}
    began = time.monotonic()
    try:
        print(f"# {per_round * args.rounds} calls per strategy in {args.rounds} rounds, {args.concurrency} callers, "
              f"replicas of {args.delay * 1000:.0f}, {args.delay * 1000:.0f}, {args.delay * args.slow * 1000:.0f} ms, "
              f"{args.slots} slots each, {'streamed' if args.stream else 'not streamed'}; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        for turn in range(args.rounds):
            order = names[turn % len(names):] + names[:turn % len(names)]
            for name in order:
                results[name].append(measure(name, replicas, per_round, args))
            print(f"# round {turn + 1}: p99 ms " + ", ".join(
                f"{n} {results[n][-1]['p99'] * 1000:.0f}" for n in names), flush=True)
        print("| strategy | p50 ms | p99 ms | calls/s | split (fast, fast, slow) | ll code us, median / mean "
              "| end lag ms, median / p99 | pick us |")
        print("|---|---|---|---|---|---|---|---|")
        for name in names:
            rounds = results[name]
            shares = ", ".join(f"{100 * median_of(rounds, 'shares', i):.1f} %" for i in range(len(replicas)))
            own = (f"{median_of(rounds, 'own', 0) * 1e6:.1f} / {median_of(rounds, 'own', 1) * 1e6:.1f}"
                   if name in LEASTLOAD else "-")
            lag = (f"{median_of(rounds, 'lags', 0) * 1000:.1f} / {median_of(rounds, 'lags', 1) * 1000:.1f}"
                   if name in LEASTLOAD and median_of(rounds, "lags", 0) is not None else "-")
            print(f"| {'leastload' if name in LEASTLOAD else 'LiteLLM'} {name} | "
                  f"{median_of(rounds, 'p50') * 1000:.0f} | {median_of(rounds, 'p99') * 1000:.0f} | "
                  f"{median_of(rounds, 'rate'):.0f} | {shares} | {own} | {lag} | "
                  f"{median_of(rounds, 'pick') * 1e6:.0f} |", flush=True)
        print(verdict(results))
        print(f"# {time.monotonic() - began:.0f} s; load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        for replica in replicas:
            replica.stop()


if __name__ == "__main__":
    main()
