"""What the sender's page plays: intake's verdict on each kind of upload (what a browser plays as it is),
the copy normalize makes of one it cannot (AMR here, made with the real encoder) and none for one it can,
the audio route serving that copy with ranges, and the sweep of normalized copies leaving it alone
(real PocketBase, the real pipeline with a provider that answers at once)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.providers.instant import InstantProvider
from sidecar.serving.assembly import default_steps
from testkit.audio import SAMPLE, decode_info, reencode, speech_wav_bytes, write_audio
from testkit.media import wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer, now_ms
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually


def amr(dst: Path) -> Path:
    """The sample's speech as AMR-NB at 12.2 kbit/s, as a phone records it."""
    return reencode(SAMPLE, dst, codec="libopencore_amrnb", container="amr", rate=8000, bit_rate=12200)


def ogg_speex_head() -> bytes:
    """The first page of an Ogg/Speex file (intake reads no further; no Speex encoder is at hand)."""
    packet = b"Speex   " + b"1.2.1".ljust(20, b"\0") + (1).to_bytes(4, "little") + (80).to_bytes(4, "little")
    packet += (16000).to_bytes(4, "little") + bytes(48)
    page = b"OggS\x00\x02" + bytes(8) + (7).to_bytes(4, "little") + bytes(8) + bytes([1, len(packet)])
    return page + packet + bytes(200)


# (file name, how it is made) → (container, codec, a browser plays it): each made by the real encoder.
KINDS: list[tuple[str, Callable[[Path], Path], str, str, bool]] = [
    ("note.amr", amr, "amr", "amr_nb", False),
    ("a.aiff", lambda p: write_audio(p, 1, codec="pcm_s16be", container="aiff"), "aiff", "", False),
    ("a.au", lambda p: write_audio(p, 1, codec="pcm_s16be", container="au"), "au", "", False),
    ("a.3gp", lambda p: write_audio(p, 1, codec="libopencore_amrnb", rate=8000, channels=1), "mp4", "samr", False),
    ("alac.m4a", lambda p: write_audio(p, 1, codec="alac", container="mp4"), "mp4", "alac", False),
    ("ima.wav", lambda p: write_audio(p, 1, codec="adpcm_ima_wav", channels=1), "riff", "adpcm_ima_wav", False),
    ("a.mp2", lambda p: write_audio(p, 1, codec="mp2"), "mpeg-audio", "mp2", False),
    ("pcm.wav", lambda p: write_audio(p, 1, codec="pcm_s16le"), "riff", "pcm_s16le", True),
    ("mulaw.wav", lambda p: write_audio(p, 1, codec="pcm_mulaw", rate=8000, channels=1), "riff", "pcm_mulaw", True),
    ("opus.ogg", lambda p: write_audio(p, 1, codec="libopus", rate=48000), "ogg", "opus", True),
    ("a.mp3", lambda p: write_audio(p, 1, codec="libmp3lame"), "mp3", "mp3", True),
    ("aac.m4a", lambda p: write_audio(p, 1, codec="aac", container="mp4", video=True), "mp4", "mp4a", True),
    ("a.flac", lambda p: write_audio(p, 1, codec="flac"), "flac", "flac", True),
    ("opus.webm", lambda p: write_audio(p, 1, codec="libopus", rate=48000), "matroska", "a_opus", True),
    ("ac3.mkv", lambda p: write_audio(p, 1, codec="ac3", rate=48000), "matroska", "a_ac3", False),
]


def original_of(su: Caller, rid: str) -> dict[str, Any]:
    rows = su.http.get("/api/collections/files/records", params={"filter": f'record="{rid}"'})
    (row,) = [f for f in rows.json()["items"] if f["role"] == "original"]
    return dict(row)


def test_intake_decides_once_which_uploads_a_browser_plays(sender: Caller, superuser: Caller, tmp_path: Path) -> None:
    for name, make, container, codec, plays in KINDS:
        rid = sender.upload(make(tmp_path / name))
        row = original_of(superuser, rid)
        assert (row["format"], row["codec"], row["browser_plays"]) == (container, codec, "yes" if plays else "no"), name
        assert sender.poll(rid)["playback"] == ("original" if plays else "pending"), name
    speex = sender.upload(ogg_speex_head(), name="note.spx")
    row = original_of(superuser, speex)
    assert (row["format"], row["codec"], row["browser_plays"]) == ("ogg", "speex", "no")


def files_of(su: Caller, rid: str) -> list[dict[str, Any]]:
    rows = su.http.get("/api/collections/files/records", params={"filter": f'record="{rid}"', "sort": "created,id"})
    return list(rows.json()["items"])


def run_until(pb: PocketBaseServer, check: Callable[[], bool], **pipeline: Any) -> None:
    """The real pipeline runs until ``check()`` holds (its sweep included)."""

    async def drain() -> None:
        async with running_sidecar(pb, default_steps(), provider=InstantProvider(), workers=1, **pipeline) as pool:
            async with pool_running(pool):
                await eventually(check, within=120, what=check.__doc__ or "")

    anyio.run(drain)


