"""I4: the exports as the route serves them, parsed back (not compared as strings), so any
valid rendering passes. The segments are written the way finalize writes them."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from testkit.media import wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer

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


def seg(start: float, end: float, text: str, **extra: Any) -> dict[str, Any]:
    return {"start": start, "end": end, "text": text, **extra}


def export(sender: Caller, service: Caller, segments: list[dict[str, Any]], fmt: str, content: str = "") -> str:
    """A finished record whose transcript has ``segments``, exported through the sender's route."""
    rid = sender.http.post("/api/transcriber/records", files={"file": ("a.wav", wav_bytes(0.1))}).json()["id"]
    now = int(time.time() * 1000)
    claim = service.http.post("/api/pipeline/claim", json={"now": now, "leases": {"uploaded": 60_000}}).json()
    assert claim["id"] == rid
    pipe = f"/api/pipeline/records/{rid}"
    body = {"token": claim["token"], "content": content, "segments": segments}
    assert service.http.put(f"{pipe}/texts/transcript", json=body).status_code == 200
    done = service.http.post(f"{pipe}/advance", json={"token": claim["token"], "now": now, "to": "done"})
    assert done.status_code == 200
    resp = sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": fmt})
    assert resp.status_code == 200, resp.text
    return resp.text


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
    body = json.loads(export(sender, service, SAMPLE, "json", content="Hello there."))
    assert body == {"text": "Hello there.", "language": None, "segments": SAMPLE}


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
