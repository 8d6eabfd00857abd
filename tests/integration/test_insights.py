"""Insights against a real PocketBase: the queue after `done`, the fenced result, what the poll, the
list, the JSON export and the panel show; the owner's edits kept; a failing step leaves the transcript
done and visible. The chat server is faked (respx), shaped like OpenAI's chat completions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import respx
from pydantic import SecretStr

from sidecar.insights.engines import OpenAIEngine
from sidecar.outcome import Advance, StepResult
from sidecar.pipeline.pool import WorkerPool
from sidecar.serving.assembly import pipeline
from sidecar.settings import InsightsSettings
from sidecar.steps import insights
from sidecar.steps.base import Step, StepContext
from testkit.pocketbase import Caller, PocketBaseServer
from tests.support.exports import parse_json_export
from tests.support.fakes import StubProvider, chat_answer
from tests.support.sidecar import pool_running, settings_for
from tests.support.waiting import eventually

pytestmark = pytest.mark.anyio

LINES = [
    "Good morning everyone, let us start the planning meeting.",
    "We decided to ship the new billing page on Friday.",
    "Anna will write the release notes before Thursday.",
]


async def advance(ctx: StepContext) -> StepResult:
    return Advance("test step done")


async def finalize(ctx: StepContext) -> StepResult:
    segs = [{"start": i * 5.0, "end": i * 5.0 + 4, "text": t} for i, t in enumerate(LINES)]
    await ctx.session.put_text("transcript", " ".join(LINES), segs, language="en")
    return Advance("transcript stored")


STEPS: dict[str, Step] = {
    "normalize": advance,
    "submit": advance,
    "poll": advance,
    "finalize": finalize,
    "insights": insights.run,
}


GOOD = json.dumps(
    {
        "brief": [{"sentence": "The billing page ships on Friday.", "quote": "ship the new billing page on Friday"}],
        "topics": [{"name": "Billing", "quote": "the new billing page"}],
    }
)


@asynccontextmanager
async def sidecar(pb: PocketBaseServer, reply: Callable[[httpx.Request], httpx.Response]) -> AsyncIterator[WorkerPool]:
    settings = settings_for(pb, workers=1)
    settings.insights = InsightsSettings(
        provider="openai", model="m", base_url="http://chat.test", api_key=SecretStr("sk-test-abcdef123456")
    )
    with respx.mock(assert_all_called=False) as router:
        router.post("http://chat.test/v1/chat/completions").mock(side_effect=reply)
        router.route(host="127.0.0.1").pass_through()
        engine = OpenAIEngine(settings.insights, pb_clock())
        async with pipeline(settings, steps=STEPS, provider=StubProvider(), insights=engine) as pool:
            yield pool


def pb_clock() -> Any:
    from sidecar.runtime.clock import SystemClock

    return SystemClock()


def when(row: dict[str, Any], ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The row once it is ready (an empty dict, which ``eventually`` takes for not yet, before)."""
    return row if ready(row) else {}


def insights_row(su: Caller, rid: str) -> dict[str, Any]:
    items = su.http.get("/api/collections/insights/records", params={"filter": f'record = "{rid}"'}).json()["items"]
    return dict(items[0]) if items else {"state": "", "halted_at": ""}


async def test_a_done_recording_gets_a_grounded_brief_and_topics_everywhere_it_shows(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = sender.upload()
    async with sidecar(pb, lambda req: chat_answer(GOOD)) as pool, pool_running(pool):
        row = await eventually(lambda: when(insights_row(superuser, rid), lambda r: r["state"] == "done"))
    poll = sender.poll(rid)
    assert poll["status"] == "done" and poll["text"].startswith("Good morning")
    assert poll["brief"] == "The billing page ships on Friday." and poll["topics"] == ["Billing"]
    items = sender.http.get("/api/transcriber/records").json()["items"]
    assert items[0]["brief"] == poll["brief"] and items[0]["topics"] == ["Billing"]
    export = parse_json_export(
        sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "json"}).text
    )
    assert export["brief"] == poll["brief"] and export["topics"] == ["Billing"]
    assert export["quotes"] == [
        {
            "sentence": "The billing page ships on Friday.",
            "quote": "ship the new billing page on Friday",
            "start": 5,
            "end": 9,
        }
    ]
    assert row["kept"] == 1 and row["provider"] == "openai"
    topics = superuser.http.get("/api/collections/topics/records").json()["items"]
    assert [(t["name"], t["owner"]) for t in topics] == [("Billing", sender.id)]
    # The owner edits the brief in the panel: the quotes no longer describe it, so the export leaves them out.
    rec = superuser.record(rid)
    form = {k: v for k, v in rec.items() if k not in ("id", "collectionId", "collectionName", "created", "updated")}
    form["brief"] = "My own words."
    assert superuser.http.patch(f"/api/collections/audio_records/records/{rid}", json=form).status_code == 200
    export = parse_json_export(
        sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "json"}).text
    )
    assert export["brief"] == "My own words." and export["quotes"] == []


