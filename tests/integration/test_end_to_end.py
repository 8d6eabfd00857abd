"""The main job end to end: a real upload through PocketBase, the real steps, the offline engine."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.media.audio import AudioSpec
from sidecar.serving.assembly import default_steps, make_provider
from testkit.pocketbase import Caller, PocketBaseServer
from testkit.wer import wer
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually, eventually_sync

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "sample.ogg"
SAMPLE_TEXT = (ROOT / "samples" / "sample.txt").read_text().strip()


async def run_until(pb: PocketBaseServer, su: Caller, rid: str, predicate: Any, **settings: Any) -> None:
    provider = make_provider(pb.settings)
    async with running_sidecar(pb, default_steps(), provider=provider, workers=1, **settings) as pool:
        async with pool_running(pool):
            await eventually(lambda: predicate(su.record(rid)), within=180)


async def test_a_recording_becomes_a_timed_transcript(pb: PocketBaseServer, sender: Caller, superuser: Caller) -> None:
    rid = sender.upload(SAMPLE)
    await run_until(pb, superuser, rid, lambda r: r["state"] == "done" or r["halted_at"])

    poll = sender.poll(rid)
    assert poll["status"] == "done" and poll["halted"] is False
    assert wer(SAMPLE_TEXT, poll["text"]) <= 0.1, poll["text"]

    # the normalized audio is a new file row; the original is kept
    files = superuser.http.get(
        "/api/collections/files/records", params={"filter": f'record="{rid}"', "sort": "created,@rowid"}
    ).json()
    assert [f["role"] for f in files["items"]] == ["original", "normalized"]
    assert files["items"][1]["duration_ms"] == pytest.approx(5800, abs=600)
    # the attempt row holds the raw response as an attachment
    attempts = superuser.http.get(
        "/api/collections/recognition_attempts/records", params={"filter": f'record="{rid}"'}
    ).json()
    assert attempts["totalItems"] == 1
    assert attempts["items"][0]["provider"] == "offline" and attempts["items"][0]["raw_response"]
    # the journal shows every stage; the offline engine answers at once, so none waited in 'submitted'
    ev = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record="{rid}"', "sort": "created,@rowid"}
    ).json()
    # (The literary text's step, on its own queue once the recording is done, may have run too: its
    # journal lines name its queue, not a stage of the recording.)
    assert [e["stage"] for e in ev["items"] if e["kind"] == "advanced" and e["stage"] != "literary"] == [
        "normalized",
        "transcribed",
        "done",
    ]

    srt = sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "srt"})
    assert srt.status_code == 200
    cues = srt.text.strip().split("\n\n")
    assert cues and all(re.fullmatch(r"\d+\n\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}\n.+", c) for c in cues), (
        srt.text
    )
    vtt = sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "vtt"})
    assert vtt.text.startswith("WEBVTT\n\n") and "-->" in vtt.text
    js = json.loads(sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "json"}).text)
    assert js["text"] == poll["text"] and js["segments"][0]["end"] > js["segments"][0]["start"]
    assert "words" in js["segments"][0]
    txt = sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "txt"})
    assert txt.text == poll["text"]
    assert sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "doc"}).status_code == 400
    other = pb.new_sender()
    assert other.http.get(f"/api/transcriber/records/{rid}/transcript").status_code == 404


async def test_undecodable_audio_halts_without_spending_retries(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    # a valid Ogg page header, then garbage: intake accepts it, only decoding can tell
    bad = b"OggS\x00\x02" + bytes(range(256)) * 40
    rid = sender.upload(bad, name="x.ogg")
    await run_until(pb, superuser, rid, lambda r: bool(r["halted_at"]))
    rec = superuser.record(rid)
    assert rec["halt_code"] == "unsupported_media" and rec["state"] == "uploaded"
    assert rec["attempts"] == 1  # halted on the first try
    poll = sender.poll(rid)
    assert poll["halted"] is True and poll["halt_code"] == "unsupported_media" and poll["text"] is None
    assert sender.http.get(f"/api/transcriber/records/{rid}/transcript").status_code == 404


def test_a_submit_killed_after_the_provider_answered_does_not_pay_twice(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, tmp_path: Path
) -> None:
    import subprocess
    import sys
    import time

    rid = sender.upload(SAMPLE)
    counter = tmp_path / "starts.txt"
    env = pb.worker_env(
        TRANSCRIBER_PIPELINE__WORKERS="1",
        TRANSCRIBER_PIPELINE__LEASES__NORMALIZED="1",
        TEST_PAID_COUNTER=str(counter),
        TEST_WORKER_SECONDS="90",  # the test stops it once the record is done
    )
    first = subprocess.run(
        [sys.executable, "-m", "tests.support.kill_worker"],
        env=env | {"TEST_WORKER_MODE": "paid-die"},
        timeout=120,
        check=False,
    )
    assert first.returncode == -9  # killed inside submit, after the operation id was stored
    assert len(counter.read_text().splitlines()) == 1
    rec = superuser.record(rid)
    assert rec["state"] == "normalized" and rec["attempts"] == 1
    # The dead claim's one-second lease runs out.
    eventually_sync(lambda: superuser.record(rid)["claim_expires_at"] < time.time() * 1000, within=5)
    second = subprocess.Popen(
        [sys.executable, "-m", "tests.support.kill_worker"], env=env | {"TEST_WORKER_MODE": "paid"}
    )
    try:
        eventually_sync(lambda: superuser.record(rid)["state"] == "done", within=60)
    finally:
        second.terminate()
        second.wait(30)
    assert len(counter.read_text().splitlines()) == 1  # started once, paid once
    assert sender.poll(rid)["text"] == "paid once"
    events = superuser.http.get("/api/collections/record_events/records", params={"filter": f'record="{rid}"'}).json()
    assert any("not started again" in e["outcome_text"] for e in events["items"])


async def test_a_lost_operation_is_recognized_again_when_the_owner_sets_the_stage_back(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    from sidecar.outcome import HaltCode, PermanentError
    from sidecar.providers.base import OnProgress, Polled, Started, StartRequest
    from sidecar.transcript.model import Segment, Transcript
    from testkit.audio import speech_wav_bytes
    from tests.support.fakes import StubProvider

    class Expiring(StubProvider):
        """The first operation's results expire; later ones answer with their own number."""

        starts = 0

        async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
            Expiring.starts += 1
            return Started(f"op-{Expiring.starts}")

        async def poll(self, operation_id: str) -> Polled:
            if operation_id == "op-1":
                raise PermanentError(HaltCode.RESULTS_EXPIRED, "results of op-1 are gone")
            t = Transcript(text=f"text of {operation_id}", segments=[Segment(start=0, end=1, text="x")])
            return Polled(ready=True, raw=t.model_dump_json().encode())

    rid = sender.upload(speech_wav_bytes(1.0))
    url = f"/api/collections/audio_records/records/{rid}"

    def owner_sets(**changes: Any) -> None:
        form = superuser.http.get(url).json() | changes
        assert superuser.http.patch(url, json=form).status_code == 200

    def attempts() -> list[str]:
        rows = superuser.http.get(
            "/api/collections/recognition_attempts/records",
            params={"filter": f'record="{rid}"', "sort": "created,@rowid"},
        ).json()["items"]
        return [f"{r['operation_id']}:{r['status']}" for r in rows]

    async with running_sidecar(pb, default_steps(), provider=Expiring(), workers=1, idle_poll=0.2) as pool:
        async with pool_running(pool):

            async def until(predicate: Any) -> dict[str, Any]:
                def check() -> dict[str, Any] | None:
                    rec = dict(superuser.http.get(url).json())
                    return rec if predicate(rec) else None

                found = await eventually(check, within=30)
                assert found is not None
                return found

            halted = await until(lambda r: r["halted_at"])
            assert halted["halt_code"] == "results_expired" and "clear the halt" in halted["halt_reason"]
            assert await anyio.to_thread.run_sync(attempts) == ["op-1:lost"]  # never polled again
            await anyio.to_thread.run_sync(lambda: owner_sets(state="normalized", halted_at=""))
            done = await until(lambda r: r["state"] == "done" or r["halted_at"])
            assert done["state"] == "done", done
            poll = await anyio.to_thread.run_sync(lambda: sender.poll(rid))
            assert poll["text"] == "text of op-2"
            # A finished record, set back by the owner, is recognized anew rather than resumed.
            await anyio.to_thread.run_sync(lambda: owner_sets(state="normalized"))
            await until(lambda r: r["state"] == "done" and r["attempts"] == 0 and Expiring.starts == 3)
            assert sender.poll(rid)["text"] == "text of op-3"
    assert attempts() == ["op-1:lost", "op-2:superseded", "op-3:cleaned"]
    assert Expiring.starts == 3


