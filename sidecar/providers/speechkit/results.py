"""SpeechKit's recognition results, read: the getRecognition stream → ``Transcript``. No I/O here.

The body of ``getRecognition`` is a sequence of JSON objects, each
``{"result": StreamingResponse}`` (PROVIDERS.md A.6). Whether they come one
per line or pretty-printed is not confirmed, so both are read (and a JSON
array of them). ``final`` events carry the recognized words of an utterance;
``finalRefinement`` the normalized text of a final, matched by ``finalIndex``
(else the latest final not yet refined). The audio is sent as mono, so a
second ``channelTag`` can only be speaker labeling's (SP1): each tag is a
speaker, and segments from several come back in time order with ``speaker``.
An error inside the stream (``{"error": {...}}`` or a bare status) fails the
recognition, or expires it when the code is 5 NOT_FOUND.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sidecar.outcome import HaltCode, PermanentError
from sidecar.redaction import Scrub, redact, short
from sidecar.transcript.model import Segment, Transcript, Word

__all__ = ["NOT_FOUND", "decode_stream", "status_text", "stream_error", "transcript_from"]

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
NOT_FOUND = 5


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
    channel: str
    refined: dict[str, Any] | None = None


def transcript_from(events: list[dict[str, Any]], scrub: Scrub = redact) -> Transcript:
    """Segments from the ``final`` events, with refined (normalized) text where sent; channel tags as speakers."""
    utterances: list[_Utterance] = []
    by_index: dict[tuple[str, str], _Utterance] = {}
    received_ms = 0.0
    for event in events:
        error = stream_error(event)
        if error is not None:
            code = HaltCode.RESULTS_EXPIRED if error.get("code") == NOT_FOUND else HaltCode.PROVIDER_FAILED
            raise PermanentError(code, scrub(f"SpeechKit recognition failed: {status_text(error, scrub)}"))
        result = event.get("result", event)
        if not isinstance(result, dict):
            continue
        received_ms = max(received_ms, _ms(_dict(result.get("audioCursors")).get("receivedDataMs")) or 0.0)
        if isinstance(result.get("final"), dict):
            final = result["final"]
            tag = _channel(result, final)
            alternative = _first_alternative(final)
            if alternative is None:
                continue
            index = _index(_dict(result.get("audioCursors")).get("finalIndex"))
            utterance = _Utterance(index, alternative, tag)
            utterances.append(utterance)
            if index is not None:
                by_index[(tag, index)] = utterance
        elif isinstance(result.get("finalRefinement"), dict):
            refinement = result["finalRefinement"]
            normalized = _dict(refinement.get("normalizedText"))
            alternative = _first_alternative(normalized)
            if alternative is None:
                continue
            tag = _channel(result, normalized)
            target = by_index.get((tag, _index(refinement.get("finalIndex")) or ""))
            if target is None:
                target = next((u for u in reversed(utterances) if u.refined is None and u.channel == tag), None)
            if target is not None:
                target.refined = alternative
        # partial, eouUpdate, statusCode and the analysis events carry no final text.
    speakers = len({u.channel for u in utterances}) > 1
    segments = [s for s in (_segment(u, speakers) for u in utterances) if s is not None]
    segments.sort(key=lambda s: s.start)  # stable: one speaker's segments keep their order
    language = next((lang for u in utterances if (lang := _language(u.refined or u.final))), None)
    return Transcript(
        text=" ".join(s.text for s in segments),
        segments=segments,
        language=language,
        duration=received_ms / 1000 if received_ms else None,
    )


def _segment(u: _Utterance, speakers: bool) -> Segment | None:
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
    return Segment(
        start=start / 1000,
        end=max(end, start) / 1000,
        text=text,
        words=words or None,
        speaker=u.channel if speakers else None,
    )


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


def stream_error(event: dict[str, Any]) -> dict[str, Any] | None:
    """An error status inside the stream: ``{"error": {...}}`` or a bare ``{"code", "message"}``."""
    if isinstance(event.get("error"), dict):
        return dict(event["error"])
    if "result" not in event and isinstance(event.get("code"), int) and event["code"] != 0 and "message" in event:
        return event
    return None


def status_text(status: Any, scrub: Scrub = redact) -> str:
    """``google.rpc.Status`` as text: ``NAME (code): message``, the message redacted with ``scrub`` and bounded."""
    if not isinstance(status, dict):
        return short(str(status), scrub)
    code = status.get("code")
    name = _CODES.get(code, "") if isinstance(code, int) else ""
    label = f"{name} ({code})" if name else f"code {code}"
    message = short(str(status.get("message") or ""), scrub)
    return f"{label}: {message}" if message else label
