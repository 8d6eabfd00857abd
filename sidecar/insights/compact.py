"""The transcript as the model reads it: what was said, with less to read.

Prompt tokens are most of an insights step's time on a small server (a 1.5B
model reads 30–45 tokens a second on two cores), so what the model does not
need is left out before it is sent:

* fillers ("um", "uh"; "ну", "э-э") of the transcript's language, and a word
  said twice in a row ("the the", "нет, нет") once;
* the times: the service finds each quote in the transcript itself
  (``grounding``), so the model never needs them;
* speakers as short labels, once per turn: consecutive segments of one
  speaker are one line ("Speaker 3" is ``S3``; a name stays a name);
  without speakers, a segment is a line.

The grounding check reads the transcript through the same filter (``spoken``),
so a quote copied from a compacted line is found in the original, and the
passage it keeps is the original's own words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["FILLERS", "MAX_LINE", "compact_lines", "compact_text", "short_label", "spoken", "without_labels"]

# Words that carry nothing in a transcript of this language (compared case-folded). Only languages whose
# fillers are not also words of their own (the English "er" is the German "he").
FILLERS: dict[str, frozenset[str]] = {
    "en": frozenset({"um", "umm", "uh", "uhh", "uhm", "erm", "er", "hmm", "hm", "mm", "mmm", "mhm"}),
    "ru": frozenset({"ну", "э", "ээ", "эээ", "эм", "эмм", "мм", "ммм", "хм", "кхм"}),
}
# A speaker's turn longer than this is several lines (a line is what the splitter cuts at).
MAX_LINE = 1200

_TOKEN = re.compile(r"(\w+)(\W*)", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?…]")
_WORDS = re.compile(r"\w+", re.UNICODE)
_NUMBERED = re.compile(r"^\s*speaker\s*(\d+)\s*$", re.IGNORECASE)


def _fold(word: str) -> str:
    return word.casefold().replace("ё", "е")


def spoken(folded: Sequence[str], language: str) -> list[int]:
    """The positions of ``folded`` (case-folded words) kept: no filler, no word right after itself (a number
    is never a repeat: "3.3" is two words)."""
    fillers = FILLERS.get(language, frozenset())
    kept: list[int] = []
    for i, w in enumerate(folded):
        if w in fillers or (kept and folded[kept[-1]] == w and not w.isdigit()):
            continue
        kept.append(i)
    return kept


def compact_text(text: str, language: str, previous: str = "") -> str:
    """``text`` without fillers and repeated words; ``previous`` is the word said just before (a repeat
    across two segments is one too). Punctuation stays where a kept word has it."""
    tokens = [(m.group(1), m.group(2)) for m in _TOKEN.finditer(text)]
    if not tokens:
        return " ".join(text.split())
    folded = [_fold(previous)] if previous else []
    folded += [_fold(w) for w, _ in tokens]
    keep = {i - (1 if previous else 0) for i in spoken(folded, language)}
    out: list[list[str]] = []
    start = _TOKEN.search(text)
    lead = text[: start.start()] if start else ""  # punctuation before the first word
    for i, (word, sep) in enumerate(tokens):
        if i in keep:
            out.append([word, sep])
        elif out and not _SENTENCE_END.search(out[-1][1]):
            out[-1][1] = sep  # the dropped word's punctuation, unless the kept one before ends a sentence
    return " ".join((lead.strip() + " " + "".join(w + s for w, s in out)).split())


def short_label(speaker: object) -> str:
    """A speaker as a line names it: ``S3`` for "Speaker 3", a name as it is; "" for none."""
    label = " ".join(str(speaker or "").split())
    numbered = _NUMBERED.match(label)
    if numbered:
        return f"S{numbered.group(1)}"
    return label[:24]


def compact_lines(segments: Sequence[dict[str, Any]], language: str) -> list[str]:
    """The transcript's segments as the model reads them: one line per speaker's turn, compacted."""
    lines: list[str] = []
    label_of_last: str | None = None
    last_word = ""
    for seg in segments:
        label = short_label(seg.get("speaker"))
        # A word repeated across two segments of one speaker is a repeat; another speaker's is an answer.
        said = compact_text(str(seg.get("text", "")), language, last_word if label == label_of_last else "")
        said_words = _WORDS.findall(said)
        if not said_words:
            continue
        if label and lines and label == label_of_last and len(lines[-1]) + len(said) < MAX_LINE:
            lines[-1] += " " + said
        else:
            lines.append(f"{label}: {said}" if label else said)
        label_of_last, last_word = label, said_words[-1]
    return lines


def without_labels(quote: str, labels: Iterable[str]) -> str:
    """A quote as the transcript says it: a speaker's label the model copied along ("S2:") was not said."""
    for label in sorted({lb for lb in labels if lb}, key=len, reverse=True):
        quote = re.sub(rf"(?<!\w){re.escape(label)}\s*:", " ", quote)
    return " ".join(quote.split())
