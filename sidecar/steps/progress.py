"""How far recognition of a recording has come (LA4), written as it moves.

The offline engine reports, from its worker thread, how much of a piece it
has recognized; the writer turns that into a fraction of the whole recording
and stores it every few seconds, and only when it moved: the stored value
never goes back (storage keeps the highest), and a step that keeps moving
is not taken for a stalled one.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio

from sidecar.redaction import redact
from sidecar.steps.base import StepContext

log = logging.getLogger("transcriber.progress")

# How often progress is written while it moves, and the least move worth a write.
EVERY_SECONDS = 5.0
LEAST_MOVE = 0.005


class ProgressWriter:
    def __init__(self, ctx: StepContext, duration_ms: int) -> None:
        self._ctx = ctx
        self._total = max(duration_ms, 1) / 1000
        self._seconds = 0.0  # of the recording recognized; set from any thread
        self._written = ctx.record.progress

    def reporter(self, offset_ms: int) -> Callable[[float], None]:
        """A provider's ``report`` for the piece starting at ``offset_ms``: seconds of it recognized."""

        def report(seconds: float) -> None:
            # A plain float assignment: safe from the provider's worker thread.
            self._seconds = max(self._seconds, offset_ms / 1000 + seconds)

        return report

    def reached(self, position_ms: int) -> None:
        """The recording is recognized up to ``position_ms``."""
        self._seconds = max(self._seconds, position_ms / 1000)

    async def write(self, fraction: float | None = None) -> None:
        """Stores ``fraction`` (default: as reported so far) if it moved enough since the last write."""
        value = min(1.0, self._seconds / self._total if fraction is None else fraction)
        if value >= self._written + LEAST_MOVE or (value >= 1.0 > self._written):
            await self._ctx.session.progress(value)
            self._written = value

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ProgressWriter]:
        """Writes what is reported every ``EVERY_SECONDS`` while the block runs, and once after.

        The block's own error comes out as it was raised (not in a group): the
        runner classifies it. A write that fails in between is only logged:
        progress is advice, and the step's own writes will meet the same trouble.
        """

        async def loop() -> None:
            while True:
                await self._ctx.clock.sleep(EVERY_SECONDS)
                try:
                    await self.write()
                except Exception as exc:
                    log.debug("record %s: progress not written: %s", self._ctx.record.id, redact(str(exc)))

        error: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop)
            try:
                yield self
            except BaseException as exc:  # re-raised below, once the writer has stopped
                error = exc
            finally:
                tg.cancel_scope.cancel()
        if error is not None:
            raise error
        await self.write()
