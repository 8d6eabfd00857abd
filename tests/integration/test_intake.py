"""I1–I3: the sender's upload and poll, on a real PocketBase."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.audio import write_audio
from testkit.media import CONTAINER_HEADS, wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer, running_pocketbase

# The poll body's fields as the list route gives each record; the poll of one record adds its text.
LISTED = {
    "id",
    "status",
    "activity",
    "halted",
    "halted_at",
    "halt_code",
    "title",
    "language",
    "progress",
    "resumable",
    "resumable_at",
    "playback",
    "created",
    "updated",
    "brief",
    "brief_missing_reason",
    "topics",
    "literary",
}


def count(su: Caller, collection: str) -> int:
    resp = su.http.get(f"/api/collections/{collection}/records", params={"perPage": 1})
    resp.raise_for_status()
    return int(resp.json()["totalItems"])


def test_upload_creates_record_and_original_and_answers_the_poll_body(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    resp = sender.try_upload(wav_bytes(), name="voice.wav", title="Monday standup")
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert set(body) == LISTED | {"text"}
    assert body["language"] is None
    assert (body["resumable_at"], body["playback"]) == (None, "original")  # a WAV plays as it is
    assert (body["brief"], body["topics"]) == (None, [])
    assert (body["status"], body["activity"]) == ("uploaded", "queued")
    assert body["halted"] is False and body["halted_at"] is None and body["halt_code"] is None
    assert body["title"] == "Monday standup"
    assert body["text"] is None

    rec = superuser.http.get(f"/api/collections/audio_records/records/{body['id']}").json()
    assert rec["owner"] == sender.id
    assert rec["state"] == "uploaded" and rec["attempts"] == 0 and rec["claim_token"] == ""
    files = superuser.http.get("/api/collections/files/records", params={"filter": f'record="{body["id"]}"'}).json()
    assert files["totalItems"] == 1
    assert files["items"][0]["role"] == "original"
    assert files["items"][0]["size"] == len(wav_bytes())
    assert files["items"][0]["name"] == "voice.wav"

    poll = sender.http.get(f"/api/transcriber/records/{body['id']}")
    assert poll.status_code == 200
    assert poll.json() == body


@pytest.mark.parametrize("kind", sorted(CONTAINER_HEADS))
def test_known_containers_are_accepted(shared_pb: PocketBaseServer, kind: str) -> None:
    sender = shared_pb.new_sender()
    assert sender.try_upload(CONTAINER_HEADS[kind], name=f"x.{kind}").status_code == 201


@pytest.mark.parametrize(
    ("files", "data", "status", "code"),
    [
        (None, {"title": "no file"}, 400, "missing_file"),
        ({"file": ("empty.wav", b"")}, {}, 400, "empty_file"),
        ({"file": ("notes.wav", b"just some text, renamed to .wav\n" * 20)}, {}, 415, "not_audio"),
        ({"file": ("x.wav", b"\x00\x01\x02\x03" * 100)}, {}, 415, "not_audio"),
        ({"file": ("v.wav", wav_bytes(0.1))}, {"owner": "someone-else"}, 400, "unknown_field"),
        ({"file": ("v.wav", wav_bytes(0.1))}, {"state": "done"}, 400, "unknown_field"),
        ({"file": ("v.wav", wav_bytes(0.1))}, {"title": "x" * 501}, 400, "title_too_long"),
        ({"audio": ("v.wav", wav_bytes(0.1))}, {}, 400, "missing_file"),
    ],
    ids=[
        "no-file",
        "empty",
        "text-renamed",
        "random-bytes",
        "forged-owner",
        "forged-state",
        "long-title",
        "wrong-field",
    ],
)
def test_bad_uploads_get_a_clear_4xx_and_leave_nothing(
    pb: PocketBaseServer,
    sender: Caller,
    superuser: Caller,
    files: dict[str, Any] | None,
    data: dict[str, Any],
    status: int,
    code: str,
) -> None:
    if files is None:
        # multipart with a title but no file part at all
        resp = sender.http.post(
            "/api/transcriber/records",
            content=b'--b\r\nContent-Disposition: form-data; name="title"\r\n\r\nx\r\n--b--\r\n',
            headers={"Content-Type": "multipart/form-data; boundary=b"},
        )
    else:
        resp = sender.http.post("/api/transcriber/records", files=files, data=data)
    assert resp.status_code == status, resp.text
    assert resp.json()["code"] == code
    assert len(resp.json()["message"]) > 10
    assert count(superuser, "audio_records") == 0
    assert count(superuser, "files") == 0


def test_two_files_are_refused(pb: PocketBaseServer, sender: Caller, superuser: Caller) -> None:
    resp = sender.http.post(
        "/api/transcriber/records", files=[("file", ("a.wav", wav_bytes(0.1))), ("file", ("b.wav", wav_bytes(0.1)))]
    )
    assert resp.status_code == 400 and resp.json()["code"] == "too_many_files"
    assert count(superuser, "audio_records") == 0


def test_over_the_size_limit_is_refused_with_413(tmp_path: Path) -> None:

    with running_pocketbase(tmp_path / "small", max_upload_mb=1) as small:
        s = small.new_sender()
        big = wav_bytes(40)  # ~1.3 MB
        resp = s.try_upload(big)
        assert resp.status_code == 413, resp.text
        assert "limit" in resp.json()["message"]
        su = small.superuser()
        assert count(su, "audio_records") == 0 and count(su, "files") == 0


def test_poll_is_for_the_owner_only(
    pb: PocketBaseServer, sender: Caller, other_sender: Caller, service: Caller, superuser: Caller
) -> None:
    rec_id = sender.upload(wav_bytes())
    assert sender.http.get(f"/api/transcriber/records/{rec_id}").status_code == 200
    other = other_sender.http.get(f"/api/transcriber/records/{rec_id}")
    missing = other_sender.http.get("/api/transcriber/records/doesnotexist123")
    assert other.status_code == 404 and missing.status_code == 404
    assert other.json() == missing.json()
    assert pb.anonymous().get(f"/api/transcriber/records/{rec_id}").status_code == 401
    assert service.http.get(f"/api/transcriber/records/{rec_id}").status_code == 403
    assert superuser.http.get(f"/api/transcriber/records/{rec_id}").status_code == 403
    assert pb.anonymous().post("/api/transcriber/records", files={"file": ("a.wav", wav_bytes())}).status_code == 401
    assert service.try_upload(wav_bytes()).status_code == 403


def test_unicode_and_path_like_names_are_kept_as_plain_names(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    resp = sender.try_upload(wav_bytes(0.2), name="../../etc/Встреча 🎙.wav")
    assert resp.status_code == 201
    row = superuser.http.get("/api/collections/files/records").json()["items"][0]
    assert "/" not in row["blob"] and ".." not in row["blob"]


@pytest.mark.slow
def test_a_300_mb_upload_is_accepted(pb: PocketBaseServer, sender: Caller, superuser: Caller, tmp_path: Path) -> None:
    big = tmp_path / "meeting.wav"
    size = 300 * 1024 * 1024
    with big.open("wb") as fh:
        fh.write(wav_bytes(0.01)[:44])
        chunk = b"\x00" * (1 << 20)
        while fh.tell() < size:
            fh.write(chunk)
    with big.open("rb") as fh:
        resp = sender.http.post("/api/transcriber/records", files={"file": ("meeting.wav", fh)}, timeout=300)
    assert resp.status_code == 201, resp.text
    row = superuser.http.get("/api/collections/files/records").json()["items"][0]
    assert row["size"] == big.stat().st_size


def test_a_sender_lists_their_own_recordings_newest_first_and_never_anothers(
    pb: PocketBaseServer, sender: Caller, other_sender: Caller
) -> None:
    """O12: the list route pages the caller's own records, each the poll body without the text."""
    mine = [sender.upload(wav_bytes(), title=f"mine {i}") for i in range(3)]
    theirs = [other_sender.upload(wav_bytes(), title=f"theirs {i}") for i in range(2)]

    first = sender.http.get("/api/transcriber/records", params={"page": 1, "perPage": 2})
    assert first.status_code == 200, first.text
    body = first.json()
    assert (body["page"], body["perPage"], body["totalItems"], body["totalPages"]) == (1, 2, 3, 2)
    second = sender.http.get("/api/transcriber/records", params={"page": 2, "perPage": 2}).json()
    listed = [item["id"] for item in body["items"] + second["items"]]
    assert listed == mine[::-1]  # newest first
    item = body["items"][0]
    assert "text" not in item and item["title"] == "mine 2" and item["status"] == "uploaded"
    assert set(item) == LISTED

    others = other_sender.http.get("/api/transcriber/records").json()
    assert [i["id"] for i in others["items"]] == theirs[::-1] and others["totalItems"] == 2

    for bad in ({"page": 0}, {"perPage": 501}, {"page": "x"}):
        resp = sender.http.get("/api/transcriber/records", params=bad)
        assert resp.status_code == 400 and resp.json()["code"] == "bad_page", (bad, resp.text)
    assert httpx.get(f"{pb.url}/api/transcriber/records").status_code == 401


