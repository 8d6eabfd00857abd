"""The committed meeting transcripts of known content (tests/data/meetings) and how a brief is scored on them.

Each language's file holds six sittings of one team, about ten minutes each,
written as a timed transcript (segments with start, end, speaker, text), each
with the decisions it makes. The first sitting is "the ten-minute meeting";
the six played in turn (two seconds apart) are "the hour".

A decision is **found** in a brief when one sentence of the brief holds every
one of the decision's keyword groups. A group is a list of alternatives; an
alternative is one or more words, and it is there when each of its words
begins a word of the sentence, in order and next to each other ("cancel"
is there in "cancelled", "app store" in "App Store"; "стажер" in "стажёров").
Words are compared as the grounding check compares them (case-folded, ``ё``
read as ``е``). The keywords name what the decision is about and what was
decided ("offline" and "3.3", "later" or "cut"), so a sentence that names the
subject only ("offline sync was discussed") does not count; a paraphrase with
other words can be missed, and the benchmark shows the brief beside the count.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar.insights.grounding import words

MEETINGS_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "meetings"
LANGUAGES = ("en", "ru")
# Between two sittings of the hour.
GAP_S = 2.0


@dataclass(frozen=True)
class Decision:
    text: str
    keywords: tuple[tuple[str, ...], ...]

    def found_in(self, sentence: str) -> bool:
        said = words(sentence)
        return all(any(_there(alt.split(), said) for alt in group) for group in self.keywords)


def _there(alt: Sequence[str], said: Sequence[str]) -> bool:
    n = len(alt)
    return n > 0 and any(all(said[i + j].startswith(alt[j]) for j in range(n)) for i in range(len(said) - n + 1))


@dataclass(frozen=True)
class Meeting:
    language: str
    title: str
    segments: list[dict[str, Any]]
    decisions: list[Decision]
    dictionary: list[str]

    @property
    def text(self) -> str:
        return " ".join(str(s["text"]) for s in self.segments)

    @property
    def minutes(self) -> float:
        return float(self.segments[-1]["end"]) / 60 if self.segments else 0.0

    @property
    def words(self) -> int:
        return len(self.text.split())

    def found(self, sentences: Iterable[str]) -> list[Decision]:
        """The decisions one of ``sentences`` holds (each counted once)."""
        said = list(sentences)
        return [d for d in self.decisions if any(d.found_in(s) for s in said)]


def _decision(raw: dict[str, Any]) -> Decision:
    groups = tuple(tuple(" ".join(words(alt)) for alt in group if words(alt)) for group in raw["keywords"])
    return Decision(str(raw["text"]), groups)


def sittings(language: str) -> list[Meeting]:
    """The six sittings of ``language``'s file, each timed from zero."""
    data = json.loads((MEETINGS_DIR / f"{language}.json").read_text(encoding="utf-8"))
    dictionary = [str(t) for t in data["dictionary"]]
    return [
        Meeting(
            language,
            str(s["title"]),
            [dict(seg) for seg in s["segments"]],
            [_decision(d) for d in s["decisions"]],
            dictionary,
        )
        for s in data["sittings"]
    ]


def ten_minutes(language: str) -> Meeting:
    return sittings(language)[0]


def hour(language: str) -> Meeting:
    """The six sittings played in turn: one transcript, its times running on, every decision of each."""
    parts = sittings(language)
    segments: list[dict[str, Any]] = []
    offset = 0.0
    for part in parts:
        for seg in part.segments:
            segments.append({**seg, "start": round(seg["start"] + offset, 2), "end": round(seg["end"] + offset, 2)})
        offset = segments[-1]["end"] + GAP_S
    title = f"{len(parts)} sittings: " + "; ".join(p.title for p in parts)
    return Meeting(language, title, segments, [d for p in parts for d in p.decisions], parts[0].dictionary)
