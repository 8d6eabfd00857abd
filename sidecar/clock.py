"""Time, injected: everything that reads the time or sleeps takes a Clock.

Tests use ``FakeClock`` to run watchdogs and postpones on fake time.
"""

from __future__ import annotations

import time
from typing import Protocol

import anyio
import anyio.lowlevel


class Clock(Protocol):
    def now_ms(self) -> int:
        """Unix time in milliseconds."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class FakeClock:
    """A clock that only moves when told to; ``sleep`` advances it at once."""

    def __init__(self, start_ms: int | None = None) -> None:
        self._now = start_ms if start_ms is not None else time.time_ns() // 1_000_000

    def now_ms(self) -> int:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += int(seconds * 1000)

    async def sleep(self, seconds: float) -> None:
        self.advance(max(seconds, 0))
        await anyio.lowlevel.checkpoint()
