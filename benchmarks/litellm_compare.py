"""leastload's picks in LiteLLM's Router against LiteLLM's own strategies, on the same replicas.

    pip install -e ".[litellm]"
    python -m benchmarks.litellm_compare                  # the comparison of docs/litellm.md
    python -m benchmarks.litellm_compare --calls 200      # a quick look

Three OpenAI-compatible replicas (leastload_testkit/llm_replica.py, each its own process
on 127.0.0.1): two answer in `--delay` seconds, one `--slow` times slower,
each generating at most `--slots` calls at once (the others wait in line, as
on an LLM server whose batch is full). `--concurrency` callers share one
event loop and one Router and make `--calls` chat completions in all, one
after another each. For every strategy, a fresh Router over the same replicas:
LiteLLM's simple-shuffle, least-busy and latency-based-routing, then
leastload's LEASTCONNECTION and LEASTRESPONSETIME (leastload.integrations.litellm).

Printed per strategy: p50 and p99 of the callers' latency, each replica's
share of the calls, and two routing costs: "pick" is the mean time of
`router.select()` over `--picks` picks made after the run (the router's
whole selection, with the strategy's, same entry point for all), "ll code"
the CPU time spent in leastload's own code per call during the run (a pick
and an outcome callback, each timed inside with the thread's CPU clock;
median and mean; leastload's strategies only: the mean carries the garbage
collections of LiteLLM's heap that an allocation of ours happens to start).
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

STRATEGIES = ("simple-shuffle", "least-busy", "latency-based-routing", "LEASTCONNECTION", "LEASTRESPONSETIME")
MODEL = "replicas"


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered) + 0.5)) - 1))]


class Timed:
    """The CPU time of the leastload strategy's picks and outcome callbacks, each call's apart
    (one set of outcome callbacks serves every Strategy: wrapped once)."""

    picks = []
    outcomes = []
    _wrapped = False

    def __init__(self, strategy):
        from leastload.integrations import litellm as integration

        Timed.clear()
        strategy._pick = self.wrap(strategy._pick, Timed.picks)
        if not Timed._wrapped:
            for name in ("_success", "_failure"):
                setattr(integration.OUTCOMES, name, self.wrap(getattr(integration.OUTCOMES, name), Timed.outcomes))
            Timed._wrapped = True

    @staticmethod
    def clear():
        del Timed.picks[:], Timed.outcomes[:]

    @staticmethod
    def wrap(fn, into):
        clock = time.thread_time  # CPU time of this thread: LiteLLM's logging threads may hold the GIL meanwhile

        def timed(*args, **kwargs):
            started = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                into.append(clock() - started)
        return timed

    @staticmethod
    def per_call(calls):
        """(median, mean) seconds of leastload's code per call: a pick and an outcome."""
        if not Timed.picks or not Timed.outcomes:
            return None
        median = statistics.median(Timed.picks) + statistics.median(Timed.outcomes)
        return median, (sum(Timed.picks) + sum(Timed.outcomes)) / calls


def make_router(name, replicas):
    import litellm
    from litellm import Router

    model_list = [{"model_name": MODEL,
                   "litellm_params": {"model": "openai/replica", "api_base": r.url, "api_key": "none"},
                   "model_info": {"id": f"replica{i + 1}"}} for i, r in enumerate(replicas)]
    litellm.callbacks = []
    if name in STRATEGIES[:3]:
        return Router(model_list=model_list, routing_strategy=name, num_retries=0), None
    from leastload.integrations.litellm import Strategy

    router = Router(model_list=model_list, num_retries=0)
    strategy = Strategy(name)
    strategy.install(router)
    return router, strategy


async def run(router, calls, concurrency, stream):
    latencies = []
    left = [calls]
    messages = [{"role": "user", "content": "say something about load balancing"}]

    async def caller():
        while left[0] > 0:
            left[0] -= 1
            started = time.perf_counter()
            if stream:
                response = await router.acompletion(model=MODEL, messages=messages, stream=True)
                async for _ in response:
                    pass
            else:
                await router.acompletion(model=MODEL, messages=messages)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return latencies, time.perf_counter() - started


