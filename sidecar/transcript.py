"""The one normalized form of a timed transcript, and its exports.

Every provider's raw response is parsed into ``Transcript``; ``texts`` keeps
``text`` as content and ``segments`` beside it; the exports (txt, SRT, WebVTT,
JSON) are rendered from the segments.
"""

from __future__ import annotations

from pydantic import BaseModel


class Word(BaseModel):
    start: float
    end: float
    word: str


class Segment(BaseModel):
    start: float  # seconds
    end: float
    text: str
    words: list[Word] | None = None


class Transcript(BaseModel):
    text: str
    segments: list[Segment]
    language: str | None = None
    duration: float | None = None


# --- exports -----------------------------------------------------------------

EXPORT_FORMATS = ("txt", "srt", "vtt", "json")


def to_txt(t: Transcript) -> str:
    """One line per segment; the whole text when there are no segments."""
    lines = [_one_line(s.text) for s in t.segments]
    lines = [line for line in lines if line]
    if not lines and t.text.strip():
        lines = [_one_line(t.text)]
    return "".join(line + "\n" for line in lines)


def to_srt(t: Transcript) -> str:
    """SubRip: numbered cues from 1, ``HH:MM:SS,mmm --> HH:MM:SS,mmm``, a blank line after each."""
    cues = []
    for index, (start, end, text) in enumerate(_cues(t), start=1):
        # "-->" inside a cue's text would read as a timing line to some parsers.
        text = text.replace("-->", "->")
        cues.append(f"{index}\n{_timestamp(start, ',')} --> {_timestamp(end, ',')}\n{text}\n")
    return "\n".join(cues)


def to_vtt(t: Transcript) -> str:
    """WebVTT: the ``WEBVTT`` header, then cues timed ``HH:MM:SS.mmm --> HH:MM:SS.mmm``."""
    parts = ["WEBVTT\n"]
    for start, end, text in _cues(t):
        # Cue text is markup: escaping "<" and "&" also defuses "-->".
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        parts.append(f"{_timestamp(start, '.')} --> {_timestamp(end, '.')}\n{text}\n")
    return "\n".join(parts)


def to_json(t: Transcript) -> str:
    return t.model_dump_json(indent=2) + "\n"


def render(t: Transcript, fmt: str) -> str:
    """``t`` exported as ``fmt``: one of ``EXPORT_FORMATS``."""
    if fmt == "txt":
        return to_txt(t)
    if fmt == "srt":
        return to_srt(t)
    if fmt == "vtt":
        return to_vtt(t)
    if fmt == "json":
        return to_json(t)
    raise ValueError(f"unknown export format {fmt!r}; expected one of {', '.join(EXPORT_FORMATS)}")


def _cues(t: Transcript) -> list[tuple[int, int, str]]:
    """(start ms, end ms, text) per non-empty segment, in time order, never ending before starting."""
    cues = []
    for s in sorted(t.segments, key=lambda s: s.start):
        text = _one_line(s.text)
        if not text:
            continue
        start = _millis(s.start)
        cues.append((start, max(start, _millis(s.end)), text))
    return cues


def _one_line(text: str) -> str:
    # A blank line ends a cue in both SRT and WebVTT; whitespace is folded.
    return " ".join(text.split())


def _millis(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def _timestamp(ms: int, separator: str) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{separator}{millis:03d}"
