"""The poll says what is happening: ``activity`` beside the stage, the language as soon as it is found."""

from __future__ import annotations

import time
from typing import Any

import httpx

from testkit.pocketbase import CLAIMABLE, Caller, now_ms


def fenced(service: Caller, rid: str, outcome: str, token: str, **body: Any) -> httpx.Response:
    return service.http.post(
        f"/api/pipeline/records/{rid}/settle", json={"token": token, "now": now_ms(), "outcome": outcome, **body}
    )


def advance(service: Caller, rid: str, token: str, to: str) -> None:
    assert fenced(service, rid, "advanced", token, to=to).status_code == 200


def test_the_poll_says_what_is_happening_at_each_stage(sender: Caller, service: Caller) -> None:
    rid = sender.upload()
    assert sender.poll(rid)["activity"] == "queued"
    token = service.claim(rid)["token"]
    assert sender.poll(rid)["activity"] == "normalizing"
    advance(service, rid, token, "normalized")
    assert sender.poll(rid)["activity"] == "queued"  # between stages, waiting for a worker

    token = service.claim(rid)["token"]
    body = sender.poll(rid)
    assert (body["status"], body["activity"], body["language"]) == ("normalized", "recognizing", None)
    # The language lands with the progress the moment the engine finds it, long before done.
    assert fenced(service, rid, "progressed", token, progress=0.2, language="ru").status_code == 200
    body = sender.poll(rid)
    assert (body["status"], body["language"], body["progress"]) == ("normalized", "ru", 0.2)
    assert fenced(service, rid, "progressed", token, progress=0.7, activity="finding_speakers").status_code == 200
    assert sender.poll(rid)["activity"] == "finding_speakers"
    items = sender.http.get("/api/transcriber/records").json()["items"]
    assert [(i["id"], i["activity"], i["language"]) for i in items] == [(rid, "finding_speakers", "ru")]
    advance(service, rid, token, "submitted")

    token = service.claim(rid)["token"]
    assert sender.poll(rid)["activity"] == "waiting_for_provider"  # polling it, or not: the provider has it
    assert fenced(service, rid, "postponed", token, until=now_ms() + 1000).status_code == 200
    assert sender.poll(rid)["activity"] == "waiting_for_provider"
    time.sleep(1.1)
    token = service.claim(rid)["token"]
    advance(service, rid, token, "transcribed")
    assert sender.poll(rid)["activity"] == "queued"
    token = service.claim(rid)["token"]
    assert sender.poll(rid)["activity"] == "finalizing"
    advance(service, rid, token, "done")
    assert (sender.poll(rid)["activity"], sender.poll(rid)["progress"]) == ("done", 1)


def test_what_a_worker_said_ends_with_its_claim(sender: Caller, service: Caller) -> None:
    rid = sender.upload()
    token = service.claim(rid)["token"]
    advance(service, rid, token, "normalized")
    token = service.claim(rid, leases=dict.fromkeys(CLAIMABLE, 1500))["token"]
    assert fenced(service, rid, "progressed", token, progress=0.9, activity="finding_speakers").status_code == 200
    assert sender.poll(rid)["activity"] == "finding_speakers"
    time.sleep(1.6)  # the worker died: its lease ran out, the record waits to be claimed again
    assert sender.poll(rid)["activity"] == "queued"
    service.claim(rid)
    assert sender.poll(rid)["activity"] == "recognizing"  # a new claim: nothing said yet


def test_a_halted_recording_says_so_and_a_step_cannot_claim_what_the_record_says(
    sender: Caller, service: Caller
) -> None:
    rid = sender.upload()
    token = service.claim(rid)["token"]
    for derived in ("queued", "done", "halted", "sleeping"):
        refused = fenced(service, rid, "progressed", token, progress=0.1, activity=derived)
        assert refused.status_code == 400 and refused.json()["code"] == "invalid", derived
    assert fenced(service, rid, "halted", token, code="unsupported_media", reason="not audio").status_code == 200
    body = sender.poll(rid)
    assert (body["activity"], body["halt_code"]) == ("halted", "unsupported_media")
