"""The one normalized form of a timed transcript, and its exports.

Every provider's raw response is parsed into ``Transcript``; ``texts`` keeps
``text`` as content and ``segments`` beside it; the exports (txt, SRT, WebVTT,
JSON) are rendered from them by the route (pb_hooks/lib/exports.js).
"""

from __future__ import annotations

from pydantic import BaseModel


class Word(BaseModel):
    start: float
    end: float
    word: str
    speaker: str | None = None


class Segment(BaseModel):
    start: float  # seconds
    end: float
    text: str
    words: list[Word] | None = None
    speaker: str | None = None  # "Speaker 1", … once numbered (sidecar.transcript.speakers); None with one speaker


class Transcript(BaseModel):
    text: str
    segments: list[Segment]
    language: str | None = None
    duration: float | None = None
    # Per speaker label: its mean voice embedding, where a diarizer gave one
    # (sidecar.transcript.speakers.VoiceLinker matches the labels of separate pieces by it).
    voices: dict[str, list[float]] | None = None


def to_json(t: Transcript) -> str:
    """The form providers hand back as their raw result (the instant provider) and tests read."""
    return t.model_dump_json(indent=2) + "\n"
