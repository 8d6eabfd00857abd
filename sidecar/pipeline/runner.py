"""One claimed record, start to end: guards → step → fenced outcome.

The guards run before the step (P7, P9): a record claimed with more attempts
than allowed, or in its stage for longer than its limit, is halted by its
claimer and its step is not run. Whatever the step ends in is written back
under the claim's token; a write that finds the claim gone (FencedOut) is
dropped quietly: someone else owns the record now (P5).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import anyio

from sidecar.clock import Clock
from sidecar.logs import redact
from sidecar.metrics import Metrics
from sidecar.outcome import (
    Advance,
    Halt,
    HaltCode,
    Outcome,
    PermanentError,
    Postpone,
    PostponeError,
    RetryableError,
)
from sidecar.pipeline.stages import Stage, StageTable
from sidecar.pocketbase.client import AudioRecord, Claim, PocketBaseClient
from sidecar.pocketbase.errors import FencedOut
from sidecar.providers.base import Provider
from sidecar.settings import Settings
from sidecar.steps.base import StepContext

log = logging.getLogger("transcriber.runner")


def _human(d: timedelta) -> str:
    s = int(d.total_seconds())
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s // 60} min"
    return f"{s} s"


@dataclass
class Runner:
    storage: PocketBaseClient
    table: StageTable
    settings: Settings
    clock: Clock
    provider: Provider
    provider_for: Callable[[str], Provider]
    metrics: Metrics

    async def run(self, claim: Claim) -> str:
        """Runs the claimed record's step; returns the outcome's name (for metrics and tests)."""
        outcome = "fenced_out"
        stage_name = "unknown"
        try:
            record = await self.storage.get_record(claim.id)
            stage_name = record.state
            if record.claim_token != claim.token:
                return outcome
            outcome = await self._guarded(claim, record, self.table[record.state])
        except FencedOut:
            log.debug("claim on %s is gone; result dropped", claim.id)
        except anyio.get_cancelled_exc_class():
            # P8: our own shutdown is not the record's failure, wherever it lands (reading
            # the record, the guards, the step, the write-back): the claim is handed back.
            with anyio.CancelScope(shield=True):
                await self._release(claim)
            raise
        finally:
            self.metrics.step_finished(stage_name, outcome)
        return outcome

    async def _guarded(self, claim: Claim, record: AudioRecord, stage: Stage) -> str:
        p = self.settings.pipeline
        if record.attempts > p.max_attempts:
            tries = record.attempts - 1
            reason = f"attempts exhausted: {tries} tries of step {stage.step} did not succeed (max {p.max_attempts})"
            await self._halt(claim, record, stage, HaltCode.ATTEMPTS_EXHAUSTED, reason)
            return "halted"
        in_stage = timedelta(milliseconds=self.clock.now_ms() - record.state_entered_at)
        limit = self.table.time_limit(stage)
        if in_stage > limit:
            reason = f"stalled in {stage.name} for {_human(in_stage)} (limit {_human(limit)})"
            await self._halt(claim, record, stage, HaltCode.STALLED, reason)
            return "halted"
        return await self._run_step(claim, record, stage)

    async def _run_step(self, claim: Claim, record: AudioRecord, stage: Stage) -> str:
        p = self.settings.pipeline
        workdir = Path(tempfile.mkdtemp(prefix=f"transcriber-{record.id}-"))
        ctx = StepContext(
            claim, record, self.storage, self.provider, self.provider_for, self.settings, self.clock, workdir
        )
        step = self.table.step_of(stage)
        outcome: Outcome | None = None
        error: Exception | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._keep_lease, claim, stage)
                try:
                    with anyio.fail_after(p.step_timeout.total_seconds()):
                        outcome = await step(ctx)
                except Exception as exc:  # classified below, outside the task group
                    error = exc
                finally:
                    tg.cancel_scope.cancel()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if isinstance(error, FencedOut):
            raise error
        if isinstance(error, PermanentError):
            outcome = Halt(error.code, str(error))
        elif isinstance(error, PostponeError):
            outcome = Postpone(error.delay, str(error))
        elif error is not None:
            await self._fail(claim, record, stage, error)
            return "failed"
        assert outcome is not None
        return await self._apply(claim, record, stage, outcome)

    async def _apply(self, claim: Claim, record: AudioRecord, stage: Stage, outcome: Outcome) -> str:
        if isinstance(outcome, Advance):
            assert stage.next is not None
            await self.storage.advance(claim, stage.next, redact(outcome.note or f"{stage.step} done"))
            log.info("record %s: %s done → %s", record.id, stage.step, stage.next)
            return "advanced"
        if isinstance(outcome, Postpone):
            delay = outcome.delay or self.settings.pipeline.poll_delay
            until = self.clock.now_ms() + max(int(delay.total_seconds() * 1000), 1)
            await self.storage.postpone(claim, until, redact(outcome.note))
            log.debug("record %s postponed by %s", record.id, delay)
            return "postponed"
        await self._halt(claim, record, stage, outcome.code, outcome.reason)
        return "halted"

    async def _halt(self, claim: Claim, record: AudioRecord, stage: Stage, code: HaltCode, reason: str) -> None:
        reason = redact(reason)
        await self.storage.halt(claim, code.value, reason)
        log.warning("record %s halted in %s: %s: %s", record.id, stage.name, code.value, reason)

    async def _fail(self, claim: Claim, record: AudioRecord, stage: Stage, exc: BaseException) -> None:
        delay = self.settings.pipeline.retry_delay
        if isinstance(exc, RetryableError) and exc.retry_after is not None:
            delay = max(delay, exc.retry_after)
        what = f"{type(exc).__name__}: {exc}" if not isinstance(exc, RetryableError) else str(exc)
        text = redact(f"step {stage.step} failed (attempt {record.attempts}): {what}")[:4000]
        log.warning("record %s: %s", record.id, text)
        await self.storage.fail(claim, self.clock.now_ms() + int(delay.total_seconds() * 1000), text)

    async def _release(self, claim: Claim) -> None:
        try:
            with anyio.fail_after(5):
                await self.storage.release(claim)
        except FencedOut:
            pass  # the write-back the shutdown interrupted had already landed
        except Exception as exc:  # the lease will expire; the attempt then counts
            log.warning("record %s: could not release on shutdown: %s", claim.id, redact(str(exc)))

    async def _keep_lease(self, claim: Claim, stage: Stage) -> None:
        """Extends the lease of a long step while it is still running."""
        period = max(stage.lease.total_seconds() / 3, 1.0)
        while True:
            await anyio.sleep(period)
            until = self.clock.now_ms() + int(stage.lease.total_seconds() * 1000)
            try:
                await self.storage.extend(claim, until)
            except FencedOut:
                return  # the step will find out when it writes
            except Exception as exc:
                log.debug("lease extension for %s failed: %s", claim.id, redact(str(exc)))