@pytest.mark.slow
def test_an_upload_a_browser_cannot_play_gets_a_playable_copy_that_outlives_the_sweep(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, tmp_path: Path
) -> None:
    note = amr(tmp_path / "note.amr")
    unplayable = sender.upload(note)
    clip = speech_wav_bytes(2.0)
    playable = sender.upload(clip, name="clip.wav")
    url = f"/api/transcriber/records/{unplayable}/audio"
    # Before normalize: no copy yet; the route serves the upload; asking for the copy is a 404.
    assert sender.poll(unplayable)["playback"] == "pending"
    assert sender.http.get(url).content == note.read_bytes()
    assert sender.http.get(url, params={"file": "playable"}).status_code == 404

    su = superuser

    def swept() -> bool:
        """both done, and their normalized copies swept"""
        ids = (unplayable, playable)
        normalized = [f for rid in ids for f in files_of(su, rid) if f["role"] == "normalized"]
        done = all(su.record(rid)["state"] == "done" for rid in ids)
        return done and len(normalized) == 2 and all(f["removed_at"] > 0 for f in normalized)

    # The sweep runs as soon as a recording is done and keeps no normalized copy.
    run_until(pb, swept, keep_normalized=0, sweep_every=0.2)
    rows = files_of(su, unplayable)
    assert sorted(f["role"] for f in rows) == ["normalized", "original", "playable"]
    (copy,) = [f for f in rows if f["role"] == "playable"]
    assert copy["format"] == "ogg_opus" and copy["blob"].endswith(".ogg") and copy["removed_at"] == 0
    assert abs(copy["duration_ms"] - su.record(unplayable)["duration_ms"]) <= 40
    assert sorted(f["role"] for f in files_of(su, playable)) == ["normalized", "original"]  # none for what plays
    journal = su.http.get("/api/collections/record_events/records", params={"filter": f'record="{unplayable}"'})
    assert any("a copy a browser plays made (ogg_opus" in e["outcome_text"] for e in journal.json()["items"])

    # The route serves the copy, with ranges, after the sweep; the upload on request.
    assert sender.poll(unplayable)["playback"] == "copy"
    assert sender.poll(playable)["playback"] == "original"
    whole = sender.http.get(url)
    assert whole.status_code == 200 and whole.headers["Content-Type"] == "audio/ogg"
    assert whole.content[:4] == b"OggS" and whole.content == sender.http.get(url, params={"file": "playable"}).content
    (tmp_path / "copy.ogg").write_bytes(whole.content)
    heard = decode_info(tmp_path / "copy.ogg")
    assert (heard.codec, heard.channels) == ("opus", 1) and abs(heard.seconds - decode_info(note).seconds) < 0.1
    n = len(whole.content)
    for first, last in [(0, 99), (n // 2, n // 2 + 499), (n - 50, n - 1)]:
        part = sender.http.get(url, headers={"Range": f"bytes={first}-{last}"})
        assert part.status_code == 206 and part.headers["Content-Range"] == f"bytes {first}-{last}/{n}"
        assert part.content == whole.content[first : last + 1]
    assert sender.http.get(url, headers={"Range": f"bytes={n + 10}-"}).status_code == 416
    assert sender.http.get(url, params={"file": "original"}).content == note.read_bytes()
    other = f"/api/transcriber/records/{playable}/audio"
    assert sender.http.get(other).content == clip
    assert sender.http.get(other, params={"file": "playable"}).status_code == 404
    bad = sender.http.get(url, params={"file": "normalized"})
    assert bad.status_code == 400 and bad.json()["code"] == "bad_file"


def test_only_the_pipeline_writes_a_copy_and_never_an_original(sender: Caller, service: Caller) -> None:
    rid = sender.upload(wav_bytes(0.5))
    token = service.claim(rid)["token"]
    url = f"/api/pipeline/records/{rid}/files"
    for role in ("original", "transcript"):
        resp = service.http.post(url, data={"token": token, "role": role}, files={"blob": ("x.wav", wav_bytes(0.1))})
        assert resp.status_code == 400 and "normalized or playable" in resp.text, role
    no_blob = service.http.post(url, json={"token": token, "role": "playable", "speech_ms": 0})
    assert no_blob.status_code == 400
    made = service.http.post(
        url, data={"token": token, "role": "playable", "format": "ogg_opus"}, files={"blob": ("p.ogg", b"OggS")}
    )
    assert made.status_code == 200 and made.json()["role"] == "playable", made.text


def test_a_recording_normalized_before_copies_were_made_says_it_has_none(
    pb: PocketBaseServer, sender: Caller, service: Caller, tmp_path: Path
) -> None:
    """An AMR normalized with no copy (as before this release): the poll says `none`; the route still gives
    the upload. One stored before intake's verdict existed is served as uploaded (`original`), as before."""
    rid = sender.upload(amr(tmp_path / "note.amr"))
    token = service.claim(rid)["token"]
    resp = service.http.post(
        f"/api/pipeline/records/{rid}/settle",
        json={"outcome": "advanced", "token": token, "now": now_ms(), "to": "normalized"},
    )
    assert resp.status_code == 200, resp.text
    assert sender.poll(rid)["playback"] == "none"
    assert sender.http.get(f"/api/transcriber/records/{rid}/audio").content[:6] == b"#!AMR\n"
    pb.sql("UPDATE files SET browser_plays = '' WHERE record = ?", rid)
    assert sender.poll(rid)["playback"] == "original"
    halted = sender.upload(amr(tmp_path / "other.amr"))
    pb.sql(
        "UPDATE audio_records SET halted_at = '2026-01-01 00:00:00.000Z', halt_code = 'too_long' WHERE id = ?", halted
    )
    assert sender.poll(halted)["playback"] == "none"  # normalize will not run again: no copy is coming
