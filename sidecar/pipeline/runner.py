"""One claimed record, start to end: guards → step → fenced outcome.

The guards run before the step (P7, P9): a record claimed with more attempts
than allowed, or in its stage for longer than its limit, is halted by its
claimer and its step is not run. Whatever the step ends in is classified
into one transition and settled under the claim's token; a write that finds
the claim gone (``FencedOut``) is dropped quietly: someone else owns the
record now (P5). Each run reports one ``Verdict``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import anyio

from sidecar.outcome import (
    Advance,
    CredentialsRefused,
    HaltCode,
    PermanentError,
    PostponeError,
    RetryableError,
    StepResult,
    Verdict,
)
from sidecar.pipeline.metrics import Metrics
from sidecar.pipeline.stages import Stage, StageTable
from sidecar.redaction import redact
from sidecar.runtime.clock import Clock, run_with_deadline
from sidecar.runtime.cpus import CpuGate
from sidecar.runtime.logs import log_context
from sidecar.settings import Settings
from sidecar.steps.base import StepContext, StepKit
from sidecar.storage.copies import LocalCopies
from sidecar.storage.errors import FencedOut, StorageUnavailable
from sidecar.storage.model import AudioRecord, Claimed
from sidecar.storage.protocol import Storage
from sidecar.storage.session import ClaimSession
from sidecar.storage.transitions import Advanced, Extended, Failed, Halted, Postponed, Released, Transition

log = logging.getLogger("transcriber.runner")

# How long a shutdown waits for the release of a claim to land (seconds on the runner's clock).
RELEASE_TIMEOUT = 5.0


def _human(d: timedelta) -> str:
    s = int(d.total_seconds())
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s // 60} min"
    return f"{s} s"


def _ms(d: timedelta) -> int:
    return int(d.total_seconds() * 1000)


@dataclass
class Runner:
    """Runs any claimed record's step as the stage table declares it; it names no step and no stage."""

    storage: Storage
    table: StageTable
    settings: Settings
    clock: Clock
    kit: StepKit  # what every step gets from the assembly (providers among it): passed on, never read
    metrics: Metrics
    # The CPUs this process shares between its steps (recognition before an offline insights engine).
    gate: CpuGate = field(default_factory=CpuGate)
    # Files this process stored or fetched, read by its later steps instead of fetched again.
    copies: LocalCopies | None = None

    def follow_up_leases(self) -> dict[str, timedelta]:
        """The follow-up queues this process may take work of now, each with its lease."""
        return self.table.follow_up_leases(self.gate.free_for)

    async def run(self, claimed: Claimed) -> Verdict:
        """Runs the claimed record's step and settles what it ended in."""
        record = claimed.record
        stage = self.table.stage_for(claimed)
        started = self.clock.now_ms()
        verdict = Verdict.FENCED_OUT
        with log_context(
            record=record.recording or record.id,
            stage=stage.name,
            claim=claimed.claim.token[:8],
            provider=stage.doer or self.kit.providers.name,
        ):
            try:
                verdict = await self._guarded(claimed, stage)
            except FencedOut:
                log.debug("claim on %s is gone; result dropped", record.id)
            except StorageUnavailable as exc:
                # The outcome could not be written (storage stayed away past the ride-out):
                # the lease will run out and the record be claimed again; the attempt counts.
                verdict = Verdict.UNWRITTEN
                log.warning("record %s: its outcome could not be written: %s", record.id, redact(str(exc)))
            except anyio.get_cancelled_exc_class():
                # P8: our own shutdown is not the record's failure, wherever it lands (the
                # guards, the step, the write-back): the claim is handed back.
                verdict = Verdict.RELEASED
                with anyio.CancelScope(shield=True):
                    await self._release(claimed)
                raise
            finally:
                self.metrics.step_finished(stage.name, verdict)
                self._log_run(record, stage, verdict, (self.clock.now_ms() - started) / 1000)
        return verdict

    def _log_run(self, record: AudioRecord, stage: Stage, verdict: Verdict, seconds: float) -> None:
        """One line per run (its outcome and duration), at info unless nothing happened (a poll that found
        nothing yet, a claim that was gone)."""
        quiet = verdict in (Verdict.POSTPONED, Verdict.FENCED_OUT)
        log.log(
            logging.DEBUG if quiet else logging.INFO,
            "record %s: %s %s in %.1f s",
            record.id,
            stage.step or stage.name,
            verdict.value,
            seconds,
            extra={"outcome": verdict.value, "duration_s": round(seconds, 3)},
        )

    async def _guarded(self, claimed: Claimed, stage: Stage) -> Verdict:
        record, p = claimed.record, self.settings.pipeline
        # A try that ended without a word (its process killed mid-step) still counted: the claim after the
        # last one allowed halts here, its step not run (P7). A try that fails halts at once (``_classify``).
        if record.attempts > p.max_attempts:
            tries = record.attempts - 1
            reason = f"attempts exhausted: {tries} tries of step {stage.step} did not succeed (max {p.max_attempts})"
            return await self._settle(claimed, Halted(HaltCode.ATTEMPTS_EXHAUSTED, reason))
        # Stalled: no progress for longer than the limit, counted from entering the
        # stage or from the last time a step reported progress (a six-hour
        # recording recognized here may take longer than the limit, moving all along).
        # Waiting is not stalling. The time before the stage's first try (a backlog, the
        # service down for an upgrade) does not count: that claim set ``progress_at``
        # (pb_hooks/lib/claim.js), unless the stage was postponed, whose clock runs on (P10).
        # Nor does the time after a dead worker's lease ran out: it counts up to that moment.
        now = self.clock.now_ms()
        worked_until = min(now, record.lease_ended_at) if record.lease_ended_at else now
        in_stage = timedelta(milliseconds=worked_until - max(record.state_entered_at, record.progress_at))
        limit = self.table.time_limit(stage)
        if in_stage > limit:
            reason = f"stalled in {stage.name}: no progress for {_human(in_stage)} (limit {_human(limit)})"
            return await self._settle(claimed, Halted(HaltCode.STALLED, reason))
        return await self._settle(claimed, await self._run_step(claimed, stage))

    async def _run_step(self, claimed: Claimed, stage: Stage) -> Transition:
        """The step's outcome as the transition to settle (a failure classified where it surfaced)."""
        record = claimed.record
        workdir = Path(tempfile.mkdtemp(prefix=f"transcriber-{record.id}-"))
        session = ClaimSession(self.storage, claimed.claim, record, claimed.rows, self.copies)
        ctx = StepContext(session, self.kit, workdir)
        step = self.table.step_of(stage)
        outcome: StepResult | None = None
        error: Exception | None = None
        try:
            with self.gate.hold(stage.cpus):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._keep_lease, claimed, stage)
                    try:
                        timeout = self.settings.pipeline.step_timeout.total_seconds()
                        outcome = await run_with_deadline(self.clock, timeout, lambda: step(ctx))
                    except Exception as exc:  # classified below, outside the task group
                        error = exc
                    finally:
                        tg.cancel_scope.cancel()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if isinstance(error, FencedOut):
            raise error
        if error is not None:
            return self._classify(record, stage, error)
        assert outcome is not None
        if isinstance(outcome, Advance):
            assert stage.next is not None
            to = stage.skip_to if outcome.nothing_next and stage.skip_to else stage.next
            # A record that finished gets what follows queued, when the table has a follow-up.
            follow = self.table.follows(stage, to)
            return Advanced(to, redact(outcome.note or f"{stage.step} done"), follow_ups=follow)
        delay = outcome.delay or self.settings.pipeline.poll_delay
        return Postponed(self.clock.now_ms() + max(_ms(delay), 1), redact(outcome.note))

    def _classify(self, record: AudioRecord, stage: Stage, error: Exception) -> Transition:
        if isinstance(error, PermanentError):
            return Halted(error.code, str(error))
        if isinstance(error, PostponeError):
            if isinstance(error, CredentialsRefused):
                self.metrics.credentials_refused.labels(stage=stage.name).inc()
                log.warning("record %s waits: %s", record.id, redact(str(error)))
            delay = error.delay or self.settings.pipeline.poll_delay
            return Postponed(self.clock.now_ms() + max(_ms(delay), 1), redact(str(error)))
        what = str(error) if isinstance(error, RetryableError) else f"{type(error).__name__}: {error}"
        most = self.settings.pipeline.max_attempts
        if record.attempts >= most:
            # The last try allowed failed: out of attempts now, not after another claim and a retry delay.
            reason = f"attempts exhausted: {record.attempts} tries of step {stage.step} did not succeed (max {most})"
            return Halted(HaltCode.ATTEMPTS_EXHAUSTED, redact(f"{reason}; the last: {what}")[:2000])
        delay = self.settings.pipeline.retry_delay
        if isinstance(error, RetryableError) and error.retry_after is not None:
            delay = max(delay, error.retry_after)
        text = redact(f"step {stage.step} failed (attempt {record.attempts}): {what}")[:4000]
        return Failed(self.clock.now_ms() + _ms(delay), text)

    async def _settle(self, claimed: Claimed, change: Transition) -> Verdict:
        record = claimed.record
        if isinstance(change, Halted):
            change = Halted(change.code, redact(change.reason))
        await self.storage.settle(claimed.claim, change)
        finished = isinstance(change, Advanced) and self.table.is_terminal(change.stage)
        if self.copies is not None and (finished or isinstance(change, Halted)):
            self.copies.forget(record.id)  # nothing here reads them again
        if isinstance(change, Advanced):
            log.debug("record %s: %s → %s", record.id, record.state, change.stage)
            return Verdict.ADVANCED
        if isinstance(change, Postponed):
            log.debug("record %s postponed until %d", record.id, change.until_ms)
            return Verdict.POSTPONED
        if isinstance(change, Halted):
            # P16: every halt is also a log line with its reason.
            log.warning("record %s halted in %s: %s: %s", record.id, record.state, change.code.value, change.reason)
            return Verdict.HALTED
        assert isinstance(change, Failed)
        log.warning("record %s: %s", record.id, change.note)
        return Verdict.FAILED

    async def release(self, claimed: Claimed) -> None:
        """Hands an unrun claim back, its attempt not counted (a stop that landed while it was claimed)."""
        with anyio.CancelScope(shield=True):
            await self._release(claimed)
        self.metrics.step_finished(self.table.stage_for(claimed).name, Verdict.RELEASED)

    async def _release(self, claimed: Claimed) -> None:
        try:
            await run_with_deadline(self.clock, RELEASE_TIMEOUT, lambda: self.storage.settle(claimed.claim, Released()))
        except FencedOut:
            pass  # the write-back the shutdown interrupted had already landed
        except Exception as exc:  # the lease will expire; the attempt then counts
            log.warning("record %s: could not release on shutdown: %s", claimed.claim.id, redact(str(exc)))

    async def _keep_lease(self, claimed: Claimed, stage: Stage) -> None:
        """Extends the lease of a long step while it is still running."""
        period = max(stage.lease.total_seconds() / 3, 1.0)
        while True:
            await self.clock.sleep(period)
            try:
                await self.storage.settle(claimed.claim, Extended(self.clock.now_ms() + _ms(stage.lease)))
            except FencedOut:
                return  # the step will find out when it writes
            except Exception as exc:
                log.debug("lease extension for %s failed: %s", claimed.claim.id, redact(str(exc)))
