"""Yandex SpeechKit asynchronous recognition (API v3, REST), with the audio in Object Storage.

``start`` uploads the normalized audio (``object_storage``), reports its URI,
POSTs ``/stt/v3/recognizeFileAsync`` and reports the operation id the moment
the Operation arrives. ``poll`` reads ``/operations/{id}``; once it is done,
``/stt/v3/getRecognition`` returns the result stream, which is checked and
kept raw. ``parse`` turns the stream into a ``Transcript``; ``cleanup``
deletes the results at SpeechKit and the uploaded object.

Paying at most once (P18). SpeechKit ignores idempotency keys and offers no
way to list recognition operations by a key of ours, so an operation whose
id was never stored cannot be found again: ``find_started`` always answers
None for the operation. What it can do honestly is spare the upload: a
retried submit reuses the audio stored for the attempt (known URI, or found
under the attempt's key prefix) instead of uploading again. The residual
window: if the process dies after SpeechKit accepted the request and before
the submit step stored the operation id (``on_progress``), the next try
starts a second, billed recognition; the first one's results expire at
SpeechKit after 3 days. A read timeout on the start request is the same
window seen from the network, so that request is never repeated within the
call (PROVIDERS.md D.1).

Not confirmed against the real service (PROVIDERS.md, UNCONFIRMED items),
and how this module copes:

* The framing of the getRecognition body: one JSON object per line, or
  pretty-printed objects one after another. Both are read by decoding JSON
  values in a loop (``json.JSONDecoder.raw_decode``), skipping whitespace; a
  JSON array of the same objects is accepted too.
* Errors inside the stream: an ``{"error": {...}}`` object (or a bare
  ``{"code", "message"}`` status) fails the recognition (PROVIDER_FAILED),
  or expires it when the code is 5 NOT_FOUND.
* getRecognition after the 3-day retention: an HTTP 404, or a JSON status
  with code 5 at any HTTP status, halts with RESULTS_EXPIRED.
* The query parameter: the API reference spells it ``operationId`` (sent
  here); the curl examples use ``operation_id``.
* Which final a ``finalRefinement`` refines: by ``finalIndex`` against the
  final's ``audioCursors.finalIndex`` (as in the documented example), else
  the latest final not yet refined.
* Several audio channels: the audio is normalized to mono, so one channel is
  expected; if several appear, only the first ``channelTag`` seen (normally
  "0") is kept rather than interleaving channels.
* ``x-folder-id`` is sent only with an IAM token and a configured folder:
  service-account credentials use the account's folder, and the docs warn
  against passing one with them (A.2). With both an API key and an IAM
  token configured, the API key is used.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx

from sidecar.languages import speechkit_tag
from sidecar.logs import redact
from sidecar.outcome import HaltCode, PermanentError, RetryableError, TranscriberError
from sidecar.providers.base import AudioSpec, OnProgress, Polled, Started, StartRequest
from sidecar.providers.http import (
    DEFAULT_RETRY,
    RetryPolicy,
    Scrub,
    json_body,
    rejected,
    retry_after,
    scrubber,
    send,
    short,
    timeout,
)
from sidecar.providers.object_storage import ObjectStore
from sidecar.settings import ObjectStorageSettings, SpeechKitSettings
from sidecar.transcript import Segment, Transcript, Word

__all__ = ["MAX_BYTES", "MAX_DURATION", "SpeechKitProvider", "decode_stream", "transcript_from"]

log = logging.getLogger("transcriber.speechkit")

WHO = "SpeechKit"
MAX_BYTES = 1_000_000_000  # 1 GB per file in a bucket (A.8)
MAX_DURATION = timedelta(hours=4)  # A.8
# A 429 is a quota (RESOURCE_EXHAUSTED), not a burst limit: waiting seconds does not help.
QUOTA_WAIT = timedelta(minutes=5)
# Operation status checks are a 5 req/s quota for the whole folder: early on the
# pipeline's poll_delay applies, long jobs (deferred mode, up to 24 h) are asked less often.
_POLL_GROW_AFTER = timedelta(minutes=1)
_POLL_MIN = timedelta(seconds=10)
_POLL_MAX = timedelta(minutes=5)
_REUSE_MEMORY = 256

_CONTAINERS = {  # normalized format → (containerAudioType, key suffix, content type)
    "ogg_opus": ("OGG_OPUS", ".ogg", "audio/ogg"),
    "mp3": ("MP3", ".mp3", "audio/mpeg"),
    "wav_pcm16": ("WAV", ".wav", "audio/wav"),
}

_CODES = {
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
}
_NOT_FOUND = 5


class SpeechKitProvider:
    name = "speechkit"

    def __init__(
        self,
        settings: SpeechKitSettings,
        storage: ObjectStorageSettings,
        *,
        client: httpx.AsyncClient | None = None,
        store: ObjectStore | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.model = settings.model
        self._s = settings
        self._stt = settings.stt_url.rstrip("/")
        self._ops = settings.operation_url.rstrip("/")
        self._timeout = timeout(settings.timeout)
        self._http = client or httpx.AsyncClient(timeout=self._timeout)
        self._store = store or ObjectStore(storage)
        self._retry = retry
        self._scrub = scrubber(
            [
                settings.api_key.get_secret_value() if settings.api_key else None,
                settings.iam_token.get_secret_value() if settings.iam_token else None,
                storage.secret_access_key.get_secret_value() if storage.secret_access_key else None,
                storage.access_key_id,
            ]
        )
        # attempt key → an upload found by find_started, for start to reuse.
        self._reuse: dict[str, str] = {}

    @property
    def audio_spec(self) -> AudioSpec:
        # Opus in Ogg is read without rate restrictions (A.9); 16 kHz mono at
        # 32 kbit/s keeps speech intact and 4 h of it near 60 MB.
        return AudioSpec(
            format="ogg_opus",
            sample_rate=16000,
            channels=1,
            bitrate=32000,
            max_bytes=MAX_BYTES,
            max_duration=MAX_DURATION,
        )

    # --- submit ----------------------------------------------------------------

    async def find_started(self, attempt_key: str, audio_uri: str) -> str | None:
        """Always None for the operation (it cannot be looked up); remembers a reusable upload."""
        try:
            if audio_uri:
                found = audio_uri if await self._store.exists(audio_uri) else None
            else:
                found = await self._store.find(attempt_key)
        except TranscriberError as e:
            # Not being able to look only costs a second upload.
            log.warning("could not look for an earlier upload of attempt %s: %s", attempt_key, self._scrub(str(e)))
            found = None
        if found:
            if len(self._reuse) >= _REUSE_MEMORY:
                self._reuse.pop(next(iter(self._reuse)))
            self._reuse[attempt_key] = found
        return None

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        self._auth_headers()  # a missing credential fails before anything is uploaded
        container, suffix, content_type = self._container(request.format)
        uri = self._reuse.pop(request.attempt_key, None)
        if uri is None:
            key = self._store.new_key(request.attempt_key, suffix)
            uri = await self._store.upload(request.audio, key, content_type)
        else:
            log.info("attempt %s: reusing the audio uploaded by an earlier try", request.attempt_key)
        await on_progress("audio_uri", uri)
        try:
            operation_id = await self._recognize(uri, container, request.language)
        except PermanentError:
            await self._drop_upload(uri)
            raise
        await on_progress("operation_id", operation_id)
        return Started(operation_id=operation_id, audio_uri=uri)

    async def _recognize(self, uri: str, container: str, hint: str | None) -> str:
        model: dict[str, Any] = {
            "model": self._s.model,
            "audioFormat": {"containerAudio": {"containerAudioType": container}},
            "textNormalization": {
                "textNormalization": "TEXT_NORMALIZATION_ENABLED"
                if self._s.text_normalization
                else "TEXT_NORMALIZATION_DISABLED",
                "profanityFilter": False,
                "literatureText": False,
            },
        }
        languages = _restriction(hint, self._s.language)
        if languages:
            model["languageRestriction"] = {"restrictionType": "WHITELIST", "languageCode": languages}
        resp = await self._request(
            "POST", f"{self._stt}/stt/v3/recognizeFileAsync", json={"uri": uri, "recognitionModel": model}, paid=True
        )
        self._check(resp)
        operation = json_body(resp, who=WHO, what="operation")
        operation_id = operation.get("id") if isinstance(operation, dict) else None
        if not isinstance(operation_id, str) or not operation_id:
            raise RetryableError(
                "SpeechKit accepted the recognition request but its answer carries no operation id "
                "(it may have been truncated); the recognition may have started"
            )
        return operation_id

    async def _drop_upload(self, uri: str) -> None:
        try:
            await self._store.delete(uri)
        except TranscriberError as e:
            log.warning("could not remove the upload of a refused request: %s", self._scrub(str(e)))

    # --- poll ------------------------------------------------------------------

    async def poll(self, operation_id: str) -> Polled:
        resp = await self._request("GET", f"{self._ops}/operations/{quote(operation_id, safe='')}")
        self._check(resp)
        operation = json_body(resp, who=WHO, what="operation")
        if not isinstance(operation, dict) or not isinstance(operation.get("done", False), bool):
            raise RetryableError("SpeechKit sent a malformed operation (not an Operation object)")
        if not operation.get("done"):
            return Polled(ready=False, retry_in=_poll_interval(operation.get("createdAt")))
        error = operation.get("error")
        if error:
            # A finished operation's error is final for that job (D.1).
            reason = self._scrub(f"SpeechKit recognition failed: {_status(error)}")
            raise PermanentError(HaltCode.PROVIDER_FAILED, reason)
        return Polled(ready=True, raw=await self._results(operation_id))

    async def _results(self, operation_id: str) -> bytes:
        resp = await self._request("GET", f"{self._stt}/stt/v3/getRecognition", params={"operationId": operation_id})
        status = _json_status(resp) if resp.status_code >= 300 else None
        if resp.status_code == 404 or (status is not None and status.get("code") == _NOT_FOUND):
            raise _expired(operation_id, _describe(resp))
        self._check(resp)
        try:
            events = decode_stream(resp.content)
        except ValueError as e:
            raise RetryableError(
                f"SpeechKit sent a malformed recognition result ({len(resp.content)} bytes, not a sequence of "
                "JSON objects); it may have been truncated"
            ) from e
        for event in events:
            error = _stream_error(event)
            if error is not None:
                raise self._failure(error, operation_id)
        return resp.content

    def _failure(self, status: dict[str, Any], operation_id: str) -> PermanentError:
        if status.get("code") == _NOT_FOUND:
            return _expired(operation_id, _status(status))
        return PermanentError(HaltCode.PROVIDER_FAILED, self._scrub(f"SpeechKit recognition failed: {_status(status)}"))

    # --- finalize --------------------------------------------------------------

    def parse(self, raw: bytes) -> Transcript:
        try:
            events = decode_stream(raw)
        except ValueError as e:
            raise PermanentError(
                HaltCode.PROVIDER_FAILED, "the stored SpeechKit result is not a sequence of JSON objects"
            ) from e
        return transcript_from(events, self._scrub)

    async def cleanup(self, operation_id: str, audio_uri: str) -> None:
        """Deletes the results at SpeechKit and the uploaded audio; tries both before reporting."""
        problems: list[str] = []
        if operation_id:
            try:
                resp = await self._request(
                    "DELETE", f"{self._stt}/stt/v3/deleteRecognition", params={"operationId": operation_id}
                )
                if resp.status_code != 404:  # already gone
                    self._check(resp)
            except TranscriberError as e:
                problems.append(str(e))
        if audio_uri:
            try:
                await self._store.delete(audio_uri)
            except TranscriberError as e:
                problems.append(str(e))
        if problems:
            raise RetryableError(self._scrub("; ".join(problems)))

    async def aclose(self) -> None:
        await self._http.aclose()
        await self._store.aclose()

    # --- plumbing --------------------------------------------------------------

    def _auth_headers(self) -> dict[str, str]:
        if self._s.api_key:
            return {"Authorization": f"Api-Key {self._s.api_key.get_secret_value()}"}
        if self._s.iam_token:
            headers = {"Authorization": f"Bearer {self._s.iam_token.get_secret_value()}"}
            if self._s.folder_id:
                headers["x-folder-id"] = self._s.folder_id
            return headers
        raise PermanentError(HaltCode.PROVIDER_REJECTED, "speechkit.api_key or speechkit.iam_token is not configured")

    def _container(self, fmt: str) -> tuple[str, str, str]:
        try:
            return _CONTAINERS[fmt]
        except KeyError:
            raise PermanentError(
                HaltCode.UNSUPPORTED_MEDIA, f"SpeechKit does not read {fmt} audio; normalize it again"
            ) from None

    async def _request(
        self,
        method: str,
        url: str,
        *,
        json: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        paid: bool = False,
    ) -> httpx.Response:
        headers = self._auth_headers()
        return await send(
            lambda: self._http.request(method, url, headers=headers, json=json, params=params, timeout=self._timeout),
            who=WHO,
            policy=self._retry,
            repeatable=not paid,
            scrub=self._scrub,
            describe=_describe,
        )

    def _check(self, resp: httpx.Response) -> None:
        """Passes a 2xx answer; raises the classified error for anything else."""
        if resp.is_success:
            return
        if resp.status_code == 429:
            wait = max(retry_after(resp) or timedelta(0), timedelta(seconds=60))
            raise RetryableError(
                self._scrub(
                    f"SpeechKit quota exhausted (429: {short(_describe(resp)) or 'RESOURCE_EXHAUSTED'}); "
                    f"trying again in {int(wait.total_seconds())} s at the earliest"
                ),
                retry_after=wait,
            )
        raise rejected(WHO, resp, _describe(resp), self._scrub)


def _restriction(hint: str | None, configured: str) -> list[str]:
    """The languageRestriction whitelist (L4): the sender's hint, else the configured tags; [] = auto.

    A hint SpeechKit is not known to take is sent as no restriction, so that
    SpeechKit finds the language itself rather than being pushed to a wrong one.
    """
    if hint:
        tag = speechkit_tag(hint)
        return [tag] if tag else []
    return [c.strip() for c in configured.split(",") if c.strip() and c.strip().lower() != "auto"]


# --- the result stream ---------------------------------------------------------


def decode_stream(raw: bytes) -> list[dict[str, Any]]:
    """The JSON objects of a getRecognition body, one per line or pretty-printed; ValueError if malformed."""
    text = raw.decode("utf-8").lstrip("\ufeff")
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    pos = _skip_space(text, 0)
    while pos < len(text):
        value, pos = decoder.raw_decode(text, pos)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if not isinstance(item, dict):
                raise ValueError(f"expected JSON objects, found {type(item).__name__}")
            objects.append(item)
        pos = _skip_space(text, pos)
    return objects


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


@dataclass
class _Utterance:
    index: str | None
    final: dict[str, Any]
    refined: dict[str, Any] | None = None


def transcript_from(events: list[dict[str, Any]], scrub: Scrub = redact) -> Transcript:
    """Segments from the ``final`` events of one channel, with refined (normalized) text where sent."""
    channel: str | None = None
    utterances: list[_Utterance] = []
    by_index: dict[str, _Utterance] = {}
    received_ms = 0.0
    for event in events:
        error = _stream_error(event)
        if error is not None:
            code = HaltCode.RESULTS_EXPIRED if error.get("code") == _NOT_FOUND else HaltCode.PROVIDER_FAILED
            raise PermanentError(code, scrub(f"SpeechKit recognition failed: {_status(error)}"))
        result = event.get("result", event)
        if not isinstance(result, dict):
            continue
        received_ms = max(received_ms, _ms(_dict(result.get("audioCursors")).get("receivedDataMs")) or 0.0)
        if isinstance(result.get("final"), dict):
            final = result["final"]
            tag = _channel(result, final)
            channel = tag if channel is None else channel
            alternative = _first_alternative(final)
            if tag != channel or alternative is None:
                continue
            index = _index(_dict(result.get("audioCursors")).get("finalIndex"))
            utterance = _Utterance(index, alternative)
            utterances.append(utterance)
            if index is not None:
                by_index[index] = utterance
        elif isinstance(result.get("finalRefinement"), dict):
            refinement = result["finalRefinement"]
            normalized = _dict(refinement.get("normalizedText"))
            alternative = _first_alternative(normalized)
            if alternative is None or channel is None or _channel(result, normalized) != channel:
                continue
            target = by_index.get(_index(refinement.get("finalIndex")) or "")
            if target is None:
                target = next((u for u in reversed(utterances) if u.refined is None), None)
            if target is not None:
                target.refined = alternative
        # partial, eouUpdate, statusCode and the analysis events carry no final text.
    segments = [s for s in (_segment(u) for u in utterances) if s is not None]
    language = next((lang for u in utterances if (lang := _language(u.refined or u.final))), None)
    return Transcript(
        text=" ".join(s.text for s in segments),
        segments=segments,
        language=language,
        duration=received_ms / 1000 if received_ms else None,
    )


def _segment(u: _Utterance) -> Segment | None:
    chosen = u.refined or u.final
    text = " ".join(str(chosen.get("text") or u.final.get("text") or "").split())
    if not text:
        return None
    words = _words(chosen) or _words(u.final)
    start = _ms(chosen.get("startTimeMs"))
    end = _ms(chosen.get("endTimeMs"))
    if start is None:
        start = words[0].start * 1000 if words else 0.0
    if end is None:
        end = words[-1].end * 1000 if words else start
    return Segment(start=start / 1000, end=max(end, start) / 1000, text=text, words=words or None)


def _words(alternative: dict[str, Any]) -> list[Word]:
    words = []
    for w in alternative.get("words") or []:
        if not isinstance(w, dict) or not str(w.get("text") or "").strip():
            continue
        start = _ms(w.get("startTimeMs")) or 0.0
        end = _ms(w.get("endTimeMs"))
        words.append(Word(start=start / 1000, end=max(end if end is not None else start, start) / 1000, word=w["text"]))
    return words


def _language(alternative: dict[str, Any]) -> str | None:
    languages = [x for x in alternative.get("languages") or [] if isinstance(x, dict) and x.get("languageCode")]
    if not languages:
        return None
    best = max(languages, key=lambda x: float(x.get("probability") or 0))
    return str(best["languageCode"])


def _first_alternative(update: dict[str, Any]) -> dict[str, Any] | None:
    alternatives = update.get("alternatives")
    if isinstance(alternatives, list) and alternatives and isinstance(alternatives[0], dict):
        return alternatives[0]
    return None


def _channel(result: dict[str, Any], update: dict[str, Any]) -> str:
    # The top-level channelTag; the one inside the update is deprecated.
    return str(result.get("channelTag") or update.get("channelTag") or "0")


def _index(value: Any) -> str | None:
    return None if value is None else str(value)


def _ms(value: Any) -> float | None:
    # int64 values arrive as JSON strings ("459").
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _stream_error(event: dict[str, Any]) -> dict[str, Any] | None:
    """An error status inside the stream: ``{"error": {...}}`` or a bare ``{"code", "message"}``."""
    if isinstance(event.get("error"), dict):
        return dict(event["error"])
    if "result" not in event and isinstance(event.get("code"), int) and event["code"] != 0 and "message" in event:
        return event
    return None


# --- errors --------------------------------------------------------------------


def _status(status: Any) -> str:
    """``google.rpc.Status`` as text: ``NAME (code): message``."""
    if not isinstance(status, dict):
        return short(str(status))
    code = status.get("code")
    name = _CODES.get(code, "") if isinstance(code, int) else ""
    label = f"{name} ({code})" if name else f"code {code}"
    message = short(str(status.get("message") or ""))
    return f"{label}: {message}" if message else label


def _json_status(resp: httpx.Response) -> dict[str, Any] | None:
    try:
        body = json.loads(resp.content)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(body, dict):
        status = body.get("error", body)
        if isinstance(status, dict) and "code" in status:
            return dict(status)
    return None


def _describe(resp: httpx.Response) -> str:
    status = _json_status(resp)
    if status is not None:
        return _status(status)
    return short(resp.text[:300]) if resp.content else ""


def _expired(operation_id: str, detail: str) -> PermanentError:
    return PermanentError(
        HaltCode.RESULTS_EXPIRED,
        f"SpeechKit no longer has the results of operation {operation_id} (they are kept 3 days)"
        + (f": {detail}" if detail else ""),
    )


def _poll_interval(created_at: Any) -> timedelta | None:
    """None (the pipeline's poll_delay) for young operations; then a tenth of their age, 10 s – 5 min."""
    created = _parse_time(created_at)
    if created is None:
        return None
    age = datetime.now(UTC) - created
    if age < _POLL_GROW_AFTER:
        return None
    return min(max(age / 10, _POLL_MIN), _POLL_MAX)


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
