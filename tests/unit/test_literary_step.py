"""The literary step on the twin: queued when a recording is done (beside the brief, not instead of it),
claimed, settled and journalled through the follow-up queue's declaration; a stop mid-proofread hands the
claim back and a restart finishes it; a failing proofread never touches the brief. And the runner, the
pool and the claim name no follow-up step: each is a declaration."""

from __future__ import annotations

import io
import re
from typing import Any

import anyio
import pytest
from docx import Document

from sidecar.outcome import Advance, StepResult, Verdict
from sidecar.pipeline.pool import WorkerPool
from sidecar.runtime.clock import FakeClock
from sidecar.steps import literary
from sidecar.steps.base import Step, StepContext
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import Claimed
from tests.support.operator import ROOT
from tests.support.sidecar import twin_sidecar

pytestmark = pytest.mark.anyio

SEGMENTS: list[dict[str, Any]] = [
    {"start": 0.0, "end": 3.0, "text": "эм, я я думаю, что маяк светил", "speaker": "Speaker 1"},
    {"start": 3.2, "end": 5.0, "text": 'всю ночь. он сказал "хватит" - и ушёл.', "speaker": "Speaker 1"},
    {"start": 9.0, "end": 11.0, "text": "ну-у да.", "speaker": "Speaker 2"},
]


async def advance(ctx: StepContext) -> StepResult:
    return Advance("test step done")


async def finalize(ctx: StepContext) -> StepResult:
    await ctx.session.put_text("transcript", " ".join(s["text"] for s in SEGMENTS), SEGMENTS, language="ru")
    return Advance("transcript stored")


def steps(**changed: Step) -> dict[str, Step]:
    base: dict[str, Step] = {
        "normalize": advance,
        "submit": advance,
        "poll": advance,
        "finalize": finalize,
        "literary": literary.run,
    }
    return {**base, **changed}


async def claim(pool: WorkerPool) -> Claimed:
    got = await pool.runner.storage.claim(pool.runner.table.leases(), follow_ups=pool.runner.follow_up_leases())
    assert isinstance(got, Claimed)
    return got


async def finish_recording(pool: WorkerPool, storage: InMemoryStorage, rid: str) -> None:
    while storage.row(rid).state != "done":
        assert await pool.runner.run(await claim(pool)) is Verdict.ADVANCED


async def test_a_done_recording_gets_its_literary_text(storage: InMemoryStorage) -> None:
    rid = storage.add_record()
    async with twin_sidecar(storage, steps()) as pool:
        await finish_recording(pool, storage, rid)
        row = storage.literary_of(rid)
        assert row is not None and row.state == "queued"
        got = await claim(pool)
        assert got.claim.queue == "literary" and got.record.recording == rid
        assert await pool.runner.run(got) is Verdict.ADVANCED
    assert (row.state, row.attempts, row.claim_token) == ("done", 0, "")
    text = storage.texts[(rid, "literary")]
    assert text.content == (
        "Speaker 1: Я думаю, что маяк светил всю ночь. Он сказал «хватит»\u00a0— и ушёл.\n\nSpeaker 2: Да."
    )
    assert text.segments == [
        {
            "start": 0.0,
            "end": 5.0,
            "speaker": "Speaker 1",
            "text": "Я думаю, что маяк светил всю ночь. Он сказал «хватит»\u00a0— и ушёл.",
        },
        {"start": 9.0, "end": 11.0, "speaker": "Speaker 2", "text": "Да."},
    ]
    document = Document(io.BytesIO(storage.documents[(rid, "literary")]))
    assert [p.text for p in document.paragraphs] == [
        "Speaker 1: Я думаю, что маяк светил всю ночь. Он сказал «хватит»\u00a0— и ушёл.",
        "Speaker 2: Да.",
    ]
    assert [r.bold for r in document.paragraphs[0].runs] == [True, None]
    # The transcript's own Word document, made beside it: its words as recognized, a paragraph a turn.
    transcript = Document(io.BytesIO(storage.documents[(rid, "transcript")]))
    assert [p.text for p in transcript.paragraphs] == [
        'Speaker 1: эм, я я думаю, что маяк светил всю ночь. он сказал "хватит" - и ушёл.',
        "Speaker 2: ну-у да.",
    ]
    journal = [(e.stage, e.kind, e.text) for e in storage.journal_of(rid)]
    assert ("done", "note", "literary text queued (the literary step)") in journal
    assert journal[-1] == ("literary", "advanced", "literary text of 2 paragraphs (rule-based edition)")


async def test_a_stop_mid_proofread_hands_the_claim_back_and_a_restart_finishes(storage: InMemoryStorage) -> None:
    rid = storage.add_record()
    entered = anyio.Event()

    async def endless(ctx: StepContext) -> StepResult:
        await ctx.session.literary_source()
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError

    async with twin_sidecar(storage, steps(literary=endless)) as pool:
        await finish_recording(pool, storage, rid)
        got = await claim(pool)
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.runner.run, got)
            await entered.wait()
            assert storage.literary_of(rid).attempts == 1  # type: ignore[union-attr]
            tg.cancel_scope.cancel()
    row = storage.literary_of(rid)
    assert row is not None and (row.state, row.attempts, row.claim_token, row.halted_at) == ("queued", 0, "", "")
    assert storage.journal_of(rid)[-1].kind == "released" and (rid, "literary") not in storage.texts
    # A new process takes it up and finishes.
    async with twin_sidecar(storage, steps()) as pool:
        assert await pool.runner.run(await claim(pool)) is Verdict.ADVANCED
    assert row.state == "done" and storage.texts[(rid, "literary")].content.startswith("Speaker 1: Я думаю")


