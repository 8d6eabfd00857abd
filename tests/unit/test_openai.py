"""The OpenAI-compatible provider against respx-mocked servers (PROVIDERS.md C, D.3)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import pytest
import respx
from pydantic import SecretStr

from sidecar.outcome import HaltCode, PermanentError, RetryableError
from sidecar.providers.base import StartRequest
from sidecar.providers.http import retry_after
from sidecar.providers.openai.provider import MAX_BYTES, OpenAIProvider, endpoint
from sidecar.settings import OpenAISettings

pytestmark = pytest.mark.anyio

URL = "https://api.openai.com/v1/audio/transcriptions"
API_KEY = "sk-proj-test-9f8e7d6c5b4a3210"

# verbose_json as the OpenAPI spec describes it (C.2).
VERBOSE = {
    "task": "transcribe",
    "language": "english",
    "duration": 6.2,
    "text": "The quick brown fox. Jumps over the dog.",
    "segments": [
        {
            "id": 0,
            "seek": 0,
            "start": 0.0,
            "end": 2.4,
            "text": " The quick brown fox.",
            "tokens": [50364, 440, 1702],
            "temperature": 0.0,
            "avg_logprob": -0.2,
            "compression_ratio": 1.1,
            "no_speech_prob": 0.01,
        },
        {
            "id": 1,
            "seek": 0,
            "start": 2.4,
            "end": 6.2,
            "text": " Jumps over the dog.",
            "tokens": [50484, 23266],
            "temperature": 0.0,
            "avg_logprob": -0.3,
            "compression_ratio": 1.1,
            "no_speech_prob": 0.02,
        },
    ],
    "words": [
        {"word": "The", "start": 0.1, "end": 0.3},
        {"word": "quick", "start": 0.4, "end": 0.8},
        {"word": "brown", "start": 0.9, "end": 1.3},
        {"word": "fox", "start": 1.4, "end": 2.3},
        {"word": "Jumps", "start": 2.5, "end": 3.0},
        {"word": "over", "start": 3.1, "end": 3.6},
        {"word": "the", "start": 3.7, "end": 3.9},
        {"word": "dog", "start": 4.0, "end": 4.6},
    ],
    "usage": {"type": "duration", "seconds": 7},
}


def make(**settings: Any) -> OpenAIProvider:
    values: dict[str, Any] = {"api_key": SecretStr(API_KEY)} | settings
    return OpenAIProvider(OpenAISettings(**values))


@pytest.fixture
async def provider() -> AsyncIterator[OpenAIProvider]:
    p = make()
    yield p
    await p.aclose()


def _request(audio: Path, language: str | None = None) -> StartRequest:
    return StartRequest(audio=audio, format="ogg_opus", duration_ms=6200, attempt_key="att42", language=language)


async def _no_progress(field: str, value: str) -> None:
    raise AssertionError(f"a synchronous call has nothing to report early ({field})")


def form_fields(request: httpx.Request) -> list[tuple[str, str]]:
    """(name, value or filename) per multipart part, in order."""
    boundary = request.headers["content-type"].split("boundary=")[1].encode()
    fields = []
    for part in request.content.split(b"--" + boundary)[1:-1]:
        head, _, body = part.partition(b"\r\n\r\n")
        disposition = head.decode().split("Content-Disposition: ")[1].split("\r\n")[0]
        name = disposition.split('name="')[1].split('"')[0]
        if 'filename="' in disposition:
            filename = disposition.split('filename="')[1].split('"')[0]
            content_type = head.decode().split("Content-Type: ")[1].split("\r\n")[0]
            fields.append((name, f"{filename} ({content_type}, {len(body) - 2} bytes)"))
        else:
            fields.append((name, body[:-2].decode()))
    return fields


# --- the request -----------------------------------------------------------------


async def test_start_sends_the_multipart_form_and_returns_the_body(
    api: respx.MockRouter, provider: OpenAIProvider, audio: Path
) -> None:
    route = api.post(URL).respond(200, json=VERBOSE)
    started = await provider.start(_request(audio), _no_progress)

    assert started.operation_id == "openai-att42" and started.audio_uri == ""
    assert started.raw is not None and json.loads(started.raw) == VERBOSE
    request = route.calls.last.request
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"
    assert sorted(form_fields(request)) == sorted(
        [
            ("model", "whisper-1"),
            ("response_format", "verbose_json"),
            ("timestamp_granularities[]", "segment"),
            ("timestamp_granularities[]", "word"),
            ("file", f"audio.ogg (audio/ogg, {(await anyio.Path(audio).stat()).st_size} bytes)"),
        ]
    )


@pytest.mark.parametrize(
    "base_url",
    ["http://127.0.0.1:8000", "http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/"],
)
def test_a_base_url_ending_in_v1_is_the_same(base_url: str) -> None:
    assert endpoint(base_url) == "http://127.0.0.1:8000/v1/audio/transcriptions"
    assert endpoint("https://api.groq.com/openai/v1") == "https://api.groq.com/openai/v1/audio/transcriptions"


async def test_a_local_server_without_a_key_gets_no_authorization(api: respx.MockRouter, audio: Path) -> None:
    route = api.post("http://127.0.0.1:8000/v1/audio/transcriptions").respond(200, json={"text": "hello", "id": "tr-1"})
    p = make(api_key=None, base_url="http://127.0.0.1:8000/v1", model="Systran/faster-whisper-small", language="en")
    started = await p.start(_request(audio), _no_progress)
    await p.aclose()
    request = route.calls.last.request
    assert "authorization" not in request.headers
    assert ("language", "en") in form_fields(request)
    assert ("model", "Systran/faster-whisper-small") in form_fields(request)
    assert started.operation_id == "tr-1"  # a server's own id is kept


@pytest.mark.parametrize(("configured", "hint", "sent"), [(None, None, None), ("en", None, "en"), ("en", "ru", "ru")])
async def test_the_senders_language_is_sent_first(
    api: respx.MockRouter, audio: Path, configured: str | None, hint: str | None, sent: str | None
) -> None:
    route = api.post(URL).respond(200, json={"text": "hello"})
    p = make(language=configured)
    await p.start(_request(audio, language=hint), _no_progress)
    await p.aclose()
    languages = [v for k, v in form_fields(route.calls.last.request) if k == "language"]
    assert languages == ([sent] if sent else [])


async def test_gpt_4o_models_are_asked_for_plain_json(api: respx.MockRouter, audio: Path) -> None:
    route = api.post(URL).respond(200, json={"text": "hello there"})
    p = make(model="gpt-4o-mini-transcribe")
    await p.start(_request(audio), _no_progress)
    await p.aclose()
    fields = form_fields(route.calls.last.request)
    assert ("response_format", "json") in fields
    assert not [f for f in fields if f[0].startswith("timestamp_granularities")]


async def test_audio_spec_fits_the_25_mib_cap(provider: OpenAIProvider) -> None:
    spec = provider.audio_spec
    assert spec.format in ("ogg_opus", "mp3") and spec.sample_rate == 16000 and spec.channels == 1
    assert spec.bitrate is not None and spec.bitrate <= 32000
    assert spec.max_bytes == MAX_BYTES < 25 * 1024 * 1024


async def test_poll_is_never_needed(provider: OpenAIProvider) -> None:
    with pytest.raises(PermanentError) as e:
        await provider.poll("openai-att42")
    assert e.value.code == HaltCode.PROVIDER_FAILED
    assert await provider.find_started("att42", "") is None


# --- errors ----------------------------------------------------------------------


async def test_429_rate_limit_is_retryable_with_the_servers_wait(
    api: respx.MockRouter, provider: OpenAIProvider, audio: Path
) -> None:
    body = {"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}
    route = api.post(URL).respond(429, json=body, headers={"Retry-After": "17"})
    with pytest.raises(RetryableError) as e:
        await provider.start(_request(audio), _no_progress)
    assert e.value.retry_after == timedelta(seconds=17)
    assert "rate limit" in str(e.value).lower()
    assert route.call_count == 1


async def test_429_quota_exhausted_is_permanent(api: respx.MockRouter, provider: OpenAIProvider, audio: Path) -> None:
    body = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    api.post(URL).respond(429, json=body)
    with pytest.raises(PermanentError) as e:
        await provider.start(_request(audio), _no_progress)
    assert e.value.code == HaltCode.PROVIDER_REJECTED
    assert "quota is exhausted" in str(e.value)


async def test_5xx_then_success_is_retried_within_the_call(
    api: respx.MockRouter, provider: OpenAIProvider, audio: Path
) -> None:
    route = api.post(URL)
    route.side_effect = [httpx.Response(502, text="Bad gateway"), httpx.Response(200, json=VERBOSE)]
    started = await provider.start(_request(audio), _no_progress)
    assert started.raw is not None and route.call_count == 2
    # The file went out whole both times.
    size = (await anyio.Path(audio).stat()).st_size
    for call in route.calls:
        assert ("file", f"audio.ogg (audio/ogg, {size} bytes)") in form_fields(call.request)


@pytest.mark.parametrize(
    ("answer", "says", "tries"),
    [
        pytest.param(
            {"return_value": httpx.Response(500, json={"error": {"message": "The server had an error"}})},
            r"answered 500 \(The server had an error\); gave up after 3 tries",
            3,
            id="5xx every time: retried, then retryable",
        ),
        pytest.param(
            {"side_effect": httpx.ReadTimeout("timed out")},
            "may have been accepted",
            1,
            id="a read timeout is not repeated: the call may have been billed",
        ),
        pytest.param(
            {"side_effect": httpx.ConnectTimeout("connect timed out")},
            "did not answer within the timeout",
            3,
            id="a connect timeout is retried, then retryable",
        ),
    ],
)
async def test_a_call_that_keeps_failing_is_retryable_and_repeated_only_where_it_was_not_billed(
    api: respx.MockRouter, provider: OpenAIProvider, audio: Path, answer: dict[str, Any], says: str, tries: int
) -> None:
    route = api.post(URL).mock(**answer)
    with pytest.raises(RetryableError, match=says):
        await provider.start(_request(audio), _no_progress)
    assert route.call_count == tries


@pytest.mark.parametrize("body", [b"<html>502 Bad Gateway</html>", b'{"text": "The quick', b'{"segments": []}'])
async def test_a_malformed_body_is_retryable(
    api: respx.MockRouter, provider: OpenAIProvider, audio: Path, body: bytes
) -> None:
    api.post(URL).respond(200, content=body)
    with pytest.raises(RetryableError, match="malformed"):
        await provider.start(_request(audio), _no_progress)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            400,
            {"error": {"message": f"Invalid file format ({API_KEY}).", "type": "invalid_request_error"}},
            "Invalid file format",
        ),
        (400, {"error": f"failed to read audio (key={API_KEY})"}, "failed to read audio"),  # whisper.cpp
        (404, {"detail": f"Model not installed; Bearer {API_KEY}"}, "Model not installed"),  # speaches
        (413, {"message": f"too large {API_KEY}"}, "too large"),  # LocalAI
    ],
)
async def test_a_4xx_is_a_permanent_rejection_without_the_key(
    api: respx.MockRouter, provider: OpenAIProvider, audio: Path, status: int, body: Any, expected: str
) -> None:
    api.post(URL).respond(status, json=body)
    with pytest.raises(PermanentError) as e:
        await provider.start(_request(audio), _no_progress)
    assert e.value.code == HaltCode.PROVIDER_REJECTED
    assert str(e.value).startswith(f"OpenAI rejected the request ({status})")
    assert expected in str(e.value)
    assert API_KEY not in str(e.value) and "[redacted]" in str(e.value)


def test_retry_after_reads_seconds_milliseconds_and_http_dates() -> None:
    def resp(**headers: str) -> httpx.Response:
        return httpx.Response(429, headers=headers)

    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after(resp(**{"Retry-After": "5"})) == timedelta(seconds=5)
    assert retry_after(resp(**{"retry-after-ms": "1500", "Retry-After": "5"})) == timedelta(milliseconds=1500)
    when = format_datetime(now + timedelta(seconds=120), usegmt=True)
    assert retry_after(resp(**{"Retry-After": when}), now=now) == timedelta(seconds=120)
    assert retry_after(resp(**{"Retry-After": "soon"})) is None
    assert retry_after(resp()) is None


async def test_the_diarizing_model_is_asked_for_diarized_json(api: respx.MockRouter, audio: Path) -> None:
    route = api.post(URL).respond(200, json=DIARIZED)
    p = make(model="gpt-4o-transcribe-diarize")
    started = await p.start(_request(audio), _no_progress)
    await p.aclose()
    fields = form_fields(route.calls.last.request)
    assert ("response_format", "diarized_json") in fields and ("chunking_strategy", "auto") in fields
    assert not [f for f in fields if f[0].startswith("timestamp_granularities")]
    assert started.raw is not None
    t = p.parse(started.raw)
    assert [(s.start, s.end, s.text, s.speaker) for s in t.segments] == [
        (0.0, 2.1, "Shall we start?", "A"),
        (2.4, 4.0, "Yes, go ahead.", "B"),
        (4.2, 5.0, "Good.", "A"),
    ]


# OpenAI's diarized_json (TranscriptionDiarized: segments with id, start, end, speaker, text, type)
DIARIZED: dict[str, object] = {
    "task": "transcribe",
    "duration": 5.0,
    "text": "Shall we start? Yes, go ahead. Good.",
    "segments": [
        {
            "type": "transcript.text.segment",
            "id": "seg_0",
            "start": 0.0,
            "end": 2.1,
            "speaker": "A",
            "text": " Shall we start?",
        },
        {
            "type": "transcript.text.segment",
            "id": "seg_1",
            "start": 2.4,
            "end": 4.0,
            "speaker": "B",
            "text": " Yes, go ahead.",
        },
        {"type": "transcript.text.segment", "id": "seg_2", "start": 4.2, "end": 5.0, "speaker": "A", "text": " Good."},
    ],
    "usage": {"type": "duration", "seconds": 5},
}


# --- parse -----------------------------------------------------------------------


async def test_verbose_json_gives_timed_segments_with_their_words(provider: OpenAIProvider) -> None:
    t = provider.parse(json.dumps(VERBOSE).encode())
    assert t.text == "The quick brown fox. Jumps over the dog."
    assert [(s.start, s.end, s.text) for s in t.segments] == [
        (0.0, 2.4, "The quick brown fox."),
        (2.4, 6.2, "Jumps over the dog."),
    ]
    assert [w.word for w in t.segments[0].words or []] == ["The", "quick", "brown", "fox"]
    assert [w.word for w in t.segments[1].words or []] == ["Jumps", "over", "the", "dog"]
    assert t.language == "english" and t.duration == 6.2


async def test_plain_json_is_one_segment(provider: OpenAIProvider) -> None:
    t = provider.parse(b'{"text": " Hello there. "}')
    assert t.text == "Hello there."
    assert [(s.start, s.end, s.text) for s in t.segments] == [(0.0, 0.0, "Hello there.")]
    t = provider.parse(b'{"text": "Hello", "duration": 3.5}')
    assert [(s.start, s.end) for s in t.segments] == [(0.0, 3.5)]
    assert provider.parse(b'{"text": ""}').segments == []


async def test_words_without_segments_make_one_timed_segment(provider: OpenAIProvider) -> None:
    body = {
        "text": "hi you",
        "words": [{"word": "hi", "start": 0.5, "end": 0.7}, {"word": "you", "start": 0.8, "end": 1}],
    }
    t = provider.parse(json.dumps(body).encode())
    assert [(s.start, s.end, len(s.words or [])) for s in t.segments] == [(0.5, 1.0, 2)]


async def test_nanosecond_times_are_recognised(provider: OpenAIProvider) -> None:
    body = {"text": "x", "segments": [{"id": 0, "start": 0, "end": 9640000000, "text": "x"}]}
    t = provider.parse(json.dumps(body).encode())
    assert t.segments[0].end == pytest.approx(9.64)


async def test_a_corrupt_stored_body_halts(provider: OpenAIProvider) -> None:
    with pytest.raises(PermanentError) as e:
        provider.parse(b"not json")
    assert e.value.code == HaltCode.PROVIDER_FAILED


LONG_KEY = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1eF3hJ5kL7nP9rS1uV3x"  # 51 characters, as the probe's
SLASHED_KEY = "k3y/With+Slashes=And/Plus+Signs/Q9w8e7r6t5y4u3i2"  # what URL encoding changes


@pytest.mark.parametrize(
    ("body", "shape"),
    [
        ({"error": {"message": "x" * 460 + f" your key is {LONG_KEY}"}}, "a long message ending in the key"),
        ("<html><body>" + "y" * 270 + f" {LONG_KEY}</body></html>", "a non-JSON body cut inside the key"),
        ({"error": {"message": f"bad key {LONG_KEY[:20]}\n{LONG_KEY[20:]} refused"}}, "the key across a newline"),
        ({"error": {"message": f"see https://x.example/?q={quote(SLASHED_KEY, safe='')}"}}, "the key URL-encoded"),
    ],
)
async def test_no_part_of_the_key_survives_a_cut_message(
    api: respx.MockRouter, audio: Path, body: Any, shape: str
) -> None:
    """H1: the key is removed before any bound is applied, and in its split or encoded forms."""
    key = SLASHED_KEY if "encoded" in shape else LONG_KEY
    provider = make(api_key=SecretStr(key))
    if isinstance(body, str):
        api.post(URL).respond(400, text=body)
    else:
        api.post(URL).respond(400, json=body)
    with pytest.raises(PermanentError) as e:
        await provider.start(_request(audio), _no_progress)
    reason = str(e.value)
    flat = "".join(reason.split())
    for form in (key, quote(key, safe="")):  # no run of 8 or more of its characters, anywhere
        runs = {form[i : i + 8] for i in range(len(form) - 7)}
        assert not any(run in flat for run in runs), (shape, reason)
    await provider.aclose()


@pytest.mark.parametrize(
    "ident",
    [f"resp_{API_KEY}", f"resp-{API_KEY.encode().hex()}", f"Bearer {API_KEY[3:]}"],
    ids=["plain", "hex", "bearer"],
)
async def test_the_servers_id_is_stored_without_the_key(
    api: respx.MockRouter, provider: OpenAIProvider, audio: Path, ident: str
) -> None:
    """A server that echoes the key in its response's id had it stored and exported as the operation id."""
    api.post(URL).respond(200, json=VERBOSE | {"id": ident})
    started = await provider.start(_request(audio), _no_progress)
    assert "[redacted]" in started.operation_id
    assert API_KEY[8:16] not in started.operation_id and API_KEY.encode().hex()[:16] not in started.operation_id


async def test_a_fair_id_is_kept_and_an_overlong_one_replaced(
    api: respx.MockRouter, provider: OpenAIProvider, audio: Path
) -> None:
    api.post(URL).respond(200, json=VERBOSE | {"id": "resp_01HZX4Q8"})
    assert (await provider.start(_request(audio), _no_progress)).operation_id == "resp_01HZX4Q8"
    api.post(URL).respond(200, json=VERBOSE | {"id": "x" * 5000})
    assert (await provider.start(_request(audio), _no_progress)).operation_id == "openai-att42"
