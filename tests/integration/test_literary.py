"""The literary text against a real PocketBase: its own queue after `done`, beside the brief's and
independent of it; the poll and the list say whether it is ready; a correction of the transcript by the
owner queues the literary text again and never the brief. The chat server is faked (respx)."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import respx
from docx import Document
from pydantic import SecretStr

from sidecar.insights.engines import OpenAIEngine
from sidecar.outcome import Advance, StepResult
from sidecar.pipeline.pool import WorkerPool
from sidecar.serving.assembly import pipeline
from sidecar.settings import InsightsSettings
from sidecar.steps.base import StepContext
from testkit.pocketbase import Caller, PocketBaseServer
from tests.support.fakes import StubProvider, chat_answer
from tests.support.pipeline_steps import storing
from tests.support.sidecar import pool_running, settings_for
from tests.support.waiting import eventually

pytestmark = pytest.mark.anyio

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
LINES = [
    ("Speaker 1", "um, good morning everyone, let us start the the planning meeting."),
    ("Speaker 1", "we we decided to ship the new billing page on Friday."),
    ("Speaker 2", "uh Anna will write the release notes - don't worry."),
]


STEPS = storing(LINES)

BRIEF = json.dumps(
    {
        "brief": [{"sentence": "The billing page ships on Friday.", "quote": "ship the new billing page on Friday"}],
        "topics": [{"name": "Billing", "quote": "the new billing page"}],
    }
)


@asynccontextmanager
async def sidecar(pb: PocketBaseServer, asked: list[httpx.Request]) -> AsyncIterator[WorkerPool]:
    settings = settings_for(pb, workers=1)
    # The rule-based text beside the brief (the model's proofreading: test_literary_model.py).
    settings.insights = InsightsSettings(
        provider="openai",
        model="m",
        base_url="http://chat.test",
        api_key=SecretStr("sk-test-abcdef123456"),
        proofread=False,
    )

    def reply(req: httpx.Request) -> httpx.Response:
        asked.append(req)
        return chat_answer(BRIEF)

    with respx.mock(assert_all_called=False) as router:
        router.post("http://chat.test/v1/chat/completions").mock(side_effect=reply)
        router.route(host="127.0.0.1").pass_through()
        engine = OpenAIEngine(settings.insights, _clock())
        async with pipeline(settings, steps=STEPS, provider=StubProvider(), insights=engine) as pool:
            yield pool


def _clock() -> Any:
    from sidecar.runtime.clock import SystemClock

    return SystemClock()


def row_of(su: Caller, table: str, rid: str) -> dict[str, Any]:
    items = su.http.get(f"/api/collections/{table}/records", params={"filter": f'record = "{rid}"'}).json()["items"]
    return dict(items[0]) if items else {"state": "", "halted_at": ""}


def text_of(su: Caller, rid: str, kind: str) -> dict[str, Any]:
    flt = f'record = "{rid}" && kind = "{kind}"'
    items = su.http.get("/api/collections/texts/records", params={"filter": flt}).json()["items"]
    return dict(items[0]) if items else {}


def transcript_docx(sender: Caller, rid: str) -> list[str]:
    """The transcript's DOCX download, opened: its paragraphs, which must be its txt export's."""
    base = f"/api/transcriber/records/{rid}/transcript"
    got = sender.http.get(base, params={"format": "docx"})
    assert got.status_code == 200, got.text
    assert got.headers["content-type"] == DOCX
    assert got.headers["content-disposition"].startswith('attachment; filename="transcript.docx"')
    paragraphs = [p.text for p in Document(io.BytesIO(got.content)).paragraphs]
    assert paragraphs == sender.http.get(base, params={"format": "txt"}).text.strip().split("\n\n")
    return paragraphs


def when(row: dict[str, Any], ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    return row if ready(row) else {}


def both_done(su: Caller, rid: str) -> dict[str, Any]:
    lit, ins = row_of(su, "literary", rid), row_of(su, "insights", rid)
    return {"literary": lit, "insights": ins} if lit["state"] == ins["state"] == "done" else {}


async def test_the_literary_text_is_made_beside_the_brief_and_a_correction_remakes_it_alone(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = sender.upload()
    asked: list[httpx.Request] = []
    async with sidecar(pb, asked) as pool, pool_running(pool):
        rows = await eventually(lambda: both_done(superuser, rid))
    text = text_of(superuser, rid, "literary")
    assert text["content"] == (
        "Speaker 1: Good morning everyone, let us start the planning meeting. "
        "We decided to ship the new billing page on Friday.\n\n"
        "Speaker 2: Anna will write the release notes - don’t worry."
    )
    assert text["segments"] == [
        {
            "start": 0,
            "end": 9,
            "speaker": "Speaker 1",
            "text": "Good morning everyone, let us start the planning meeting. "
            "We decided to ship the new billing page on Friday.",
        },
        {"start": 10, "end": 14, "speaker": "Speaker 2", "text": "Anna will write the release notes - don’t worry."},
    ]
    poll = sender.poll(rid)
    assert poll["literary"] == "ready" and poll["brief"] == "The billing page ships on Friday."
    items = sender.http.get("/api/transcriber/records").json()["items"]
    assert items[0]["literary"] == "ready"
    # The downloads: txt as stored, md with times and speakers, docx made by the step.
    base = f"/api/transcriber/records/{rid}/text"
    txt = sender.http.get(base, params={"format": "txt"})
    assert txt.status_code == 200 and txt.text == text["content"] + "\n"
    assert txt.headers["content-type"].startswith("text/plain")
    md = sender.http.get(base, params={"format": "md"}).text
    assert "*[00:00]* **Speaker 1:** Good morning everyone" in md and "*[00:10]* **Speaker 2:** Anna" in md
    got_docx = sender.http.get(base, params={"format": "docx"})
    assert got_docx.status_code == 200 and got_docx.headers["content-disposition"].startswith("attachment")
    paragraphs = [p.text for p in Document(io.BytesIO(got_docx.content)).paragraphs]
    assert paragraphs[-2:] == [
        "Speaker 1: Good morning everyone, let us start the planning meeting. "
        "We decided to ship the new billing page on Friday.",
        "Speaker 2: Anna will write the release notes - don’t worry.",
    ]
    bad = sender.http.get(base, params={"format": "pdf"})
    assert bad.status_code == 400 and bad.json()["code"] == "bad_format"
    # The transcript's Word document, made by the same step: the txt export's paragraphs, word for word.
    assert transcript_docx(sender, rid) == [
        "Speaker 1: um, good morning everyone, let us start the the planning meeting. "
        "we we decided to ship the new billing page on Friday.",
        "Speaker 2: uh Anna will write the release notes - don't worry.",
    ]
    briefs_asked = len(asked)
    assert briefs_asked > 0

    # The owner corrects the transcript in the panel (no worker runs meanwhile).
    transcript = text_of(superuser, rid, "transcript")
    fixed = transcript["content"].replace("Anna", "Hanna")
    got = superuser.http.patch(f"/api/collections/texts/records/{transcript['id']}", json={"content": fixed})
    assert got.status_code == 200, got.text
    assert row_of(superuser, "literary", rid)["state"] == "queued"
    assert sender.poll(rid)["literary"] == "pending"
    # While it is made again, the stale text is not handed out, nor the transcript's stale document.
    assert sender.http.get(base, params={"format": "txt"}).status_code == 404
    stale = sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "docx"})
    assert stale.status_code == 404 and stale.json()["code"] == "not_found"
    # The brief is not made again: its row is as it was.
    assert row_of(superuser, "insights", rid) == rows["insights"]
    journal = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record = "{rid}"', "sort": "created"}
    ).json()["items"]
    assert any(
        e["stage"] == "literary"
        and e["kind"] == "stage_set"
        and "literary set to queued by the owner" in e["outcome_text"]
        and "the transcript was corrected" in e["outcome_text"]
        for e in journal
    )

    async with sidecar(pb, asked) as pool, pool_running(pool):
        await eventually(lambda: when(row_of(superuser, "literary", rid), lambda r: r["state"] == "done"))
    assert "Speaker 2: Hanna will write the release notes" in text_of(superuser, rid, "literary")["content"]
    assert transcript_docx(sender, rid)[-1] == "Speaker 2: uh Hanna will write the release notes - don't worry."
    assert len(asked) == briefs_asked
    assert row_of(superuser, "insights", rid) == rows["insights"]
    assert sender.poll(rid)["literary"] == "ready"


async def test_an_empty_transcript_gives_an_empty_text_and_done(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    async def silent(ctx: StepContext) -> StepResult:
        await ctx.session.put_text("transcript", "", [], language="ru")
        return Advance("no speech")

    rid = sender.upload()
    settings = settings_for(pb, workers=1)
    steps = {**STEPS, "finalize": silent}
    async with pipeline(settings, steps=steps, provider=StubProvider()) as pool, pool_running(pool):
        await eventually(lambda: when(row_of(superuser, "literary", rid), lambda r: r["state"] == "done"))
    row = row_of(superuser, "literary", rid)
    assert row["halted_at"] == "" and row["attempts"] == 0
    text = text_of(superuser, rid, "literary")
    assert text["content"] == "" and text["segments"] == []
    assert sender.poll(rid)["literary"] == "ready"


async def test_the_owner_asks_for_a_literary_text_in_the_panel_and_runs_it_again(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = sender.upload()
    settings = settings_for(pb, workers=1)
    without = {k: v for k, v in STEPS.items() if k not in ("literary", "insights")}
    async with pipeline(settings, steps=without, provider=StubProvider()) as pool, pool_running(pool):
        await eventually(lambda: when(sender.poll(rid), lambda p: p["status"] == "done"))
    # Done before the literary step ran here: no row, nothing said.
    assert row_of(superuser, "literary", rid)["state"] == "" and sender.poll(rid)["literary"] is None
    made = superuser.http.post("/api/collections/literary/records", json={"record": rid, "state": "queued"})
    assert made.status_code == 200, made.text
    assert sender.poll(rid)["literary"] == "pending"
    async with pipeline(settings, steps=STEPS, provider=StubProvider()) as pool, pool_running(pool):
        row = await eventually(lambda: when(row_of(superuser, "literary", rid), lambda r: r["state"] == "done"))
    assert text_of(superuser, rid, "literary")["content"].startswith("Speaker 1: Good morning")
    # Run again: set back to queued in the panel (the whole form, as the panel posts it).
    form = {k: v for k, v in row.items() if k not in ("id", "collectionId", "collectionName", "created", "updated")}
    form["state"] = "queued"
    got = superuser.http.patch(f"/api/collections/literary/records/{row['id']}", json=form)
    assert got.status_code == 200, got.text
    assert row_of(superuser, "literary", rid)["state"] == "queued"
    refused = superuser.http.delete(f"/api/collections/literary/records/{row['id']}")
    assert refused.status_code == 400 and "kept with their recording" in refused.text
    journal = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record = "{rid}"', "sort": "created"}
    ).json()["items"]
    said = [e["outcome_text"] for e in journal if e["stage"] == "literary"]
    assert "literary asked for by the owner" in said
    assert "literary set to queued by the owner: the literary text will be made again" in said
