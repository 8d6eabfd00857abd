"""ST6: the owner's edits in the panel, which posts the whole form as it was opened."""

from __future__ import annotations

import time
from typing import Any

from testkit.pocketbase import Caller, PocketBaseServer, created_ms, now_ms
from tests.support.waiting import eventually_sync

FORM_FIELDS = [
    "title",
    "owner",
    "state",
    "halted_at",
    "halt_code",
    "halt_reason",
    "attempts",
    "brief",
    "topics",
    "state_entered_at",
    "claim_token",
    "claim_expires_at",
    "paused_until",
    "available_at",
    "queue_rev",
]


def open_form(su: Caller, rid: str) -> dict[str, Any]:
    rec = su.record(rid)
    return {k: rec[k] for k in FORM_FIELDS}


def save_form(su: Caller, rid: str, form: dict[str, Any]) -> dict[str, Any]:
    resp = su.http.patch(f"/api/collections/audio_records/records/{rid}", json=form)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def events(su: Caller, rid: str) -> list[dict[str, Any]]:
    resp = su.http.get(
        "/api/collections/record_events/records", params={"filter": f'record="{rid}"', "sort": "created,@rowid"}
    )
    return list(resp.json()["items"])


def test_clearing_halted_at_releases_the_claim_and_resets_the_clocks(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    rid = sender.upload(title="t0")
    c = service.claim()
    halt = service.http.post(
        f"/api/pipeline/records/{rid}/settle",
        json={"outcome": "halted", "token": c["token"], "now": now_ms(), "code": "stalled", "reason": "r"},
    )
    assert halt.status_code == 200
    # an old stage clock, as a long-halted record would have
    form = open_form(superuser, rid)
    assert form["halted_at"] and form["halt_code"] == "stalled"
    before = now_ms()
    form["halted_at"] = ""
    saved = save_form(superuser, rid, form)
    assert saved["halted_at"] == "" and saved["halt_code"] == ""
    assert saved["claim_token"] == "" and saved["claim_expires_at"] == 0
    assert saved["attempts"] == 0
    assert saved["state_entered_at"] >= before
    # back in the queue at its creation time: resumed records keep their place in creation order
    assert saved["available_at"] == created_ms(saved)
    assert saved["state"] == "uploaded"
    assert [e["kind"] for e in events(superuser, rid)][-1] == "resumed"
    # and the record is claimable again, with a new token
    again = service.claim()
    assert again["id"] == rid and again["token"] != c["token"]


def test_stale_form_with_only_the_title_changed_keeps_the_workers_fields(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    rid = sender.upload(title="t0")
    form = open_form(superuser, rid)  # the owner opens the dialog
    c = service.claim()  # meanwhile a worker claims the record
    fresh = open_form(superuser, rid)
    form["title"] = "Renamed by the owner"
    saved = save_form(superuser, rid, form)
    assert saved["title"] == "Renamed by the owner"
    for f in ("claim_token", "attempts", "state", "claim_expires_at", "available_at", "queue_rev", "state_entered_at"):
        assert saved[f] == fresh[f], f
    assert saved["claim_token"] == c["token"]
    # the worker's claim still holds: its fenced write lands
    adv = service.http.post(
        f"/api/pipeline/records/{rid}/settle",
        json={"outcome": "advanced", "token": c["token"], "now": now_ms(), "to": "normalized"},
    )
    assert adv.status_code == 200
    rec = open_form(superuser, rid)
    assert rec["state"] == "normalized" and rec["title"] == "Renamed by the owner"


def test_a_stale_form_that_would_change_the_stage_is_refused_with_a_message(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    """O8: not silently dropped (the panel would show success): refused, and the panel shows why."""
    rid = sender.upload(title="t0")
    form = open_form(superuser, rid)
    c = service.claim()
    service.http.post(
        f"/api/pipeline/records/{rid}/settle",
        json={"outcome": "advanced", "token": c["token"], "now": now_ms(), "to": "normalized"},
    )
    form["title"] = "t1"
    resp = superuser.http.patch(f"/api/collections/audio_records/records/{rid}", json=form)  # still says "uploaded"
    assert resp.status_code == 400
    assert "changed since you opened it" in resp.json()["message"] and "normalized" in resp.json()["message"]
    rec = superuser.record(rid)
    assert rec["state"] == "normalized" and rec["title"] == "t0"  # nothing of the stale form landed
    # Reopened, the same edit goes through.
    fresh = open_form(superuser, rid)
    fresh["title"] = "t1"
    assert save_form(superuser, rid, fresh)["title"] == "t1"


def test_the_owner_can_change_a_record_a_worker_keeps_claiming_and_postponing(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    rid = sender.upload(title="t0")
    form = open_form(superuser, rid)  # the dialog stays open while a worker polls the record
    for _ in range(3):
        c = service.claim()
        resp = service.http.post(
            f"/api/pipeline/records/{rid}/settle",
            json={"outcome": "postponed", "token": c["token"], "now": now_ms(), "until": now_ms() + 1},
        )
        assert resp.status_code == 200
        time.sleep(0.01)
    form["halted_at"] = "2026-01-01 00:00:00.000Z"
    form["halt_reason"] = "wrong file"
    saved = save_form(superuser, rid, form)
    assert saved["halted_at"] and saved["halt_code"] == "halted_by_owner" and saved["halt_reason"] == "wrong file"
    assert events(superuser, rid)[-1]["kind"] == "halted"
    # P16: the halt is also a log line (PocketBase writes its log in batches)
    logs = eventually_sync(
        lambda: superuser.http.get("/api/logs", params={"filter": 'message="record halted by the owner"'}).json()[
            "items"
        ],
        within=15,
        every=0.2,
        what="a log line for the owner's halt",
    )
    assert logs[0]["data"]["record"] == rid and logs[0]["data"]["reason"] == "wrong file"


def test_changing_the_stage_restarts_it_and_is_journalled(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    rid = sender.upload(title="t0")
    c = service.claim()
    form = open_form(superuser, rid)
    before = now_ms()
    form["state"] = "normalized"
    saved = save_form(superuser, rid, form)
    assert saved["state"] == "normalized" and saved["state_entered_at"] >= before
    assert saved["claim_token"] == "" and saved["attempts"] == 0
    ev = events(superuser, rid)[-1]
    assert ev["kind"] == "stage_set" and "uploaded" in ev["outcome_text"] and "normalized" in ev["outcome_text"]
    # the old claim is fenced out
    late = service.http.post(
        f"/api/pipeline/records/{rid}/settle",
        json={"outcome": "advanced", "token": c["token"], "now": now_ms(), "to": "normalized"},
    )
    assert late.status_code == 409 and late.json()["code"] == "fenced_out"


def test_setting_the_stage_to_done_takes_the_record_out_of_the_queue(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    rid = sender.upload(title="t0")
    form = open_form(superuser, rid)
    form["state"] = "done"
    assert save_form(superuser, rid, form)["available_at"] == 0
    resp = service.http.post("/api/pipeline/claim", json={"now": now_ms(), "leases": {"uploaded": 1000}})
    assert resp.status_code == 204


def test_direct_edits_of_worker_fields_are_ignored(pb: PocketBaseServer, sender: Caller, superuser: Caller) -> None:
    rid = sender.upload(title="t0")
    saved = save_form(superuser, rid, {"attempts": 9, "claim_token": "forged", "title": "ok"})
    assert saved["attempts"] == 0 and saved["claim_token"] == "" and saved["title"] == "ok"