async def test_an_owners_edit_while_the_step_runs_is_never_written_over(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = sender.upload()
    edited: list[bool] = []

    def edit_then_answer(req: httpx.Request) -> httpx.Response:
        if not edited:  # the owner saves the recording in the panel while the model thinks
            rec = superuser.record(rid)
            form = {k: v for k, v in rec.items() if k not in ("id", "collectionId", "collectionName", "updated")}
            form["brief"] = "Written by the owner."
            resp = superuser.http.patch(f"/api/collections/audio_records/records/{rid}", json=form)
            assert resp.status_code == 200, resp.text
            edited.append(True)
        return chat_answer(GOOD)

    async with sidecar(pb, edit_then_answer) as pool, pool_running(pool):
        await eventually(lambda: insights_row(superuser, rid)["state"] == "done" and edited)
    poll = sender.poll(rid)
    assert poll["brief"] == "Written by the owner." and poll["topics"] == []


async def test_a_failing_step_leaves_the_transcript_done_and_visible(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = sender.upload()
    async with sidecar(pb, lambda req: chat_answer("I cannot do JSON today.")) as pool, pool_running(pool):
        row = await eventually(lambda: when(insights_row(superuser, rid), lambda r: bool(r["halted_at"])))
    assert row["halt_code"] == "unparsable_answer" and row["state"] == "queued"
    poll = sender.poll(rid)
    assert poll["status"] == "done" and not poll["halted"] and poll["text"] and poll["brief"] is None
    # The owner clears the halt in the panel: the step runs again (here: halts again, counted afresh).
    form = {"halted_at": "", "queue_rev": row["queue_rev"], "state": "queued"}
    resp = superuser.http.patch(f"/api/collections/insights/records/{row['id']}", json=form)
    assert resp.status_code == 200, resp.text
    again = insights_row(superuser, rid)
    assert again["halted_at"] == "" and again["attempts"] == 0 and again["available_at"] > 0


async def test_an_empty_answer_is_asked_for_more_simply_then_the_owner_and_the_sender_are_told_why(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    rid = sender.upload()
    asked: list[dict[str, Any]] = []

    def empty(req: httpx.Request) -> httpx.Response:
        asked.append(json.loads(req.content))
        return chat_answer({"brief": [], "topics": []})

    async with sidecar(pb, empty) as pool, pool_running(pool):
        row = await eventually(lambda: when(insights_row(superuser, rid), lambda r: r["state"] == "done"))
    # Once more, more simply, then no brief: why, on the insights row (the panel) and in the journal.
    assert len(asked) == 2 and asked[1]["messages"][0]["content"].startswith("Say in one sentence, in English,")
    assert row["no_brief"] == "nothing_usable" and row["halted_at"] == ""
    assert row["no_brief_reason"] == (
        "the model's first answer gave nothing usable (it proposed no sentence), "
        "nor did a simpler request (it proposed no sentence)"
    )
    events = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record = "{rid}"', "perPage": 200}
    ).json()["items"]
    assert any(e["outcome_text"].startswith("no brief: the model's first answer gave nothing usable") for e in events)
    # The sender's poll says there is none and why (the page words it); the list says so too.
    poll = sender.poll(rid)
    assert poll["brief"] is None and poll["brief_missing_reason"] == "nothing_usable"
    items = sender.http.get("/api/transcriber/records").json()["items"]
    assert items[0]["brief_missing_reason"] == "nothing_usable"
    # The owner writes one: the poll no longer says there is none.
    rec = superuser.record(rid)
    form = {k: v for k, v in rec.items() if k not in ("id", "collectionId", "collectionName", "created", "updated")}
    form["brief"] = "A test upload."
    assert superuser.http.patch(f"/api/collections/audio_records/records/{rid}", json=form).status_code == 200
    assert sender.poll(rid)["brief_missing_reason"] is None
