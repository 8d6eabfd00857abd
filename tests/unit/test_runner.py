"""The runner on the in-memory twin and fake time: guards, outcomes, fencing, leases, shutdown (P5–P10, P16)."""

from __future__ import annotations

import logging
from datetime import timedelta

import anyio
import pytest

from sidecar.outcome import (
    Advance,
    HaltCode,
    PermanentError,
    Postpone,
    PostponeError,
    RetryableError,
    StepResult,
    Verdict,
)
from sidecar.pipeline.pool import WorkerPool
from sidecar.redaction import register_secrets
from sidecar.runtime.clock import FakeClock
from sidecar.steps.base import Step, StepContext
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import Claimed, FileRole, NoWork
from sidecar.storage.transitions import Advanced
from tests.support.sidecar import twin_sidecar

pytestmark = pytest.mark.anyio


async def advance(ctx: StepContext) -> StepResult:
    return Advance("test step done")


ALL: dict[str, Step] = {"normalize": advance, "submit": advance, "poll": advance, "finalize": advance}


def steps(**changed: Step) -> dict[str, Step]:
    return {**ALL, **changed}


async def claim(pool: WorkerPool) -> Claimed:
    got = await pool.runner.storage.claim(pool.runner.table.leases())
    assert isinstance(got, Claimed)
    return got


async def move_to(pool: WorkerPool, storage: InMemoryStorage, rid: str, stage: str) -> None:
    """Brings the record to ``stage`` the way finished steps would."""
    while storage.row(rid).state != stage:
        got = await claim(pool)
        nxt = pool.runner.table[got.record.state].next
        assert nxt is not None
        await storage.settle(got.claim, Advanced(nxt))


def kinds(storage: InMemoryStorage, rid: str) -> list[str]:
    return [e.kind for e in storage.journal_of(rid)]


async def test_an_advance_enters_the_next_stage_and_resets_the_count(storage: InMemoryStorage) -> None:
    rid = storage.add_record()
    async with twin_sidecar(storage, ALL) as pool:
        got = await claim(pool)
        assert got.record.id == rid and got.record.state == "uploaded" and got.record.attempts == 1
        assert await pool.runner.run(got) is Verdict.ADVANCED
        runs = pool.runner.metrics.step_runs.labels(stage="uploaded", outcome="advanced")._value.get()
    row = storage.row(rid)
    assert (row.state, row.attempts, row.claim_token) == ("normalized", 0, "")
    assert kinds(storage, rid) == ["accepted", "advanced"]
    assert storage.journal_of(rid)[-1].text == "test step done"
    assert runs == 1


async def test_the_claim_carries_the_record_so_the_runner_reads_nothing_more(storage: InMemoryStorage) -> None:
    storage.add_record()
    async with twin_sidecar(storage, ALL) as pool:
        got = await claim(pool)
        storage.calls.clear()
        await pool.runner.run(got)
    assert storage.calls == ["settle:advanced"]


async def test_a_postpone_keeps_the_stage_and_its_clock(storage: InMemoryStorage, clock: FakeClock) -> None:
    rid = storage.add_record()

    async def later(ctx: StepContext) -> StepResult:
        return Postpone(timedelta(seconds=42), "provider busy")

    async with twin_sidecar(storage, steps(normalize=later)) as pool:
        entered = storage.row(rid).state_entered_at
        clock.advance(5)
        assert await pool.runner.run(await claim(pool)) is Verdict.POSTPONED
    row = storage.row(rid)
    assert row.state == "uploaded" and row.state_entered_at == entered
    assert row.paused_until == clock.now_ms() + 42_000 and row.attempts == 0
    assert storage.journal_of(rid)[-1].text == "provider busy"


