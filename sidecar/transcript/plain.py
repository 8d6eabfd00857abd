"""The transcript as its txt export reads, paragraph by paragraph (for its Word document).

The txt export is rendered by the route (pb_hooks/lib/exports.js ``toTxt``); the Word document
of the transcript is made in the sidecar (python-docx), so this mirrors that rule: the cues of
``cues()`` (time order, empty ones dropped, each one line), one paragraph per turn of speakers
("Speaker 1: …"), and without speakers the text as kept. tests/integration/test_literary.py
downloads both from a real PocketBase and holds them equal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Turn", "turns"]

# The latest time a cue may name (exports.js MAX_SECONDS).
_MAX_SECONDS = 1e7
# JavaScript's \s, which exports.js splits words on: Python's whitespace and the byte order mark.
_SPACE = re.compile(r"[\s\ufeff]+")
# A paragraph ends at a blank line (the text as kept, without speakers).
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


@dataclass(frozen=True)
class Turn:
    """One paragraph of the txt export: a speaker's words (``speaker`` None: nobody named)."""

    speaker: str | None
    text: str

    def plain(self) -> str:
        return f"{self.speaker}: {self.text}" if self.speaker else self.text


def _one_line(text: object) -> str:
    return " ".join(w for w in _SPACE.split(str(text or "")) if w)


def _seconds(value: object) -> float | None:
    """A finite time in seconds, clamped to [0, _MAX_SECONDS] (as JavaScript's ``Number`` reads it), or None."""
    if isinstance(value, bool) or value is None or value == "":
        return None
    try:
        number = float(value) if isinstance(value, int | float | str) else math.nan
    except ValueError:
        return None
    return min(max(0.0, number), _MAX_SECONDS) if math.isfinite(number) else None


def _speaker(segment: dict[str, Any]) -> str | None:
    label = segment.get("speaker")
    return (_one_line(label) or None) if isinstance(label, str) else None


def _cues(segments: Sequence[object]) -> list[tuple[float, Turn]]:
    """exports.js ``cues()``: (start, words) in time order, a cue without a usable start after the one before."""
    out: list[tuple[float, Turn]] = []
    previous = 0.0
    for s in segments:
        seg = s if isinstance(s, dict) else {}
        text = _one_line(seg.get("text"))
        if not text:
            continue
        given = _seconds(seg.get("start"))
        start = previous if given is None else given
        end = _seconds(seg.get("end"))
        previous = max(start, start if end is None else end)
        out.append((start, Turn(_speaker(seg), text)))
    return sorted(out, key=lambda c: c[0])  # stable, as Array.prototype.sort


def turns(content: str, segments: Sequence[object]) -> list[Turn]:
    """The txt export's paragraphs: a turn per speaker change when someone is named, else the text as
    kept, split at its blank lines."""
    cues = [turn for _, turn in _cues(segments)]
    if not any(c.speaker for c in cues):
        return [Turn(None, p.strip()) for p in _BLANK_LINE.split(content) if p.strip()]
    out: list[Turn] = []
    for c in cues:
        if out and out[-1].speaker == c.speaker:
            out[-1] = Turn(c.speaker, f"{out[-1].text} {c.text}")
        else:
            out.append(c)
    return out
