"""The seed scenarios (P5–P14) on a real PocketBase, with the real runner and pool
and test steps defined here."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

import anyio
import httpx
import pytest

from sidecar.clock import FakeClock
from sidecar.outcome import Advance, Outcome, Postpone
from sidecar.pocketbase.client import Claim
from sidecar.settings import StageLeases
from sidecar.steps.base import StepContext
from tests.fakes import pool_running, running_sidecar
from tests.harness import Caller, PocketBaseServer
from tests.media import wav_bytes

pytestmark = pytest.mark.anyio


def upload(sender: Caller, title: str = "") -> str:
    resp = sender.http.post(
        "/api/transcriber/records", files={"file": ("a.wav", wav_bytes(0.1))}, data={"title": title}
    )
    assert resp.status_code == 201
    return str(resp.json()["id"])


def record(su: Caller, rid: str) -> dict[str, Any]:
    return dict(su.http.get(f"/api/collections/audio_records/records/{rid}").json())


def events(su: Caller, rid: str | None = None) -> list[dict[str, Any]]:
    params = {"sort": "created,@rowid", "perPage": 500} | ({"filter": f'record="{rid}"'} if rid else {})
    return list(su.http.get("/api/collections/record_events/records", params=params).json()["items"])


async def in_thread(fn: Any, *args: Any) -> Any:
    return await anyio.to_thread.run_sync(fn, *args)


def panel_edit(su: Caller, rid: str, **changes: Any) -> dict[str, Any]:
    """The panel's whole-form save, opened now."""
    form = record(su, rid)
    form.update(changes)
    for k in ("id", "collectionId", "collectionName", "created", "updated"):
        form.pop(k, None)
    resp = su.http.patch(f"/api/collections/audio_records/records/{rid}", json=form)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def claim_one(pool: Any) -> Claim:
    got = await pool.runner.storage.claim(pool.runner.table.leases())
    assert isinstance(got, Claim)
    return got


async def advance_all(ctx: StepContext) -> Outcome:
    return Advance("test step done")


ALL = {"normalize": advance_all, "submit": advance_all, "poll": advance_all, "finalize": advance_all}


async def wait_for(predicate: Any, timeout: float = 20.0) -> None:
    with anyio.fail_after(timeout):
        while not await in_thread(predicate):
            await anyio.sleep(0.05)


