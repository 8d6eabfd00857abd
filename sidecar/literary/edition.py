"""The rule-based edition: a transcript's timed segments as readable paragraphs.

Pure functions on lists, offline and fast (PF14: well under a second an hour of audio).
What it does, and nothing else:

- paragraphs by speaker turn, by pause (``pause`` seconds of silence between two segments,
  or between two timed words inside one) and by length (a paragraph longer than
  ``max_chars`` ends at the next segment that ends a sentence, or at any segment past
  twice that);
- fillers out (ru: э, ээ, эм, м-м, ну-у, хм; en: uh, um, er, erm, hmm) and stutters out
  (the same word or phrase of up to three words said again at once, "я я я" → "я", "let us let us"
  → "let us"; a cut-off start, "ко- конечно" → "конечно");
- sentence case: the first letter of the paragraph and of each sentence in it is upper case
  (no letter is ever lowered: names stay as recognized);
- the language's typography: Russian «ёлочки» for straight double quotes and an em dash with a
  non-breaking space before it where a hyphen stands alone between words (ё kept as recognized);
  English curly quotes and apostrophes.

Every paragraph keeps the time span of the segments it was made of, and their speaker. Words are
never added, replaced or reordered: what a person said stays what they said.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_CHARS", "PAUSE", "Paragraph", "clean", "edit", "render"]

PAUSE = 2.0  # seconds of silence that end a paragraph
MAX_CHARS = 1000  # a paragraph past this ends at the next sentence end

NBSP = "\u00a0"

# A filler is a whole token (its punctuation aside) matching one of these, by language.
_FILLERS: dict[str, re.Pattern[str]] = {
    "ru": re.compile(r"(?:э+|э+м+|э+-э+|м+|м+-м+|мм+|хм+|ну-у+|а-а+|э+-м+)", re.IGNORECASE),
    "en": re.compile(r"(?:u+h+|u+m+|e+r+m*|h+m+|m{2,}|m+-m+|a+h+m*)", re.IGNORECASE),
}
# Words people repeat on purpose ("да, да", "very very"): a repeat of these is kept.
_REPEATS_KEPT: dict[str, frozenset[str]] = {
    "ru": frozenset({"да", "нет", "очень", "так", "ну", "давно", "много", "тук", "ха"}),
    "en": frozenset({"very", "that", "had", "no", "yes", "bye", "really", "so", "ha", "knock"}),
}

_CORE = re.compile(r"^([\"'«»“”„‘’(\[]*)(.*?)([\"'«»“”„‘’)\].,!?…:;]*)$", re.DOTALL)
_SENTENCE_END = re.compile(r"[.!?…][\"'»”’)\]]*$")


@dataclass(frozen=True)
class Paragraph:
    start: float  # seconds
    end: float
    speaker: str | None
    text: str

    def as_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "speaker": self.speaker, "text": self.text}


@dataclass
class _Run:
    """Source text of one paragraph in the making."""

    start: float
    end: float
    speaker: str | None
    texts: list[str]
    chars: int = 0


def _time(value: Any, default: float) -> float:
    """Seconds, or ``default`` for a value that is none (a hand-edited segment): its words still count."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if math.isfinite(out) and out >= 0 else default


def _pieces(segment: Mapping[str, Any], pause: float) -> Iterable[tuple[float, float, str]]:
    """A segment as (start, end, text), cut where its timed words leave a pause (words where known)."""
    start = _time(segment.get("start"), 0.0)
    end = max(_time(segment.get("end"), start), start)
    text = str(segment.get("text") or "")
    words = segment.get("words")
    if not isinstance(words, list) or len(words) < 2:
        yield start, end, text
        return
    timed = [
        (_time(w.get("start"), start), _time(w.get("end"), start))
        for w in words
        if isinstance(w, Mapping) and str(w.get("word") or "").strip()
    ]
    gaps = [i for i in range(1, len(timed)) if timed[i][0] - timed[i - 1][1] > pause]
    if not gaps or len(timed) != len(text.split()):
        # No pause inside, or words that do not spell the text (a corrected segment): the segment whole.
        yield start, end, text
        return
    tokens = text.split()
    cuts = [0, *gaps, len(timed)]
    for a, b in itertools.pairwise(cuts):
        yield timed[a][0], timed[b - 1][1], " ".join(tokens[a:b])


def _runs(segments: Sequence[Any], pause: float, max_chars: int) -> list[_Run]:
    runs: list[_Run] = []
    for segment in segments:
        if not isinstance(segment, Mapping):
            continue
        speaker = segment.get("speaker")
        speaker = str(speaker) if speaker else None
        for start, end, text in _pieces(segment, pause):
            if not text.strip():
                continue
            last = runs[-1] if runs else None
            long = last is not None and (
                (last.chars >= max_chars and _SENTENCE_END.search(last.texts[-1].rstrip()) is not None)
                or last.chars >= 2 * max_chars
            )
            if last is None or last.speaker != speaker or start - last.end > pause or long:
                runs.append(_Run(start, end, speaker, [text], len(text)))
            else:
                last.texts.append(text)
                last.end = max(last.end, end)
                last.chars += len(text) + 1
    return runs


def _split(token: str) -> tuple[str, str, str]:
    m = _CORE.match(token)
    assert m is not None  # the pattern matches any string
    return m.group(1), m.group(2), m.group(3)


def _key(core: str) -> str:
    return core.lower().replace("ё", "е")


