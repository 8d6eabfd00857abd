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

Our own credentials (O5): none configured, a key or token refused or
expired (401/403, or UNAUTHENTICATED/PERMISSION_DENIED inside a result
stream), an authorized key that cannot be read, signed with or exchanged,
Object Storage refusing the access keys: each raises ``CredentialsRefused``
at the request where it shows, so the record waits for the owner and no
operation, started or about to be, is marked lost for it. A refused authorized
key is read from its file again on the next try.

Not confirmed against the real service (PROVIDERS.md, UNCONFIRMED items),
and how this module copes:

* The framing of the getRecognition body, errors inside it, which final a
  refinement refines, several channels: see ``results``, which
  reads the stream.
* getRecognition after the 3-day retention: an HTTP 404, or a JSON status
  with code 5 at any HTTP status, halts with RESULTS_EXPIRED.
* The query parameter: the API reference spells it ``operationId`` (sent
  here); the curl examples use ``operation_id``.
* ``x-folder-id`` is sent only with an IAM token and a configured folder:
  service-account credentials use the account's folder, and the docs warn
  against passing one with them (A.2). With both an API key and an IAM
  token configured, the API key is used.
* Speaker labeling (``speakerLabeling`` at the top of the request, SP1): which
  models accept it is not documented, and the docs promise at most two
  speakers in mono audio, told apart by ``channelTag``. It is sent unless
  ``[speechkit] speaker_labeling = false``; a model that refuses it halts
  ``provider_rejected`` with SpeechKit's message, and the setting is the way out.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
import httpx

from sidecar.media.audio import FORMATS
from sidecar.outcome import CredentialsRefused, HaltCode, PermanentError, RetryableError, TranscriberError
from sidecar.providers import http
from sidecar.providers.base import AudioSpec, OnProgress, Polled, Started, StartRequest
from sidecar.providers.speechkit.iam import IamTokens, ServiceAccountKey
from sidecar.providers.speechkit.object_storage import ObjectStore
from sidecar.providers.speechkit.results import NOT_FOUND, decode_stream, status_text, stream_error, transcript_from
from sidecar.redaction import Scrub, scrubber, short
from sidecar.settings import ObjectStorageSettings, SpeechKitSettings
from sidecar.transcript.languages import speechkit_tag
from sidecar.transcript.model import Transcript

__all__ = ["MAX_BYTES", "MAX_DURATION", "SpeechKitProvider", "decode_stream", "transcript_from"]

log = logging.getLogger("transcriber.speechkit")

WHO = "SpeechKit"
MAX_BYTES = 1_000_000_000  # 1 GB per file in a bucket (A.8)
MAX_DURATION = timedelta(hours=4)  # A.8
# Pieces stay this far under the cap, whatever the container's duration rounding.
PIECE_MARGIN = timedelta(minutes=10)
# A 429 is a quota (RESOURCE_EXHAUSTED), not a burst limit: waiting seconds does not help.
QUOTA_WAIT = timedelta(minutes=5)
# google.rpc codes of our credentials refused (A.7: 7 PERMISSION_DENIED is
# HTTP 403, 16 UNAUTHENTICATED is 401), as an error inside the result stream.
_CREDENTIAL_CODES = frozenset({7, 16})
# What the journal says of the recognition when our credentials are refused.
_NOT_STARTED = "nothing was started; it starts once they work: check the key or token and the service account's roles"
_KEPT = "the recognition is kept and asked about again: check the key or token and the service account's roles"
_COPY_LATER = "the copy is removed later"
# Operation status checks are a 5 req/s quota for the whole folder: early on the
# pipeline's poll_delay applies, long jobs (deferred mode, up to 24 h) are asked less often.
_POLL_GROW_AFTER = timedelta(minutes=1)
_POLL_MIN = timedelta(seconds=10)
_POLL_MAX = timedelta(minutes=5)
_REUSE_MEMORY = 256

# The formats SpeechKit reads from a bucket (A.3), by their names in sidecar.media.audio.FORMATS.
CONTAINERS = {"ogg_opus": "OGG_OPUS", "mp3": "MP3", "wav_pcm16": "WAV"}