def _trickled(data: bytes, seconds: float) -> Iterator[bytes]:
    """``data`` sent evenly over ``seconds`` (a slow line)."""
    step = max(1, len(data) // 40)
    for i in range(0, len(data), step):
        time.sleep(seconds / 40)
        yield data[i : i + step]


@pytest.mark.parametrize(("read_timeout", "accepted"), [(8.0, True), (2.0, False)])
def test_a_slow_upload_completes_within_the_read_timeout(tmp_path: Path, read_timeout: float, accepted: bool) -> None:
    """LA6: the whole request may take up to ``[intake] read_timeout`` (5 minutes shortened to seconds here)."""
    with running_pocketbase(tmp_path / "pb", read_timeout=timedelta(seconds=read_timeout)) as server:
        sender = server.new_sender()
        boundary = "transcriber-slow-upload"
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.wav"\r\n'
                f"Content-Type: audio/wav\r\n\r\n"
            ).encode()
            + wav_bytes(2.0)
            + f"\r\n--{boundary}--\r\n".encode()
        )
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}", "Content-Length": str(len(body))}
        try:
            resp = sender.http.post(
                "/api/transcriber/records", content=_trickled(body, 4.0), headers=headers, timeout=30
            )
        except httpx.TransportError:
            resp = None
        if accepted:
            assert resp is not None and resp.status_code == 201, resp and resp.text
        else:  # cut off mid-body: the setting is what let the slower one through
            assert resp is None or resp.status_code >= 400


