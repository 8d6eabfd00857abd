"""I4: the exports as the route serves them, parsed back (not compared as strings), so any
valid rendering passes. The segments are written the way finalize writes them."""

from __future__ import annotations

import json
import re

import pytest

from testkit.pocketbase import Caller, PocketBaseServer
from tests.support.exports import (
    NASTY,
    export,
    exported,
    finished,
    parse_json_export,
    parse_srt,
    parse_vtt,
    seg,
    vtt_cues,
)

SAMPLE = [
    seg(0.0, 1.52, " Hello there.", words=[{"start": 0.0, "end": 0.6, "word": " Hello"}]),
    seg(1.52, 3.0049, " General Kenobi."),
    seg(3661.2, 3725.5, " A long pause."),
]


def test_srt_is_valid_and_faithful(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    text = export(sender, service, SAMPLE, "srt")
    cues = parse_srt(text)
    assert [c[0] for c in cues] == [1, 2, 3]
    assert [c[3] for c in cues] == ["Hello there.", "General Kenobi.", "A long pause."]
    assert cues[1][1:3] == (1.52, 3.005)
    assert cues[2][1:3] == (3661.2, 3725.5)
    assert "01:01:01,200 --> 01:02:05,500" in text


def test_vtt_is_valid_and_faithful(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    text = export(sender, service, SAMPLE, "vtt")
    cues = parse_vtt(text)
    assert [c[2] for c in cues] == ["Hello there.", "General Kenobi.", "A long pause."]
    assert cues[0][:2] == (0.0, 1.52)
    assert "00:00:00.000 --> 00:00:01.520" in text


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_cues_are_ordered_and_never_end_before_they_start(
    pb: PocketBaseServer, sender: Caller, service: Caller, fmt: str
) -> None:
    segments = [
        seg(5.0, 6.0, "third"),
        seg(1.0, 0.5, "first, end before start"),
        seg(2.0, 3.0, "  \n "),  # nothing to show
        seg(2.5, 4.0, "second\n\nwith a blank line"),
    ]
    rendered = export(sender, service, segments, fmt)
    cues = [c[1:] for c in parse_srt(rendered)] if fmt == "srt" else parse_vtt(rendered)
    assert [c[2] for c in cues] == ["first, end before start", "second with a blank line", "third"]
    starts = [c[0] for c in cues]
    assert starts == sorted(starts)
    assert all(end >= start for start, end, _ in cues)
    if fmt == "srt":
        assert [c[0] for c in parse_srt(rendered)] == [1, 2, 3]


def test_hours_beyond_99_and_rounding(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    late = [seg(360000.0004, 360001.9996, "late")]
    assert "100:00:00,000 --> 100:00:02,000" in export(sender, service, late, "srt")
    assert "100:00:00.000 --> 100:00:02.000" in export(sender, service, late, "vtt")


def test_markup_and_arrows_cannot_break_cues(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    hostile = [seg(0, 1, "a --> b <i>c</i> & d")]
    assert parse_srt(export(sender, service, hostile, "srt"))[0][3] == "a --› b ‹i›c‹/i› & d"
    script = [seg(0, 1, '<font color="red">x</font><script>alert(1)</script>')]
    srt = export(sender, service, script, "srt")
    assert "<" not in srt and ">" not in srt.replace("-->", "")
    assert parse_vtt(export(sender, service, hostile, "vtt"))[0][2] == "a --&gt; b &lt;i&gt;c&lt;/i&gt; &amp; d"


def test_empty_transcript(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    assert export(sender, service, [], "srt") == ""
    assert export(sender, service, [], "vtt") == "WEBVTT\n"
    assert export(sender, service, [], "txt") == ""


def test_txt_is_the_text_and_json_keeps_the_segments(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:

    assert export(sender, service, SAMPLE, "txt", content="Hello there. General Kenobi.") == (
        "Hello there. General Kenobi."
    )
    body = parse_json_export(export(sender, service, SAMPLE, "json", content="Hello there."))
    # No insights yet: the brief is null, with no quotes and no topics.
    assert body == {
        "text": "Hello there.",
        "language": None,
        "segments": SAMPLE,
        "cues": [
            {"start": 0.0, "end": 1.52, "text": "Hello there.", "speaker": None},
            {"start": 1.52, "end": 3.0049, "text": "General Kenobi.", "speaker": None},
            {"start": 3661.2, "end": 3725.5, "text": "A long pause.", "speaker": None},
        ],
        "brief": None,
        "quotes": [],
        "topics": [],
    }


def test_times_that_are_not_finite_never_reach_a_cue(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    """H8: a stored 1e300, a string or a null cannot make "Infinity:NaN" or a giant stamp.

    (A 1e400, Infinity once parsed, is refused by the fenced route itself: 400.)"""
    segments = [
        seg(0.0, 1.0, "fine"),
        {"start": "later", "end": None, "text": "no usable time"},
        seg(2.0, 1e300, "ends absurdly late"),
        seg(1e300, 3.0, "starts absurdly late"),
    ]
    for fmt in ("srt", "vtt"):
        raw = export(sender, service, segments, fmt)
        assert "Infinity" not in raw and "NaN" not in raw and "e+" not in raw
        cues = [c[1:] for c in parse_srt(raw)] if fmt == "srt" else parse_vtt(raw)
        assert sorted(c[2] for c in cues) == ["ends absurdly late", "fine", "no usable time", "starts absurdly late"]
        by_text = {c[2]: c[:2] for c in cues}
        assert by_text["no usable time"] == (1.0, 1.0)  # follows the cue before it
        assert by_text["starts absurdly late"][0] == 1e7  # a start past any stamp is the last one
        assert all(0 <= start <= end <= 1e7 for start, end, _ in cues)


DIALOGUE = [
    seg(0.0, 2.0, " Shall we start?", speaker="Speaker 1"),
    seg(2.0, 3.0, " The release first.", speaker="Speaker 1"),
    seg(
        3.5,
        5.0,
        " Yes, it passed.",
        speaker="Speaker 2",
        words=[{"start": 3.5, "end": 3.9, "word": " Yes,", "speaker": "Speaker 2"}],
    ),
    seg(5.5, 6.0, " Good.", speaker="<b>Anna</b> & co"),
]


def test_speakers_show_in_every_export(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    content = "Shall we start? The release first. Yes, it passed. Good."
    srt = parse_srt(export(sender, service, DIALOGUE, "srt", content))
    assert [c[3] for c in srt] == [
        "Speaker 1: Shall we start?",
        "Speaker 1: The release first.",
        "Speaker 2: Yes, it passed.",
        "‹b›Anna‹/b› & co: Good.",
    ]
    vtt = export(sender, service, DIALOGUE, "vtt", content)
    voices = re.findall(r"^<v ([^>]*)>(.*)$", vtt, flags=re.MULTILINE)
    assert voices == [
        ("Speaker 1", "Shall we start?"),
        ("Speaker 1", "The release first."),
        ("Speaker 2", "Yes, it passed."),
        ("&lt;b&gt;Anna&lt;/b&gt; &amp; co", "Good."),
    ]
    txt = export(sender, service, DIALOGUE, "txt", content)
    assert txt.split("\n\n") == [
        "Speaker 1: Shall we start? The release first.",
        "Speaker 2: Yes, it passed.",
        "<b>Anna</b> & co: Good.\n",
    ]
    body = parse_json_export(export(sender, service, DIALOGUE, "json", content))
    assert [s["speaker"] for s in body["segments"]] == ["Speaker 1", "Speaker 1", "Speaker 2", "<b>Anna</b> & co"]
    assert body["segments"][2]["words"][0]["speaker"] == "Speaker 2"
    assert body["text"] == content


def test_without_speakers_the_exports_are_as_before(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    plain = [seg(0.0, 2.0, " Shall we start?"), seg(2.0, 3.0, " The release first.")]
    content = "Shall we start? The release first."
    assert export(sender, service, plain, "txt", content) == content
    assert [c[3] for c in parse_srt(export(sender, service, plain, "srt", content))] == [
        "Shall we start?",
        "The release first.",
    ]
    assert [c[2] for c in parse_vtt(export(sender, service, plain, "vtt", content))] == [
        "Shall we start?",
        "The release first.",
    ]


# NASTY's cues by the rule: in time order (equal starts keep their order), none empty, one line each,
# every time finite and at most 1e7 s, ends never before starts, a missing or textual start the end of
# the cue before it (in the provider's order), speakers on one line.
NASTY_CUES = [
    {"start": 0.3333, "end": 0.6667, "text": "first over two lines", "speaker": "Speaker 1"},
    {"start": 0.6667, "end": 0.6667, "text": "a start that is no number", "speaker": None},
    {"start": 2.0, "end": 2.0, "text": "reversed: ends before it starts", "speaker": "Anna Petrova"},
    {"start": 3.5, "end": 3.5, "text": "<b>markup</b> & no end", "speaker": "Speaker 1"},
    {"start": 5.25, "end": 6.125, "text": "third, fractional", "speaker": None},
    {"start": 6.125, "end": 6.125, "text": "no times: follows the one before", "speaker": None},
    {"start": 1e7, "end": 1e7, "text": "starts absurdly late", "speaker": None},
]


def test_the_json_exports_cues_are_the_srt_and_webvtt_cues(
    pb: PocketBaseServer, sender: Caller, service: Caller
) -> None:
    """The JSON export carries the cues the timed exports are made of (the sender's page shows them):
    on a transcript no provider should write, they are the SRT's and the WebVTT's, to the millisecond."""
    rid = finished(sender, service, NASTY, content="whatever was said")
    body = json.loads(exported(sender, rid, "json"))
    assert body["segments"] == NASTY  # the stored segments still go out as they are (off the schema here)
    parse_json_export(json.dumps(body | {"segments": []}))  # the cues are in it
    assert body["cues"] == NASTY_CUES
    in_ms = [{**c, "start": round(c["start"], 3), "end": round(c["end"], 3)} for c in body["cues"]]
    assert vtt_cues(exported(sender, rid, "vtt")) == in_ms
    srt = parse_srt(exported(sender, rid, "srt"))
    assert [(n, start, end) for n, start, end, _ in srt] == [(i, c["start"], c["end"]) for i, c in enumerate(in_ms, 1)]
    looks = str.maketrans({"<": "‹", ">": "›"})
    assert [text for *_, text in srt] == [
        ((c["speaker"] + ": ") if c["speaker"] else "") + c["text"].translate(looks) for c in in_ms
    ]
