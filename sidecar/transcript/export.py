"""The JSON export's shape (``GET …/transcript?format=json``), typed once.

PocketBase renders the export (pb_hooks/lib/exports.js) from the stored
transcript (``model.Transcript``: text and segments) and the recording's
insights. Its JSON Schema, ``docs/schema/transcript-export.schema.json``, is
generated from these classes (``python -m sidecar.transcript.export``); a unit
test keeps the file in step with them, and the export tests validate every
JSON export they read against the file, so the route and this shape cannot
drift apart unnoticed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExportWord(_Closed):
    start: float = Field(description="seconds from the start of the recording")
    end: float
    word: str
    speaker: str | None = None


class ExportSegment(_Closed):
    start: float = Field(description="seconds from the start of the recording")
    end: float
    text: str
    words: list[ExportWord] | None = Field(default=None, description="absent once the owner corrected the segment")
    speaker: str | None = Field(default=None, description='"Speaker 1", …; absent with one speaker')
    corrected: bool | None = Field(default=None, description="true where the owner's correction changed the words")


class ExportCue(_Closed):
    """A segment as the SRT and WebVTT exports time it (the cue rule of pb_hooks/lib/exports.js)."""

    start: float = Field(description="seconds from the start of the recording, never after end")
    end: float
    text: str = Field(description="one line, never empty")
    speaker: str | None = Field(default=None, description='"Speaker 1", …; null with one speaker')


class Quote(_Closed):
    sentence: str = Field(description="a sentence of the brief")
    quote: str = Field(description="the words of the transcript it rests on")
    start: float = Field(description="where the quote begins, seconds")
    end: float


class TranscriptExport(_Closed):
    text: str
    language: str | None = Field(description="the language found or given (ISO 639-1), or null")
    segments: list[ExportSegment]
    cues: list[ExportCue] = Field(
        default_factory=list,
        description="the segments as SRT and WebVTT time them: in time order, none empty, every time finite",
    )
    brief: str | None = Field(description="the brief, once written; null before")
    quotes: list[Quote] = Field(description="the brief's sentences with their quotes; empty once the owner edits it")
    topics: list[str] = Field(description="topic names, at most five")


def json_schema() -> dict[str, Any]:
    schema = TranscriptExport.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "transcriber transcript export (format=json)"
    return schema


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(schema_text())