async def pick_cost(router, picks):
    """Mean seconds per router.select() (requests dropped at once: a leastload pick ends then)."""
    started = time.perf_counter()
    for _ in range(picks):
        await router.select(MODEL, {"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
    return (time.perf_counter() - started) / picks


def measure(name, replicas, args):
    router, strategy = make_router(name, replicas)
    timed = Timed(strategy) if strategy is not None else None
    before = [r.stats()["requests"] for r in replicas]

    async def main():
        await run(router, min(args.calls, args.concurrency), args.concurrency, args.stream)  # warm-up
        warm = [r.stats()["requests"] for r in replicas]
        if timed is not None:
            Timed.clear()
        latencies, wall = await run(router, args.calls, args.concurrency, args.stream)
        after = [r.stats()["requests"] for r in replicas]
        await asyncio.sleep(0.2)  # the last success callbacks
        own = Timed.per_call(args.calls) if timed is not None else None
        pick = await pick_cost(router, args.picks)
        gc.collect()
        await asyncio.sleep(0.05)
        if strategy is not None:
            open_now = strategy.open_transactions()
            assert set(open_now.values()) == {0}, f"{name}: transactions left open: {open_now}"
        return latencies, wall, [a - w for a, w in zip(after, warm)], own, pick

    latencies, wall, split, own, pick = asyncio.run(main())
    del before
    return {"name": name, "p50": percentile(latencies, 50), "p99": percentile(latencies, 99),
            "mean": statistics.fmean(latencies), "wall": wall, "split": split, "own": own, "pick": pick}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay", type=float, default=1.0, help="the fast replicas' answer time, s")
    parser.add_argument("--slow", type=float, default=3.0, help="how many times slower the third is")
    parser.add_argument("--slots", type=int, default=16, help="calls each replica generates at once")
    parser.add_argument("--tokens", type=int, default=16, help="completion tokens per call")
    parser.add_argument("--stream", action="store_true", help="streamed completions (TTFB = first token)")
    parser.add_argument("--picks", type=int, default=2000, help="router.select() calls timed per strategy")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # LiteLLM's deprecation notes
    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        parser.error(f"--strategies: unknown {unknown}; choose from {', '.join(STRATEGIES)}")

    ttfb = args.delay / 4
    settings = [dict(delay=args.delay, ttfb=ttfb), dict(delay=args.delay, ttfb=ttfb),
                dict(delay=args.delay * args.slow, ttfb=ttfb * args.slow)]
    replicas = [start_replica(completion_tokens=args.tokens, slots=args.slots, **s) for s in settings]
    try:
        print(f"# {args.calls} calls, {args.concurrency} callers, replicas of {args.delay * 1000:.0f}, "
              f"{args.delay * 1000:.0f}, {args.delay * args.slow * 1000:.0f} ms, {args.slots} slots each, "
              f"{'streamed' if args.stream else 'not streamed'}", flush=True)
        print("| strategy | p50 ms | p99 ms | mean ms | calls/s | split (fast, fast, slow) | pick us | ll code us, median / mean |")
        print("|---|---|---|---|---|---|---|---|")
        for name in names:
            r = measure(name, replicas, args)
            shares = ", ".join(f"{100 * n / max(1, sum(r['split'])):.1f} %" for n in r["split"])
            own = f"{r['own'][0] * 1e6:.1f} / {r['own'][1] * 1e6:.1f}" if r["own"] is not None else "-"
            print(f"| {name} | {r['p50'] * 1000:.1f} | {r['p99'] * 1000:.1f} | {r['mean'] * 1000:.1f} | "
                  f"{args.calls / r['wall']:.0f} | {shares} | {r['pick'] * 1e6:.0f} | {own} |", flush=True)
    finally:
        for replica in replicas:
            replica.stop()


if __name__ == "__main__":
    main()
