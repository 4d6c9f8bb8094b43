"""Bounded waits: for a condition, or for a child process's first line."""
import asyncio
import selectors
import time
from typing import IO, Any, Callable


def wait_until(predicate: Callable[[], Any], timeout: float, step: float = 0.02) -> Any:
    """Polls predicate() until it is true or `timeout` seconds passed; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """wait_until() that fails (AssertionError naming `what`) when the time runs out."""
    value = wait_until(predicate, timeout, step=0.05)
    if not value:
        raise AssertionError(f"not within {timeout} s: {what}")
    return value


async def wait_until_async(predicate: Callable[[], Any], timeout: float, step: float = 0.02) -> Any:
    """wait_until() inside an event loop: the loop runs while it waits."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(step)


def first_line(stream: IO[str], timeout: float) -> str:
    """The first line a child process writes to `stream` (stripped), waiting at most `timeout` s."""
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        if not sel.select(timeout):
            return f"<no output within {timeout:.0f} s>"
        return stream.readline().strip()