async def test_a_permanent_error_halts_with_its_code_and_a_clean_reason(
    storage: InMemoryStorage, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="transcriber")
    register_secrets(["sk-runner-secret-123456"])
    rid = storage.add_record()

    async def broken(ctx: StepContext) -> StepResult:
        raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, "the file is not audio (key sk-runner-secret-123456)")

    async with twin_sidecar(storage, steps(normalize=broken)) as pool:
        assert await pool.runner.run(await claim(pool)) is Verdict.HALTED
    row = storage.row(rid)
    assert row.halt_code == "unsupported_media" and row.halted_at != "" and row.claim_token == ""
    assert "sk-runner-secret" not in row.halt_reason and "[redacted]" in row.halt_reason
    # P16: every halt is also a log line with its reason
    assert [r.getMessage() for r in caplog.records if "halted" in r.getMessage()] == [
        f"record {rid} halted in uploaded: unsupported_media: {row.halt_reason}"
    ]


async def test_a_postpone_error_spends_no_attempt(storage: InMemoryStorage, clock: FakeClock) -> None:
    rid = storage.add_record()

    async def not_ours(ctx: StepContext) -> StepResult:
        raise PostponeError("credentials refused", delay=timedelta(minutes=5))

    async with twin_sidecar(storage, steps(normalize=not_ours)) as pool:
        assert await pool.runner.run(await claim(pool)) is Verdict.POSTPONED
    row = storage.row(rid)
    assert row.attempts == 0 and row.paused_until == clock.now_ms() + 300_000 and row.halted_at == ""


@pytest.mark.parametrize(
    ("error", "wait", "text"),
    [
        (RetryableError("429 from the provider", retry_after=timedelta(seconds=42)), 42, "429 from the provider"),
        (RetryableError("503"), 1, "503"),
        (RuntimeError("decoder exploded"), 1, "RuntimeError: decoder exploded"),
    ],
)
async def test_a_failure_spends_the_attempt_and_waits(
    storage: InMemoryStorage, clock: FakeClock, error: Exception, wait: int, text: str
) -> None:
    rid = storage.add_record()

    async def failing(ctx: StepContext) -> StepResult:
        raise error

    async with twin_sidecar(storage, steps(normalize=failing), retry_delay=1) as pool:
        assert await pool.runner.run(await claim(pool)) is Verdict.FAILED
    row = storage.row(rid)
    assert row.attempts == 1 and row.claim_token == "" and row.available_at == clock.now_ms() + wait * 1000
    assert storage.journal_of(rid)[-1].kind == "failed"
    assert storage.journal_of(rid)[-1].text == f"step normalize failed (attempt 1): {text}"


async def test_the_last_failed_try_allowed_halts_at_once(storage: InMemoryStorage, clock: FakeClock) -> None:
    """Out of attempts is decided when the last try fails (as River does), not by another claim after
    the retry delay: the record halts then, with the failure in its reason and one journal row."""
    rid = storage.add_record()
    ran: list[int] = []

    async def failing(ctx: StepContext) -> StepResult:
        ran.append(ctx.record.attempts)
        raise RuntimeError("no")

    async with twin_sidecar(storage, steps(normalize=failing), max_attempts=2, retry_delay=30) as pool:
        first = await pool.runner.run(await claim(pool))
        clock.advance(30)
        last = await pool.runner.run(await claim(pool))
        assert await pool.runner.storage.claim(pool.runner.table.leases()) == NoWork()
    assert (first, last) == (Verdict.FAILED, Verdict.HALTED)
    assert ran == [1, 2]
    row = storage.row(rid)
    assert row.halt_code == "attempts_exhausted" and row.claim_token == "" and row.available_at == 0
    assert "2 tries of step normalize" in row.halt_reason and "the last: RuntimeError: no" in row.halt_reason
    assert [e.kind for e in storage.journal_of(rid)][-2:] == ["failed", "halted"]


