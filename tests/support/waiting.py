"""Waiting for something outside the test's control (a server, a subprocess) to become true.

The one polling loop of the suite: the check may block (a synchronous HTTP
call), so the async form runs it in a thread and never stalls the event loop
the workers share.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

__all__ = ["eventually", "eventually_sync"]

T = TypeVar("T")


async def eventually(check: Callable[[], T], *, within: float = 30.0, every: float = 0.05, what: str = "") -> T:
    """The first truthy value of ``check()``, asked every ``every`` seconds; TimeoutError after ``within``."""
    last: T | None = None
    try:
        with anyio.fail_after(within):
            while True:
                last = await anyio.to_thread.run_sync(check)
                if last:
                    return last
                await anyio.sleep(every)
    except TimeoutError:
        raise TimeoutError(f"not true within {within:g} s: {what or check!r} (last: {last!r})") from None


def eventually_sync(check: Callable[[], T], *, within: float = 30.0, every: float = 0.05, what: str = "") -> T:
    """``eventually`` for synchronous tests."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true within {within:g} s: {what or check!r} (last: {value!r})")
        time.sleep(every)