class SpeechKitProvider:
    name = "speechkit"

    def __init__(
        self,
        settings: SpeechKitSettings,
        storage: ObjectStorageSettings,
        *,
        client: httpx.AsyncClient | None = None,
        store: ObjectStore | None = None,
        retry: http.RetryPolicy = http.DEFAULT_RETRY,
    ) -> None:
        self.model = settings.model
        self._s = settings
        self._stt = settings.stt_url.rstrip("/")
        self._ops = settings.operation_url.rstrip("/")
        self._timeout = http.timeout(settings.timeout)
        self._http = client or httpx.AsyncClient(timeout=self._timeout)
        self._tokens: IamTokens | None = None  # made on first use from [speechkit] service_account_key
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
        # 32 kbit/s keeps speech intact and 4 h of it near 60 MB. Longer
        # recordings are cut into pieces under SpeechKit's 4-hour cap.
        return AudioSpec(
            format="ogg_opus",
            sample_rate=16000,
            channels=1,
            bitrate=32000,
            max_bytes=MAX_BYTES,
            max_piece=MAX_DURATION - PIECE_MARGIN,
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
        await self._auth_headers()  # a missing credential fails before anything is uploaded
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
        body: dict[str, Any] = {"uri": uri, "recognitionModel": model}
        if self._s.speaker_labeling:
            body["speakerLabeling"] = {"speakerLabeling": "SPEAKER_LABELING_ENABLED"}
        resp = await self._request("POST", f"{self._stt}/stt/v3/recognizeFileAsync", json=body, paid=True)
        self._check(resp, kept=_NOT_STARTED)
        operation = http.json_body(resp, who=WHO, what="operation")
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
        self._check(resp, kept=_KEPT)
        operation = http.json_body(resp, who=WHO, what="operation")
        if not isinstance(operation, dict) or not isinstance(operation.get("done", False), bool):
            raise RetryableError("SpeechKit sent a malformed operation (not an Operation object)")
        if not operation.get("done"):
            return Polled(ready=False, retry_in=_poll_interval(operation.get("createdAt")))
        error = operation.get("error")
        if error:
            # A finished operation's error is final for that job (D.1).
            reason = self._scrub(f"SpeechKit recognition failed: {status_text(error, self._scrub)}")
            raise PermanentError(HaltCode.PROVIDER_FAILED, reason)
        return Polled(ready=True, raw=await self._results(operation_id))

    async def _results(self, operation_id: str) -> bytes:
        resp = await self._request("GET", f"{self._stt}/stt/v3/getRecognition", params={"operationId": operation_id})
        status = _jsonstatus_text(resp) if resp.status_code >= 300 else None
        if resp.status_code == 404 or (status is not None and status.get("code") == NOT_FOUND):
            raise _expired(operation_id, _describe(resp, self._scrub), self._scrub)
        self._check(resp, kept=_KEPT)
        try:
            events = decode_stream(resp.content)
        except ValueError as e:
            raise RetryableError(
                f"SpeechKit sent a malformed recognition result ({len(resp.content)} bytes, not a sequence of "
                "JSON objects); it may have been truncated"
            ) from e
        for event in events:
            error = stream_error(event)
            if error is not None:
                raise self._failure(error, operation_id)
        return resp.content

    def _failure(self, status: dict[str, Any], operation_id: str) -> TranscriberError:
        """An error inside the result stream of a finished operation: our credentials, expiry, or a failure."""
        if status.get("code") in _CREDENTIAL_CODES:
            # The operation finished well (poll said so); what was refused is our request for its results.
            return http.credentials_refused(WHO, status_text(status, self._scrub), "", self._scrub, kept=_KEPT)
        if status.get("code") == NOT_FOUND:
            return _expired(operation_id, status_text(status, self._scrub), self._scrub)
        return PermanentError(
            HaltCode.PROVIDER_FAILED, self._scrub(f"SpeechKit recognition failed: {status_text(status, self._scrub)}")
        )

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
                    self._check(resp, kept=_COPY_LATER)
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

    async def _auth_headers(self) -> dict[str, str]:
        """By precedence: an API key; IAM tokens from a service account's authorized key; a static IAM token.

        None configured (now: the settings may have changed since a recognition
        started) is our credentials missing, never the recording's fault (O5).
        """
        if self._s.api_key:
            return {"Authorization": f"Api-Key {self._s.api_key.get_secret_value()}"}
        if self._s.service_account_key:
            if self._tokens is None:
                key = await anyio.to_thread.run_sync(ServiceAccountKey.load, self._s.service_account_key)
                self._tokens = IamTokens(key, self._s.iam_url, self._http)
            try:
                token = await self._tokens.token()
            except CredentialsRefused:
                self._tokens = None  # the key was refused: the file is read again, the owner may have replaced it
                raise
            return {"Authorization": f"Bearer {token}"}
        if self._s.iam_token:
            headers = {"Authorization": f"Bearer {self._s.iam_token.get_secret_value()}"}
            if self._s.folder_id:
                headers["x-folder-id"] = self._s.folder_id
            return headers
        raise CredentialsRefused(
            "SpeechKit has no credentials: speechkit.api_key, speechkit.service_account_key or speechkit.iam_token "
            "is not configured; the record waits until one is (a recognition already started is kept)",
            delay=http.CREDENTIALS_WAIT,
        )

    def _container(self, fmt: str) -> tuple[str, str, str]:
        """containerAudioType, object key suffix, content type."""
        if fmt not in CONTAINERS:
            raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, f"SpeechKit does not read {fmt} audio; normalize it again")
        target = FORMATS[fmt]
        return CONTAINERS[fmt], f".{target.extension}", target.content_type

    async def _request(
        self,
        method: str,
        url: str,
        *,
        json: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        paid: bool = False,
    ) -> httpx.Response:
        headers = await self._auth_headers()
        return await http.send(
            lambda: self._http.request(method, url, headers=headers, json=json, params=params, timeout=self._timeout),
            who=WHO,
            policy=self._retry,
            repeatable=not paid,
            scrub=self._scrub,
            describe=lambda r: _describe(r, self._scrub),
        )

    def _check(self, resp: httpx.Response, *, kept: str) -> None:
        """Passes a 2xx answer; raises the classified error for anything else.

        Our credentials refused (401 UNAUTHENTICATED, 403 PERMISSION_DENIED:
        a missing or revoked key, an expired token, a missing role; A.7) is
        never the recording's fault: whether the request starts a
        recognition, asks about one already paid for, or removes its copy,
        the record waits for the owner to fix them and no operation is marked
        lost for it (O5). ``kept`` says what became of the recognition.
        """
        if resp.is_success:
            return
        if resp.status_code in http.REFUSED_CREDENTIALS:
            if resp.status_code == 401 and self._tokens is not None:
                self._tokens.forget()  # expired or revoked early: the next request exchanges the key again
            raise http.credentials_refused(WHO, resp.status_code, _describe(resp, self._scrub), self._scrub, kept=kept)
        if resp.status_code == 429:
            wait = max(http.retry_after(resp) or timedelta(0), timedelta(seconds=60))
            detail = short(_describe(resp, self._scrub), self._scrub) or "RESOURCE_EXHAUSTED"
            raise RetryableError(
                self._scrub(
                    f"SpeechKit quota exhausted (429: {detail}); "
                    f"trying again in {int(wait.total_seconds())} s at the earliest"
                ),
                retry_after=wait,
            )
        raise http.rejected(WHO, resp, _describe(resp, self._scrub), self._scrub)


