"""The outside probe's findings (issue H3, H6, H7 and the panel's gaps), each
replayed against the real server: a decompression bomb, PocketBase's own
errors, absurd numbers in the fenced routes, a correction that must reach every
export, an owner change, a recording made in the panel."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
import pytest

from sidecar.providers.instant import InstantProvider
from sidecar.service import default_steps
from testkit.flac_bomb import write_flac_bomb
from testkit.media import wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer, running_pocketbase
from tests.support import raw_http
from tests.support.exports import exported, finished, parse_srt, parse_vtt, seg
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow

INTAKE = "/api/transcriber/records"


def journal(su: Caller, rid: str) -> list[dict[str, Any]]:
    found = su.http.get(
        "/api/collections/record_events/records", params={"filter": f'record="{rid}"', "sort": "created,@rowid"}
    )
    items: list[dict[str, Any]] = found.json()["items"]
    return items


def test_a_flac_bomb_halts_too_long_at_once_and_nothing_big_is_stored(tmp_path: Path) -> None:
    bomb = write_flac_bomb(tmp_path / "meeting.flac", hours=100)
    with running_pocketbase(tmp_path / "pb") as pb:
        sender, su = pb.new_sender(), pb.superuser()
        rid = sender.http.post(INTAKE, files={"file": ("meeting.flac", bomb.read_bytes())}).json()["id"]

        async def run() -> None:
            async with running_sidecar(pb, default_steps(), provider=InstantProvider()) as pool:
                async with pool_running(pool):
                    await eventually(lambda: sender.http.get(f"{INTAKE}/{rid}").json()["halted"], within=60)

        anyio.run(run)
        rec = su.http.get(f"/api/collections/audio_records/records/{rid}").json()
        assert (rec["halt_code"], rec["attempts"]) == ("too_long", 1)
        assert rec["halt_reason"] == "the audio is longer than allowed (limit 6:00:00)"
        stored = [p.stat().st_size for p in (pb.settings.pocketbase.data_dir / "storage").rglob("*") if p.is_file()]
        assert max(stored) < 1 << 20  # the upload itself and PocketBase's notes about it


def test_every_error_a_sender_can_meet_carries_a_code(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path, max_upload_mb=1) as pb:
        sender, anonymous = pb.new_sender(), pb.anonymous()
        answers: dict[str, httpx.Response] = {
            # PocketBase's own body limit (the route allows the file limit plus 1 MB of envelope)
            "too_large": sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(80))}),
            "bad_upload": sender.http.post(
                INTAKE,
                content=b'--b\r\nContent-Disposition: form-data; name="title"\r\n\r\nt\r\n' * 20_000 + b"--b--\r\n",
                headers={"Content-Type": "multipart/form-data; boundary=b"},
            ),
            "login_failed": anonymous.post(
                "/api/collections/users/auth-with-password", json={"identity": sender.email, "password": "wrong"}
            ),
            "unauthorized": anonymous.get(f"{INTAKE}/abc"),
            "not_found": sender.http.get(f"{INTAKE}/abcdefghijklmno"),
            "title_too_long": sender.http.post(
                INTAKE, files={"file": ("a.wav", wav_bytes(0.1))}, data={"title": "🎙" * 501}
            ),
        }
        for code, resp in answers.items():
            assert 400 <= resp.status_code < 500, (code, resp.status_code)
            body = resp.json()
            assert body["code"] == code, (code, body)
            assert isinstance(body["message"], str) and len(body["message"]) > 10, body
            assert body["status"] == resp.status_code
        assert answers["too_large"].json()["message"] == "The upload is larger than the limit of 1 MB."
        assert answers["title_too_long"].json()["message"].startswith("The title is 501 characters")

        # characters, not UTF-16 units: 500 emoji are 500 characters
        titled = sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.1))}, data={"title": "🎙" * 500})
        assert titled.status_code == 201 and titled.json()["title"] == "🎙" * 500

        # PocketBase's rate limiter says when to come back (one address, many accounts)
        for i in range(30):
            limited = anonymous.post(
                "/api/collections/users/auth-with-password",
                json={"identity": f"nobody-{i}@example.com", "password": "wrong"},
            )
            if limited.status_code == 429:
                break
        assert limited.status_code == 429
        assert limited.json()["code"] == "too_many_requests" and int(limited.headers["Retry-After"]) > 0


@pytest.mark.parametrize(("field", "code"), [("title", "title_too_long"), ("language", "unknown_language")])
def test_a_20_mb_text_field_is_refused_unread_and_costs_pocketbase_no_memory(
    field: str, code: str, tmp_path: Path, figures: dict[str, str]
) -> None:
    """A long title cost PocketBase about 100 bytes a character before it was refused (2.2 GB
    resident for 20 MiB); now every text field is bounded in bytes before it is read."""
    with running_pocketbase(tmp_path) as pb:
        sender, su = pb.new_sender(), pb.superuser()
        server = psutil.Process(pb.proc.pid)
        # the hooks loaded and warm: one upload of the ordinary kind
        warm = sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.2))}, data={field: "en"})
        assert warm.status_code == 201
        before = server.memory_info().rss
        cpu_before = sum(server.cpu_times()[:2])
        body = raw_http.multipart("b0undary", [(field, None, b"t" * (20 << 20)), ("file", "a.wav", wav_bytes(0.2))])
        answer = raw_http.post(
            pb.url,
            INTAKE,
            body,
            {"Authorization": sender.token, "Content-Type": "multipart/form-data; boundary=b0undary"},
        )
        grown = server.memory_info().rss - before
        cpu = sum(server.cpu_times()[:2]) - cpu_before
        figures[f"PocketBase RSS after a 20 MiB {field}"] = (
            f"{before / 2**20:.1f} MiB before, {grown / 2**20:+.1f} MiB after, {cpu:.2f} s of CPU"
        )
        assert grown < 4 << 20, f"PocketBase grew by {grown / 2**20:.1f} MiB ({cpu:.1f} s of CPU)"
        assert cpu < 2.0, f"{cpu:.1f} s of CPU"
        assert answer.status == 400 and answer.json()["code"] == code, answer
        assert "bytes" in answer.json()["message"]
        assert su.http.get("/api/collections/audio_records/records").json()["totalItems"] == 1


def test_numbers_in_the_fenced_routes_are_bounded(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    rid = sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.1))}).json()["id"]
    now = int(time.time() * 1000)
    for body in (
        {"now": 1e300, "leases": {"uploaded": 60_000}},
        {"now": now, "leases": {"uploaded": 1e300}},
        {"now": now, "leases": {"uploaded": -5}},
    ):
        refused = service.http.post("/api/pipeline/claim", json=body)
        assert (refused.status_code, refused.json()["code"]) == (400, "invalid"), body
    claim = service.http.post("/api/pipeline/claim", json={"now": now, "leases": {"uploaded": 60_000}}).json()
    assert claim["id"] == rid
    pipe = f"/api/pipeline/records/{rid}"
    for route, field in (("postpone", "until"), ("extend", "until"), ("fail", "retry_at")):
        body = {"token": claim["token"], "now": now, field: 1e300, "text": "x"}
        refused = service.http.post(f"{pipe}/{route}", json=body)
        assert refused.status_code == 400 and field in refused.json()["message"], (route, refused.text)
    fine = service.http.post(f"{pipe}/postpone", json={"token": claim["token"], "now": now, "until": now + 1000})
    assert fine.status_code == 200


def test_an_owners_correction_reaches_every_export_and_leaves_no_old_word(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    segments = [
        seg(0.0, 2.5, " Please call Anna Petrova tomorrow.", words=[{"start": 0.0, "end": 0.4, "word": " Please"}]),
        seg(2.5, 4.0, " She knows the plan."),
        seg(4.0, 6.0, " Thank you all."),
    ]
    rid = finished(sender, service, segments, "Please call Anna Petrova tomorrow. She knows the plan. Thank you all.")
    row = superuser.http.get("/api/collections/texts/records", params={"filter": f'record="{rid}"'}).json()["items"][0]
    corrected = "Please call the client tomorrow. She knows the plan, surely. Thank you all."
    saved = superuser.http.patch(f"/api/collections/texts/records/{row['id']}", json={"content": corrected})
    assert saved.status_code == 200, saved.text

    texts = {fmt: exported(sender, rid, fmt) for fmt in ("txt", "srt", "vtt", "json")}
    texts["poll"] = sender.http.get(f"{INTAKE}/{rid}").text
    for fmt, text in texts.items():
        assert "Anna" not in text and "Petrova" not in text, fmt
    assert texts["txt"] == corrected
    assert [(c[1], c[2], c[3]) for c in parse_srt(texts["srt"])] == [
        (0.0, 2.5, "Please call the client tomorrow."),
        (2.5, 4.0, "She knows the plan, surely."),
        (4.0, 6.0, "Thank you all."),
    ]
    assert [c[2] for c in parse_vtt(texts["vtt"])] == [c[3] for c in parse_srt(texts["srt"])]
    body = json.loads(texts["json"])
    assert body["text"] == corrected
    first, second, third = body["segments"]
    assert first["corrected"] and "words" not in first  # the old word times told the old words
    assert second["corrected"] and not third.get("corrected")
    assert any(e["kind"] == "note" and "corrected by the owner" in e["outcome_text"] for e in journal(superuser, rid))


def test_a_correction_of_a_long_transcript_moves_only_what_changed(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    sentences = [f"Sentence number {i} says something about item {i * 7}." for i in range(600)]
    segments = [seg(i * 3.0, i * 3.0 + 2.5, s) for i, s in enumerate(sentences)]
    rid = finished(sender, service, segments, " ".join(sentences))
    fixed = list(sentences)
    fixed[10] = "Sentence number 10 was misheard entirely."
    fixed[300] = fixed[300].replace("something", "nothing at all")
    fixed[599] = ""  # a sentence removed
    row = superuser.http.get("/api/collections/texts/records", params={"filter": f'record="{rid}"'}).json()["items"][0]
    corrected = " ".join(s for s in fixed if s)
    assert superuser.http.patch(f"/api/collections/texts/records/{row['id']}", json={"content": corrected}).is_success
    cues = parse_srt(exported(sender, rid, "srt"))
    assert [c[3] for c in cues] == [s for s in fixed if s]
    assert [c[1] for c in cues] == [i * 3.0 for i in range(599)]


def test_an_owner_change_is_journalled(
    pb: PocketBaseServer, sender: Caller, other_sender: Caller, superuser: Caller
) -> None:
    rid = sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.1))}).json()["id"]
    rec = superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()
    moved = superuser.http.patch(
        f"/api/collections/audio_records/records/{rid}", json={**rec, "owner": other_sender.id}
    )
    assert moved.status_code == 200, moved.text
    notes = [e["outcome_text"] for e in journal(superuser, rid) if e["kind"] == "note"]
    assert notes == [f"owner changed by the owner of the service from {sender.id} to {other_sender.id}"]
    assert sender.http.get(f"{INTAKE}/{rid}").status_code == 404
    assert other_sender.http.get(f"{INTAKE}/{rid}").status_code == 200


def test_a_recording_cannot_be_made_in_the_panel(pb: PocketBaseServer, sender: Caller, superuser: Caller) -> None:
    resp = superuser.http.post("/api/collections/audio_records/records", json={"owner": sender.id, "state": "uploaded"})
    assert resp.status_code == 400
    assert "uploading" in resp.json()["message"]
    assert superuser.http.get("/api/collections/audio_records/records").json()["totalItems"] == 0
