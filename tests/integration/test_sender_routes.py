"""The routes the sender's page adds: the audio with ranges, resume, rename, the upload options; and
the realtime status (``record_status``) that reaches its sender alone."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from testkit.media import wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer, now_ms
from testkit.realtime import realtime

AUDIO = wav_bytes(1.0)


def halt(service: Caller, rid: str, code: str) -> None:
    token = service.claim(rid)["token"]
    resp = service.http.post(
        f"/api/pipeline/records/{rid}/settle",
        json={"outcome": "halted", "token": token, "now": now_ms(), "code": code, "reason": "test"},
    )
    assert resp.status_code == 200, resp.text


def events(pb: PocketBaseServer, rid: str) -> list[dict[str, Any]]:
    su = pb.superuser()
    resp = su.http.get(
        "/api/collections/record_events/records", params={"filter": f'record="{rid}"', "sort": "created,@rowid"}
    )
    return list(resp.json()["items"])


# --- the audio, with ranges -------------------------------------------------------------------


def test_the_audio_is_served_to_its_sender_with_ranges(
    pb: PocketBaseServer, sender: Caller, other_sender: Caller
) -> None:
    rid = sender.upload(AUDIO)
    url = f"/api/transcriber/records/{rid}/audio"
    whole = sender.http.get(url)
    assert whole.status_code == 200 and whole.content == AUDIO
    assert whole.headers["Accept-Ranges"] == "bytes"
    assert whole.headers["Content-Type"].startswith("audio/")
    assert "private" in whole.headers["Cache-Control"]
    n = len(AUDIO)
    for first, last in [(0, 99), (n // 2, n // 2 + 999), (n - 100, n - 1)]:
        part = sender.http.get(url, headers={"Range": f"bytes={first}-{last}"})
        assert part.status_code == 206, (first, part.status_code)
        assert part.headers["Content-Range"] == f"bytes {first}-{last}/{n}"
        assert part.content == AUDIO[first : last + 1]
    tail = sender.http.get(url, headers={"Range": "bytes=-10"})
    assert tail.status_code == 206 and tail.content == AUDIO[-10:]
    assert sender.http.get(url, headers={"Range": f"bytes={n + 10}-"}).status_code == 416

    # Anyone else: the poll's 404 (another sender), 401 (nobody), 403 (not a sender).
    missing = sender.http.get("/api/transcriber/records/nosuchrecord123/audio")
    theirs = other_sender.http.get(url, headers={"Range": "bytes=0-99"})
    assert theirs.status_code == 404 and theirs.json() == missing.json()
    assert theirs.json()["code"] == "not_found"
    assert other_sender.http.get(f"/api/transcriber/records/{rid}").json() == theirs.json()
    assert pb.anonymous().get(url).status_code == 401
    assert pb.service().http.get(url).status_code == 403
    assert pb.superuser().http.get(url).status_code == 403


def test_a_file_token_in_the_url_plays_and_stays_out_of_the_request_log(
    pb: PocketBaseServer, sender: Caller, other_sender: Caller
) -> None:
    rid = sender.upload(AUDIO)
    token = sender.http.post("/api/files/token").json()["token"]
    anon = pb.anonymous()
    url = f"/api/transcriber/records/{rid}/audio"
    part = anon.get(url, params={"token": token}, headers={"Range": "bytes=10-19"})
    assert part.status_code == 206 and part.content == AUDIO[10:20]
    # Another sender's file token, an auth token in its place, garbage: no audio.
    theirs = other_sender.http.post("/api/files/token").json()["token"]
    assert anon.get(url, params={"token": theirs}).status_code == 404
    assert anon.get(url, params={"token": sender.token}).status_code == 401
    assert anon.get(url, params={"token": "x"}).status_code == 401
    # PocketBase keeps every request's URL in its log: the token is not there.
    su = pb.superuser()

    def logged() -> list[dict[str, Any]]:
        resp = su.http.get("/api/logs", params={"filter": 'data.url ~ "/audio"', "perPage": 50})
        return list(resp.json()["items"])

    deadline = time.monotonic() + 10
    while len(logged()) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    rows = logged()
    assert len(rows) >= 4
    text = json.dumps(rows)
    assert token not in text and theirs not in text and sender.token not in text


# --- resume -----------------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["attempts_exhausted", "stalled", "provider_failed", "results_expired"])
def test_a_sender_resumes_a_halt_another_try_can_cure(
    pb: PocketBaseServer, sender: Caller, service: Caller, code: str
) -> None:
    rid = sender.upload(AUDIO)
    halt(service, rid, code)
    polled = sender.http.get(f"/api/transcriber/records/{rid}").json()
    assert polled["halted"] is True and polled["resumable"] is True
    before = pb.superuser().record(rid)
    resp = sender.http.post(f"/api/transcriber/records/{rid}/resume")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["halted"] is False and body["halt_code"] is None and body["activity"] == "queued"
    assert body["resumable"] is False
    after = pb.superuser().record(rid)
    # The owner's resume: halt cleared, attempts afresh, claim released, back in the queue, the stage kept.
    assert after["halted_at"] == "" and after["halt_code"] == "" and after["attempts"] == 0
    assert after["claim_token"] == "" and after["available_at"] > 0 and after["state"] == before["state"]
    assert after["queue_rev"] == before["queue_rev"] + 1
    resumed = [e for e in events(pb, rid) if e["kind"] == "resumed"]
    assert [(e["actor"], e["outcome_text"]) for e in resumed] == [("sender", f"halt cleared by the sender ({code})")]
    # The workers take it again.
    service.claim(rid)


def test_resuming_keeps_the_recognitions_already_paid_for(
    pb: PocketBaseServer, sender: Caller, service: Caller
) -> None:
    """No paid call twice: a resume supersedes no attempt (only the owner's stage change does)."""
    rid = sender.upload(AUDIO)
    token = service.claim(rid)["token"]
    pipe = f"/api/pipeline/records/{rid}"
    made = service.http.post(f"{pipe}/attempts", json={"token": token, "provider": "speechkit"})
    assert made.status_code == 200, made.text
    started = service.http.post(f"{pipe}/attempts/{made.json()['id']}", json={"token": token, "operation_id": "op1"})
    assert started.status_code == 200, started.text
    assert (
        service.http.post(
            f"{pipe}/settle",
            json={
                "outcome": "halted",
                "token": token,
                "now": now_ms(),
                "code": "attempts_exhausted",
                "reason": "polls failed",
            },
        ).status_code
        == 200
    )
    assert sender.http.post(f"/api/transcriber/records/{rid}/resume").status_code == 200
    su = pb.superuser()
    rows = su.http.get("/api/collections/recognition_attempts/records", params={"filter": f'record="{rid}"'})
    (attempt,) = rows.json()["items"]
    assert attempt["operation_id"] == "op1" and attempt["status"] not in ("superseded", "lost")


@pytest.mark.parametrize(
    "code", ["too_long", "unsupported_media", "halted_by_owner", "unclaimable", "provider_rejected"]
)
def test_halts_a_retry_cannot_cure_are_not_the_senders_to_resume(
    pb: PocketBaseServer, sender: Caller, service: Caller, code: str
) -> None:
    rid = sender.upload(AUDIO)
    halt(service, rid, code)
    assert sender.http.get(f"/api/transcriber/records/{rid}").json()["resumable"] is False
    resp = sender.http.post(f"/api/transcriber/records/{rid}/resume")
    assert resp.status_code == 409 and resp.json()["code"] == "not_resumable", resp.text
    assert code in resp.json()["message"]
    polled = sender.http.get(f"/api/transcriber/records/{rid}").json()
    assert polled["halted"] is True and polled["halt_code"] == code
    assert not [e for e in events(pb, rid) if e["kind"] == "resumed"]


def test_resume_is_refused_when_not_halted_for_someone_else_and_after_three_times(
    pb: PocketBaseServer, sender: Caller, other_sender: Caller, service: Caller
) -> None:
    rid = sender.upload(AUDIO)
    resp = sender.http.post(f"/api/transcriber/records/{rid}/resume")
    assert resp.status_code == 409 and resp.json()["code"] == "not_halted"
    halt(service, rid, "stalled")
    theirs = other_sender.http.post(f"/api/transcriber/records/{rid}/resume")
    assert theirs.status_code == 404 and theirs.json()["code"] == "not_found"
    assert pb.anonymous().post(f"/api/transcriber/records/{rid}/resume").status_code == 401
    assert service.http.post(f"/api/transcriber/records/{rid}/resume").status_code == 403
    for _ in range(3):
        assert sender.http.post(f"/api/transcriber/records/{rid}/resume").status_code == 200
        halt(service, rid, "stalled")
    assert sender.http.get(f"/api/transcriber/records/{rid}").json()["resumable"] is False
    resp = sender.http.post(f"/api/transcriber/records/{rid}/resume")
    assert resp.status_code == 409 and resp.json()["code"] == "resume_limit"
    assert sender.http.get(f"/api/transcriber/records/{rid}").json()["halted"] is True


def test_an_over_quota_halt_resumes_only_within_the_days_audio(tmp_path: Any) -> None:
    """The length normalize measured (kept when it halted) against what is left of the sender's day:
    429 too_much_audio with Retry-After while it does not fit, nothing changed; a recording longer than
    the whole day's quota never fits (the poll says no time); with room, resumed and its audio reserved."""
    from sidecar.settings import QuotaSettings
    from testkit.pocketbase import running_pocketbase

    quotas = QuotaSettings(uploads_per_hour=0, waiting=0, audio_hours_per_day=10 / 3600)
    with running_pocketbase(tmp_path, quotas=quotas) as pb:
        sender, service, su = pb.new_sender(), pb.service(), pb.superuser()
        rid, huge = sender.upload(wav_bytes(0.5)), sender.upload(wav_bytes(0.5))
        held = sender.upload(wav_bytes(6.0))  # 6 s of the day's 10 reserved at intake
        for one, measured in ((rid, 6000), (huge, 11_000)):
            halt(service, one, "over_quota")
            pb.sql("UPDATE audio_records SET duration_ms = ?, quota_ms = 0 WHERE id = ?", measured, one)
        polled = sender.poll(rid)
        assert (polled["halt_code"], polled["resumable"]) == ("over_quota", False)
        assert polled["resumable_at"] is not None
        before = su.record(rid)
        resp = sender.http.post(f"/api/transcriber/records/{rid}/resume")
        assert resp.status_code == 429 and resp.json()["code"] == "too_much_audio", resp.text
        assert 86000 < int(resp.headers["Retry-After"]) <= 86400
        assert su.record(rid) == before and not [e for e in events(pb, rid) if e["kind"] == "resumed"]
        # Longer than the day's whole quota: no wait helps, the poll names no time.
        never = sender.poll(huge)
        assert (never["resumable"], never["resumable_at"]) == (False, None)
        resp = sender.http.post(f"/api/transcriber/records/{huge}/resume")
        assert resp.status_code == 429 and "raises it" in resp.json()["message"]
        # The 6 seconds reserved go (halted by the owner before normalize: held no more): it fits now.
        halt(service, held, "halted_by_owner")
        assert sender.poll(rid)["resumable"] is True
        resp = sender.http.post(f"/api/transcriber/records/{rid}/resume")
        assert resp.status_code == 200, resp.text
        assert su.record(rid)["quota_ms"] == 6000  # held from now on, until normalize measures it again
        assert [e["actor"] for e in events(pb, rid) if e["kind"] == "resumed"] == ["sender"]


def test_resume_counts_against_the_waiting_quota(tmp_path: Any) -> None:
    from sidecar.settings import QuotaSettings
    from testkit.pocketbase import running_pocketbase

    with running_pocketbase(tmp_path, quotas=QuotaSettings(uploads_per_hour=0, waiting=1, audio_hours_per_day=0)) as pb:
        sender, service = pb.new_sender(), pb.service()
        first = sender.upload(AUDIO)
        halt(service, first, "stalled")  # a halted recording does not wait
        sender.upload(AUDIO)  # the one waiting now
        resp = sender.http.post(f"/api/transcriber/records/{first}/resume")
        assert resp.status_code == 429 and resp.json()["code"] == "too_many_waiting"
        assert int(resp.headers["Retry-After"]) > 0
        assert sender.http.get(f"/api/transcriber/records/{first}").json()["halted"] is True


# --- rename -----------------------------------------------------------------------------------


def test_a_sender_renames_their_recording_and_nothing_else(
    pb: PocketBaseServer, sender: Caller, other_sender: Caller
) -> None:
    rid = sender.upload(AUDIO, title="Recording 1")
    url = f"/api/transcriber/records/{rid}"
    resp = sender.http.patch(url, json={"title": "  Board meeting 🎙  "})
    assert resp.status_code == 200, resp.text
    assert resp.json()["title"] == "Board meeting 🎙"
    assert sender.http.get(url).json()["title"] == "Board meeting 🎙"
    assert [e["actor"] for e in events(pb, rid) if e["outcome_text"] == "title changed by the sender"] == ["sender"]
    assert sender.http.patch(url, json={"title": "x" * 500}).status_code == 200
    long = sender.http.patch(url, json={"title": "x" * 501})
    assert long.status_code == 400 and long.json()["code"] == "title_too_long"
    assert sender.http.patch(url, json={"title": 5}).json()["code"] == "invalid_title"
    assert sender.http.patch(url, json={"title": "a", "state": "done"}).json()["code"] == "unknown_field"
    big = sender.http.patch(url, content=b'{"title": "' + b"x" * 100_000 + b'"}')
    assert big.status_code == 413
    theirs = other_sender.http.patch(url, json={"title": "mine now"})
    assert theirs.status_code == 404 and theirs.json()["code"] == "not_found"
    assert sender.http.get(url).json()["title"] == "x" * 500


def test_the_upload_options_name_the_intakes_languages(pb: PocketBaseServer) -> None:
    body = pb.anonymous().get("/api/transcriber/options").json()
    su = pb.superuser()
    schema = su.http.get("/api/collections/audio_records").json()
    (language,) = [f for f in schema["fields"] if f["name"] == "language"]
    assert body["languages"] == language["values"] and "ru" in body["languages"]
    assert body["max_upload_bytes"] == 1024 * 1024 * 1024
    assert body["resumable_halt_codes"] == [
        "attempts_exhausted",
        "stalled",
        "provider_failed",
        "results_expired",
        "over_quota",
    ]
    # No mail is set up in a fresh server: the page says to ask the owner for a new password.
    assert body["password_reset"] is False
    (password,) = [f for f in su.http.get("/api/collections/users").json()["fields"] if f["name"] == "password"]
    # characters as PocketBase's field counts them; bytes as bcrypt does
    limits = {"min": password["min"], "max": 71, "max_bytes": 72}
    assert body["password_length"] == limits == {"min": 8, "max": 71, "max_bytes": 72}


# --- realtime status --------------------------------------------------------------------------


def test_realtime_status_reaches_its_sender_alone(
    pb: PocketBaseServer, sender: Caller, other_sender: Caller, service: Caller
) -> None:
    subs = ["record_status/*"]
    with (
        realtime(pb.url, sender.token, subs) as mine,
        realtime(pb.url, other_sender.token, subs) as theirs,
        realtime(pb.url, None, subs) as nobody,
        realtime(
            pb.url, other_sender.token, ["record_status/*?options=" + json.dumps({"query": {"expand": "owner"}})]
        ) as expanding,
    ):
        rid = sender.upload(AUDIO, title="Standup")
        created = mine.wait_for(lambda d: d["record"]["id"] == rid)
        assert created["record"]["poll"]["status"] == "uploaded"
        assert created["record"]["poll"]["title"] == "Standup"
        assert created["record"]["owner"] == sender.id
        assert "text" not in created["record"]["poll"]

        # The workers move it: the claim, progress with the language, a halt; each one an event.
        token = service.claim(rid)["token"]
        mine.wait_for(lambda d: d["record"]["poll"]["activity"] == "normalizing")
        pipe = f"/api/pipeline/records/{rid}"
        assert (
            service.http.post(
                f"{pipe}/settle", json={"outcome": "advanced", "token": token, "now": now_ms(), "to": "normalized"}
            ).status_code
            == 200
        )
        token = service.claim(rid)["token"]
        assert (
            service.http.post(
                f"{pipe}/settle",
                json={
                    "outcome": "progressed",
                    "token": token,
                    "now": now_ms(),
                    "progress": 0.4,
                    "activity": "recognizing",
                    "language": "ru",
                },
            ).status_code
            == 200
        )
        moving = mine.wait_for(lambda d: d["record"]["poll"]["progress"] == 0.4)
        assert moving["record"]["poll"]["language"] == "ru"
        assert moving["record"]["poll"]["activity"] == "recognizing"
        assert (
            service.http.post(
                f"{pipe}/settle",
                json={"outcome": "halted", "token": token, "now": now_ms(), "code": "stalled", "reason": "r"},
            ).status_code
            == 200
        )
        halted = mine.wait_for(lambda d: d["record"]["poll"]["halted"])
        assert halted["record"]["poll"]["resumable"] is True
        assert sender.http.post(f"{pipe.replace('pipeline', 'transcriber')}/resume").status_code == 200
        mine.wait_for(lambda d: not d["record"]["poll"]["halted"])
        assert sender.http.patch(f"/api/transcriber/records/{rid}", json={"title": "Renamed"}).status_code == 200
        mine.wait_for(lambda d: d["record"]["poll"]["title"] == "Renamed")

        # The owner halts it in the panel: that reaches the page too.
        su = pb.superuser()
        rec = su.record(rid)
        rec["halted_at"] = "2026-01-01 09:00:00.000Z"
        assert su.http.patch(f"/api/collections/audio_records/records/{rid}", json=rec).status_code == 200
        mine.wait_for(lambda d: d["record"]["poll"]["halt_code"] == "halted_by_owner")

        # Nobody else heard a thing: not another sender, not an anonymous stream, not with an expand.
        for stream in (theirs, nobody, expanding):
            assert stream.drain(1.0) == []

    # The rows are for realtime only: the records API shows them to no sender, nor to the service.
    for caller in (sender, other_sender, service):
        base = "/api/collections/record_status/records"
        assert caller.http.get(base).status_code == 403
        # (PocketBase checks the view rule first: a sender it does not admit gets its 404)
        assert caller.http.get(f"{base}/{rid}").status_code == (403 if caller is sender else 404)
    assert pb.anonymous().get("/api/collections/record_status/records").status_code == 403


def test_each_status_event_is_numbered_so_the_newest_is_known_whatever_order_they_arrive_in(
    pb: PocketBaseServer, sender: Caller, service: Caller
) -> None:
    """PocketBase hands each realtime message over on its own, so changes made close together may
    arrive in any order: ``seq`` counts the writes of one recording's row, and the highest is the
    newest (the sender's page keeps it, pb_public/js/latest.js)."""
    steps = [round(0.01 * i, 2) for i in range(1, 31)]
    with realtime(pb.url, sender.token, ["record_status/*"]) as mine:
        rid = sender.upload(AUDIO)
        token = service.claim(rid)["token"]
        for value in steps:  # back to back, as a worker's first reports come
            resp = service.http.post(
                f"/api/pipeline/records/{rid}/settle",
                json={"outcome": "progressed", "token": token, "now": now_ms(), "progress": value},
            )
            assert resp.status_code == 200, resp.text
        heard = [data["record"] for _, data in mine.drain(3.0)]
    # The upload, the claim and one write per progress: each an event, numbered once, from 1 up.
    assert all(r["id"] == rid for r in heard)
    assert sorted(r["seq"] for r in heard) == list(range(1, len(steps) + 3))
    # Read by their numbers, the events tell the story in the order it happened; the last is the newest.
    story = sorted(heard, key=lambda r: r["seq"])
    assert story[0]["poll"]["status"] == "uploaded" and story[0]["poll"]["progress"] is None
    assert story[1]["poll"]["activity"] == "normalizing"
    assert [r["poll"]["progress"] for r in story[2:]] == steps


def test_one_recording_is_heard_by_its_sender_and_not_by_another_asking_for_it_by_id(
    pb: PocketBaseServer, sender: Caller, other_sender: Caller, service: Caller
) -> None:
    rid = sender.upload(AUDIO)
    with (
        realtime(pb.url, sender.token, [f"record_status/{rid}"]) as mine,
        realtime(pb.url, other_sender.token, [f"record_status/{rid}"]) as theirs,
    ):
        service.claim(rid)
        mine.wait_for(lambda d: d["record"]["id"] == rid and d["record"]["poll"]["activity"] == "normalizing")
        assert theirs.drain(1.0) == []