def _without_fillers_and_stutters(tokens: list[str], language: str) -> list[str]:
    filler = _FILLERS.get(language)
    kept_repeats = _REPEATS_KEPT.get(language, frozenset())
    out: list[str] = []
    for token in tokens:
        lead, core, trail = _split(token)
        if not core:
            out.append(token)
            continue
        if filler is not None and filler.fullmatch(core):
            # A filler goes with its commas; the end of a sentence it carried stays.
            if out and any(c in trail for c in ".!?…") and not _SENTENCE_END.search(out[-1]):
                out[-1] = out[-1].rstrip(",;:") + trail.lstrip(",;:")
            continue
        if out:
            p_lead, p_core, p_trail = _split(out[-1])
            # A cut-off start ("ко-") said again in full.
            if p_core.endswith("-") and len(p_core) > 1 and _key(core).startswith(_key(p_core[:-1])) and not p_trail:
                out[-1] = p_lead + (core[0].upper() + core[1:] if p_core[:1].isupper() else core) + trail
                continue
            # The same word again at once ("я я я", "I, I"): said once, with the last one's punctuation.
            if (
                _key(p_core) == _key(core)
                and core.isalpha()
                and _key(core) not in kept_repeats
                and not lead
                and not any(c in p_trail for c in ".!?…")
            ):
                out[-1] = p_lead + p_core + trail
                continue
        out.append(token)
    return out


# The longest phrase whose repeat at once is a false start ("let us let us begin").
_PHRASE = 3


def _without_repeated_phrases(tokens: list[str]) -> list[str]:
    """A phrase of two or three words said twice at once: said once (the second time's punctuation kept)."""
    out: list[str] = []
    for token in tokens:
        out.append(token)
        for n in range(2, _PHRASE + 1):
            if len(out) < 2 * n:
                continue
            first, second = out[-2 * n : -n], out[-n:]
            keys = [_key(_split(t)[1]) for t in first]
            if (
                all(k.isalpha() for k in keys)
                and keys == [_key(_split(t)[1]) for t in second]
                and not any(c in _split(t)[2] for t in first for c in ".!?…")
            ):
                # The first copy's capital stays where it began a sentence.
                if first[0][:1].isupper() and not second[0][:1].isupper():
                    second = [second[0][:1].upper() + second[0][1:], *second[1:]]
                out[-2 * n :] = second
                break
    return out


def _sentence_case(tokens: list[str]) -> list[str]:
    out = []
    upper_next = True
    for token in tokens:
        if upper_next:
            for i, ch in enumerate(token):
                if ch.isalpha():
                    token = token[:i] + ch.upper() + token[i + 1 :]
                    break
                if ch.isdigit():
                    break
        upper_next = _SENTENCE_END.search(token) is not None
        out.append(token)
    return out


def _quotes(text: str, opening: str, closing: str) -> str:
    """Straight double quotes as a pair: opening where a word starts, closing where one ends."""
    out = []
    for i, ch in enumerate(text):
        if ch != '"':
            out.append(ch)
            continue
        before = text[i - 1] if i > 0 else " "
        out.append(opening if before.isspace() or before in "([{—-" else closing)
    return "".join(out)


def _typography(text: str, language: str) -> str:
    if language == "ru":
        text = _quotes(text, "«", "»")
        # A hyphen (or an en dash) alone between words is a dash: an em dash held to the word before it.
        text = re.sub(r"(?<=\S) +[-–] +(?=\S)", NBSP + "— ", text)
    elif language == "en":
        text = _quotes(text, "“", "”")
        text = re.sub(r"(?<=\w)'(?=\w)", "’", text)  # don't, it's
        text = re.sub(r"(?<=\w)'", "’", text)  # the boys'
        text = re.sub(r"(?<!\w)'(?=\w)", "‘", text)  # 'quoted
        text = text.replace("'", "’")
    return text


def clean(text: str, language: str) -> str:
    """One paragraph's text: fillers and stutters out, sentence case, typography; "" when nothing is left."""
    language = (language or "").split("-")[0].lower()
    tokens = _without_repeated_phrases(_without_fillers_and_stutters(text.split(), language))
    # Punctuation left alone at the start by a removed word ("эм, так" → ", так").
    while tokens and not any(ch.isalnum() for ch in tokens[0]) and tokens[0][:1] in ",;:.":
        tokens.pop(0)
    tokens = _sentence_case(tokens)
    return _typography(" ".join(tokens), language)


def edit(
    segments: Sequence[Any],
    language: str,
    *,
    pause: float = PAUSE,
    max_chars: int = MAX_CHARS,
) -> list[Paragraph]:
    """The transcript's segments (``{start, end, text, speaker?, words?}``, as stored: anything else is
    passed over) as edited paragraphs."""
    out = []
    for run in _runs(segments, pause, max_chars):
        text = clean(" ".join(run.texts), language)
        if text:
            out.append(Paragraph(round(run.start, 3), round(run.end, 3), run.speaker, text))
    return out


def render(paragraphs: Sequence[Paragraph]) -> str:
    """The text as people paste it: paragraphs apart by a blank line, the speaker named at each turn."""
    out = []
    speaker: str | None = None
    for p in paragraphs:
        named = p.speaker is not None and p.speaker != speaker
        out.append(f"{p.speaker}: {p.text}" if named else p.text)
        speaker = p.speaker
    return "\n\n".join(out)
