"""The transcript's paragraphs as its txt export has them (sidecar/transcript/plain.py mirrors
pb_hooks/lib/exports.js: the cue rule, a paragraph per turn of speakers, the text as kept without
speakers), and its Word document made of them."""

from __future__ import annotations

import io
from typing import Any

from docx import Document

from sidecar.literary.document import transcript_docx_bytes
from sidecar.transcript.plain import Turn, turns


def test_without_speakers_the_text_as_kept_a_paragraph_per_blank_line() -> None:
    segments = [{"start": 0, "end": 1, "text": "ignored here"}]
    assert turns("First part.\n\nSecond  part,\nstill second.\n\n\n", segments) == [
        Turn(None, "First part."),
        Turn(None, "Second  part,\nstill second."),
    ]
    assert turns("", []) == []


def test_a_paragraph_per_turn_in_time_order_each_cue_on_one_line() -> None:
    segments: list[Any] = [
        {"start": 5, "end": 6, "text": "later words", "speaker": "Speaker 2"},
        {"start": 0, "end": 2, "text": "hello\n  there", "speaker": " Speaker  1 "},
        {"start": 2, "end": 3, "text": "again", "speaker": "Speaker 1"},
        {"start": 3, "end": 4, "text": "   ", "speaker": "Speaker 2"},  # empty: dropped
        {"start": None, "end": None, "text": "no time", "speaker": "Speaker 2"},  # after the one before
        "not a segment",
        {"start": 7, "end": 8, "text": "nobody named"},
    ]
    assert [t.plain() for t in turns("ignored", segments)] == [
        "Speaker 1: hello there again",
        "Speaker 2: no time later words",
        "nobody named",
    ]


def test_times_read_as_javascript_reads_them() -> None:
    segments: list[Any] = [
        {"start": "2.5", "end": 3, "text": "second", "speaker": "A"},
        {"start": True, "end": 1, "text": "then", "speaker": "B"},  # a flag is no time: at the end before it
        {"start": float("inf"), "text": "last", "speaker": "A"},  # nor is infinity
        {"start": "1e400", "end": "x", "text": "first", "speaker": "B"},  # nor a number past any float
    ]
    assert [t.plain() for t in turns("", segments)] == ["A: second", "B: then", "A: last", "B: first"]


def test_the_word_document_holds_the_title_and_a_paragraph_per_turn_the_speaker_in_bold() -> None:
    got = transcript_docx_bytes([Turn("Speaker 1", "Hi\x00 there."), Turn(None, "Bye.")], "Budget\x07", "en")
    doc = Document(io.BytesIO(got))
    assert [p.text for p in doc.paragraphs] == ["Budget", "Speaker 1: Hi there.", "Bye."]
    assert [r.bold for r in doc.paragraphs[1].runs] == [True, None]
    assert (doc.core_properties.title, doc.core_properties.language) == ("Budget", "en")
