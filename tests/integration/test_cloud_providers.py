"""The cloud providers end to end: a real PocketBase, the real steps and pool, real audio
normalization, a real S3-compatible server (moto); only the recognition APIs are mocked (respx)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from pydantic import SecretStr

from sidecar.providers.base import OnProgress, Started, StartRequest
from sidecar.providers.openai.provider import OpenAIProvider
from sidecar.providers.speechkit.provider import SpeechKitProvider
from sidecar.serving.assembly import default_steps
from sidecar.settings import OpenAISettings, SpeechKitSettings
from testkit.pocketbase import Caller, PocketBaseServer
from testkit.s3 import S3Server
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
CLIP = ROOT / "tests" / "data" / "speech" / "fox.ogg"
CLIP_TEXT = json.loads((CLIP.parent / "clips.json").read_text(encoding="utf-8"))["fox.ogg"]
STT = "https://stt.api.cloud.yandex.net"
OPS = "https://operation.api.cloud.yandex.net"
OP_ID = "e03sup6d5h7rq1234567"
API_KEY = "AQVN-e2e-key-Xy12Zw34"
PIPELINE: dict[str, Any] = {"workers": 1, "poll_delay": 0.05, "idle_poll": 0.1, "retry_delay": 0}


@pytest.fixture
def api(pb: PocketBaseServer) -> Iterator[respx.MockRouter]:
    """Only the recognition APIs are mocked; PocketBase traffic passes through."""
    with respx.mock(assert_all_called=True, assert_all_mocked=True) as router:
        router.route(url__startswith=pb.url).pass_through()
        yield router


async def run_until_settled(pb: PocketBaseServer, provider: Any, sender: Caller, rid: str) -> dict[str, Any]:
    async with running_sidecar(pb, default_steps(), provider=provider, **PIPELINE) as pool:
        async with pool_running(pool):

            def settled() -> dict[str, Any] | None:
                body = sender.poll(rid)
                return body if body["status"] == "done" or body["halted"] else None

            found = await eventually(settled, within=45, what="the record done or halted")
    assert found is not None
    return found


def events(su: Caller, rid: str) -> list[dict[str, Any]]:
    params: dict[str, str | int] = {"sort": "created,@rowid", "perPage": 500, "filter": f'record="{rid}"'}
    return list(su.http.get("/api/collections/record_events/records", params=params).json()["items"])


def recognition_stream(text: str) -> bytes:
    """The getRecognition body for one utterance, pretty-printed as in the docs (A.6)."""
    words = text.rstrip(".").split()
    timed = [
        {"text": w.lower(), "startTimeMs": str(300 + 250 * i), "endTimeMs": str(500 + 250 * i)}
        for i, w in enumerate(words)
    ]
    end = str(600 + 250 * len(words))

    def alternative(t: str) -> dict[str, Any]:
        return {"words": timed, "text": t, "startTimeMs": "0", "endTimeMs": end, "confidence": 0, "languages": []}

    cursors = {"receivedDataMs": end, "finalTimeMs": end, "finalIndex": "0", "eouTimeMs": "0"}
    messages = [
        {
            "result": {
                "audioCursors": cursors,
                "final": {"alternatives": [alternative(text.lower().rstrip("."))]},
                "channelTag": "0",
            }
        },
        {
            "result": {
                "audioCursors": cursors,
                "finalRefinement": {"finalIndex": "0", "normalizedText": {"alternatives": [alternative(text)]}},
                "channelTag": "0",
            }
        },
        {"result": {"audioCursors": cursors | {"eouTimeMs": end}, "eouUpdate": {"timeMs": end}, "channelTag": "0"}},
    ]
    return "\n".join(json.dumps(m, indent=3) for m in messages).encode()


class KilledAfterStoringTheId(SpeechKitProvider):
    """The worker dies right after the operation id reached PocketBase, once."""

    killed = False

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        async def progress(field: str, value: str) -> None:
            await on_progress(field, value)
            if field == "operation_id" and not self.killed:
                self.killed = True
                raise RuntimeError("worker killed")

        return await super().start(request, progress)


async def test_speechkit_end_to_end_pays_once_and_leaves_nothing_behind(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, s3: S3Server, api: respx.MockRouter
) -> None:
    bucket = s3.new_bucket()
    uploaded: list[bytes] = []

    def recognize(request: httpx.Request) -> httpx.Response:
        uri = json.loads(request.content)["uri"]
        assert uri.startswith(f"{s3.endpoint_url}/{bucket}/transcriber/")
        key = uri.removeprefix(f"{s3.endpoint_url}/{bucket}/")
        uploaded.append(s3.read(bucket, key))  # the audio is in the bucket before the call
        return httpx.Response(200, json={"id": OP_ID, "description": "STT v3 async recognition", "done": False})

    recognize_route = api.post(f"{STT}/stt/v3/recognizeFileAsync").mock(side_effect=recognize)
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    operation = {"id": OP_ID, "description": "STT v3 async recognition", "createdAt": created}
    status = api.get(f"{OPS}/operations/{OP_ID}")
    status.side_effect = [
        httpx.Response(200, json=operation | {"done": False}),
        httpx.Response(200, json=operation | {"done": True}),
    ]
    api.get(f"{STT}/stt/v3/getRecognition", params={"operationId": OP_ID}).respond(
        200, content=recognition_stream(CLIP_TEXT)
    )
    delete = api.delete(f"{STT}/stt/v3/deleteRecognition", params={"operationId": OP_ID}).respond(200)

    provider = KilledAfterStoringTheId(SpeechKitSettings(api_key=SecretStr(API_KEY)), s3.settings(bucket))
    rid = sender.upload(CLIP, mime="audio/ogg")
    body = await run_until_settled(pb, provider, sender, rid)

    assert body["status"] == "done" and not body["halted"], body
    assert body["text"] == CLIP_TEXT
    assert recognize_route.call_count == 1  # the retried submit found the stored operation id
    assert provider.killed
    assert len(uploaded) == 1 and uploaded[0].startswith(b"OggS")
    assert status.call_count == 2 and delete.call_count == 1
    assert s3.keys(bucket) == []  # the upload is removed after finalize
    journal = events(superuser, rid)
    assert any("worker killed" in e["outcome_text"] for e in journal)
    assert any("started by an earlier try, not started again" in e["outcome_text"] for e in journal)
    assert API_KEY not in json.dumps(journal)
    srt = sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "srt"}).text
    assert "00:00:00,000 --> " in srt and CLIP_TEXT in srt


async def test_speechkit_failed_operation_halts_provider_failed_without_secrets(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, s3: S3Server, api: respx.MockRouter
) -> None:
    bucket = s3.new_bucket()
    api.post(f"{STT}/stt/v3/recognizeFileAsync").respond(200, json={"id": OP_ID, "done": False})
    error = {"code": 3, "message": f"audio could not be decoded; key {API_KEY}"}
    api.get(f"{OPS}/operations/{OP_ID}").respond(200, json={"id": OP_ID, "done": True, "error": error})
    delete = api.delete(f"{STT}/stt/v3/deleteRecognition").respond(200, json={})
    provider = SpeechKitProvider(SpeechKitSettings(api_key=SecretStr(API_KEY)), s3.settings(bucket))

    rid = sender.upload(CLIP, mime="audio/ogg")
    body = await run_until_settled(pb, provider, sender, rid)

    assert body["halted"] and body["halt_code"] == "provider_failed", body
    rec = superuser.record(rid)
    assert "INVALID_ARGUMENT (3): audio could not be decoded" in rec["halt_reason"]
    assert API_KEY not in rec["halt_reason"] and API_KEY not in json.dumps(events(superuser, rid))
    # O6: a lost attempt's copies go at once: the upload and the results at SpeechKit.
    assert s3.keys(bucket) == [] and delete.call_count == 1
    [attempt] = superuser.http.get(
        "/api/collections/recognition_attempts/records", params={"filter": f'record="{rid}"'}
    ).json()["items"]
    assert attempt["status"] == "lost" and attempt["copies_removed_at"] > 0


async def test_openai_compatible_end_to_end(pb: PocketBaseServer, sender: Caller, api: respx.MockRouter) -> None:
    words = CLIP_TEXT.rstrip(".").split()
    verbose = {
        "task": "transcribe",
        "language": "english",
        "duration": 3.1,
        "text": CLIP_TEXT,
        "segments": [{"id": 0, "seek": 0, "start": 0.0, "end": 3.1, "text": " " + CLIP_TEXT, "tokens": []}],
        "words": [{"word": w, "start": 0.3 * i, "end": 0.3 * i + 0.25} for i, w in enumerate(words)],
    }
    route = api.post("http://whisper.local:8000/v1/audio/transcriptions").respond(200, json=verbose)
    provider = OpenAIProvider(OpenAISettings(base_url="http://whisper.local:8000/v1", model="whisper-1"))

    rid = sender.upload(CLIP, mime="audio/ogg")
    body = await run_until_settled(pb, provider, sender, rid)

    assert body["status"] == "done" and body["text"] == CLIP_TEXT, body
    assert route.call_count == 1
    request = route.calls.last.request
    assert "authorization" not in request.headers
    assert b'filename="audio.ogg"' in request.content and b"OggS" in request.content
    vtt = sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "vtt"}).text
    assert vtt.startswith("WEBVTT") and CLIP_TEXT in vtt
