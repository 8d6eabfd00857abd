"""The follow-up queues are a declaration: a queue added to the declarations alone (a test-only one,
with its step) is queued when a recording is done, claimed, run, settled and journalled by the runner,
the pool's claim and the twin's settle, none of which is changed for it (the sidecar's half; the hooks'
half reads pb_hooks/lib/followups.js the same way, held by test_js_mirrors and test_literary_step)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import pytest

from sidecar.outcome import Advance, StepResult, Verdict
from sidecar.pipeline import stages
from sidecar.pipeline.stages import StageTable
from sidecar.steps.base import Step, StepContext
from sidecar.storage import memory
from sidecar.storage.memory import FollowUpRow, InMemoryStorage
from sidecar.storage.model import Claimed
from tests.support.sidecar import twin_sidecar

pytestmark = pytest.mark.anyio


@dataclass(kw_only=True)
class ChecklistRow(FollowUpRow):
    queue: ClassVar[str] = "checklist"


async def advance(ctx: StepContext) -> StepResult:
    return Advance("test step done")


async def checklist(ctx: StepContext) -> StepResult:
    await ctx.session.note("three items found")
    return Advance("checklist made")


STEPS: dict[str, Step] = {
    "normalize": advance,
    "submit": advance,
    "poll": advance,
    "finalize": advance,
    "checklist": checklist,
}


async def test_a_follow_up_declared_alone_is_queued_claimed_settled_and_journalled(
    storage: InMemoryStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = stages.Stage("checklist", "checklist", stages.Work.OWN, stages.LEASE, "done")
    monkeypatch.setattr(stages, "FOLLOW_UPS", (*stages.FOLLOW_UPS, declared))
    monkeypatch.setattr(
        memory,
        "FOLLOW_UPS",
        {
            **memory.FOLLOW_UPS,
            "checklist": memory._FollowUp(ChecklistRow, "checklist queued", "checklist done", "checklist again"),
        },
    )
    rid = storage.add_record()
    async with twin_sidecar(storage, STEPS) as pool:
        pool.runner.table = StageTable(pool.runner.table.settings, STEPS, follow_ups={"checklist": "test"})
        leases = pool.runner.table.leases()
        while storage.row(rid).state != "done":
            got = await storage.claim(leases, follow_ups=pool.runner.follow_up_leases())
            assert isinstance(got, Claimed)
            assert await pool.runner.run(got) is Verdict.ADVANCED
        (row,) = storage.queues["checklist"].values()
        assert (row.record, row.state) == (rid, "queued")
        got = await storage.claim(leases, follow_ups=pool.runner.follow_up_leases())
        assert isinstance(got, Claimed) and got.claim.queue == "checklist" and got.record.recording == rid
        assert pool.runner.table.stage_for(got) == replace(declared, doer="test")
        assert await pool.runner.run(got) is Verdict.ADVANCED
    assert (row.state, row.attempts, row.claim_token, row.available_at) == ("done", 0, "", 0)
    journal = [(e.stage, e.kind, e.text) for e in storage.journal_of(rid)]
    assert journal[-3:] == [
        ("done", "note", "checklist queued"),
        ("checklist", "note", "three items found"),
        ("checklist", "advanced", "checklist made"),
    ]
