"""The exports: parsed back, not compared as strings, so any valid rendering passes."""

from __future__ import annotations

import re

import pytest

from sidecar.transcript import (
    EXPORT_FORMATS,
    Segment,
    Transcript,
    Word,
    render,
    to_json,
    to_srt,
    to_txt,
    to_vtt,
)

SRT_TIME = re.compile(r"^(\d{2,}):([0-5]\d):([0-5]\d),(\d{3}) --> (\d{2,}):([0-5]\d):([0-5]\d),(\d{3})$")
VTT_TIME = re.compile(r"^(\d{2,}):([0-5]\d):([0-5]\d)\.(\d{3}) --> (\d{2,}):([0-5]\d):([0-5]\d)\.(\d{3})$")


def _seconds(h: str, m: str, s: str, ms: str) -> float:
    return int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000


def parse_srt(text: str) -> list[tuple[int, float, float, str]]:
    """Strict SubRip reader: (index, start, end, text) per cue."""
    assert text.endswith("\n") and not text.endswith("\n\n\n")
    cues = []
    for block in text.strip("\n").split("\n\n"):
        lines = block.split("\n")
        assert len(lines) >= 3, block
        assert lines[0].isdigit(), block
        timing = SRT_TIME.match(lines[1])
        assert timing, lines[1]
        g = timing.groups()
        body = "\n".join(lines[2:])
        assert body.strip() and "-->" not in body
        cues.append((int(lines[0]), _seconds(*g[:4]), _seconds(*g[4:]), body))
    return cues


def parse_vtt(text: str) -> list[tuple[float, float, str]]:
    """Strict WebVTT reader for cues without identifiers or settings."""
    assert text.startswith("WEBVTT\n\n") or text == "WEBVTT\n"
    cues = []
    for block in text.strip("\n").split("\n\n")[1:]:
        lines = block.split("\n")
        timing = VTT_TIME.match(lines[0])
        assert timing, lines[0]
        g = timing.groups()
        body = "\n".join(lines[1:])
        assert body.strip() and "-->" not in body
        assert not re.search(r"&(?!amp;|lt;|gt;)|<", body), body
        cues.append((_seconds(*g[:4]), _seconds(*g[4:]), body))
    return cues


def _transcript() -> Transcript:
    return Transcript(
        text="Hello there. General Kenobi. A long pause.",
        language="en",
        duration=3725.5,
        segments=[
            Segment(
                start=0.0,
                end=1.52,
                text=" Hello there.",
                words=[Word(start=0.0, end=0.6, word=" Hello"), Word(start=0.6, end=1.52, word=" there.")],
            ),
            Segment(start=1.52, end=3.0049, text=" General Kenobi."),
            Segment(start=3661.2, end=3725.5, text=" A long pause."),
        ],
    )


def test_srt_is_valid_and_faithful() -> None:
    cues = parse_srt(to_srt(_transcript()))
    assert [c[0] for c in cues] == [1, 2, 3]
    assert [c[3] for c in cues] == ["Hello there.", "General Kenobi.", "A long pause."]
    assert cues[1][1:3] == (1.52, 3.005)
    assert cues[2][1:3] == (3661.2, 3725.5)
    assert "01:01:01,200 --> 01:02:05,500" in to_srt(_transcript())


def test_vtt_is_valid_and_faithful() -> None:
    text = to_vtt(_transcript())
    cues = parse_vtt(text)
    assert [c[2] for c in cues] == ["Hello there.", "General Kenobi.", "A long pause."]
    assert cues[0][:2] == (0.0, 1.52)
    assert "00:00:00.000 --> 00:00:01.520" in text


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_cues_are_ordered_and_never_end_before_they_start(fmt: str) -> None:
    t = Transcript(
        text="",
        segments=[
            Segment(start=5.0, end=6.0, text="third"),
            Segment(start=1.0, end=0.5, text="first, end before start"),
            Segment(start=2.0, end=3.0, text="  \n "),  # nothing to show
            Segment(start=2.5, end=4.0, text="second\n\nwith a blank line"),
        ],
    )
    rendered = render(t, fmt)
    cues = [c[1:] for c in parse_srt(rendered)] if fmt == "srt" else parse_vtt(rendered)
    assert [c[2] for c in cues] == ["first, end before start", "second with a blank line", "third"]
    starts = [c[0] for c in cues]
    assert starts == sorted(starts)
    assert all(end >= start for start, end, _ in cues)
    if fmt == "srt":
        assert [c[0] for c in parse_srt(rendered)] == [1, 2, 3]


def test_hours_beyond_99_and_rounding() -> None:
    t = Transcript(text="x", segments=[Segment(start=360000.0004, end=360001.9996, text="late")])
    assert "100:00:00,000 --> 100:00:02,000" in to_srt(t)
    assert "100:00:00.000 --> 100:00:02.000" in to_vtt(t)


def test_markup_and_arrows_cannot_break_cues() -> None:
    t = Transcript(text="", segments=[Segment(start=0, end=1, text="a --> b <i>c</i> & d")])
    assert parse_srt(to_srt(t))[0][3] == "a -> b <i>c</i> & d"
    assert parse_vtt(to_vtt(t))[0][2] == "a --&gt; b &lt;i&gt;c&lt;/i&gt; &amp; d"


def test_empty_transcript() -> None:
    t = Transcript(text="", segments=[])
    assert to_srt(t) == ""
    assert to_vtt(t) == "WEBVTT\n"
    assert to_txt(t) == ""
    assert Transcript.model_validate_json(to_json(t)) == t


def test_txt_one_line_per_segment() -> None:
    assert to_txt(_transcript()) == "Hello there.\nGeneral Kenobi.\nA long pause.\n"
    no_segments = Transcript(text=" Just  the\ntext. ", segments=[])
    assert to_txt(no_segments) == "Just the text.\n"


def test_json_round_trips() -> None:
    t = _transcript()
    assert Transcript.model_validate_json(to_json(t)) == t


def test_render_dispatches_and_refuses_unknown_formats() -> None:
    t = _transcript()
    assert EXPORT_FORMATS == ("txt", "srt", "vtt", "json")
    assert render(t, "txt") == to_txt(t)
    assert render(t, "srt") == to_srt(t)
    assert render(t, "vtt") == to_vtt(t)
    assert render(t, "json") == to_json(t)
    with pytest.raises(ValueError, match="unknown export format"):
        render(t, "docx")
