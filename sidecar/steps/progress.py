"""How far recognition of a recording has come (LA4), written as it moves.

The offline engine reports, from its worker thread, how much of a piece it
has recognized; the writer turns that into a fraction of the whole recording
and stores it every few seconds, and only when it moved: the stored value
never goes back (storage keeps the highest), and a step that keeps moving
is not taken for a stalled one.

It also reports what it is doing (``Activity``: recognizing, finding
speakers) and the language it found; those are written at once, with the
progress, so the sender's poll shows them while the work goes on.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.lowlevel import EventLoopToken

from sidecar.activity import Activity
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
        # What the step does and the language it found: set from any thread, written at once.
        self._activity: Activity | None = None
        self._language: str | None = None
        self._written_activity: Activity | None = None  # the claim started without one
        self._written_language: str | None = ctx.record.language or None
        self._votes: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._news = anyio.Event()
        self._loop: tuple[EventLoopToken, int] | None = None  # (the writer's event loop, its thread)

    def reporter(self, offset_ms: int) -> Callable[[float], None]:
        """A provider's ``report`` for the piece starting at ``offset_ms``: seconds of it recognized."""

        def report(seconds: float) -> None:
            # A plain float assignment: safe from the provider's worker thread.
            self._seconds = max(self._seconds, offset_ms / 1000 + seconds)

        return report

    def reached(self, position_ms: int) -> None:
        """The recording is recognized up to ``position_ms``."""
        self._seconds = max(self._seconds, position_ms / 1000)

    def doing(self, activity: Activity) -> None:
        """The step now does ``activity`` (one of ``activity.REPORTED``); callable from any thread."""
        self._activity = activity
        self._wake()

    def found_language(self, code: str) -> None:
        """A piece's language is ``code``; callable from any thread. The recording's is the one most
        pieces found so far (the first on a tie), as the join of the pieces will say at the end."""
        with self._lock:
            self._votes[code] += 1
            self._language = self._votes.most_common(1)[0][0]
        self._wake()

    async def write(self, fraction: float | None = None) -> None:
        """Stores ``fraction`` (default: as reported so far) if it moved enough since the last write,
        and what the step does and the language found if either changed since."""
        value = min(1.0, self._seconds / self._total if fraction is None else fraction)
        moved = value >= self._written + LEAST_MOVE or (value >= 1.0 > self._written)
        activity, language = self._activity, self._language
        activity = activity if activity != self._written_activity else None
        language = language if language != self._written_language else None
        if moved or activity is not None or language is not None:
            await self._ctx.session.progress(value, activity=activity, language=language)
            self._written = max(self._written, value)
            self._written_activity = activity or self._written_activity
            self._written_language = language or self._written_language

    def _wake(self) -> None:
        """Wakes the writing loop (if one runs) so that news is written now, not at its next tick."""
        loop = self._loop
        if loop is None:
            return
        token, thread = loop
        if threading.get_ident() == thread:
            self._news.set()
            return
        try:
            anyio.from_thread.run_sync(self._news.set, token=token)
        except RuntimeError:  # the loop is gone: the step ended, and its last write took what there was
            pass

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ProgressWriter]:
        """Writes what is reported every ``EVERY_SECONDS`` while the block runs, and once after.

        The block's own error comes out as it was raised (not in a group): the
        runner classifies it. A write that fails in between is only logged:
        progress is advice, and the step's own writes will meet the same trouble.
        """

        async def loop() -> None:
            while True:
                news = self._news
                if await self._ctx.clock.wait(news, EVERY_SECONDS):
                    self._news = anyio.Event()  # what came after this is news for the next round
                try:
                    await self.write()
                except Exception as exc:
                    log.debug("record %s: progress not written: %s", self._ctx.record.id, redact(str(exc)))

        error: BaseException | None = None
        self._loop = (anyio.lowlevel.current_token(), threading.get_ident())
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop)
            try:
                yield self
            except BaseException as exc:  # re-raised below, once the writer has stopped
                error = exc
            finally:
                self._loop = None
                tg.cancel_scope.cancel()
        if error is not None:
            raise error
        await self.write()
