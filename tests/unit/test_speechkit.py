"""SpeechKit async recognition (API v3, REST): the HTTP API mocked with respx in the shapes
PROVIDERS.md documents (A.4–A.7), the bucket a real S3-compatible server (moto)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import respx
from pydantic import SecretStr

from sidecar.outcome import Advance, CredentialsRefused, HaltCode, PermanentError, RetryableError, StepResult
from sidecar.providers.base import StartRequest
from sidecar.providers.speechkit.object_storage import ObjectStore
from sidecar.providers.speechkit.provider import MAX_BYTES, MAX_DURATION, SpeechKitProvider
from sidecar.providers.speechkit.results import decode_stream, transcript_from
from sidecar.settings import Settings, SpeechKitSettings
from sidecar.steps import submit
from sidecar.steps.base import Providers, StepContext, StepKit
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import AttemptChange, AttemptRow, Claim, Claimed
from sidecar.storage.session import ClaimSession
from sidecar.storage.transitions import Advanced
from testkit.s3 import ACCESS_KEY_ID, SECRET_ACCESS_KEY, S3Server
from tests.support.sidecar import twin

pytestmark = pytest.mark.anyio

STT = "https://stt.api.cloud.yandex.net"
OPS = "https://operation.api.cloud.yandex.net"
API_KEY = "AQVN-test-api-key-7Hq2xLp9"
IAM_TOKEN = "t1.9euelZ-test-iam-token-Qx7"
OP_ID = "f8ddr61b30fk12345678"


def make_provider(s3: S3Server, bucket: str, **settings: Any) -> SpeechKitProvider:
    values: dict[str, Any] = {"api_key": SecretStr(API_KEY)} | settings
    storage = s3.settings(bucket)
    return SpeechKitProvider(SpeechKitSettings(**values), storage, store=ObjectStore(storage, max_attempts=1))


@pytest.fixture
async def provider(s3: S3Server, bucket: str) -> AsyncIterator[SpeechKitProvider]:
    p = make_provider(s3, bucket)
    yield p
    await p.aclose()


# --- documented shapes ----------------------------------------------------------


def operation(done: bool, **extra: Any) -> dict[str, Any]:
    """An Operation as A.4/A.5 show it."""
    op: dict[str, Any] = {
        "id": OP_ID,
        "description": "STT v3 async recognition",
        "createdAt": "2024-07-15T07:39:36Z",
        "createdBy": "ajehumcuv38h12345678",
        "modifiedAt": "2024-07-15T07:39:37Z" if done else "2024-07-15T07:39:36Z",
        "done": done,
    }
    if not done:
        op["metadata"] = None
    return op | extra


def _word(text: str, start: int, end: int) -> dict[str, str]:
    return {"text": text, "startTimeMs": str(start), "endTimeMs": str(end)}


def _alternative(text: str, words: list[dict[str, str]], start: int, end: int) -> dict[str, Any]:
    return {
        "words": words,
        "text": text,
        "startTimeMs": str(start),
        "endTimeMs": str(end),
        "confidence": 0,
        "languages": [{"languageCode": "en-US", "probability": 1}],
    }


def _message(index: int, received: int, eou: int, channel: str = "0", **event: Any) -> dict[str, Any]:
    return {
        "result": {
            "sessionUuid": {"uuid": "24935f24-2c1f62dc-8dd49006-12345678", "userRequestId": "f8d2h7m07t4i12345678"},
            "audioCursors": {
                "receivedDataMs": str(received),
                "resetTimeMs": "0",
                "partialTimeMs": str(received),
                "finalTimeMs": str(received),
                "finalIndex": str(index),
                "eouTimeMs": str(eou),
            },
            "responseWallTimeMs": "189",
            **event,
            "channelTag": channel,
        }
    }


def utterance(
    index: int, raw: str, normalized: str, words: list[tuple[str, int, int]], channel: str = "0"
) -> list[dict[str, Any]]:
    """One utterance as the documented example sends it: final, finalRefinement, eouUpdate."""
    start, end = words[0][1] - 100, words[-1][2] + 200
    ws = [_word(*w) for w in words]
    return [
        _message(
            index, end, 0, channel, final={"alternatives": [_alternative(raw, ws, start, end)], "channelTag": channel}
        ),
        _message(
            index,
            end,
            0,
            channel,
            finalRefinement={
                "finalIndex": str(index),
                "normalizedText": {"alternatives": [_alternative(normalized, ws, start, end)], "channelTag": channel},
            },
        ),
        _message(index, end, end, channel, eouUpdate={"timeMs": str(end)}),
    ]


def two_utterances() -> list[dict[str, Any]]:
    return [
        _message(0, 400, 0, partial={"alternatives": [_alternative("the quick", [], 0, 400)], "channelTag": "0"}),
        *utterance(
            0,
            "the quick brown fox jumps over the lazy dog",
            "The quick brown fox jumps over the lazy dog.",
            [("the", 459, 520), ("quick", 640, 1060), ("brown", 1120, 1500), ("fox", 1560, 1959), ("dog", 3000, 3400)],
        ),
        *utterance(
            1, "it costs twenty five rubles", "It costs 25 rubles.", [("it", 4100, 4200), ("rubles", 5000, 5600)]
        ),
        {"result": {"statusCode": {"codeType": "CLOSED", "message": ""}, "channelTag": "0"}},
    ]


def ndjson(messages: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(m) + "\n" for m in messages).encode()


def pretty(messages: list[dict[str, Any]]) -> bytes:
    # As the docs print it: indented objects one after another, no separators.
    return "\n".join(json.dumps(m, indent=3, ensure_ascii=False) for m in messages).encode()


async def _no_progress(field: str, value: str) -> None:
    return None


def _request(audio: Path, key: str = "att1", language: str | None = None) -> StartRequest:
    return StartRequest(audio=audio, format="ogg_opus", duration_ms=5600, attempt_key=key, language=language)


# --- start ---------------------------------------------------------------------


async def test_start_uploads_reports_the_uri_then_the_operation_id(
    api: respx.MockRouter, s3: S3Server, bucket: str, provider: SpeechKitProvider, audio: Path
) -> None:
    route = api.post(f"{STT}/stt/v3/recognizeFileAsync").respond(200, json=operation(False))
    progress: list[tuple[str, str]] = []

    async def on_progress(field: str, value: str) -> None:
        progress.append((field, value))
        if field == "audio_uri":
            assert not route.called  # stored before the paid call is made

    started = await provider.start(_request(audio), on_progress)

    [key] = s3.keys(bucket)
    uri = f"{s3.endpoint_url}/{bucket}/{key}"
    assert key.startswith("transcriber/att1/") and key.endswith(".ogg")
    assert s3.read(bucket, key) == await anyio.Path(audio).read_bytes()
    assert progress == [("audio_uri", uri), ("operation_id", OP_ID)]
    assert started.operation_id == OP_ID and started.audio_uri == uri and started.raw is None

    request = route.calls.last.request
    assert request.headers["Authorization"] == f"Api-Key {API_KEY}"
    assert "x-folder-id" not in request.headers
    assert json.loads(request.content) == {
        "uri": uri,
        "recognitionModel": {
            "model": "general",
            "audioFormat": {"containerAudio": {"containerAudioType": "OGG_OPUS"}},
            "textNormalization": {
                "textNormalization": "TEXT_NORMALIZATION_ENABLED",
                "profanityFilter": False,
                "literatureText": False,
            },
        },
        "speakerLabeling": {"speakerLabeling": "SPEAKER_LABELING_ENABLED"},
    }
    assert "languageRestriction" not in json.loads(request.content)["recognitionModel"]  # auto by default


async def test_settings_shape_the_request(api: respx.MockRouter, s3: S3Server, bucket: str, audio: Path) -> None:
    route = api.post("https://stt.internal/stt/v3/recognizeFileAsync").respond(200, json=operation(False))
    p = make_provider(
        s3,
        bucket,
        api_key=None,
        iam_token=SecretStr(IAM_TOKEN),
        folder_id="b1gfolder",
        model="deferred-general",
        language="en-US, ru-RU",
        text_normalization=False,
        stt_url="https://stt.internal/",
    )
    await p.start(_request(audio), _no_progress)
    await p.aclose()
    request = route.calls.last.request
    assert request.headers["Authorization"] == f"Bearer {IAM_TOKEN}"
    assert request.headers["x-folder-id"] == "b1gfolder"
    model = json.loads(request.content)["recognitionModel"]
    assert model["model"] == "deferred-general"
    assert model["textNormalization"]["textNormalization"] == "TEXT_NORMALIZATION_DISABLED"
    assert model["languageRestriction"]["languageCode"] == ["en-US", "ru-RU"]


async def test_an_api_key_never_carries_a_folder_and_auto_language_sets_no_restriction(
    api: respx.MockRouter, s3: S3Server, bucket: str, audio: Path
) -> None:
    route = api.post(f"{STT}/stt/v3/recognizeFileAsync").respond(200, json=operation(False))
    p = make_provider(s3, bucket, folder_id="b1gfolder", language="auto")
    await p.start(_request(audio), _no_progress)
    await p.aclose()
    request = route.calls.last.request
    assert "x-folder-id" not in request.headers
    assert "languageRestriction" not in json.loads(request.content)["recognitionModel"]


@pytest.mark.parametrize(
    ("configured", "hint", "sent"),
    [
        ("auto", "ru", ["ru-RU"]),
        ("en-US", "ru", ["ru-RU"]),  # the sender's hint comes first
        ("en-US", None, ["en-US"]),
        ("ru-RU", "kk", ["kk-KZ"]),
        ("ru-RU", "cy", None),  # a language SpeechKit is not known to take: let it find the language
    ],
)
async def test_the_senders_language_becomes_the_restriction(
    api: respx.MockRouter, s3: S3Server, bucket: str, audio: Path, configured: str, hint: str | None, sent: Any
) -> None:
    route = api.post(f"{STT}/stt/v3/recognizeFileAsync").respond(200, json=operation(False))
    p = make_provider(s3, bucket, language=configured)
    await p.start(_request(audio, language=hint), _no_progress)
    await p.aclose()
    model = json.loads(route.calls.last.request.content)["recognitionModel"]
    if sent is None:
        assert "languageRestriction" not in model
    else:
        assert model["languageRestriction"] == {"restrictionType": "WHITELIST", "languageCode": sent}


def test_the_language_found_is_read_from_the_stream() -> None:
    from sidecar.transcript import languages

    final = {
        "final": {"alternatives": [{"text": "привет", "languages": [{"languageCode": "ru-RU", "probability": 0.9}]}]}
    }
    t = transcript_from([{"result": final}])
    assert t.language == "ru-RU" and languages.code_of(t.language) == "ru"


async def test_audio_spec_declares_the_documented_caps(provider: SpeechKitProvider) -> None:
    spec = provider.audio_spec
    assert spec.format == "ogg_opus" and spec.channels == 1
    # Each piece stays under the per-operation caps (LA1): 4 hours, 1 GB.
    assert MAX_DURATION == timedelta(hours=4)
    assert spec.max_piece is not None and spec.max_piece < MAX_DURATION
    assert spec.max_bytes == MAX_BYTES <= 1024**3
    seconds = spec.piece_seconds()
    assert seconds is not None and seconds * (spec.bitrate or 0) / 8 < MAX_BYTES


async def test_no_credentials_wait_for_the_owner_before_uploading(s3: S3Server, bucket: str, audio: Path) -> None:
    p = make_provider(s3, bucket, api_key=None)
    with pytest.raises(CredentialsRefused, match=r"api_key, speechkit\.service_account_key or speechkit\.iam_token"):
        await p.start(_request(audio), _no_progress)
    assert s3.keys(bucket) == []
    await p.aclose()


async def test_a_rejected_request_halts_without_the_key_and_removes_the_upload(
    api: respx.MockRouter, s3: S3Server, bucket: str, provider: SpeechKitProvider, audio: Path
) -> None:
    api.post(f"{STT}/stt/v3/recognizeFileAsync").respond(
        400,
        json={
            "code": 3,
            "message": f"Invalid audio format: Api-Key {API_KEY} (also {SECRET_ACCESS_KEY})",
            "details": [{"@type": "type.googleapis.com/google.rpc.RequestInfo", "requestId": "abc"}],
        },
    )
    with pytest.raises(PermanentError) as e:
        await provider.start(_request(audio), _no_progress)
    assert e.value.code == HaltCode.PROVIDER_REJECTED
    text = str(e.value)
    assert text.startswith("SpeechKit rejected the request (400): INVALID_ARGUMENT (3): Invalid audio format")
    assert API_KEY not in text and SECRET_ACCESS_KEY not in text and ACCESS_KEY_ID not in text
    assert s3.keys(bucket) == []


async def test_429_is_a_quota_with_a_long_wait(api: respx.MockRouter, provider: SpeechKitProvider, audio: Path) -> None:
    route = api.post(f"{STT}/stt/v3/recognizeFileAsync")
    route.respond(429, json={"code": 8, "message": "Quota exceeded"}, headers={"Retry-After": "90"})
    with pytest.raises(RetryableError) as e:
        await provider.start(_request(audio), _no_progress)
    assert e.value.retry_after == timedelta(seconds=90)
    assert "quota exhausted" in str(e.value)
    assert route.call_count == 1  # not hammered within the call

    route.respond(429, json={"code": 8, "message": "Quota exceeded"}, headers={"Retry-After": "2"})
    with pytest.raises(RetryableError) as e:
        await provider.start(_request(audio), _no_progress)
    assert e.value.retry_after is not None and e.value.retry_after >= timedelta(seconds=60)


async def test_a_start_answer_without_an_id_is_retryable(
    api: respx.MockRouter, provider: SpeechKitProvider, audio: Path
) -> None:
    route = api.post(f"{STT}/stt/v3/recognizeFileAsync")
    route.respond(200, json={"description": "STT v3 async recognition", "done": False})
    with pytest.raises(RetryableError, match="no operation id"):
        await provider.start(_request(audio), _no_progress)
    route.respond(200, content=b'{"id":"f8ddr61b30fk","descr')
    with pytest.raises(RetryableError, match="truncated"):
        await provider.start(_request(audio), _no_progress)


async def test_a_read_timeout_on_the_paid_call_is_not_repeated(
    api: respx.MockRouter, provider: SpeechKitProvider, audio: Path
) -> None:
    route = api.post(f"{STT}/stt/v3/recognizeFileAsync").mock(side_effect=httpx.ReadTimeout("timed out"))
    with pytest.raises(RetryableError, match="may have been accepted"):
        await provider.start(_request(audio), _no_progress)
    assert route.call_count == 1


async def test_a_connect_timeout_or_5xx_on_the_paid_call_is_retried(
    api: respx.MockRouter, provider: SpeechKitProvider, audio: Path
) -> None:
    route = api.post(f"{STT}/stt/v3/recognizeFileAsync")
    route.side_effect = [
        httpx.ConnectTimeout("connect timed out"),
        httpx.Response(503, json={"code": 14, "message": "unavailable"}),
        httpx.Response(200, json=operation(False)),
    ]
    started = await provider.start(_request(audio), _no_progress)
    assert started.operation_id == OP_ID and route.call_count == 3


# --- poll --------------------------------------------------------------------------


async def test_poll_not_done_postpones_and_backs_off_for_old_operations(
    api: respx.MockRouter, provider: SpeechKitProvider
) -> None:
    route = api.get(f"{OPS}/operations/{OP_ID}")
    now = datetime.now(UTC)
    route.respond(200, json=operation(False, createdAt=now.isoformat().replace("+00:00", "Z")))
    polled = await provider.poll(OP_ID)
    assert not polled.ready and polled.raw is None and polled.retry_in is None  # the pipeline's poll_delay

    route.respond(200, json=operation(False, createdAt=(now - timedelta(minutes=20)).isoformat()))
    polled = await provider.poll(OP_ID)
    assert polled.retry_in is not None and timedelta(seconds=60) < polled.retry_in <= timedelta(minutes=5)
    assert route.calls.last.request.headers["Authorization"] == f"Api-Key {API_KEY}"


@pytest.mark.parametrize("framing", [ndjson, pretty])
async def test_poll_done_fetches_the_result_stream(
    api: respx.MockRouter, provider: SpeechKitProvider, framing: Any
) -> None:
    body = framing(two_utterances())
    api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(True))
    results = api.get(f"{STT}/stt/v3/getRecognition", params={"operationId": OP_ID}).respond(200, content=body)

    polled = await provider.poll(OP_ID)

    assert polled.ready and polled.raw == body
    assert results.call_count == 1
    t = provider.parse(body)
    assert t.text == "The quick brown fox jumps over the lazy dog. It costs 25 rubles."
    assert [(s.start, s.end, s.text) for s in t.segments] == [
        (0.359, 3.6, "The quick brown fox jumps over the lazy dog."),
        (4.0, 5.8, "It costs 25 rubles."),
    ]
    words = t.segments[0].words or []
    assert [(w.word, w.start, w.end) for w in words[:2]] == [("the", 0.459, 0.52), ("quick", 0.64, 1.06)]
    assert t.language == "en-US"


async def test_a_failed_operation_halts_as_provider_failed(api: respx.MockRouter, provider: SpeechKitProvider) -> None:
    error = {"code": 3, "message": f"Invalid audio format (key {API_KEY})", "details": []}
    api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(True, error=error))
    # No getRecognition route: asking for results would fail the test (assert_all_mocked).
    with pytest.raises(PermanentError) as e:
        await provider.poll(OP_ID)
    assert e.value.code == HaltCode.PROVIDER_FAILED
    assert "INVALID_ARGUMENT (3): Invalid audio format" in str(e.value)
    assert API_KEY not in str(e.value)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (404, {"code": 5, "message": "operation results not found"}),
        (404, None),
        (400, {"code": 5, "message": "not found"}),
        (200, {"error": {"code": 5, "message": "results expired"}}),
    ],
)
async def test_expired_results_halt_as_results_expired(
    api: respx.MockRouter, provider: SpeechKitProvider, status: int, body: Any
) -> None:
    api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(True))
    route = api.get(f"{STT}/stt/v3/getRecognition")
    route.respond(status, json=body) if body is not None else route.respond(status, text="Not Found")
    with pytest.raises(PermanentError) as e:
        await provider.poll(OP_ID)
    assert e.value.code == HaltCode.RESULTS_EXPIRED
    assert "3 days" in str(e.value)


async def test_an_error_inside_the_stream_is_a_failure(api: respx.MockRouter, provider: SpeechKitProvider) -> None:
    api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(True))
    stream = [*two_utterances()[:2], {"error": {"code": 13, "message": "Internal error"}}]
    api.get(f"{STT}/stt/v3/getRecognition").respond(200, content=ndjson(stream))
    with pytest.raises(PermanentError) as e:
        await provider.poll(OP_ID)
    assert e.value.code == HaltCode.PROVIDER_FAILED and "INTERNAL (13)" in str(e.value)
    with pytest.raises(PermanentError) as e:
        provider.parse(ndjson(stream))
    assert e.value.code == HaltCode.PROVIDER_FAILED


async def test_a_truncated_result_stream_is_retryable(api: respx.MockRouter, provider: SpeechKitProvider) -> None:
    api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(True))
    body = pretty(two_utterances())
    api.get(f"{STT}/stt/v3/getRecognition").respond(200, content=body[: len(body) // 2])
    with pytest.raises(RetryableError, match="truncated"):
        await provider.poll(OP_ID)


async def test_5xx_then_success_is_retried_within_the_call(api: respx.MockRouter, provider: SpeechKitProvider) -> None:
    route = api.get(f"{OPS}/operations/{OP_ID}")
    route.side_effect = [
        httpx.Response(503, json={"code": 14, "message": "Unavailable"}),
        httpx.Response(504, json={"code": 4, "message": "Deadline exceeded"}),
        httpx.Response(200, json=operation(False)),
    ]
    polled = await provider.poll(OP_ID)
    assert not polled.ready and route.call_count == 3


async def test_5xx_every_time_gives_up_as_retryable(api: respx.MockRouter, provider: SpeechKitProvider) -> None:
    route = api.get(f"{OPS}/operations/{OP_ID}").respond(500, json={"code": 13, "message": "Internal"})
    with pytest.raises(RetryableError) as e:
        await provider.poll(OP_ID)
    assert route.call_count == 3
    assert "SpeechKit answered 500 (INTERNAL (13): Internal); gave up after 3 tries" == str(e.value)


@pytest.mark.parametrize("error", [httpx.ReadTimeout("read"), httpx.ConnectTimeout("connect"), httpx.ConnectError("x")])
async def test_timeouts_and_network_errors_are_retried_then_retryable(
    api: respx.MockRouter, provider: SpeechKitProvider, error: Exception
) -> None:
    route = api.get(f"{OPS}/operations/{OP_ID}").mock(side_effect=error)
    with pytest.raises(RetryableError):
        await provider.poll(OP_ID)
    assert route.call_count == 3


async def test_a_malformed_operation_is_retryable(api: respx.MockRouter, provider: SpeechKitProvider) -> None:
    api.get(f"{OPS}/operations/{OP_ID}").respond(200, content=b"<html>gateway</html>")
    with pytest.raises(RetryableError, match="may have been truncated"):
        await provider.poll(OP_ID)


async def test_every_request_has_a_timeout(api: respx.MockRouter, s3: S3Server, bucket: str) -> None:
    route = api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(False))
    p = make_provider(s3, bucket, timeout=timedelta(seconds=7))
    await p.poll(OP_ID)
    await p.aclose()
    assert route.calls.last.request.extensions["timeout"] == {"connect": 7.0, "read": 7.0, "write": 7.0, "pool": 7.0}


# --- parse -------------------------------------------------------------------------


def test_both_framings_decode_to_the_same_objects() -> None:
    messages = two_utterances()
    assert decode_stream(ndjson(messages)) == decode_stream(pretty(messages)) == messages
    assert decode_stream(json.dumps(messages).encode()) == messages  # a JSON array, too
    assert decode_stream(b"  \n") == []
    with pytest.raises(ValueError):
        decode_stream(b'{"result": {}} 42')


async def test_channel_tags_are_speakers_in_time_order_and_refinements_match_their_own(
    provider: SpeechKitProvider,
) -> None:
    # Mono audio with speakerLabeling: SpeechKit tells the speaker in channelTag.
    left = utterance(0, "hello there", "Hello there.", [("hello", 100, 400), ("there", 450, 800)], channel="0")
    right = utterance(0, "other side", "Other side.", [("other", 900, 1200), ("side", 1250, 1500)], channel="1")
    second = utterance(1, "bye now", "Bye now.", [("bye", 1600, 1900), ("now", 1950, 2200)], channel="0")
    # Without audioCursors, a refinement refines its channel's latest final not yet refined.
    for m in second:
        del m["result"]["audioCursors"]
    del second[1]["result"]["finalRefinement"]["finalIndex"]
    t = provider.parse(ndjson([*left[:1], *right, *left[1:], *second]))
    assert [(s.text, s.speaker) for s in t.segments] == [("Hello there.", "0"), ("Other side.", "1"), ("Bye now.", "0")]
    assert t.text == "Hello there. Other side. Bye now."


async def test_one_channel_means_no_speakers(provider: SpeechKitProvider) -> None:
    t = provider.parse(ndjson(two_utterances()))
    assert t.segments and all(s.speaker is None for s in t.segments)


async def test_finals_without_refinement_keep_their_own_text(provider: SpeechKitProvider) -> None:
    only_finals = [m for m in two_utterances() if "finalRefinement" not in m["result"]]
    t = provider.parse(pretty(only_finals))
    assert t.text == "the quick brown fox jumps over the lazy dog it costs twenty five rubles"
    assert provider.parse(b"").text == ""


async def test_a_corrupt_stored_result_halts(provider: SpeechKitProvider) -> None:
    with pytest.raises(PermanentError) as e:
        provider.parse(b"\xff\xfe not json")
    assert e.value.code == HaltCode.PROVIDER_FAILED


# --- cleanup -------------------------------------------------------------------------


async def test_cleanup_deletes_the_results_and_the_upload(
    api: respx.MockRouter, s3: S3Server, bucket: str, provider: SpeechKitProvider, audio: Path
) -> None:
    api.post(f"{STT}/stt/v3/recognizeFileAsync").respond(200, json=operation(False))
    delete = api.delete(f"{STT}/stt/v3/deleteRecognition", params={"operationId": OP_ID}).respond(200, content=b"")
    started = await provider.start(_request(audio), _no_progress)
    assert len(s3.keys(bucket)) == 1

    await provider.cleanup(started.operation_id, started.audio_uri)

    assert delete.call_count == 1 and s3.keys(bucket) == []
    delete.respond(404, json={"code": 5, "message": "not found"})
    await provider.cleanup(started.operation_id, started.audio_uri)  # already gone: fine


async def test_cleanup_tries_both_and_reports_failures(
    api: respx.MockRouter, s3: S3Server, bucket: str, provider: SpeechKitProvider, audio: Path
) -> None:
    api.post(f"{STT}/stt/v3/recognizeFileAsync").respond(200, json=operation(False))
    api.delete(f"{STT}/stt/v3/deleteRecognition").respond(403, json={"code": 7, "message": "Permission denied"})
    started = await provider.start(_request(audio), _no_progress)
    with pytest.raises(RetryableError, match="PERMISSION_DENIED"):
        await provider.cleanup(started.operation_id, started.audio_uri)
    assert s3.keys(bucket) == []  # the upload went anyway


# --- paying at most once (P18) -----------------------------------------------------


async def test_find_started_reuses_the_upload_but_cannot_find_the_operation(
    api: respx.MockRouter, s3: S3Server, bucket: str, provider: SpeechKitProvider, audio: Path
) -> None:
    api.post(f"{STT}/stt/v3/recognizeFileAsync").respond(200, json=operation(False))
    first = await provider.start(_request(audio), _no_progress)

    assert await provider.find_started("att1", first.audio_uri) is None
    again = await provider.start(_request(audio), _no_progress)
    assert again.audio_uri == first.audio_uri
    assert len(s3.keys(bucket)) == 1

    # The address was never stored: the upload is found under the attempt's prefix.
    assert await provider.find_started("att1", "") is None
    assert (await provider.start(_request(audio), _no_progress)).audio_uri == first.audio_uri
    assert len(s3.keys(bucket)) == 1

    # A stored address whose object is gone: uploaded again.
    s3.client.delete_object(Bucket=bucket, Key=s3.keys(bucket)[0])
    assert await provider.find_started("att1", first.audio_uri) is None
    assert (await provider.start(_request(audio), _no_progress)).audio_uri != first.audio_uri


class Killed(Exception):
    """The worker process dies here."""


@dataclass
class DyingStorage(InMemoryStorage):
    """The twin, dying once just before or just after an operation id is stored."""

    die: str | None = None  # "after_storing_id" | "before_storing_id"

    async def update_attempt(self, claim: Claim, attempt_id: str, change: AttemptChange) -> AttemptRow:
        storing_id = change.operation_id is not None
        if storing_id and self.die == "before_storing_id":
            self.die = None
            raise Killed
        row = await super().update_attempt(claim, attempt_id, change)
        if storing_id and self.die == "after_storing_id":
            self.die = None
            raise Killed
        return row

    def attempts(self, record_id: str) -> list[AttemptRow]:
        return [a.row for a in self._attempts.values() if a.row.record == record_id]


async def _normalized(audio: Path, die: str) -> tuple[DyingStorage, str]:
    """A record in ``normalized`` with its normalized audio, on a storage that dies once at ``die``."""
    base = twin()
    storage = DyingStorage(stages=base.stages, terminal=base.terminal, clock=base.clock, die=die)
    rid = storage.add_record()
    first = await storage.claim({"uploaded": timedelta(minutes=5)})
    assert isinstance(first, Claimed)
    await storage.attach_file(first.claim, audio, role="normalized", format="ogg_opus", duration_ms=5600)
    await storage.settle(first.claim, Advanced("normalized"))
    return storage, rid


async def _claim(storage: InMemoryStorage, rid: str) -> Claimed:
    storage.clock.advance(3600)  # type: ignore[attr-defined]  # past any lease of a killed try
    got = await storage.claim({"normalized": timedelta(minutes=5)})
    assert isinstance(got, Claimed) and got.record.id == rid
    return got


async def _submit(storage: InMemoryStorage, rid: str, provider: SpeechKitProvider, workdir: Path) -> StepResult:
    """One try of submit: the record claimed, the step run."""
    claimed = await _claim(storage, rid)
    kit = StepKit(Providers(provider, lambda name: provider), Settings(), storage.clock)
    return await submit.run(StepContext(ClaimSession(storage, claimed.claim, claimed.record), kit, workdir))


async def _killed_in_submit(
    audio: Path, die: str, provider: SpeechKitProvider, workdir: Path
) -> tuple[DyingStorage, str]:
    """A normalized record whose first try of submit was killed at ``die``: its storage and id."""
    storage, rid = await _normalized(audio, die)
    with pytest.raises(Killed):
        await _submit(storage, rid, provider, workdir)
    return storage, rid


async def test_a_kill_after_the_id_is_stored_never_starts_a_second_recognition(
    api: respx.MockRouter, s3: S3Server, bucket: str, provider: SpeechKitProvider, audio: Path, tmp_path: Path
) -> None:
    recognize = api.post(f"{STT}/stt/v3/recognizeFileAsync").respond(200, json=operation(False))
    storage, rid = await _killed_in_submit(audio, "after_storing_id", provider, tmp_path)
    assert storage.attempts(rid)[0].operation_id == OP_ID

    outcome = await _submit(storage, rid, provider, tmp_path)

    assert isinstance(outcome, Advance) and "not started again" in outcome.note
    assert recognize.call_count == 1
    assert len(s3.keys(bucket)) == 1


async def test_the_residual_window_a_kill_before_the_id_is_stored_pays_twice(
    api: respx.MockRouter, s3: S3Server, bucket: str, provider: SpeechKitProvider, audio: Path, tmp_path: Path
) -> None:
    """Documented, not closed: SpeechKit cannot be asked for an operation by our key."""
    recognize = api.post(f"{STT}/stt/v3/recognizeFileAsync").respond(200, json=operation(False))
    storage, rid = await _killed_in_submit(audio, "before_storing_id", provider, tmp_path)
    [row] = storage.attempts(rid)
    assert row.operation_id == "" and row.audio_uri

    outcome = await _submit(storage, rid, provider, tmp_path)

    assert isinstance(outcome, Advance)
    assert recognize.call_count == 2  # the second paid call the docs name
    assert len(s3.keys(bucket)) == 1  # ... but the upload is not repeated
    assert storage.attempts(rid)[0].operation_id == OP_ID