async def test_owner_panel_edit_survives_the_steps_save(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = upload(sender, "before")

    async def step(ctx: StepContext) -> Outcome:
        await in_thread(lambda: panel_edit(superuser, rid, title="edited in the panel", brief="notes"))
        return Advance()

    async with running_sidecar(pb, dict(ALL, normalize=step)) as pool:
        assert await pool.runner.run(await claim_one(pool)) == "advanced"
    rec = record(superuser, rid)
    assert rec["state"] == "normalized"
    assert rec["title"] == "edited in the panel" and rec["brief"] == "notes"
    assert rec["owner"] == sender.id


async def test_claim_lost_to_lease_expiry_drops_the_first_steps_result(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = upload(sender)
    clock = FakeClock()
    second: list[Claim] = []

    async def slow_step(ctx: StepContext) -> Outcome:
        clock.advance(16 * 60)  # past the 15-minute lease
        got = await ctx.storage.claim({"uploaded": timedelta(minutes=15)})
        assert isinstance(got, Claim) and got.id == rid
        second.append(got)
        return Advance("first step's result")

    leases = StageLeases(uploaded=timedelta(minutes=15))
    async with running_sidecar(pb, dict(ALL, normalize=slow_step), clock=clock, leases=leases) as pool:
        first = await claim_one(pool)
        assert await pool.runner.run(first) == "fenced_out"
    rec = record(superuser, rid)
    assert rec["state"] == "uploaded"
    assert rec["claim_token"] == second[0].token != first.token
    assert "stage_entered" not in [e["kind"] for e in events(superuser, rid)]


async def test_unhalt_under_a_running_step_drops_the_first_steps_result(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = upload(sender)
    second: list[Claim] = []

    async def step(ctx: StepContext) -> Outcome:
        await in_thread(lambda: panel_edit(superuser, rid, halted_at="2026-01-01 00:00:00.000Z"))  # owner halts
        await in_thread(lambda: panel_edit(superuser, rid, halted_at=""))  # ... and resumes it
        got = await ctx.storage.claim({"uploaded": timedelta(minutes=5)})  # another worker takes it
        assert isinstance(got, Claim)
        second.append(got)
        return Advance("stale result")

    async with running_sidecar(pb, dict(ALL, normalize=step)) as pool:
        first = await claim_one(pool)
        assert await pool.runner.run(first) == "fenced_out"
    rec = record(superuser, rid)
    assert rec["state"] == "uploaded" and rec["claim_token"] == second[0].token
    assert rec["halted_at"] == ""


async def test_a_step_failing_every_time_halts_after_max_attempts(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="transcriber")
    rid = upload(sender)
    calls: list[int] = []

    async def broken(ctx: StepContext) -> Outcome:
        calls.append(ctx.record.attempts)
        raise RuntimeError("decoder exploded")

    async with running_sidecar(pb, dict(ALL, normalize=broken), workers=1, max_attempts=3, retry_delay=0) as pool:
        async with pool_running(pool):
            await wait_for(lambda: record(superuser, rid)["halted_at"] != "")
    assert calls == [1, 2, 3]
    rec = record(superuser, rid)
    assert rec["halt_code"] == "attempts_exhausted" and "max 3" in rec["halt_reason"]
    # P16: every halt is also a log line with its reason
    halts = [r.getMessage() for r in caplog.records if "halted" in r.getMessage() and rid in r.getMessage()]
    assert halts == [f"record {rid} halted in uploaded: attempts_exhausted: {rec['halt_reason']}"]
    kinds = [e["kind"] for e in events(superuser, rid)]
    assert kinds.count("step_failed") == 3 and kinds[-1] == "halted"
    assert "decoder exploded" in events(superuser, rid)[1]["outcome_text"]
    poll = sender.http.get(f"/api/transcriber/records/{rid}").json()
    assert poll["halted"] is True and poll["halt_code"] == "attempts_exhausted" and poll["status"] == "uploaded"
    claim = pb.service().http.post(
        "/api/pipeline/claim", json={"now": int(time.time() * 1000) + 10**9, "leases": {"uploaded": 1000}}
    )
    assert claim.status_code == 204


async def test_a_graceful_stop_during_a_step_spends_no_attempt(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = upload(sender)
    entered = anyio.Event()

    async def endless(ctx: StepContext) -> Outcome:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError

    async with running_sidecar(pb, dict(ALL, normalize=endless), workers=1, shutdown_grace=0.2) as pool:
        async with pool_running(pool):
            with anyio.fail_after(10):
                await entered.wait()
            assert record(superuser, rid)["attempts"] == 1
    rec = record(superuser, rid)
    assert rec["attempts"] == 0 and rec["halted_at"] == "" and rec["claim_token"] == ""
    assert rec["state"] == "uploaded"
    assert [e["kind"] for e in events(superuser, rid)][-1] == "released"


async def test_a_graceful_stop_before_the_step_starts_also_hands_the_claim_back(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = upload(sender)
    reading = anyio.Event()
    async with running_sidecar(pb, ALL, workers=1, shutdown_grace=0.2) as pool:
        real_get = pool.runner.storage.get_record

        async def slow_get_record(record_id: str) -> Any:
            reading.set()
            await anyio.sleep(30)  # the stop lands while the claimed record is still being read
            return await real_get(record_id)

        pool.runner.storage.get_record = slow_get_record  # type: ignore[method-assign]
        async with pool_running(pool):
            with anyio.fail_after(10):
                await reading.wait()
            assert record(superuser, rid)["claim_token"] != ""
    rec = record(superuser, rid)
    assert rec["attempts"] == 0 and rec["claim_token"] == "" and rec["state"] == "uploaded"
    assert [e["kind"] for e in events(superuser, rid)][-1] == "released"


async def test_a_failed_step_waits_at_least_what_the_provider_asked(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    from sidecar.outcome import RetryableError

    rid = upload(sender)

    async def throttled(ctx: StepContext) -> Outcome:
        raise RetryableError("429 from the provider", retry_after=timedelta(seconds=42))

    clock = FakeClock()
    async with running_sidecar(pb, dict(ALL, normalize=throttled), clock=clock, retry_delay=1) as pool:
        assert await pool.runner.run(await claim_one(pool)) == "failed"
    rec = record(superuser, rid)
    assert rec["attempts"] == 1 and rec["claim_token"] == ""
    assert rec["available_at"] >= clock.now_ms() + 42_000  # Retry-After over the 1 s retry delay


async def test_records_passing_several_stages_never_approach_the_limit(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = upload(sender)
    seen: list[int] = []

    async def step(ctx: StepContext) -> Outcome:
        seen.append(ctx.record.attempts)
        return Advance()

    steps = {"normalize": step, "submit": step, "poll": step, "finalize": step}
    async with running_sidecar(pb, steps, workers=1, max_attempts=1) as pool:
        async with pool_running(pool):
            await wait_for(lambda: record(superuser, rid)["state"] == "done")
    rec = record(superuser, rid)
    assert seen == [1, 1, 1, 1]
    assert rec["attempts"] == 0 and rec["halted_at"] == "" and rec["owner"] == sender.id
    assert [e["stage"] for e in events(superuser, rid) if e["kind"] == "stage_entered"] == [
        "normalized",
        "submitted",
        "transcribed",
        "done",
    ]


async def test_two_owners_records_are_taken_in_creation_order(pb: PocketBaseServer, superuser: Caller) -> None:
    a, b = pb.new_sender(), pb.new_sender()
    created = [upload(a), upload(b), upload(a), upload(b), upload(b)]
    runs: list[tuple[str, str]] = []

    def logged(name: str) -> Any:
        async def step(ctx: StepContext) -> Outcome:
            runs.append((name, ctx.record.id))
            return Advance()

        return step

    from sidecar.pocketbase.client import NoWork

    async with running_sidecar(pb, {name: logged(name) for name in ALL}) as pool:
        while not isinstance(got := await pool.runner.storage.claim(pool.runner.table.leases()), NoWork):
            await pool.runner.run(got)
    assert [rid for name, rid in runs if name == "normalize"] == created
    # P4: the oldest recording is finished before the next one is started
    assert [rid for _, rid in runs] == [rid for rid in created for _ in ALL]
    assert [record(superuser, r)["owner"] for r in created] == [a.id, b.id, a.id, b.id, b.id]


@pytest.mark.parametrize(
    ("stage", "hours", "halted"), [("uploaded", 1.5, True), ("submitted", 1.5, False), ("submitted", 3, True)]
)
async def test_stall_watchdog_uses_the_own_or_foreign_limit(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, stage: str, hours: float, halted: bool
) -> None:
    rid = upload(sender)
    clock = FakeClock()
    ran: list[str] = []

    async def step(ctx: StepContext) -> Outcome:
        ran.append(ctx.record.state)
        return Postpone(timedelta(seconds=1))

    async with running_sidecar(
        pb, dict(ALL, normalize=step, poll=step), clock=clock, own_work_limit=3600, foreign_work_limit=7200
    ) as pool:
        if stage == "submitted":
            for to in ("normalized", "submitted"):
                c = await claim_one(pool)
                await pool.runner.storage.advance(c, to)
        clock.advance(hours * 3600)
        outcome = await pool.runner.run(await claim_one(pool))
    rec = record(superuser, rid)
    if halted:
        assert outcome == "halted" and ran == []
        assert rec["halt_code"] == "stalled" and f"stalled in {stage}" in rec["halt_reason"]
    else:
        assert outcome == "postponed" and ran == [stage] and rec["halted_at"] == ""


async def test_a_hundred_postpones_neither_move_the_stage_clock_nor_defeat_the_watchdog(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = upload(sender)
    clock = FakeClock()

    async def not_ready(ctx: StepContext) -> Outcome:
        return Postpone(timedelta(seconds=10), "provider busy")

    async with running_sidecar(pb, dict(ALL, poll=not_ready), clock=clock, foreign_work_limit=1800) as pool:
        for to in ("normalized", "submitted"):
            await pool.runner.storage.advance(await claim_one(pool), to)
        entered = record(superuser, rid)["state_entered_at"]
        for _ in range(100):
            assert await pool.runner.run(await claim_one(pool)) == "postponed"
            clock.advance(11)
        rec = record(superuser, rid)
        assert rec["state_entered_at"] == entered and rec["state"] == "submitted" and rec["attempts"] == 0
        clock.advance(1000)  # 100 × 11 s + 1000 s > the 30-minute limit
        assert await pool.runner.run(await claim_one(pool)) == "halted"
    rec = record(superuser, rid)
    assert rec["halt_code"] == "stalled" and rec["state_entered_at"] == entered


async def test_zero_workers_accept_uploads_and_move_nothing(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    async with running_sidecar(pb, ALL, workers=0) as pool:
        async with pool_running(pool):
            rid = upload(sender)
            await anyio.sleep(1.0)
    rec = record(superuser, rid)
    assert rec["state"] == "uploaded" and rec["attempts"] == 0 and rec["claim_token"] == ""


async def test_an_empty_run_writes_no_event_and_logs_nothing_above_debug(
    pb: PocketBaseServer, superuser: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running_sidecar(pb, ALL, workers=2, idle_poll=0.05) as pool:
        empty = pool.runner.metrics.claims.labels(result="empty")
        async with pool_running(pool):
            await wait_for(lambda: empty._value.get() >= 4, timeout=20)  # the workers did look for work
            await anyio.sleep(0.5)
    assert events(superuser) == []
    noisy = [
        r
        for r in caplog.records
        if r.levelno > logging.DEBUG and r.name.startswith("transcriber") and "pool" not in r.getMessage()
    ]
    assert noisy == []


async def test_new_uploads_wake_idle_workers_quickly(pb: PocketBaseServer, sender: Caller, superuser: Caller) -> None:
    async with running_sidecar(pb, ALL, workers=1, idle_poll=30) as pool:
        async with pool_running(pool):
            await anyio.sleep(0.5)  # the worker is now idle, waiting up to 30 s
            t0 = time.monotonic()
            rid = upload(sender)
            await wait_for(lambda: record(superuser, rid)["state"] == "done", timeout=10)
            elapsed = time.monotonic() - t0
    assert elapsed < 10  # woken by the realtime event, not the 30 s poll


async def test_a_wake_while_a_claim_is_in_flight_is_not_lost(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    from sidecar.pocketbase.client import NoWork

    async with running_sidecar(pb, ALL, workers=1, idle_poll=60) as pool:
        wakes = 0
        wake = pool.waker.wake

        def counting_wake() -> None:
            nonlocal wakes
            wakes += 1
            wake()

        pool.waker.wake = counting_wake  # type: ignore[method-assign]
        real_claim = pool.runner.storage.claim
        raced: list[str] = []

        async def claim_overtaken_by_an_upload(leases: Any) -> Any:
            got = await real_claim(leases)
            if isinstance(got, NoWork) and wakes and not raced:
                # The claim found nothing; before its answer is handled, a record is
                # uploaded and its realtime event reaches the pool.
                before = wakes
                raced.append(upload(sender))
                await wait_for(lambda: wakes > before, timeout=10)
            return got

        pool.runner.storage.claim = claim_overtaken_by_an_upload  # type: ignore[method-assign]
        async with pool_running(pool):
            await wait_for(lambda: raced, timeout=10)  # the subscription was up (a wake), then the race ran
            # Woken by the event that arrived mid-claim, not by the 60 s poll.
            await wait_for(lambda: record(superuser, raced[0])["state"] == "done", timeout=10)


def test_a_step_that_takes_its_process_down_halts_after_max_attempts(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    import subprocess
    import sys

    rid = upload(sender)
    env = pb.worker_env(
        TRANSCRIBER_PIPELINE__WORKERS="1",
        TRANSCRIBER_PIPELINE__MAX_ATTEMPTS="2",
        TRANSCRIBER_PIPELINE__LEASES__UPLOADED="1",
    )
    codes = []
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-m", "tests.kill_worker"], env=env, timeout=60, check=False)
        codes.append(proc.returncode)
        if record(superuser, rid)["halted_at"]:
            break
        time.sleep(1.2)  # let the dead worker's lease expire
    assert codes[:2] == [-9, -9]  # really killed, twice
    rec = record(superuser, rid)
    assert rec["halt_code"] == "attempts_exhausted", rec
    assert rec["attempts"] == 3


async def test_metrics_count_step_runs_and_records_per_stage(pb: PocketBaseServer, sender: Caller) -> None:
    from tests.harness import free_port

    upload(sender)
    upload(sender)
    async with running_sidecar(pb, ALL) as pool:
        metrics = pool.runner.metrics
        await pool.runner.run(await claim_one(pool))
        await metrics.refresh_records(pool.runner.storage, pool.runner.table.stages)
        port = free_port()
        stop = metrics.serve("127.0.0.1", port)
        try:
            body = (
                await anyio.to_thread.run_sync(lambda: httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5))
            ).text
        finally:
            stop()
    assert 'transcriber_step_runs_total{outcome="advanced",stage="uploaded"} 1.0' in body
    assert 'transcriber_records{halted="false",stage="uploaded"} 1.0' in body
    assert 'transcriber_records{halted="false",stage="normalized"} 1.0' in body


async def test_a_provider_outage_while_polling_postpones_instead_of_spending_attempts(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    from sidecar.outcome import RetryableError
    from sidecar.providers.base import Polled
    from sidecar.steps import poll
    from tests.fakes import StubProvider

    class Down(StubProvider):
        async def poll(self, operation_id: str) -> Polled:
            raise RetryableError("503 from the provider", retry_after=timedelta(seconds=42))

    rid = upload(sender)
    async with running_sidecar(pb, dict(ALL, poll=poll.run), provider=Down()) as pool:
        storage = pool.runner.storage
        for to in ("normalized", "submitted"):
            c = await claim_one(pool)
            if to == "submitted":
                aid = await storage.create_attempt(c, provider="stub", model="m")
                await storage.update_attempt(c, aid, operation_id="op-1", status="running")
            await storage.advance(c, to)
        before = int(time.time() * 1000)
        assert await pool.runner.run(await claim_one(pool)) == "postponed"
    rec = record(superuser, rid)
    assert rec["attempts"] == 0 and rec["halted_at"] == "" and rec["state"] == "submitted"
    assert rec["paused_until"] >= before + 42_000
    assert "503 from the provider" in events(superuser, rid)[-1]["outcome_text"]
