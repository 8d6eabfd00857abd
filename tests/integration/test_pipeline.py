"""The pipeline against a real PocketBase where only a real one can tell: the owner's panel saves
racing a running step, realtime wake-ups, a worker process killed by its step, the metrics' counts.

The queue's own behaviour (guards, outcomes, leases, order, shutdown) is tested on the in-memory
twin in tests/unit, and the twin is held to PocketBase by tests/contract.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import anyio
import httpx
import pytest

from sidecar.outcome import Advance, StepResult, Verdict
from sidecar.steps.base import Step, StepContext
from sidecar.storage.model import Claimed
from testkit.pocketbase import Caller, PocketBaseServer, free_port
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually, eventually_sync

pytestmark = pytest.mark.anyio


def panel_edit(su: Caller, rid: str, **changes: Any) -> dict[str, Any]:
    """The panel's whole-form save, opened now."""
    form = su.record(rid)
    form.update(changes)
    for k in ("id", "collectionId", "collectionName", "created", "updated"):
        form.pop(k, None)
    resp = su.http.patch(f"/api/collections/audio_records/records/{rid}", json=form)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def advance_all(ctx: StepContext) -> StepResult:
    return Advance("test step done")


ALL: dict[str, Step] = {"normalize": advance_all, "submit": advance_all, "poll": advance_all, "finalize": advance_all}


async def claim_one(pool: Any) -> Claimed:
    got = await pool.runner.storage.claim(pool.runner.table.leases())
    assert isinstance(got, Claimed)
    return got


async def test_owner_panel_edit_survives_the_steps_save(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = sender.upload(title="before")

    async def step(ctx: StepContext) -> StepResult:
        await anyio.to_thread.run_sync(lambda: panel_edit(superuser, rid, title="edited in the panel", brief="notes"))
        return Advance()

    async with running_sidecar(pb, dict(ALL, normalize=step)) as pool:
        assert await pool.runner.run(await claim_one(pool)) is Verdict.ADVANCED
    rec = superuser.record(rid)
    assert rec["state"] == "normalized"
    assert rec["title"] == "edited in the panel" and rec["brief"] == "notes"
    assert rec["owner"] == sender.id


async def test_an_unhalt_in_the_panel_under_a_running_step_drops_its_result(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = sender.upload()
    second: list[Claimed] = []

    async def step(ctx: StepContext) -> StepResult:
        await anyio.to_thread.run_sync(lambda: panel_edit(superuser, rid, halted_at="2026-01-01 00:00:00.000Z"))
        await anyio.to_thread.run_sync(lambda: panel_edit(superuser, rid, halted_at=""))  # ... and resumes it
        second.append(await claim_one(pool))  # another worker takes it
        return Advance("stale result")

    async with running_sidecar(pb, dict(ALL, normalize=step)) as pool:
        first = await claim_one(pool)
        assert await pool.runner.run(first) is Verdict.FENCED_OUT
    rec = superuser.record(rid)
    assert rec["state"] == "uploaded" and rec["claim_token"] == second[0].claim.token
    assert rec["halted_at"] == ""


async def test_new_uploads_wake_idle_workers_through_realtime(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    async with running_sidecar(pb, ALL, workers=1, idle_poll=30) as pool, pool_running(pool):
        await anyio.sleep(0.5)  # the worker is now idle, waiting up to 30 s
        t0 = time.monotonic()
        rid = await anyio.to_thread.run_sync(sender.upload)
        await eventually(lambda: superuser.record(rid)["state"] == "done", within=10)
        elapsed = time.monotonic() - t0
    assert elapsed < 10  # woken by the realtime event, not the 30 s poll


def test_a_step_that_takes_its_process_down_halts_after_max_attempts(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = sender.upload()
    env = pb.worker_env(
        TRANSCRIBER_PIPELINE__WORKERS="1",
        TRANSCRIBER_PIPELINE__MAX_ATTEMPTS="2",
        TRANSCRIBER_PIPELINE__LEASES__UPLOADED="1",
    )
    codes = []
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-m", "tests.support.kill_worker"], env=env, timeout=60, check=False)
        codes.append(proc.returncode)
        if superuser.record(rid)["halted_at"]:
            break
        # The dead worker's one-second lease runs out.
        eventually_sync(lambda: superuser.record(rid)["claim_expires_at"] < time.time() * 1000, within=5)
    assert codes[:2] == [-9, -9]  # really killed, twice
    rec = superuser.record(rid)
    assert rec["halt_code"] == "attempts_exhausted", rec
    assert rec["attempts"] == 3


async def test_metrics_count_step_runs_and_records_per_stage(pb: PocketBaseServer, sender: Caller) -> None:
    sender.upload()
    sender.upload()
    async with running_sidecar(pb, ALL) as pool:
        metrics = pool.runner.metrics
        await pool.runner.run(await claim_one(pool))
        await metrics.refresh_records(pool.runner.storage, pool.runner.table.stages)
        port = free_port()
        stop = metrics.serve("127.0.0.1", port)
        try:
            async with httpx.AsyncClient() as http:
                body = (await http.get(f"http://127.0.0.1:{port}/metrics", timeout=5)).text
        finally:
            stop()
    assert 'transcriber_step_runs_total{outcome="advanced",stage="uploaded"} 1.0' in body
    assert 'transcriber_records{halted="false",stage="uploaded"} 1.0' in body
    assert 'transcriber_records{halted="false",stage="normalized"} 1.0' in body


async def test_rows_no_worker_can_read_are_set_aside_while_the_pool_finishes_the_rest(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two rows nobody can read among good ones, with real workers: one the claim stops (text in
    ``progress``), one that reaches the sidecar and does not read there (a record model stricter
    than PocketBase's check, as a release apart would be). Both are halted ``unclaimable`` with a
    journal row and counted once; every other recording is finished, and the pool keeps running."""
    from pydantic import field_validator

    from sidecar.pocketbase import client as client_module
    from sidecar.storage.model import AudioRecord

    class Stricter(AudioRecord):
        @field_validator("title")
        @classmethod
        def _readable_title(cls, title: str) -> str:
            if title == "read me not":
                raise ValueError("a title this release cannot read")
            return title

    monkeypatch.setattr(client_module, "AudioRecord", Stricter)
    stopped_by_claim = sender.upload()
    stopped_by_sidecar = sender.upload(title="read me not")
    behind = sender.upload()
    pb.sql("UPDATE audio_records SET progress = 'abc' WHERE id = ?", stopped_by_claim)
    async with running_sidecar(pb, ALL, workers=2, idle_poll=1) as pool, pool_running(pool):
        await eventually(lambda: superuser.record(behind)["state"] == "done", within=30)
        later = await anyio.to_thread.run_sync(sender.upload)  # the pool still runs
        await eventually(lambda: superuser.record(later)["state"] == "done", within=30)
        assert pool.runner.metrics.set_aside._value.get() == 2
    for rid, said in ((stopped_by_claim, "progress holds text 'abc'"), (stopped_by_sidecar, "title")):
        rec = superuser.record(rid)
        assert (rec["halt_code"], rec["state"], rec["claim_token"]) == ("unclaimable", "uploaded", ""), rec
        events = superuser.http.get(
            "/api/collections/record_events/records", params={"filter": f'record = "{rid}" && kind = "halted"'}
        ).json()["items"]
        assert len(events) == 1 and said in events[0]["outcome_text"], events