async def test_attempts_above_the_maximum_halt_without_running_the_step(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    """A try that ended without a word (its worker killed mid-step) counted its attempt: the claim after
    the last one allowed halts the record and does not run its step (P7)."""
    rid = storage.add_record()
    ran: list[int] = []

    async def step(ctx: StepContext) -> StepResult:
        ran.append(ctx.record.attempts)
        return Advance()

    async with twin_sidecar(storage, steps(normalize=step), max_attempts=2) as pool:
        for _ in range(2):  # two claims whose workers died: their leases run out, nothing settled
            await claim(pool)
            clock.advance(pool.runner.table["uploaded"].lease.total_seconds() + 1)
        verdict = await pool.runner.run(await claim(pool))
    assert verdict is Verdict.HALTED and ran == []  # P7: the step is not run on the claim that exceeds the maximum
    row = storage.row(rid)
    assert row.halt_code == "attempts_exhausted" and "2 tries of step normalize" in row.halt_reason


@pytest.mark.parametrize(
    ("stage", "hours", "halted"), [("uploaded", 1.5, True), ("submitted", 1.5, False), ("submitted", 3, True)]
)
async def test_stall_watchdog_uses_the_own_or_foreign_limit(
    storage: InMemoryStorage, clock: FakeClock, stage: str, hours: float, halted: bool
) -> None:
    rid = storage.add_record()
    ran: list[str] = []

    async def step(ctx: StepContext) -> StepResult:
        ran.append(ctx.record.state)
        return Postpone(timedelta(seconds=1))

    table = steps(normalize=step, poll=step)
    async with twin_sidecar(storage, table, own_work_limit=3600, foreign_work_limit=7200) as pool:
        await move_to(pool, storage, rid, stage)
        assert await pool.runner.run(await claim(pool)) is Verdict.POSTPONED  # tried: not ready yet
        clock.advance(hours * 3600)
        verdict = await pool.runner.run(await claim(pool))
    row = storage.row(rid)
    if halted:
        assert verdict is Verdict.HALTED and ran == [stage]
        assert row.halt_code == "stalled" and f"stalled in {stage}" in row.halt_reason
    else:
        assert verdict is Verdict.POSTPONED and ran == [stage, stage] and row.halted_at == ""


@pytest.mark.parametrize("stage", ["uploaded", "submitted"])
async def test_a_record_that_only_waited_in_the_queue_is_not_stalled(
    storage: InMemoryStorage, clock: FakeClock, stage: str
) -> None:
    """A backlog, or the service down for a day's upgrade: the first claim in a stage runs the step,
    however long the record waited; nothing had tried and failed to move it."""
    rid = storage.add_record()
    ran: list[str] = []

    async def step(ctx: StepContext) -> StepResult:
        ran.append(ctx.record.state)
        return Postpone(timedelta(seconds=1))

    async with twin_sidecar(storage, steps(normalize=step, poll=step), own_work_limit=3600) as pool:
        await move_to(pool, storage, rid, stage)
        clock.advance(24 * 3600)
        assert await pool.runner.run(await claim(pool)) is Verdict.POSTPONED
    assert ran == [stage] and storage.row(rid).halted_at == ""


@pytest.mark.parametrize("day_in_the_queue", ["before the first try", "after its lease ran out"])
async def test_a_day_of_waiting_around_a_dead_try_is_not_a_stall(
    storage: InMemoryStorage, clock: FakeClock, day_in_the_queue: str
) -> None:
    """A worker died in the middle of its first try, and a day passed with the record in the queue:
    before that try (a backlog) or after its lease ran out (the service down). The stage's time counts
    neither wait, so the next claim runs the step again instead of halting the record."""
    rid = storage.add_record()
    ran: list[tuple[str, int]] = []

    async def step(ctx: StepContext) -> StepResult:
        ran.append((ctx.record.state, ctx.record.attempts))
        return Postpone(timedelta(seconds=1))

    day, before = 24 * 3600, day_in_the_queue == "before the first try"
    async with twin_sidecar(storage, steps(normalize=step), own_work_limit=3600) as pool:
        lease = pool.runner.table["uploaded"].lease.total_seconds()
        clock.advance(day if before else 0)
        await claim(pool)  # its worker dies: the lease runs out unrenewed
        clock.advance(lease + 1 if before else day)
        assert await pool.runner.run(await claim(pool)) is Verdict.POSTPONED
    assert ran == [("uploaded", 2)] and storage.row(rid).halted_at == ""


async def test_a_hundred_postpones_neither_move_the_stage_clock_nor_defeat_the_watchdog(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    rid = storage.add_record()

    async def not_ready(ctx: StepContext) -> StepResult:
        return Postpone(timedelta(seconds=10), "provider busy")

    async with twin_sidecar(storage, steps(poll=not_ready), foreign_work_limit=1800) as pool:
        await move_to(pool, storage, rid, "submitted")
        entered = storage.row(rid).state_entered_at
        for _ in range(100):
            assert await pool.runner.run(await claim(pool)) is Verdict.POSTPONED
            clock.advance(11)
        row = storage.row(rid)
        assert row.state_entered_at == entered and row.state == "submitted" and row.attempts == 0
        clock.advance(1000)  # 100 × 11 s + 1000 s > the 30-minute limit
        assert await pool.runner.run(await claim(pool)) is Verdict.HALTED
    assert storage.row(rid).halt_code == "stalled" and storage.row(rid).state_entered_at == entered


async def test_a_claim_lost_to_lease_expiry_writes_nothing(storage: InMemoryStorage, clock: FakeClock) -> None:
    rid = storage.add_record()
    second: list[Claimed] = []

    async def slow(ctx: StepContext) -> StepResult:
        clock.advance(16 * 60)  # past the 15-minute lease
        got = await storage.claim({"uploaded": timedelta(minutes=15)})  # another worker takes it
        assert isinstance(got, Claimed) and got.record.id == rid
        second.append(got)
        return Advance("first step's result")

    async with twin_sidecar(storage, steps(normalize=slow), leases={"uploaded": timedelta(minutes=15)}) as pool:
        first = await claim(pool)
        assert await pool.runner.run(first) is Verdict.FENCED_OUT
    row = storage.row(rid)
    assert row.state == "uploaded" and row.claim_token == second[0].claim.token != first.claim.token
    assert "advanced" not in kinds(storage, rid)


async def test_an_unhalt_under_a_running_step_drops_its_result(storage: InMemoryStorage) -> None:
    rid = storage.add_record()

    async def step(ctx: StepContext) -> StepResult:
        storage.owner_halt(rid)
        storage.owner_resume(rid)
        return Advance("stale result")

    async with twin_sidecar(storage, steps(normalize=step)) as pool:
        assert await pool.runner.run(await claim(pool)) is Verdict.FENCED_OUT
    assert storage.row(rid).state == "uploaded" and storage.row(rid).halted_at == ""


async def test_a_long_step_keeps_its_lease_alive(storage: InMemoryStorage, clock: FakeClock) -> None:
    rid = storage.add_record()
    others: list[object] = []

    async def long(ctx: StepContext) -> StepResult:
        for _ in range(10):
            await clock.sleep(60)  # ten minutes of work under a three-minute lease
            others.append(await storage.claim({"uploaded": timedelta(minutes=3)}))
        return Advance()

    async with (
        clock.autojump(),
        twin_sidecar(storage, steps(normalize=long), leases={"uploaded": timedelta(minutes=3)}) as pool,
    ):
        assert await pool.runner.run(await claim(pool)) is Verdict.ADVANCED
    assert all(not isinstance(o, Claimed) for o in others)  # never handed out meanwhile
    assert storage.row(rid).state == "normalized"


async def test_a_step_past_its_deadline_fails(storage: InMemoryStorage, clock: FakeClock) -> None:
    rid = storage.add_record()

    async def endless(ctx: StepContext) -> StepResult:
        await clock.sleep(10 * 3600)
        return Advance()

    async with clock.autojump(), twin_sidecar(storage, steps(normalize=endless), step_timeout=3600) as pool:
        started = clock.now_ms()
        assert await pool.runner.run(await claim(pool)) is Verdict.FAILED
        took = clock.now_ms() - started
    assert 3600_000 <= took < 3700_000
    assert "TimeoutError" in storage.journal_of(rid)[-1].text


async def test_a_cancelled_run_hands_the_claim_and_the_attempt_back(storage: InMemoryStorage) -> None:
    rid = storage.add_record()
    entered = anyio.Event()

    async def endless(ctx: StepContext) -> StepResult:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError

    async with twin_sidecar(storage, steps(normalize=endless)) as pool:
        got = await claim(pool)
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.runner.run, got)
            await entered.wait()
            assert storage.row(rid).attempts == 1
            tg.cancel_scope.cancel()
        released = pool.runner.metrics.step_runs.labels(stage="uploaded", outcome="released")._value.get()
    row = storage.row(rid)
    assert (row.attempts, row.claim_token, row.state, row.halted_at) == (0, "", "uploaded", "")
    assert kinds(storage, rid)[-1] == "released" and released == 1


async def test_a_step_sees_only_its_own_record(storage: InMemoryStorage, clock: FakeClock) -> None:
    mine = storage.add_record()
    clock.advance(0.001)
    other = storage.add_record()
    seen: list[str] = []

    async def nosy(ctx: StepContext) -> StepResult:
        [original] = await ctx.session.files(FileRole.ORIGINAL)
        seen.append(original.record)
        assert not hasattr(ctx.session, "claim_next") and not hasattr(ctx.session, "settle")
        others = await storage.files_of(other, FileRole.ORIGINAL)
        with pytest.raises(ValueError, match="asked for a row of record"):
            await ctx.session.download(others[0], ctx.workdir / "x")
        return Advance()

    async with twin_sidecar(storage, steps(normalize=nosy)) as pool:
        assert await pool.runner.run(await claim(pool)) is Verdict.ADVANCED
    assert seen == [mine]


async def test_an_outcome_that_cannot_be_written_is_labelled_so(
    storage: InMemoryStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """O11: not 'fenced out': storage stayed away, the lease will expire and the attempt counts."""
    from sidecar.storage.errors import StorageUnavailable

    rid = storage.add_record()

    async def away(*args: object, **kwargs: object) -> None:
        raise StorageUnavailable("PocketBase unreachable: ConnectError")

    async with twin_sidecar(storage, ALL) as pool:
        got = await claim(pool)
        monkeypatch.setattr(storage, "settle", away)
        assert await pool.runner.run(got) is Verdict.UNWRITTEN
        metrics = pool.runner.metrics.step_runs
        assert metrics.labels(stage="uploaded", outcome="unwritten")._value.get() == 1
        assert metrics.labels(stage="uploaded", outcome="fenced_out")._value.get() == 0
    assert storage.row(rid).claim_token == got.claim.token  # nothing written: the lease runs out


async def test_progress_that_moves_keeps_the_watchdog_quiet_and_progress_that_stops_does_not(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    """A six-hour recording may take longer than the stage's limit; only a stop in progress is a stall."""
    rid = storage.add_record()
    done = 0.0

    async def recognizing(ctx: StepContext) -> StepResult:
        await ctx.session.progress(done)
        return Postpone(timedelta(seconds=10), "recognizing")

    async with twin_sidecar(storage, steps(poll=recognizing), foreign_work_limit=1800) as pool:
        await move_to(pool, storage, rid, "submitted")
        for _ in range(12):  # two hours in all, four times the limit, moving every ten minutes
            done += 0.05
            assert await pool.runner.run(await claim(pool)) is Verdict.POSTPONED
            clock.advance(600)
        row = storage.row(rid)
        assert row.halted_at == "" and abs(row.progress - 0.6) < 1e-9
        for _ in range(3):  # the same value again is no progress
            assert await pool.runner.run(await claim(pool)) is Verdict.POSTPONED
            clock.advance(600)
        assert await pool.runner.run(await claim(pool)) is Verdict.HALTED
    row = storage.row(rid)
    assert row.halt_code == "stalled" and "no progress for" in row.halt_reason
