"""Every language offline (SPEC L1–L6), through the real server, the real steps and the real base model."""

from __future__ import annotations

import json
import wave
from pathlib import Path
from typing import Any

import faster_whisper
import pytest

from sidecar.media import vad
from sidecar.providers.offline.provider import OfflineProvider
from sidecar.serving.assembly import default_steps, make_provider
from testkit.audio import compose_wav, decode_info, write_audio
from testkit.pocketbase import Caller, PocketBaseServer
from testkit.wer import wer
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
SPEECH = ROOT / "tests" / "data" / "speech"
SPEECH_RU = ROOT / "tests" / "data" / "speech_ru"
CLIPS_RU: dict[str, str] = json.loads((SPEECH_RU / "clips.json").read_text(encoding="utf-8"))
CLIPS: dict[str, str] = json.loads((SPEECH / "clips.json").read_text(encoding="utf-8"))


async def run_until_settled(pb: PocketBaseServer, su: Caller, ids: list[str], **settings: Any) -> None:
    """Runs the real pipeline (offline provider) until every record is done or halted."""

    def settled() -> bool:
        for rid in ids:
            rec = su.record(rid)
            if not (rec["state"] == "done" or rec["halted_at"]):
                return False
        return True

    async with running_sidecar(pb, default_steps(), provider=make_provider(pb.settings), **settings) as pool:
        async with pool_running(pool):
            await eventually(settled, within=240, what="every record done or halted")


def journal(su: Caller, rid: str) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"filter": f'record="{rid}"', "sort": "created,@rowid", "perPage": 200}
    return list(su.http.get("/api/collections/record_events/records", params=params).json()["items"])


def attempts(su: Caller, rid: str) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"filter": f'record="{rid}"', "perPage": 200}
    return list(su.http.get("/api/collections/recognition_attempts/records", params=params).json()["items"])


async def test_russian_end_to_end_on_the_default_settings(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, tmp_path: Path
) -> None:
    names = ["book.ogg", "park.ogg", "doctor.ogg"]
    recording = compose_wav([SPEECH_RU / n for n in names], tmp_path / "ru.wav")
    rid = sender.upload(recording)
    assert sender.poll(rid)["language"] is None
    await run_until_settled(pb, superuser, [rid])

    poll = sender.poll(rid)
    assert poll["status"] == "done" and poll["language"] == "ru"
    assert wer(" ".join(CLIPS_RU[n] for n in names), poll["text"]) <= 0.2, poll["text"]
    export = json.loads(sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "json"}).text)
    assert export["language"] == "ru" and export["text"] == poll["text"]
    rec = superuser.record(rid)
    assert rec["language"] == "ru" and rec["language_hint"] == ""


async def test_english_end_to_end_and_a_hint_that_is_honoured(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    english = sender.upload(SPEECH / "report.ogg")
    hinted = sender.upload(SPEECH_RU / "dacha.ogg", language="en")  # told English, though it is Russian
    assert sender.poll(hinted)["language"] is None
    await run_until_settled(pb, superuser, [english, hinted])

    poll = sender.poll(english)
    assert poll["status"] == "done" and poll["language"] == "en"
    assert wer(CLIPS["report.ogg"], poll["text"]) <= 0.1, poll["text"]
    told = sender.poll(hinted)
    assert told["status"] == "done" and told["language"] == "en"
    rec = superuser.record(hinted)
    assert rec["language_hint"] == "en"


@pytest.mark.parametrize("value", ["xx", "russian", "ru-RU", "e", "en,ru"])
def test_an_unknown_language_is_refused_and_nothing_is_made(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, value: str
) -> None:
    resp = sender.try_upload(SPEECH / "fox.ogg", language=value)
    assert resp.status_code == 400
    body = resp.json()
    assert body["code"] == "unknown_language" and "ISO 639-1" in body["message"]
    assert superuser.http.get("/api/collections/audio_records/records").json()["totalItems"] == 0
    assert superuser.http.get("/api/collections/files/records").json()["totalItems"] == 0


def test_auto_or_an_upper_case_code_is_accepted(sender: Caller, superuser: Caller) -> None:
    auto = sender.upload(SPEECH / "fox.ogg", language="auto")
    upper = sender.upload(SPEECH / "fox.ogg", language="RU")
    hints = [superuser.record(r)["language_hint"] for r in (auto, upper)]
    assert hints == ["", "ru"]


async def test_silence_noise_and_tiny_clips_end_done_with_an_empty_transcript(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, tmp_path: Path
) -> None:
    quiet = {
        "silence": compose_wav([5.0], tmp_path / "silence.wav"),
        "noise": compose_wav([5.0], tmp_path / "noise.wav", noise=0.02),
        **{f"{ms} ms": write_audio(tmp_path / f"t{ms}.wav", ms / 1000, codec="pcm_s16le") for ms in (10, 50, 250)},
    }
    ids = {name: sender.upload(path) for name, path in quiet.items()}
    await run_until_settled(pb, superuser, list(ids.values()), workers=2)

    for name, rid in ids.items():
        poll = sender.poll(rid)
        assert (poll["status"], poll["halted"], poll["text"], poll["language"]) == ("done", False, "", None), name
        notes = [e["outcome_text"] for e in journal(superuser, rid)]
        assert any("no speech found" in n for n in notes), (name, notes)
        assert [e["kind"] for e in journal(superuser, rid)].count("failed") == 0, name
        srt = sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "srt"})
        assert srt.status_code == 200 and srt.text == ""


async def test_a_sub_second_last_block_is_recognized_once(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Blocks of 10 s over 20 s + 240 samples: the last block holds 15 ms.
    monkeypatch.setattr(vad, "BLOCK_SECONDS", 10.0)
    speech = compose_wav([SPEECH / "station.ogg", 1.0, SPEECH / "fox.ogg"], tmp_path / "speech.wav")
    recording = compose_wav([speech, 20.0 - decode_info(speech).seconds + 240 / 16000], tmp_path / "sliver.wav")
    with wave.open(str(recording)) as w:
        assert w.getnframes() == 20 * 16000 + 240
    rid = sender.upload(recording)
    await run_until_settled(pb, superuser, [rid])

    poll = sender.poll(rid)
    assert poll["status"] == "done", poll
    assert wer(CLIPS["station.ogg"] + " " + CLIPS["fox.ogg"], poll["text"]) <= 0.15, poll["text"]
    assert len(attempts(superuser, rid)) == 1
    assert [e["kind"] for e in journal(superuser, rid)].count("failed") == 0


async def test_an_engine_failure_on_the_input_halts_at_once(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = make_provider(pb.settings)
    assert isinstance(provider, OfflineProvider)
    model = provider.engine.load()

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise IndexError("boolean index did not match indexed array along axis 0")

    monkeypatch.setattr(model, "transcribe", crash)  # one window at a time
    monkeypatch.setattr(faster_whisper.BatchedInferencePipeline, "transcribe", crash)  # batched (the default)
    rid = sender.upload(SPEECH / "fox.ogg")
    await run_until_settled(pb, superuser, [rid])

    rec = superuser.record(rid)
    assert rec["halt_code"] == "provider_failed" and "IndexError" in rec["halt_reason"]
    assert rec["attempts"] == 1  # halted on the first try, not retried five times
    assert [e["kind"] for e in journal(superuser, rid)].count("failed") == 0
