"""Passive ejection and health probes together, through the proxy, with real backend
processes: a backend killed under load is ejected and marked DOWN; restarted, its first
passed probe ends its ejection (unless the proxy keeps ejections) and its slow start
begins then, once, instead of running out while it could get nothing."""
import asyncio
import collections

import pytest

from leastload_testkit.ports import free_port
from servers import run_loop
from test_proxy import C, backends  # noqa: F401 (fixtures: the C engine; backend processes, stopped after the test)
from test_proxy import RUN_TIMEOUT, assert_nothing_active, load, settle, specs, url_of, wait_for_async

from leastload.proxy import Proxy

HEALTH_INTERVAL = 0.1
RATE = 20  # manual slow start: 20 requests a second from the moment the ramp begins


@pytest.mark.parametrize("keep", [False, True], ids=["a-passed-probe-ends-it", "outlier-keep-on-health"])
def test_a_restarted_backend_returns_at_its_probe_and_ramps_once(backends, C, keep):  # noqa: F811
    procs = [backends(0.002), backends(0.002)]
    c_port = free_port()
    procs.append(backends(0.002, port=c_port))

    async def main():
        async with Proxy(specs(["a", "b", "c"], procs), "LEASTCONNECTION", listen=("127.0.0.1", 0),
                         health_check="http", health_path="/__health", health_interval=HEALTH_INTERVAL,
                         health_fall=2, health_rise=1, outlier_failures=3, outlier_ejection_time=60,
                         new_service_request=RATE, health_ends_ejection=not keep, engine=C) as proxy:
            vs, stats = proxy.vserver, proxy.stats.backends
            outcome = collections.Counter()
            done = asyncio.Event()

            async def traffic():  # rounds of 200 until told to stop (bounded)
                for _ in range(60):
                    outcome.update(await load(url_of(proxy), 200, 8))
                    if done.is_set():
                        return
            loader = asyncio.ensure_future(traffic())
            try:
                return await scenario(proxy, vs, stats, outcome, done, loader)
            finally:  # a failed step must not leave the load running past the loop's end
                done.set()
                await asyncio.wait_for(asyncio.shield(loader), 30)

    async def scenario(proxy, vs, stats, outcome, done, loader):
        assert await wait_for_async(lambda: stats["c"].requests >= 100, 20)
        procs[2].kill()
        assert await wait_for_async(lambda: vs.ejection("c") is not None and vs.state("c") == "DOWN", 20)
        ejected = vs.ejection("c")
        await asyncio.sleep(3 * HEALTH_INTERVAL)  # probes keep failing meanwhile: nothing changes
        assert vs.slow_start("c") is None and vs.ejection("c") == ejected
        backends(0.002, port=c_port)  # restarted on the same port
        assert await wait_for_async(lambda: vs.state("c") == "UP", 20)
        up_at, at_up = vs.now(), stats["c"].requests
        after = {}
        if keep:
            await asyncio.sleep(1.0)
            after = {"ejection": vs.ejection("c"), "ramp": vs.slow_start("c"),
                     "requests": stats["c"].requests - at_up}
        else:
            after["ramp"] = vs.slow_start("c")
            after["ejection"] = vs.ejection("c")
            got_traffic = await wait_for_async(lambda: stats["c"].requests > at_up, 5)
            after["waited"] = vs.now() - up_at
            after["got_traffic"] = got_traffic
            await asyncio.sleep(1.0)
            after["ramp_later"] = vs.slow_start("c")
        done.set()
        await asyncio.wait_for(asyncio.shield(loader), 30)
        await settle(proxy)
        assert_nothing_active(proxy)
        return outcome, ejected, up_at, after, vs.outlier_events, vs.slow_start_exits
    outcome, ejected, up_at, after, events, exits = run_loop(main(), RUN_TIMEOUT)
    # refused requests are retried elsewhere; only a GET whose answer was already on its way
    # when the backend was killed can be lost
    assert outcome[200] >= 0.99 * sum(outcome.values()) and sum(outcome.values()) - outcome[200] <= 2, outcome
    assert ejected["ejections"] == 1
    assert [e for e in exits if e[1] == "c"] == []  # no ramp ran out while it could get nothing
    what = [w for _, name, w in events if name == "c"]
    if keep:
        assert what == ["ejected"]
        assert after["ejection"] == ejected and after["ramp"] is None  # still out: its ramp waits
        assert after["requests"] == 0
    else:
        assert what == ["ejected", "returned early"]
        assert after["ejection"] is None
        ramp = after["ramp"]
        assert ramp is not None and ramp["mode"] == "manual" and ramp["cap"] == RATE
        assert abs(ramp["since"] - up_at) < 0.5  # it began when the probe passed
        # its first request follows the probe at once (LEASTCONNECTION: it has the fewest open);
        # the bound is loose for a busy machine, the figure here is a few milliseconds
        assert after["got_traffic"] and after["waited"] < 1.0, after
        assert after["ramp_later"] is None or after["ramp_later"]["since"] == ramp["since"]  # once


def test_an_ejections_early_return_is_logged_once(caplog):
    """A passed probe that ends a passive ejection: the engine records the return, and the
    proxy's log says it once (from the engine's events), not once more from the monitor."""
    import logging

    from leastload import ManualClock
    from leastload.proxy._health import HealthMonitor

    clock = ManualClock(100.0)
    proxy = Proxy(["a=127.0.0.1:9", "b=127.0.0.1:9", "c=127.0.0.1:9"], "LEASTCONNECTION", health_check="none",
                  outlier_failures=2, outlier_ejection_time=60, clock=clock)
    vs = proxy.vserver
    for _ in range(2):
        vs.begin("c")
        vs.fail("c")
    assert vs.ejection("c") is not None
    monitor = HealthMonitor(None, vs, proxy.backends["c"], "tcp", "/", 1.0, 1.0, 3, 1)  # no loop: _judge only
    with caplog.at_level(logging.WARNING, logger="leastload.proxy"):
        proxy._log_events()  # the ejection
        clock.advance(1.0)
        monitor._judge(True, None)
        proxy._log_events()
        proxy._log_events()  # nothing new
    assert vs.ejection("c") is None
    lines = [r.getMessage() for r in caplog.records]
    assert [line for line in lines if "return" in line] == [
        next(line for line in lines if line.startswith("backend c: returned early at"))]
    assert lines[-1].endswith("(its health probe passed)") and sum("ejected" in line for line in lines) == 1
