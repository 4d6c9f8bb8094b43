"""The end-to-end tests' event-loop runner (servers.run_loop) never hangs a run: a task
left at the end that ignores its cancellation fails the test, its stack printed."""
import asyncio

import pytest

import servers


def test_a_task_that_ignores_its_cancellation_fails_the_test_instead_of_hanging(monkeypatch):
    monkeypatch.setattr(servers, "CLEANUP_TIMEOUT", 0.3)

    async def stubborn():
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                pass  # the bug this guards against: cancellation swallowed

    async def main():
        asyncio.ensure_future(stubborn())
        await asyncio.sleep(0)
        return 7
    with pytest.raises(AssertionError, match=r"(?s)ignored their cancellation.*in stubborn"):
        servers.run_loop(main(), 5)


def test_tasks_left_at_the_end_are_cancelled_and_the_result_returned():
    left = []

    async def main():
        left.append(asyncio.ensure_future(asyncio.sleep(100)))
        return 3
    assert servers.run_loop(main(), 5) == 3
    assert left[0].cancelled()


def test_a_task_that_raised_fails_the_test():
    async def fails():
        raise RuntimeError("boom")

    async def main():
        asyncio.ensure_future(fails())
        await asyncio.sleep(0.01)
        return 1
    with pytest.raises(AssertionError, match="boom"):
        servers.run_loop(main(), 5)
