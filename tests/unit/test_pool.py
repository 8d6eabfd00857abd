"""The worker pool and its waker on the in-memory twin, in fake time that jumps when every task waits.

Idle polls of minutes and retry delays of seconds pass in microseconds here;
what is asserted is the order of events and the fake time they took.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import anyio
import anyio.lowlevel
import pytest

from sidecar.outcome import Advance, Postpone, StepResult
from sidecar.pipeline.pool import HAND_BACK, Waker, WorkerPool
from sidecar.runtime.clock import FakeClock
from sidecar.steps.base import Step, StepContext
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import NoWork
from tests.support.sidecar import pool_running, twin_sidecar

pytestmark = pytest.mark.anyio


def logged(runs: list[tuple[str, str]], name: str) -> Step:
    async def step(ctx: StepContext) -> StepResult:
        runs.append((name, ctx.record.id))
        return Advance()

    return step


def recording(runs: list[tuple[str, str]]) -> dict[str, Step]:
    return {name: logged(runs, name) for name in ("normalize", "submit", "poll", "finalize")}


@asynccontextmanager
async def running(storage: InMemoryStorage, steps: dict[str, Step], **settings: object) -> AsyncIterator[WorkerPool]:
    clock = storage.clock
    assert isinstance(clock, FakeClock)
    async with clock.autojump(), twin_sidecar(storage, steps, **settings) as pool, pool_running(pool):
        yield pool


async def until(clock: FakeClock, check: object, *, within: float = 3600) -> None:
    """Lets fake time run (in steps of a second) until ``check()`` holds."""
    deadline = clock.now_ms() + within * 1000
    while not check():  # type: ignore[operator]
        assert clock.now_ms() < deadline, "not reached in fake time"
        await clock.sleep(1)


async def test_records_of_all_owners_are_finished_oldest_first(storage: InMemoryStorage, clock: FakeClock) -> None:
    created = []
    for owner in ("a", "b", "a", "b", "b"):
        created.append(storage.add_record(owner))
        clock.advance(0.001)
    runs: list[tuple[str, str]] = []
    async with running(storage, recording(runs), workers=1):
        await until(clock, lambda: all(storage.row(r).state == "done" for r in created))
    # P4, P13: creation order, owners alike; the oldest recording is finished before the next starts
    assert [rid for _, rid in runs] == [rid for rid in created for _ in range(4)]


async def test_a_record_passing_every_stage_never_nears_the_attempt_limit(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    rid = storage.add_record()
    seen: list[int] = []

    async def step(ctx: StepContext) -> StepResult:
        seen.append(ctx.record.attempts)
        return Advance()

    table: dict[str, Step] = {name: step for name in ("normalize", "submit", "poll", "finalize")}
    async with running(storage, table, workers=1, max_attempts=1):
        await until(clock, lambda: storage.row(rid).state == "done")
    assert seen == [1, 1, 1, 1]  # each stage starts its count afresh
    row = storage.row(rid)
    assert (row.attempts, row.halted_at) == (0, "")
    assert [e.stage for e in storage.journal_of(rid) if e.kind == "advanced"] == [
        "normalized",
        "submitted",
        "transcribed",
        "done",
    ]


async def test_a_failing_step_is_retried_after_its_delay_then_halts(storage: InMemoryStorage, clock: FakeClock) -> None:
    rid = storage.add_record()
    tries: list[int] = []

    async def broken(ctx: StepContext) -> StepResult:
        tries.append(clock.now_ms())
        raise RuntimeError("decoder exploded")

    table: dict[str, Step] = {**recording([]), "normalize": broken}
    async with running(storage, table, max_attempts=3, retry_delay=30):
        await until(clock, lambda: storage.row(rid).halted_at != "")
    assert len(tries) == 3
    assert [b - a for a, b in itertools.pairwise(tries)] == [30_000, 30_000]  # the retry delay, no poll
    assert storage.row(rid).halt_code == "attempts_exhausted"
    # The third try was the last allowed: it halted at once, its failure in the halt's reason.
    assert [e.kind for e in storage.journal_of(rid)].count("failed") == 2
    assert "the last: RuntimeError: decoder exploded" in storage.row(rid).halt_reason


async def test_a_postponed_record_is_taken_again_when_its_pause_ends(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    rid = storage.add_record()
    seen: list[int] = []

    async def twice(ctx: StepContext) -> StepResult:
        seen.append(clock.now_ms())
        return Postpone(timedelta(seconds=7)) if len(seen) == 1 else Advance()

    async with running(storage, {**recording([]), "normalize": twice}, idle_poll=600):
        await until(clock, lambda: storage.row(rid).state != "uploaded")
    assert seen[1] - seen[0] == 7000  # the claim's next-available hint, not the 10-minute idle poll


async def test_zero_workers_move_nothing(storage: InMemoryStorage, clock: FakeClock) -> None:
    rid = storage.add_record()
    async with running(storage, recording([]), workers=0):
        await clock.sleep(3600)
    row = storage.row(rid)
    assert (row.state, row.attempts, row.claim_token) == ("uploaded", 0, "")


async def test_idle_workers_stay_quiet(
    storage: InMemoryStorage, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running(storage, recording([]), workers=2, idle_poll=5) as pool:
        await clock.sleep(60)
        empty = pool.runner.metrics.claims.labels(result="empty")._value.get()
    assert empty >= 2 * 60 / 5  # they did look, every idle_poll
    assert storage.events == []
    noisy = [
        r
        for r in caplog.records
        if r.levelno > logging.DEBUG and r.name.startswith("transcriber") and "pool" not in r.name
    ]
    assert noisy == []  # P14


async def test_a_new_record_wakes_an_idle_worker_at_once(storage: InMemoryStorage, clock: FakeClock) -> None:
    async with running(storage, recording([]), workers=1, idle_poll=3600):
        await clock.sleep(10)  # the worker now waits up to an hour
        before = clock.now_ms()
        rid = storage.add_record()
        await until(clock, lambda: storage.row(rid).state == "done")
        took = clock.now_ms() - before
    assert took < 5_000  # woken by the change, not by the hour-long poll


async def test_a_wake_during_a_claim_in_flight_is_not_lost(
    storage: InMemoryStorage, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    raced: list[str] = []
    real_claim = storage.claim

    async def claim_overtaken_by_an_upload(leases: object) -> object:
        got = await real_claim(leases)  # type: ignore[arg-type]
        if isinstance(got, NoWork) and not raced:
            # The claim found nothing; before its answer is handled, a record arrives
            # and its change reaches the pool.
            raced.append(storage.add_record())
            await anyio.lowlevel.checkpoint()
        return got

    monkeypatch.setattr(storage, "claim", claim_overtaken_by_an_upload)
    async with running(storage, recording([]), workers=1, idle_poll=3600):
        await until(clock, lambda: raced)
        start = clock.now_ms()
        await until(clock, lambda: storage.row(raced[0]).state == "done")
        took = clock.now_ms() - start
    assert took < 5_000  # looked again at once: the ticket was taken before the claim


async def test_a_stop_gives_running_steps_their_grace_then_hands_them_back(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    quick, slow = storage.add_record(), storage.add_record()

    async def takes(ctx: StepContext) -> StepResult:
        await clock.sleep(5 if ctx.record.id == quick else 3600)
        return Advance()

    stop = anyio.Event()
    async with (
        clock.autojump(),
        twin_sidecar(storage, {**recording([]), "normalize": takes}, workers=2, shutdown_grace=30) as pool,
    ):
        async with anyio.create_task_group() as tg:
            await tg.start(pool.run, stop)
            await until(clock, lambda: pool.busy == 2)
            stopped_at = clock.now_ms()
            stop.set()
        took = clock.now_ms() - stopped_at
    assert storage.row(quick).state == "normalized"  # finished within the grace
    row = storage.row(slow)
    assert (row.state, row.attempts, row.claim_token) == ("uploaded", 0, "")  # P8: handed back, not counted
    assert [e.kind for e in storage.journal_of(slow)][-1] == "released"
    # The steps had the grace less what a hand-back takes: every record is back within the grace.
    assert (30 - HAND_BACK) * 1000 <= took < 30_000


async def test_the_waker_ticket_taken_before_a_wake_is_already_set(clock: FakeClock) -> None:
    waker = Waker(clock)
    ticket = waker.ticket()
    waker.wake()
    assert ticket.is_set() and not waker.ticket().is_set()
    async with clock.autojump():
        started = clock.now_ms()
        await waker.wait(waker.ticket(), 90)
        assert clock.now_ms() - started == 90_000  # no wake: waits its whole time, on the clock


async def test_a_stop_during_a_claim_in_flight_hands_it_back_unrun(
    storage: InMemoryStorage, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """O3: the stop lands while the claim request is out; what comes back is released, not run."""
    rid = storage.add_record()
    ran: list[str] = []
    in_flight, answer = anyio.Event(), anyio.Event()
    real_claim = storage.claim

    async def slow_claim(leases: object) -> object:
        in_flight.set()
        await answer.wait()
        return await real_claim(leases)  # type: ignore[arg-type]

    async def step(ctx: StepContext) -> StepResult:
        ran.append(ctx.record.id)
        return Advance()

    monkeypatch.setattr(storage, "claim", slow_claim)
    stop = anyio.Event()
    table: dict[str, Step] = {**recording([]), "normalize": step}
    async with twin_sidecar(storage, table, workers=1) as pool, anyio.create_task_group() as tg:
        await tg.start(pool.run, stop)
        await in_flight.wait()
        stop.set()
        await anyio.lowlevel.checkpoint()
        answer.set()
    row = storage.row(rid)
    assert ran == []
    assert (row.state, row.attempts, row.claim_token) == ("uploaded", 0, "")
    assert [e.kind for e in storage.journal_of(rid)][-1] == "released"


async def test_an_outage_is_logged_once_and_waited_out_with_backoff(
    storage: InMemoryStorage, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """O2: the workers keep trying, less and less often, and say so once per outage."""
    from sidecar.storage.errors import StorageUnavailable

    caplog.set_level(logging.DEBUG, logger="transcriber")
    rid = storage.add_record()
    tries: list[int] = []
    real_claim = storage.claim

    async def down_for_a_while(leases: object) -> object:
        tries.append(clock.now_ms())
        if len(tries) <= 8:
            raise StorageUnavailable("PocketBase unreachable: ConnectError")
        return await real_claim(leases)  # type: ignore[arg-type]

    monkeypatch.setattr(storage, "claim", down_for_a_while)
    async with running(storage, recording([]), workers=1, idle_poll=1):
        await until(clock, lambda: storage.row(rid).state == "done", within=600)
    gaps = [b - a for a, b in itertools.pairwise(tries[:9])]
    assert gaps == sorted(gaps) and gaps[0] == 1000 and max(gaps) == 30_000  # doubling up to 30 s
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("unavailable" in m for m in warnings) == 1
    assert sum("is back after" in m for m in warnings) == 1


async def test_an_answer_to_a_claim_sent_before_the_outage_does_not_end_it(
    storage: InMemoryStorage, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """O2: while PocketBase stops, a claim already in flight may still be answered after another worker saw the
    connection drop; that late answer is no recovery, so the outage is still logged once and its end once."""
    from sidecar.storage.errors import StorageUnavailable

    caplog.set_level(logging.DEBUG, logger="transcriber")
    rid = storage.add_record()
    calls = 0
    dropped = anyio.Event()
    real_claim = storage.claim

    async def stopping_server(leases: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 1:  # sent while the server still answered; its answer comes after the drop was seen
            await dropped.wait()
            return NoWork()
        if calls <= 9:
            dropped.set()
            raise StorageUnavailable("PocketBase unreachable: ReadError")
        return await real_claim(leases)  # type: ignore[arg-type]

    monkeypatch.setattr(storage, "claim", stopping_server)
    async with running(storage, recording([]), workers=3, idle_poll=1):
        await until(clock, lambda: storage.row(rid).state == "done", within=600)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("unavailable" in m for m in warnings) == 1, warnings
    assert sum("is back after" in m for m in warnings) == 1, warnings


# --- rows nobody can read -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("progress", "abc"),
        ("state_entered_at", None),
        ("duration_ms", 1e300),
        ("attempts", 2.5),
        ("title", b"\xc3\xa9"),
    ],
)
async def test_a_row_the_claim_cannot_read_is_set_aside_and_the_pool_goes_on(
    storage: InMemoryStorage, clock: FakeClock, caplog: pytest.LogCaptureFixture, field: str, value: object
) -> None:
    """The twin's claim, as PocketBase's: the row is halted unclaimable on the way and named; the pool
    counts and logs it once, and finishes the rows behind it."""
    caplog.set_level(logging.DEBUG, logger="transcriber")
    broken, behind = storage.add_record(), storage.add_record()
    setattr(storage.row(broken), field, value)
    async with running(storage, recording([]), workers=2, idle_poll=1) as pool:
        await until(clock, lambda: storage.row(behind).state == "done")
        later = storage.add_record()
        await until(clock, lambda: storage.row(later).state == "done")
        assert pool.runner.metrics.set_aside._value.get() == 1
    row = storage.row(broken)
    assert (row.halt_code, row.state, row.claim_token) == ("unclaimable", "uploaded", "")
    [halted] = [e for e in storage.journal_of(broken) if e.kind == "halted"]
    assert halted.text.startswith("unclaimable: ") and field in halted.text
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert sum(broken in m for m in errors) == 1, errors


async def test_a_claimed_row_this_sidecar_cannot_read_is_set_aside_under_its_claim(
    storage: InMemoryStorage, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Should a claimed row reach the sidecar unreadable all the same (``UnreadableClaim``: a release
    apart), the worker halts it with the claim's token and claims again; the pool does not die."""
    from sidecar.storage.errors import UnreadableClaim
    from sidecar.storage.model import Claimed

    caplog.set_level(logging.DEBUG, logger="transcriber")
    broken, behind = storage.add_record(title="read me not"), storage.add_record()
    real_claim = storage.claim

    async def stricter(leases: object, insights: object = None) -> object:
        got = await real_claim(leases)  # type: ignore[arg-type]
        if isinstance(got, Claimed) and got.record.title == "read me not":
            raise UnreadableClaim(got.claim, "title: a title this release cannot read")
        return got

    monkeypatch.setattr(storage, "claim", stricter)
    async with running(storage, recording([]), workers=1, idle_poll=1) as pool:
        await until(clock, lambda: storage.row(behind).state == "done")
        assert pool.runner.metrics.set_aside._value.get() == 1
    row = storage.row(broken)
    assert (row.halt_code, row.claim_token, row.available_at) == ("unclaimable", "", 0)
    [halted] = [e for e in storage.journal_of(broken) if e.kind == "halted"]
    assert "a title this release cannot read" in halted.text
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert sum(broken in m for m in errors) == 1, errors