async def test_a_proofread_killed_then_a_service_down_for_hours_is_tried_again_not_stalled(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    """Its worker killed mid-proofread (the lease left to run out), the service down for three hours: the
    step's time counts only up to the dead claim's lease end, as a recording's does, so the text is made."""
    rid = storage.add_record()
    async with twin_sidecar(storage, steps(), own_work_limit=3600) as pool:
        await finish_recording(pool, storage, rid)
        dead = await claim(pool)  # its worker dies: nothing settles, the lease runs out unrenewed
        assert dead.claim.queue == "literary"
        lease_end = storage.literary_of(rid).claim_expires_at  # type: ignore[union-attr]
        clock.advance(3 * 3600)
        again = await claim(pool)
        assert again.record.lease_ended_at == lease_end and again.record.attempts == 2
        assert await pool.runner.run(again) is Verdict.ADVANCED
    row = storage.literary_of(rid)
    assert row is not None and (row.state, row.halted_at) == ("done", "")


async def test_a_failing_proofread_leaves_the_brief_alone(storage: InMemoryStorage) -> None:
    rid = storage.add_record()

    async def broken(ctx: StepContext) -> StepResult:
        raise RuntimeError("the edition broke")

    async with twin_sidecar(storage, steps(literary=broken)) as pool:
        await finish_recording(pool, storage, rid)
        storage.owner_queue_insights(rid)
        ins = storage.insights_of(rid)
        assert ins is not None
        before = (ins.state, ins.attempts, ins.queue_rev, ins.available_at)
        got = await claim(pool)
        assert got.claim.queue == "literary"
        assert await pool.runner.run(got) is Verdict.FAILED
    assert (ins.state, ins.attempts, ins.queue_rev, ins.available_at) == before
    assert storage.journal_of(rid)[-1].stage == "literary"


async def test_a_correction_of_the_transcript_queues_the_literary_text_again_and_not_the_brief(
    storage: InMemoryStorage,
) -> None:
    rid = storage.add_record()
    async with twin_sidecar(storage, steps()) as pool:
        await finish_recording(pool, storage, rid)
        storage.owner_queue_insights(rid)
        assert await pool.runner.run(await claim(pool)) is Verdict.ADVANCED  # the literary text
        ins = storage.insights_of(rid)
        assert ins is not None
        before = (ins.state, ins.queue_rev, ins.available_at)
        assert (rid, "transcript") in storage.documents
        storage.owner_correct_transcript(rid, "маяк светил всю ночь")
        # (as lib/corrections.js derives them: the segments follow the corrected words)
        storage.texts[(rid, "transcript")].segments = [{**SEGMENTS[0], "text": "маяк светил всю ночь"}]
        # The transcript's Word document held the old words: none until the literary step makes it again.
        assert (rid, "transcript") not in storage.documents
        row = storage.literary_of(rid)
        assert row is not None and row.state == "queued"
        assert (ins.state, ins.queue_rev, ins.available_at) == before
        got = await claim(pool)
        assert got.claim.queue == "literary"
        assert await pool.runner.run(got) is Verdict.ADVANCED
    paragraphs = [p.text for p in Document(io.BytesIO(storage.documents[(rid, "transcript")])).paragraphs]
    assert paragraphs == ["Speaker 1: маяк светил всю ночь"]


def _code(path: str) -> str:
    """A source file without its comments and docstrings' lines (what it does, not what it says)."""
    text = (ROOT / path).read_text()
    lines = [line.split("//")[0] if path.endswith(".js") else line.split("#")[0] for line in text.splitlines()]
    return "\n".join(lines)


@pytest.mark.parametrize(
    "path",
    [
        "sidecar/pipeline/runner.py",
        "sidecar/pipeline/pool.py",
        "pb_hooks/lib/claim.js",
        "pb_hooks/lib/settle.js",
        "pb_hooks/lib/transitions.js",
        "pb_hooks/lib/journal.js",
        "pb_hooks/lib/routes.js",
    ],
)
def test_the_runner_the_pool_and_the_claim_name_no_follow_up_step(path: str) -> None:
    """Each follow-up queue is declared once (pb_hooks/lib/followups.js, sidecar/pipeline/stages.py
    FOLLOW_UPS): the machinery that claims, runs, settles and journals them spells none out."""
    code = _code(path)
    if path.endswith(".py"):
        code = re.sub(r'"""(.*?)"""', "", code, flags=re.S)
    assert not re.findall(r"""["'](insights|literary)["']|\b(INSIGHTS|LITERARY)\b""", code)