async def test_setting_the_stage_back_to_uploaded_normalizes_again(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    """O9: a recording normalized for one provider can be redone for another; the old copy stays as history."""
    from sidecar.providers.instant import InstantProvider

    rid = sender.upload(SAMPLE)
    url = f"/api/collections/audio_records/records/{rid}"

    def normalized() -> list[dict[str, Any]]:
        params = {"filter": f'record="{rid}" && role="normalized"', "sort": "created,@rowid"}
        return list(superuser.http.get("/api/collections/files/records", params=params).json()["items"])

    def owner_sets_stage(stage: str) -> None:
        form = superuser.http.get(url).json() | {"state": stage}
        assert superuser.http.patch(url, json=form).status_code == 200

    def done() -> bool:
        return bool(superuser.http.get(url).json()["state"] == "done")

    wav = InstantProvider()  # reads PCM WAV
    async with running_sidecar(pb, default_steps(), provider=wav, workers=1) as pool, pool_running(pool):
        await eventually(done, within=60)
    [first] = normalized()
    assert first["format"] == "wav_pcm16" and not first["superseded"]

    await anyio.to_thread.run_sync(owner_sets_stage, "uploaded")
    opus = InstantProvider(audio_spec=AudioSpec("ogg_opus", bitrate=24000))  # another provider's input
    async with running_sidecar(pb, default_steps(), provider=opus, workers=1) as pool, pool_running(pool):
        await eventually(done, within=60)
    old, new = normalized()
    assert old["id"] == first["id"] and old["superseded"]  # kept as history
    assert new["format"] == "ogg_opus" and not new["superseded"]
