"""The one way the tests wait: on a condition, with a deadline, never a fixed sleep (the exception, checking
that nothing more happens, goes through :func:`quiet_for`). No test asserts a wall-clock timing."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import anyio

__all__ = ["aquiet_for", "quiet_for", "until", "wait_for"]


def wait_for(
    predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that; fail the test with ``what``
    on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


async def until(
    predicate: Callable[[], Any], timeout: float = 30.0, what: str = "", interval: float = 0.05
) -> Any:
    """:func:`wait_for` for async tests: poll without blocking the event loop. ``predicate`` may be a
    coroutine function (a question asked of tmux or of an adapter): its answer is awaited."""

    async def ask() -> Any:
        value = predicate()
        return await value if inspect.isawaitable(value) else value

    with anyio.move_on_after(timeout):
        while not (value := await ask()):
            await anyio.sleep(interval)
        return value
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


def quiet_for(seconds: float, why: str) -> None:
    """Let ``seconds`` pass so that what must NOT happen (``why``: a second hand-off, a completion before
    its time) would have shown by now. An absence has no event to wait on, so this is the one fixed wait
    in the suite; anything that does happen is waited for with :func:`wait_for` / :func:`until`."""
    time.sleep(seconds)


async def aquiet_for(seconds: float, why: str) -> None:
    """:func:`quiet_for` for async tests: the event loop (and the pipeline under test) keeps running."""
    await anyio.sleep(seconds)