def _restriction(hint: str | None, configured: str) -> list[str]:
    """The languageRestriction whitelist (L4): the sender's hint, else the configured tags; [] = auto.

    A hint SpeechKit is not known to take is sent as no restriction, so that
    SpeechKit finds the language itself rather than being pushed to a wrong one.
    """
    if hint:
        tag = speechkit_tag(hint)
        return [tag] if tag else []
    return [c.strip() for c in configured.split(",") if c.strip() and c.strip().lower() != "auto"]


# --- errors --------------------------------------------------------------------


def _jsonstatus_text(resp: httpx.Response) -> dict[str, Any] | None:
    try:
        body = json.loads(resp.content)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(body, dict):
        status = body.get("error", body)
        if isinstance(status, dict) and "code" in status:
            return dict(status)
    return None


def _describe(resp: httpx.Response, scrub: Scrub) -> str:
    """The service's error: a ``google.rpc.Status`` as text (its message redacted and bounded), or the whole body."""
    status = _jsonstatus_text(resp)
    if status is not None:
        return status_text(status, scrub)
    return resp.text if resp.content else ""


def _expired(operation_id: str, detail: str, scrub: Scrub) -> PermanentError:
    return PermanentError(
        HaltCode.RESULTS_EXPIRED,
        f"SpeechKit no longer has the results of operation {operation_id} (they are kept 3 days)"
        + (f": {short(detail, scrub)}" if detail else ""),
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
