"""The outside probes' findings (issue H3, H6, H7, the panel's gaps, and the
second pass's media findings), each replayed against the real server: a
decompression bomb and headers that lie about the length, PocketBase's own
errors, absurd numbers in the fenced routes, a correction that must reach
every export (also after one that emptied the text), an owner change, a
recording made in the panel, silent and odd media (hundreds of channels, no
samples), and normalized copies that outgrow their use."""

from __future__ import annotations

import json
import resource
import struct
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
import pytest

from sidecar.providers.instant import InstantProvider
from sidecar.serving.assembly import default_steps
from testkit.flac_bomb import LYING, write_flac_bomb
from testkit.media import wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer, running_pocketbase
from tests.conftest import DATA
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


@contextmanager
def no_file_larger_than(limit: int) -> Iterator[None]:
    """This process may write no file larger than ``limit`` (Python ignores SIGXFSZ: the write fails, EFBIG)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def stored_sizes(pb: PocketBaseServer) -> list[int]:
    """The sizes of the stored files of the recordings' audio and results (the Word documents of the
    literary text and of the transcript, a few dozen kB each, kept for good beside the texts, are not
    audio: left out)."""
    storage = pb.settings.pocketbase.data_dir / "storage"
    return [p.stat().st_size for p in storage.rglob("*") if p.is_file() and p.suffix != ".docx"]


def files_of(su: Caller, rid: str, role: str) -> list[dict[str, Any]]:
    found = su.http.get("/api/collections/files/records", params={"filter": f'record="{rid}" && role="{role}"'})
    items: list[dict[str, Any]] = found.json()["items"]
    return items


@pytest.mark.parametrize("shape", list(LYING))
def test_a_header_that_lies_about_the_length_halts_too_long_without_a_big_file(
    tmp_path: Path, shape: str, figures: dict[str, str]
) -> None:
    # Each declares one second and holds a hundred hours. Believed, it bought
    # six hours of 16 kHz PCM (690 MB) in scratch space before the cap. The
    # workers here may write no file larger than 12 MiB: the upload itself is
    # fetched whole (9 MB for the Ogg/Opus one), nothing else comes near.
    suffix, write = LYING[shape]
    bomb = write(tmp_path / f"meeting{suffix}", 100)
    with running_pocketbase(tmp_path / "pb") as pb:
        sender, su = pb.new_sender(), pb.superuser()
        rid = sender.http.post(INTAKE, files={"file": (bomb.name, bomb.read_bytes())}).json()["id"]

        async def run() -> float:
            async with running_sidecar(pb, default_steps(), provider=InstantProvider()) as pool:
                started = time.monotonic()
                async with pool_running(pool):
                    await eventually(lambda: sender.http.get(f"{INTAKE}/{rid}").json()["halted"], within=90)
                return time.monotonic() - started

        with no_file_larger_than(12 << 20):
            took = anyio.run(run)
        rec = su.http.get(f"/api/collections/audio_records/records/{rid}").json()
        assert (rec["halt_code"], rec["attempts"]) == ("too_long", 1), rec["halt_reason"]
        assert rec["halt_reason"] == "the audio is longer than allowed (limit 6:00:00)"
        assert [e["kind"] for e in journal(su, rid)].count("failed") == 0
        assert max(stored_sizes(pb)) <= bomb.stat().st_size + (1 << 20)  # the upload, nothing made of it
        figures[f"lying header ({shape}, {bomb.stat().st_size // 1000} kB) halted too_long in"] = f"{took:.1f} s"


def test_a_silent_hour_keeps_no_normalized_copy_and_a_hand_written_text_gets_cues(tmp_path: Path) -> None:
    # 6.6 kB of FLAC holding an hour of silence: normalized, it was a 115 MB
    # WAV kept for good, though nothing in it is ever sent anywhere.
    silence = write_flac_bomb(tmp_path / "hour.flac", hours=1)
    with running_pocketbase(tmp_path / "pb") as pb:
        sender, su = pb.new_sender(), pb.superuser()
        rid = sender.http.post(INTAKE, files={"file": ("hour.flac", silence.read_bytes())}).json()["id"]

        async def run() -> None:
            async with running_sidecar(pb, default_steps(), provider=InstantProvider()) as pool:
                async with pool_running(pool):
                    await eventually(lambda: sender.http.get(f"{INTAKE}/{rid}").json()["status"] == "done", within=60)

        anyio.run(run)
        poll = sender.http.get(f"{INTAKE}/{rid}").json()
        assert (poll["halted"], poll["text"]) == (False, "")
        notes = [e["outcome_text"] for e in journal(su, rid)]
        # an hour in whole FLAC blocks: 3,604.4 s
        assert "no speech found in 3604.4 s: nothing to recognize, no normalized copy kept" in notes
        assert "no speech found: the transcript is empty" in notes
        [row] = files_of(su, rid, "normalized")
        assert (row["blob"], row["size"], row["duration_ms"], row["speech_ms"]) == ("", 0, 3_604_425, 0)
        assert max(stored_sizes(pb)) < 100_000

        # The owner writes what was said by hand: the timed exports follow, spread over the hour.
        [text] = su.http.get(
            "/api/collections/texts/records", params={"filter": f'record="{rid}" && kind="transcript"'}
        ).json()["items"]
        typed = "The meeting was not recorded. Notes: budget approved. Next meeting on Monday."
        assert su.http.patch(f"/api/collections/texts/records/{text['id']}", json={"content": typed}).is_success
        cues = parse_srt(exported(sender, rid, "srt"))
        assert " ".join(c[3] for c in cues) == typed
        assert (cues[0][1], cues[-1][2]) == (0.0, 3604.425)
        assert [c[2] for c in parse_vtt(exported(sender, rid, "vtt"))] == [c[3] for c in cues]


def _wav(channels: int, frames: int, rate: int = 8000) -> bytes:
    data = bytes(2 * channels * frames)
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * 2 * channels, 2 * channels, 16)
    body = b"WAVEfmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_hundreds_of_channels_and_no_samples_end_done_and_empty(tmp_path: Path) -> None:
    # A 255-channel WAV ended attempts_exhausted (FFmpeg's resampler: "Invalid
    # argument", five times); a WAV header without samples ended
    # unsupported_media. Neither holds speech: done, empty, and the journal says why (L5).
    with running_pocketbase(tmp_path / "pb") as pb:
        sender, su = pb.new_sender(), pb.superuser()
        ids = {
            "255 channels": sender.http.post(INTAKE, files={"file": ("wide.wav", _wav(255, 2000))}).json()["id"],
            "no samples": sender.http.post(INTAKE, files={"file": ("empty.wav", _wav(1, 0))}).json()["id"],
        }

        def settled() -> bool:
            polls = [sender.http.get(f"{INTAKE}/{rid}").json() for rid in ids.values()]
            return all(p["status"] == "done" or p["halted"] for p in polls)

        async def run() -> None:
            async with running_sidecar(pb, default_steps(), provider=InstantProvider()) as pool:
                async with pool_running(pool):
                    await eventually(settled, within=60)

        anyio.run(run)
        expected = {
            "255 channels": "no speech found in 0.2 s (255 channels mixed into one): nothing to recognize",
            "no samples": "no speech found in the audio track holds no samples: nothing to recognize",
        }
        for name, rid in ids.items():
            poll = sender.http.get(f"{INTAKE}/{rid}").json()
            assert (poll["status"], poll["halted"], poll["text"]) == ("done", False, ""), (name, poll)
            events = journal(su, rid)
            assert [e["kind"] for e in events].count("failed") == 0, name
            notes = [e["outcome_text"] for e in events]
            assert any(n.startswith(expected[name]) for n in notes), (name, notes)
            assert "no speech found: the transcript is empty" in notes, name
            srt = sender.http.get(f"{INTAKE}/{rid}/transcript", params={"format": "srt"})
            assert (srt.status_code, srt.text) == (200, "")


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

        # PocketBase's rate limiter says when to come back (one address, many accounts): 30 at
        # once, so that they land in one window however slow the machine is
        def wrong(i: int) -> httpx.Response:
            return httpx.post(
                f"{pb.url}/api/collections/users/auth-with-password",
                json={"identity": f"nobody-{i}@example.com", "password": "wrong"},
                timeout=60,
            )

        with ThreadPoolExecutor(30) as pool:
            answers_429 = [r for r in pool.map(wrong, range(30)) if r.status_code == 429]
        assert answers_429, "no 429 in 30 parallel wrong logins"
        limited = answers_429[0]
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
    for outcome, field in (("postponed", "until"), ("extended", "until"), ("failed", "retry_at")):
        body = {"outcome": outcome, "token": claim["token"], "now": now, field: 1e300, "text": "x"}
        refused = service.http.post(f"{pipe}/settle", json=body)
        assert refused.status_code == 400 and field in refused.json()["message"], (outcome, refused.text)
    fine = service.http.post(
        f"{pipe}/settle", json={"outcome": "postponed", "token": claim["token"], "now": now, "until": now + 1000}
    )
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
    row = superuser.http.get(
        "/api/collections/texts/records", params={"filter": f'record="{rid}" && kind="transcript"'}
    ).json()["items"][0]
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


def test_a_correction_to_nothing_and_then_to_new_text_reaches_every_export(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    # Emptied, the transcript kept no segment; the next correction had nothing
    # to map its words onto: txt had the text, SRT and VTT no cue.
    segments = [seg(0.0, 2.5, " Please call Anna."), seg(2.5, 6.0, " She knows the plan.")]
    rid = finished(sender, service, segments, "Please call Anna. She knows the plan.")
    row = superuser.http.get(
        "/api/collections/texts/records", params={"filter": f'record="{rid}" && kind="transcript"'}
    ).json()["items"][0]
    url = f"/api/collections/texts/records/{row['id']}"
    assert superuser.http.patch(url, json={"content": ""}).is_success
    assert exported(sender, rid, "srt") == "" and parse_vtt(exported(sender, rid, "vtt")) == []
    retyped = "Please call the client. She knows the plan, surely."
    assert superuser.http.patch(url, json={"content": retyped}).is_success

    assert exported(sender, rid, "txt") == retyped
    srt = parse_srt(exported(sender, rid, "srt"))
    assert " ".join(c[3] for c in srt) == retyped
    assert [c[2] for c in parse_vtt(exported(sender, rid, "vtt"))] == [c[3] for c in srt]
    body = json.loads(exported(sender, rid, "json"))
    assert body["text"] == retyped and " ".join(s["text"] for s in body["segments"]) == retyped
    assert all(s["corrected"] and "words" not in s for s in body["segments"])
    assert all(0 <= c[1] <= c[2] for c in srt)
    notes = [e["outcome_text"] for e in journal(superuser, rid) if e["kind"] == "note"]
    assert any("spread over the recording" in n for n in notes), notes


def test_normalized_copies_of_finished_recordings_are_removed_after_keep_normalized(tmp_path: Path) -> None:
    # Recordings are never deleted, but the normalized audio is the provider's
    # input: once the transcript is stored, nobody reads it. After
    # keep_normalized it goes; its row stays as history, the original and the
    # transcript stay, and a redo from 'normalized' is refused with the way out.
    speech = (DATA / "speech" / "fox.ogg").read_bytes()
    with running_pocketbase(tmp_path / "pb") as pb:
        sender, su = pb.new_sender(), pb.superuser()
        rid = sender.http.post(INTAKE, files={"file": ("fox.ogg", speech)}).json()["id"]
        [original] = files_of(su, rid, "original")

        def removed() -> bool:
            return all(r["removed_at"] > 0 for r in files_of(su, rid, "normalized"))

        async def run() -> None:
            async with running_sidecar(
                pb, default_steps(), provider=InstantProvider(), keep_normalized=0, sweep_every=0.2
            ) as pool:
                async with pool_running(pool):
                    await eventually(lambda: sender.http.get(f"{INTAKE}/{rid}").json()["status"] == "done", within=60)
                    await eventually(removed, within=30)

        before = sum(stored_sizes(pb))
        anyio.run(run)
        [row] = files_of(su, rid, "normalized")
        assert row["blob"] == "" and row["size"] > 50_000 and row["duration_ms"] > 0  # the row stays as history
        assert sum(stored_sizes(pb)) <= before + 10_000  # what remains is what was uploaded
        [kept] = files_of(su, rid, "original")
        assert kept["blob"] == original["blob"] != ""
        token = su.http.post("/api/files/token").json()["token"]
        blob = su.http.get(f"/api/files/files/{kept['id']}/{kept['blob']}", params={"token": token})
        assert blob.content == speech
        assert sender.http.get(f"{INTAKE}/{rid}").json()["text"]  # the transcript stays
        assert exported(sender, rid, "srt")
        notes = [e["outcome_text"] for e in journal(su, rid) if e["kind"] == "note"]
        assert [n for n in notes if n.startswith("normalized audio removed")] == [
            f"normalized audio removed, the recording done 0.0 days ago: 1 file(s), {row['size'] / 1e6:.1f} MB; "
            "the original and the transcript stay (set the stage to 'uploaded' to normalize again)"
        ]

        url = f"/api/collections/audio_records/records/{rid}"
        form = su.http.get(url).json()
        refused = su.http.patch(url, json={**form, "state": "normalized"})
        assert refused.status_code == 400 and "set the stage to 'uploaded' instead" in refused.json()["message"]
        assert su.http.get(url).json()["state"] == "done"
        assert su.http.patch(url, json={**form, "state": "uploaded"}).status_code == 200


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
    row = superuser.http.get(
        "/api/collections/texts/records", params={"filter": f'record="{rid}" && kind="transcript"'}
    ).json()["items"][0]
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
