"""Any server speaking OpenAI's ``POST /v1/audio/transcriptions``.

OpenAI itself, Groq, speaches, whisper.cpp's server, LocalAI, vLLM
(PROVIDERS.md C). The request is multipart: the file, ``model``,
``language`` when set, ``response_format=verbose_json`` and repeated
``timestamp_granularities[]`` fields for segments and words (as the official
SDK sends arrays). Without an API key no Authorization header is sent, for
local servers.

Recognition is synchronous: ``start`` makes the call and returns the body as
the raw result, so ``poll`` is never needed and nothing is left to clean up.

Paying at most once (P18): the call is the paid operation and its answer is
the result, so there is nothing to store before it. The residual window: if
the process dies after the answer arrived and before the submit step stored
it, the next try pays again. A read timeout on the call is the same window
seen from the network: that request is not repeated within the call.

Our credentials refused (401, 403: a missing, wrong or revoked key, an
account that may not) postpone the record (``CredentialsRefused``, O5): the
recording is not at fault, and it is recognized once the owner fixes them.

Not confirmed against the real services (PROVIDERS.md), and how this module
copes:

* LocalAI's segment time units (an old example suggests nanoseconds): times
  beyond any possible audio length (over 10⁶ s) are read as nanoseconds.
* Whether whisper.cpp's ``verbose_json`` carries ``words[]``, and whether
  vLLM honours ``timestamp_granularities``: words are used when present,
  segments alone otherwise.
* OpenAI's guidance for 500/503: treated as transient (retried briefly
  within the call, then ``RetryableError``).
* The gpt-4o transcription models accept only ``json`` (OA spec): for model
  names starting with ``gpt-`` plain ``json`` is requested, which gives one
  untimed segment. The diarizing model (a name with ``diarize``, e.g.
  ``gpt-4o-transcribe-diarize``) is asked for ``diarized_json`` with
  ``chunking_strategy=auto`` (required for audio over 30 s): segments with a
  ``speaker`` ("A", "B", …). Any segment or word with a ``speaker`` field
  keeps it (speaches, WhisperX-based servers); without one, no speakers.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from sidecar.media.audio import FORMATS
from sidecar.outcome import HaltCode, PermanentError, RetryableError
from sidecar.providers import http
from sidecar.providers.base import AnswersAtStart, AudioSpec, OnProgress, Started, StartRequest
from sidecar.redaction import scrubber, short
from sidecar.settings import OpenAISettings
from sidecar.transcript.model import Segment, Transcript, Word

__all__ = ["MAX_BYTES", "OpenAIProvider", "endpoint", "transcript_from"]

# The request may be 25 MiB (C.3); the multipart envelope and fields need a little of it.
MAX_BYTES = 25 * 1024 * 1024 - 64 * 1024
# A server's id for a call longer than this is no id: ours is stored instead.
MAX_ID_CHARS = 200
# No audio is this long in seconds: larger times must be in nanoseconds (LocalAI).
_SECONDS_CEILING = 1e6


def endpoint(base_url: str) -> str:
    """``{base_url}/v1/audio/transcriptions``; a base URL already ending in ``/v1`` is the same."""
    base = base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return f"{base}/audio/transcriptions"


class OpenAIProvider(AnswersAtStart):
    name = "openai"
    answers_as = "OpenAI-compatible"

    def __init__(
        self,
        settings: OpenAISettings,
        *,
        client: httpx.AsyncClient | None = None,
        retry: http.RetryPolicy = http.DEFAULT_RETRY,
    ) -> None:
        self.model = settings.model
        self._s = settings
        self._url = endpoint(settings.base_url)
        host = urlsplit(self._url).hostname or "?"
        self._who = "OpenAI" if host == "api.openai.com" else f"the transcription server at {host}"
        self._timeout = http.timeout(settings.timeout)
        self._http = client or httpx.AsyncClient(timeout=self._timeout)
        self._retry = retry
        self._scrub = scrubber([settings.api_key.get_secret_value() if settings.api_key else None])

    @property
    def audio_spec(self) -> AudioSpec:
        # Every listed server reads Ogg/Opus; 16 kHz mono at 24 kbit/s keeps
        # words as clear as the original (lower bitrates measurably lose some).
        # The 25 MiB cap then holds about 2 h 10 min: longer recordings are cut
        # into pieces that fit (AudioSpec.piece_seconds).
        return AudioSpec(format="ogg_opus", sample_rate=16000, channels=1, bitrate=24000, max_bytes=MAX_BYTES)

    async def find_started(self, attempt_key: str, audio_uri: str) -> str | None:
        return None  # synchronous: nothing is ever left running at the server

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        target = FORMATS.get(request.format)
        filename, content_type = (
            (f"audio.{target.extension}", target.content_type) if target else ("audio.bin", "application/octet-stream")
        )
        audio = await anyio.Path(request.audio).read_bytes()
        data: dict[str, Any] = {"model": self._s.model, "response_format": _response_format(self._s.model)}
        if data["response_format"] == "verbose_json":
            data["timestamp_granularities[]"] = ["segment", "word"]
        elif data["response_format"] == "diarized_json":
            data["chunking_strategy"] = "auto"  # required by the diarizing models for audio over 30 s
        # L4: the sender's hint first, then the configured language; neither → the server finds it.
        language = request.language or self._s.language
        if language:
            data["language"] = language
        # The sender's names and terms, as the API's prompt: "to improve the spelling of words it may
        # mishear" (the diarizing models take no prompt).
        if request.words and data["response_format"] != "diarized_json":
            data["prompt"] = ", ".join(request.words)
        headers = {"Authorization": f"Bearer {self._s.api_key.get_secret_value()}"} if self._s.api_key else {}

        resp = await http.send(
            lambda: self._http.post(
                self._url,
                headers=headers,
                data=data,
                files={"file": (filename, audio, content_type)},
                timeout=self._timeout,
            ),
            who=self._who,
            policy=self._retry,
            repeatable=False,
            scrub=self._scrub,
            describe=_message,
        )
        self._check(resp)
        body = http.json_body(resp, who=self._who, what="transcription")
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            raise RetryableError(
                f"{self._who} sent a malformed transcription (no text field, {len(resp.content)} bytes); "
                "it may have been truncated"
            )
        return Started(operation_id=self._operation_id(body.get("id"), request.attempt_key), raw=resp.content)

    def _operation_id(self, ident: object, attempt_key: str) -> str:
        """The server's id for the call, as it is stored and exported: without the secrets (a server
        may echo the key it was sent), and ours when it names none or one longer than an id is."""
        if not isinstance(ident, str) or not ident or len(ident) > MAX_ID_CHARS:
            return f"openai-{attempt_key}"
        return self._scrub(ident)

    def parse(self, raw: bytes) -> Transcript:
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise PermanentError(HaltCode.PROVIDER_FAILED, "the stored transcription is not JSON") from e
        if not isinstance(body, dict):
            raise PermanentError(HaltCode.PROVIDER_FAILED, "the stored transcription is not a JSON object")
        return transcript_from(body)

    async def aclose(self) -> None:
        await self._http.aclose()

    def _check(self, resp: httpx.Response) -> None:
        if resp.is_success:
            return
        message = _message(resp)
        if resp.status_code in http.REFUSED_CREDENTIALS:
            # 401: a missing, wrong or revoked key; 403: the account may not (D.3). Not the
            # recording's fault: it waits for the owner, and is recognized once they work (O5).
            raise http.credentials_refused(
                self._who,
                resp.status_code,
                message,
                self._scrub,
                kept="nothing was recognized; the recording is, once they work: check [openai] api_key and the account",
            )
        if resp.status_code == 429:
            if _quota_exhausted(resp, message):
                # Out of credit or over the monthly cap: waiting does not cure it (D.3).
                raise PermanentError(
                    HaltCode.PROVIDER_REJECTED,
                    self._scrub(
                        f"{self._who}: the account's quota is exhausted (429: {short(message, self._scrub)}); "
                        "add credit or raise the limit, then resume the record"
                    ),
                )
            wait = http.retry_after(resp)
            raise RetryableError(
                self._scrub(
                    f"{self._who} rate limit reached (429: {short(message, self._scrub) or 'too many requests'})"
                ),
                retry_after=wait,
            )
        raise http.rejected(self._who, resp, message, self._scrub)


def _quota_exhausted(resp: httpx.Response, message: str) -> bool:
    error = _error_object(resp)
    kinds = {str(error.get("code") or ""), str(error.get("type") or "")} if error else set()
    return "insufficient_quota" in kinds or "exceeded your current quota" in message.lower()


def _error_object(resp: httpx.Response) -> dict[str, Any] | None:
    try:
        body = json.loads(resp.content)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return dict(body["error"])
    return None


def _message(resp: httpx.Response) -> str:
    """The server's error text: OpenAI ``error.message``, whisper.cpp ``error``, FastAPI ``detail``.

    Whole and unredacted: whoever puts it in a message redacts it, then bounds it (``short``).
    """
    try:
        body = json.loads(resp.content)
    except (ValueError, UnicodeDecodeError):
        return resp.text if resp.content else ""
    if not isinstance(body, dict):
        return str(body)
    error = body.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or error)
    if isinstance(error, str):
        return error
    detail = body.get("detail")
    if isinstance(detail, list):
        return "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail)
    if detail:
        return str(detail)
    return str(body.get("message") or "")


def _response_format(model: str) -> str:
    # OpenAI's gpt-4o models accept json only (no timestamps), except the
    # diarizing one, which gives speaker-labelled segments as diarized_json;
    # whisper-1 and the self-hosted servers give verbose_json.
    if "diarize" in model:
        return "diarized_json"
    return "json" if model.startswith("gpt-") else "verbose_json"


# --- the response ----------------------------------------------------------------


def transcript_from(body: dict[str, Any]) -> Transcript:
    """``verbose_json`` (segments, words) or plain ``json`` (text only) → ``Transcript``."""
    text = " ".join(str(body.get("text") or "").split())
    raw_segments = [s for s in body.get("segments") or [] if isinstance(s, dict)]
    raw_words = [w for w in body.get("words") or [] if isinstance(w, dict)]
    times = [
        t
        for item in (*raw_segments, *raw_words)
        for t in (_num(item.get("start")), _num(item.get("end")))
        if t is not None
    ]
    scale = 1e-9 if times and max(times) > _SECONDS_CEILING else 1.0
    duration = _num(body.get("duration"))

    segments: list[Segment] = []
    for s in raw_segments:
        seg_text = " ".join(str(s.get("text") or "").split())
        if seg_text:
            start = (_num(s.get("start")) or 0.0) * scale
            end = (_num(s.get("end")) or 0.0) * scale
            segments.append(Segment(start=start, end=max(start, end), text=seg_text, speaker=_label(s)))
    words = []
    for w in raw_words:
        token = str(w.get("word") or "").strip()
        if token:
            start = (_num(w.get("start")) or 0.0) * scale
            end = (_num(w.get("end")) or 0.0) * scale
            words.append(Word(start=start, end=max(start, end), word=token, speaker=_label(w)))

    if segments:
        _attach(words, segments)
    elif text:
        # Plain json, or words without segments: one segment over the whole audio.
        start = words[0].start if words else 0.0
        end = words[-1].end if words else (duration or 0.0)
        segments = [Segment(start=start, end=max(start, end), text=text, words=words or None)]
    language = body.get("language")
    return Transcript(
        text=text or " ".join(s.text for s in segments),
        segments=segments,
        language=str(language) if language else None,
        duration=duration,
    )


def _attach(words: list[Word], segments: list[Segment]) -> None:
    """Each word goes to the segment containing its midpoint, or else the nearest one."""
    for word in words:
        mid = (word.start + word.end) / 2

        def distance(s: Segment, mid: float = mid) -> float:
            return 0.0 if s.start <= mid <= s.end else min(abs(s.start - mid), abs(s.end - mid))

        segment = min(segments, key=distance)
        if segment.words is None:
            segment.words = []
        segment.words.append(word)


def _label(item: dict[str, Any]) -> str | None:
    # SP1: diarized_json segments say "A", "B", … (or the known names sent);
    # servers built on pyannote/WhisperX say "SPEAKER_00"; most say nothing.
    label = item.get("speaker")
    return str(label) if isinstance(label, (str, int)) and str(label).strip() else None


def _num(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
