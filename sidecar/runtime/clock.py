"""Time, injected: everything that reads the time or waits takes a Clock.

The pipeline never calls ``time.time`` or ``anyio.sleep`` itself: leases,
pauses, retries, idle waits, lease keep-alives, reconnects and step
deadlines all go through ``Clock``. Production uses ``SystemClock``; tests
use ``FakeClock``, whose time moves only when a test advances it, or, with
``autojump``, whenever every task is waiting (as trio's MockClock does), so
hours of queue behaviour run in milliseconds.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Protocol, TypeVar

import anyio
import anyio.lowlevel

__all__ = ["Clock", "FakeClock", "SystemClock", "run_with_deadline"]

T = TypeVar("T")


class Clock(Protocol):
    def now_ms(self) -> int:
        """Unix time in milliseconds."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    async def wait(self, event: anyio.Event, at_most: float) -> bool:
        """Waits for ``event`` at most ``at_most`` seconds; whether it was set."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)

    async def wait(self, event: anyio.Event, at_most: float) -> bool:
        with anyio.move_on_after(at_most):
            await event.wait()
        return event.is_set()


async def run_with_deadline(clock: Clock, seconds: float, work: Callable[[], Awaitable[T]]) -> T:
    """``work()``, cancelled with ``TimeoutError`` if it takes longer than ``seconds`` on ``clock``.

    What ``work`` raises comes out as itself, not wrapped in an exception group.
    """
    result: list[T] = []
    error: Exception | None = None
    expired = False
    async with anyio.create_task_group() as tg:

        async def watchdog() -> None:
            nonlocal expired
            await clock.sleep(seconds)
            expired = True
            tg.cancel_scope.cancel()

        tg.start_soon(watchdog)
        try:
            result.append(await work())
        except Exception as exc:
            error = exc
        tg.cancel_scope.cancel()
    if error is not None:
        raise error
    if expired and not result:
        raise TimeoutError(f"did not finish within {seconds:g} s")
    return result[0]


class FakeClock:
    """A clock for tests: time moves when ``advance`` is called, or by itself under ``autojump``."""

    def __init__(self, start_ms: int | None = None) -> None:
        self._now = start_ms if start_ms is not None else time.time_ns() // 1_000_000
        self._sleepers: list[tuple[int, int, anyio.Event]] = []
        self._order = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += int(seconds * 1000)
        self._wake_due()

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await anyio.lowlevel.checkpoint()
            return
        event = anyio.Event()
        heapq.heappush(self._sleepers, (self._now + max(int(seconds * 1000), 1), next(self._order), event))
        try:
            await event.wait()
        finally:
            event.set()  # a cancelled sleep is no longer a moment to jump to

    async def wait(self, event: anyio.Event, at_most: float) -> bool:
        if event.is_set():
            await anyio.lowlevel.checkpoint()
            return True
        async with anyio.create_task_group() as tg:

            async def on_event() -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            async def on_timeout() -> None:
                await self.sleep(at_most)
                tg.cancel_scope.cancel()

            tg.start_soon(on_event)
            tg.start_soon(on_timeout)
        return event.is_set()

    @property
    def sleeping(self) -> int:
        """How many sleeps are pending (for tests that wait for a task to settle)."""
        return sum(1 for _, _, e in self._sleepers if not e.is_set())

    def _wake_due(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, event = heapq.heappop(self._sleepers)
            event.set()

    @asynccontextmanager
    async def autojump(self) -> AsyncIterator[None]:
        """Inside the block, whenever every other task waits, time jumps to the next pending sleep."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._jumper)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    async def _jumper(self) -> None:
        while True:
            await _all_others_waiting()
            while self._sleepers and self._sleepers[0][2].is_set():
                heapq.heappop(self._sleepers)  # woken by something else: drop
            if self._sleepers:
                self._now = max(self._now, self._sleepers[0][0])
                self._wake_due()
            else:
                await anyio.sleep(0.001)  # nothing to jump to: let real time pass (I/O, threads)


async def _all_others_waiting() -> None:
    """Returns once every other task of the loop waits on something (asyncio only, like anyio's helper).

    anyio's own ``wait_all_tasks_blocked`` sleeps 0.1 s of real time per busy
    check; this yields to the loop instead, so a jump costs microseconds.
    """
    me = asyncio.current_task()
    while True:
        for _ in range(3):
            await asyncio.sleep(0)
        busy = False
        for task in asyncio.all_tasks():
            if task is me:
                continue
            waiter = getattr(task, "_fut_waiter", None)
            if waiter is None or waiter.done():
                busy = True
                break
        if not busy:
            return