DECLARING = {
    "wav": lambda d: write_audio(d / "a.wav", 7.0, codec="pcm_s16le"),
    "wav-mono-8k": lambda d: write_audio(d / "a.wav", 7.0, codec="pcm_s16le", rate=8000, channels=1),
    "flac": lambda d: write_audio(d / "a.flac", 7.0, codec="flac", rate=48000),
    "mp3": lambda d: write_audio(d / "a.mp3", 7.0, codec="libmp3lame", bit_rate=128000),
    "ogg-opus": lambda d: write_audio(d / "a.ogg", 7.0, codec="libopus", rate=48000),
    "ogg-flac": lambda d: write_audio(d / "a.oga", 7.0, codec="flac", container="ogg"),
    "m4a-aac": lambda d: write_audio(d / "a.m4a", 7.0, codec="aac"),
    "mp4-video+aac": lambda d: write_audio(d / "a.mp4", 7.0, codec="aac", video=True),
    "webm-opus": lambda d: write_audio(d / "a.webm", 7.0, codec="libopus", rate=48000),
    "aiff": lambda d: write_audio(d / "a.aiff", 7.0, codec="pcm_s16be"),
    "au": lambda d: write_audio(d / "a.au", 7.0, codec="pcm_s16be", container="au"),
}


@pytest.mark.parametrize("kind", sorted(DECLARING))
def test_intake_reserves_the_length_the_container_declares(
    shared_pb: PocketBaseServer, kind: str, tmp_path: Path
) -> None:
    """H4: the audio a recording reserves against its sender's day is read from its header at intake."""
    path = DECLARING[kind](tmp_path)
    sender, su = shared_pb.new_sender(), shared_pb.superuser()
    rid = sender.upload(path)
    rec = su.record(rid)
    assert 7000 <= rec["quota_ms"] <= 7100, rec["quota_ms"]  # MP3 and Matroska count their last frame whole


def test_a_container_that_declares_no_length_reserves_a_guess_from_its_size(
    shared_pb: PocketBaseServer, tmp_path: Path
) -> None:
    path = write_audio(tmp_path / "a.aac", 7.0, codec="aac", container="adts")  # ADTS carries no length
    sender, su = shared_pb.new_sender(), shared_pb.superuser()
    rid = sender.upload(path)
    rec = su.record(rid)
    assert rec["quota_ms"] == -(-path.stat().st_size // 2000) * 1000  # 16 kbit/s
    journal = su.http.get("/api/collections/record_events/records", params={"filter": f"record='{rid}'"}).json()
    assert "declares no length" in journal["items"][0]["outcome_text"]
