"""The literary text proofread by a language model, against a real PocketBase and an OpenAI-compatible chat
server faked with respx (shaped like OpenAI's chat completions): a misheard word mended, an answer that is
garbage, in another language, or that never comes leaves the rules' paragraph, and the owner reads why in
the texts row's paragraphs and in the journal. The owner's dictionary reaches the model."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx
from pydantic import SecretStr

from sidecar.insights.engines import OpenAIEngine
from sidecar.runtime.clock import SystemClock
from sidecar.serving.assembly import pipeline
from sidecar.settings import InsightsSettings
from testkit.pocketbase import Caller, PocketBaseServer
from tests.support.fakes import StubProvider, chat_answer
from tests.support.pipeline_steps import storing
from tests.support.sidecar import pool_running, settings_for
from tests.support.waiting import eventually

pytestmark = pytest.mark.anyio

# Four paragraphs (turns of speakers): one misheard word, and three answers that fail each their own way.
LINES = [
    ("Speaker 1", "um, we moved the cluster to cuber netties last week."),
    ("Speaker 2", "good, the whether report is due on Friday."),
    ("Speaker 1", "Anna will not write the 3 release notes."),
    ("Speaker 2", "the budget stays as it is."),
]
KEY = "sk-test-abcdef123456"


STEPS = storing(LINES)

BRIEF = {"brief": [{"sentence": "The cluster moved.", "quote": "we moved the cluster to"}], "topics": []}


def fixes(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"fixes": [{"heard": h, "meant": m} for h, m in pairs]}


def reply(asked: list[dict[str, Any]]) -> Any:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if not body["messages"][0]["content"].startswith("You proofread"):
            return chat_answer(BRIEF)  # the brief's requests
        data = json.loads(body["messages"][-1]["content"])
        asked.append(data)
        paragraph = data["paragraph"]
        if "cuber netties" in paragraph:
            return chat_answer(fixes(("cuber netties", "Kubernetes")))
        if "whether" in paragraph:
            return chat_answer("I would say the paragraph is fine as it is.")  # garbage: not the JSON
        if "release notes" in paragraph:
            return chat_answer(fixes(("release notes", "заметки к релизу")))  # another language
        raise httpx.ReadTimeout("timed out", request=request)  # no answer

    return answer


async def test_the_model_mends_a_misheard_word_and_each_failure_keeps_the_rules_paragraph_with_its_reason(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    made = superuser.http.post("/api/collections/topics/records", json={"owner": sender.id, "name": "Kubernetes"})
    assert made.status_code == 200, made.text
    rid = sender.upload()
    settings = settings_for(pb, workers=1)
    settings.insights = InsightsSettings(
        provider="openai", model="m", base_url="http://chat.test", api_key=SecretStr(KEY)
    )
    asked: list[dict[str, Any]] = []
    with respx.mock(assert_all_called=False) as router:
        router.post("http://chat.test/v1/chat/completions").mock(side_effect=reply(asked))
        router.route(host="127.0.0.1").pass_through()
        engine = OpenAIEngine(settings.insights, SystemClock())
        async with pipeline(settings, steps=STEPS, provider=StubProvider(), insights=engine) as pool:
            async with pool_running(pool):
                await eventually(lambda: _done(superuser, rid), within=60)
    items = superuser.http.get(
        "/api/collections/texts/records", params={"filter": f'record = "{rid}" && kind = "literary"'}
    ).json()["items"]
    text = items[0]
    timed_out = (
        "the model could not be asked: the chat server at chat.test did not answer within the timeout "
        "(ReadTimeout, 3 tries)"
    )
    assert text["segments"] == [
        {
            "start": 0,
            "end": 4,
            "speaker": "Speaker 1",
            "text": "We moved the cluster to Kubernetes last week.",
            "proofread": "model",
        },
        {
            "start": 5,
            "end": 9,
            "speaker": "Speaker 2",
            "text": "Good, the whether report is due on Friday.",
            "proofread": "rules",
            "reason": "the model's answer was not the JSON asked for",
        },
        {
            "start": 10,
            "end": 14,
            "speaker": "Speaker 1",
            "text": "Anna will not write the 3 release notes.",
            "proofread": "rules",
            "reason": "the model's words are not in English",
        },
        {
            "start": 15,
            "end": 19,
            "speaker": "Speaker 2",
            "text": "The budget stays as it is.",
            "proofread": "rules",
            "reason": timed_out,
        },
    ]
    assert text["content"].startswith("Speaker 1: We moved the cluster to Kubernetes last week.\n\n")
    assert asked[0]["dictionary"] == ["Kubernetes"] and asked[1]["before"].endswith("Kubernetes last week.")
    journal = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record = "{rid}"', "sort": "created"}
    ).json()["items"]
    said = [e["outcome_text"] for e in journal if e["stage"] == "literary"]
    assert "literary: paragraph at 00:15 kept as the rules made it: " + timed_out in said
    assert said[-1] == (
        "literary text of 4 paragraphs (proofread by openai (m): 1 corrected, 0 found right, 3 kept as the rules "
        "made them (1 the model's answer was not the JSON asked for; 1 the model's words are not in English; "
        "1 the model could not be asked))"
    )
    assert KEY not in json.dumps(journal)


def _done(su: Caller, rid: str) -> dict[str, Any]:
    items = su.http.get("/api/collections/literary/records", params={"filter": f'record = "{rid}"'}).json()["items"]
    return dict(items[0]) if items and items[0]["state"] == "done" else {}
