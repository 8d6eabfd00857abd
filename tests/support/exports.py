"""Exports as the sender's route serves them, parsed back strictly (not compared as strings)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from testkit.pocketbase import Caller, now_ms

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "schema" / "transcript-export.schema.json"


@cache
def _validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def parse_json_export(text: str) -> dict[str, Any]:
    """A JSON export, valid against the committed schema (sidecar/transcript/export.py) or the test fails."""
    body = json.loads(text)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator().iter_errors(body)]
    assert errors == [], errors
    assert isinstance(body, dict)
    return body


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
    """Strict WebVTT reader for cues without identifiers or settings (the body as written, voice span included)."""
    assert text.startswith("WEBVTT\n\n") or text == "WEBVTT\n"
    cues = []
    for block in text.strip("\n").split("\n\n")[1:]:
        lines = block.split("\n")
        timing = VTT_TIME.match(lines[0])
        assert timing, lines[0]
        g = timing.groups()
        body = "\n".join(lines[1:])
        assert body.strip() and "-->" not in body
        # No markup but a leading voice span (<v Speaker 1>), whose name is escaped too.
        assert not re.search(r"&(?!amp;|lt;|gt;)|<", re.sub(r"^<v [^<>]*>", "", body)), body
        cues.append((_seconds(*g[:4]), _seconds(*g[4:]), body))
    return cues


def seg(start: float, end: float, text: str, **extra: Any) -> dict[str, Any]:
    return {"start": start, "end": end, "text": text, **extra}


# Segments no provider should write, all at once: unsorted, fractional times, a missing, a textual, a
# reversed and an absurd time, empty texts, a text over several lines, markup, and speaker labels (one
# with runs of blanks).
NASTY: list[dict[str, Any]] = [
    seg(5.25, 6.125, " third,  fractional  "),
    {"start": None, "end": None, "text": "no times: follows the one before"},
    seg(2.0, 1.5, "reversed: ends before it starts", speaker="  Anna   Petrova "),
    seg(1.0, 2.0, "  \n  "),
    seg(0.3333, 0.6667, "first\n\nover two lines", speaker="Speaker 1"),
    {"start": "later", "end": 0.5, "text": "a start that is no number"},
    seg(1e300, 3.0, "starts absurdly late"),
    {"start": 4.0, "end": 4.5, "text": ""},
    {"start": 3.5, "text": "<b>markup</b> & no end", "speaker": "Speaker 1"},
]


def unescape_vtt(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def vtt_cues(text: str) -> list[dict[str, Any]]:
    """A WebVTT export's cues as {start, end, text, speaker}: the voice span read back as the speaker."""
    out = []
    for start, end, body in parse_vtt(text):
        voice = re.fullmatch(r"<v ([^>]*)>(.*)", body, re.S)
        speaker, words = (unescape_vtt(voice.group(1)), voice.group(2)) if voice else (None, body)
        out.append({"start": start, "end": end, "text": unescape_vtt(words), "speaker": speaker})
    return out


def finished(sender: Caller, service: Caller, segments: list[dict[str, Any]], content: str = "") -> str:
    """The id of a finished record whose transcript has ``segments``, written the way finalize writes them."""
    rid = sender.upload()
    now = now_ms()
    claim = service.claim(rid, now=now)
    pipe = f"/api/pipeline/records/{rid}"
    body = {"token": claim["token"], "content": content, "segments": segments}
    assert service.http.put(f"{pipe}/texts/transcript", json=body).status_code == 200
    done = service.http.post(
        f"{pipe}/settle", json={"outcome": "advanced", "token": claim["token"], "now": now, "to": "done"}
    )
    assert done.status_code == 200
    return rid


def exported(sender: Caller, rid: str, fmt: str) -> str:
    resp = sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": fmt})
    assert resp.status_code == 200, resp.text
    return resp.text


def export(sender: Caller, service: Caller, segments: list[dict[str, Any]], fmt: str, content: str = "") -> str:
    """A finished record whose transcript has ``segments``, exported through the sender's route."""
    return exported(sender, finished(sender, service, segments, content), fmt)
