"""What the brief and the topics may say: only what the transcript holds.

A model's answer is a proposal. Here each sentence of the brief keeps its
place only if the quote it gives is found in the transcript (words in order;
case, punctuation and ``ё``/``е`` do not matter, nor the fillers and repeated
words the model was not shown: ``compact``; of a quote the answer's length
limit cut, the words before the cut), at least ``MIN_QUOTE_WORDS`` long,
the sentence itself names no number and no name the transcript
never says (the invented "November 22nd"; a speaker's name is said), and
the quote supports the sentence (``support``: a small model put true
quotes beside sentences they do not say). The quote kept is the
transcript's own passage and its time the transcript's.
The brief as a whole must be in the transcript's language.

Topics: a name of the owner's dictionary (matched whatever its case) is kept
as the dictionary spells it; a new name only with a quote found in the
transcript that holds one of its words. At most ``MAX_TOPICS``, ranked here
by how much of the transcript speaks of them, never by the order the model
or the dictionary gave them in.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sidecar.insights.compact import short_label, spoken
from sidecar.insights.support import unsupported

__all__ = [
    "MAX_NEW_TOPICS",
    "MAX_TOPICS",
    "MIN_QUOTE_WORDS",
    "Grounded",
    "Indexed",
    "Proposal",
    "Quoted",
    "TopicProposal",
    "detect_language",
    "ground_brief",
    "ground_topics",
    "in_language",
    "rank_dictionary",
    "stem",
    "words",
]

MAX_TOPICS = 5
# New names a recording may add to the owner's dictionary: it grows slowly, so topics stay comparable week to week.
MAX_NEW_TOPICS = 2
MIN_QUOTE_WORDS = 3
MAX_QUOTE_WORDS = 60
# A quote's neighbourhood reaches no further than this either side (a transcript without punctuation is one
# sentence: its quote's neighbourhood would be all of it).
AROUND_WORDS = 40
_WORD = re.compile(r"\w+", re.UNICODE)
_DIGITS = re.compile(r"\d+")
# A word's stem for "does the transcript say it": its first letters (Russian endings change, the stem stays).
_STEM = 5


def _fold(word: str) -> str:
    return word.casefold().replace("ё", "е")


def words(text: str) -> list[str]:
    """The words of ``text``, case-folded, ``ё`` read as ``е``: what quote matching compares."""
    return [_fold(w) for w in _WORD.findall(text)]


def _stem(word: str) -> str:
    return word[:_STEM]


def stem(word: str) -> str:
    """A folded word's stem (``words``): what "the transcript says it" compares."""
    return _stem(word)


@dataclass(frozen=True)
class Quoted:
    """A sentence of the brief with the quote that backs it and where the quote is (seconds)."""

    sentence: str
    quote: str
    start: float
    end: float

    def as_json(self) -> dict[str, Any]:
        return {"sentence": self.sentence, "quote": self.quote, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class Proposal:
    """A sentence as the model proposed it."""

    sentence: str
    quote: str
    cut: bool = False  # the quote stopped at the answer's length limit: its last word may be cut short
    # The sentence says what the whole recording is about, in words of its own, and its quote is only where the
    # recording says it best: the transcript-wide checks apply, not whether the quote says it (``support``).
    about: bool = False


class Indexed:
    """A transcript's words in order, each with the time of the segment it was said in.

    Read as the model reads it (``compact.spoken``: no fillers of ``language``, a word said twice in a
    row once), so a quote copied from the compacted transcript is found; each word keeps where the
    original says it, so what a kept quote shows is the original's own passage."""

    def __init__(self, text: str, segments: Sequence[dict[str, Any]] = (), language: str = "") -> None:
        said: list[str] = []
        times: list[tuple[float, float]] = []
        spans: list[tuple[int, int, int]] = []  # (segment, first character, end) of each word
        ends: list[bool] = []  # whether a sentence of the transcript ends with the word
        self._texts: list[str] = []
        self._speakers: list[list[str]] = []  # each segment's speaker, as words
        speakers: set[str] = set()
        for seg in segments:
            seg_text = str(seg.get("text", ""))
            span = (_seconds(seg.get("start")), _seconds(seg.get("end")))
            found = list(_WORD.finditer(seg_text))
            said += [_fold(m.group()) for m in found]
            times += [span] * len(found)
            spans += [(len(self._texts), m.start(), m.end()) for m in found]
            ends += _sentence_ends(seg_text, found)
            self._texts.append(seg_text)
            self._speakers.append(words(short_label(seg.get("speaker"))))
            speakers.update(self._speakers[-1])
        if not said:  # no timed segments (a correction without times): the text, untimed
            found = list(_WORD.finditer(text))
            said = [_fold(m.group()) for m in found]
            times = [(0.0, 0.0)] * len(said)
            spans = [(0, m.start(), m.end()) for m in found]
            ends = _sentence_ends(text, found)
            self._texts = [text]
            self._speakers = [[]]
        self.language = language
        kept = spoken(said, language)
        self.words: list[str] = [said[i] for i in kept]
        self.times: list[tuple[float, float]] = [times[i] for i in kept]
        self._spans = [spans[i] for i in kept]
        # A sentence that ends on a word left out (a filler) ends on the word kept before it.
        self._ends = [any(ends[k:nxt]) for k, nxt in zip(kept, [*kept[1:], len(said)], strict=False)]
        self._at: dict[str, list[int]] = {}
        for i, w in enumerate(self.words):
            self._at.setdefault(w, []).append(i)
        # The speakers' names are the transcript's too (a brief may say who decided).
        self.stems = {_stem(w) for w in said} | {_stem(w) for w in speakers}
        self.counts = Counter(_stem(w) for w in said)

    def locate(self, quote: str, *, cut: bool = False) -> tuple[float, float, str] | None:
        """Where ``quote`` is said (start of its first word's segment, end of its last's) and the
        transcript's own words there, or None. A ``cut`` quote's last word is not evidence (``_covered``): where
        it is the start of what follows, the passage runs on to the end of that; otherwise it ends before it."""
        found = self.place(quote, cut=cut)
        if found is None:
            return None
        first, end = found
        return self.times[first][0], self.times[end][1], self.passage(first, end)

    def place(self, quote: str, *, cut: bool = False) -> tuple[int, int] | None:
        """The positions of ``quote``'s first and last words in ``words`` (as ``locate`` finds them), or None."""
        folded = words(quote)
        q = [folded[i] for i in spoken(folded, self.language)]
        whole, last = (q[:-1], q[-1]) if cut and q else (q, "")
        if not (MIN_QUOTE_WORDS <= len(whole) and len(q) <= MAX_QUOTE_WORDS):
            return None
        found: tuple[int, int] | None = None
        for i in self._at.get(whole[0], ()):
            if self.words[i : i + len(whole)] != whole:
                continue
            end = i + len(whole) - 1
            covered = _covered(self.words[end + 1 : end + 4], last) if last else 0
            if covered or not last:
                found = (i, end + covered)
                break
            found = found or (i, end)
        return found

    def around(self, first: int, last: int, *, cut: bool = False) -> tuple[list[str], set[str]]:
        """The words said around positions ``first`` to ``last``: from the start of the transcript's sentence
        the first is in to the end of the sentence the last is in (a ``cut`` quote went on: to the end of its
        segment), within the segments they are in and ``AROUND_WORDS`` either side, and the speakers who said them."""
        start, segment = first, self._spans[first][0]
        floor = max(0, first - AROUND_WORDS)
        while start > floor and not self._ends[start - 1] and self._spans[start - 1][0] == segment:
            start -= 1
        stop, segment = last, self._spans[last][0]
        reach = min(len(self.words) - 1, last + AROUND_WORDS)
        while stop < reach and self._spans[stop + 1][0] == segment and (cut or not self._ends[stop]):
            stop += 1
        said_by = {w for i in range(start, stop + 1) for w in self._speakers[self._spans[i][0]]}
        return self.words[start : stop + 1], said_by

    def find(self, quote: str) -> tuple[float, float] | None:
        """Where ``quote`` is said (start of its first word's segment, end of its last's), or None."""
        where = self.locate(quote)
        return None if where is None else (where[0], where[1])

    def passage(self, first: int, last: int) -> str:
        (seg_a, start, _), (seg_b, _, end) = self._spans[first], self._spans[last]
        if seg_a == seg_b:
            return self._texts[seg_a][start:end]
        pieces = [self._texts[seg_a][start:], *self._texts[seg_a + 1 : seg_b], self._texts[seg_b][:end]]
        return " ".join(" ".join(p.split()) for p in pieces if p.strip())

    def says(self, word: str) -> bool:
        return _stem(word) in self.stems


def _covered(following: Sequence[str], cut: str) -> int:
    """How many of the ``following`` words of the transcript a quote's last word, cut by the answer's length
    limit, is the start of (0: none). The grammar ends the quote inside the model's last token, so: its last
    letter is not compared (a token may begin another spelling: "пони" for "понедельника"), and it may run two
    words together (a token with its space no longer fitted: "thisweek"). It may also be a word the model
    never meant ("do" for "look": the only token that fitted), so one that is not the start of what follows
    is left out of the passage, not held against the quote."""
    stem = cut[:-1] if len(cut) > 1 else cut
    joined = ""
    for k, word in enumerate(following, 1):
        joined += word
        if joined.startswith(stem):
            return k
        if not stem.startswith(joined):
            return 0
    return 0


# What ends a sentence after a word: its mark, then a space or the end ("3.2" goes on).
_SENTENCE_END = re.compile(r"[.!?…]+[\"'»”)]*(\s|$)")


def _sentence_ends(text: str, found: Sequence[re.Match[str]]) -> list[bool]:
    """For each word ``found`` in ``text``: whether a sentence ends with it (the last word of a segment does)."""
    out = []
    for k, m in enumerate(found):
        after = text[m.end() : found[k + 1].start()] if k + 1 < len(found) else ""
        out.append(k + 1 == len(found) or bool(_SENTENCE_END.search(after)))
    return out


def _seconds(v: object) -> float:
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return f if f == f and 0 <= f < 1e7 else 0.0


@dataclass(frozen=True)
class Grounded:
    """The sentences kept, and why the others were dropped (for the journal)."""

    kept: list[Quoted]
    dropped: list[str]
    proposed: int


def _invented(sentence: str, index: Indexed) -> str | None:
    """What the sentence names that the transcript never says: a number, or a name (a capitalised word)."""
    said = set(index.words)
    for number in _DIGITS.findall(sentence):
        if number not in said:
            return f"the number {number}"
    tokens = _WORD.findall(sentence)
    for token in tokens[1:]:
        if token[:1].isupper() and not token.isupper() and not index.says(words(token)[0]):
            return f"the name {token!r}"
    return None


# Words a sentence on what a recording is about uses without naming anything in it ("the note describes
# various events"): the frame and the vague, in the languages whose notes were measured.
_VAGUE = frozenset(
    "about recording recorded note notes message voice describes described describing talks speaker speakers "
    "explanation events event things thing various several series some topics matters details information "
    "запись записи записью сообщение сообщении заметка заметке голосовое голосовом описание описанных "
    "объяснение события событиях событий говорится рассказывает разные различные несколько вещи вещах "
    "темы темах информация подробности".split()
)


def _names_nothing(sentence: str) -> str | None:
    """Why a sentence on what the recording is about says nothing of it: it has no word of four letters or more
    but the frame and the vague. A 1.5B model wrote "Объяснение описанных событиях" ("an explanation of the
    events described") for a note of five plain statements."""
    if any(len(w) >= 4 and w not in _VAGUE for w in words(sentence)):
        return None
    return "it names nothing"


def ground_brief(proposals: Iterable[Proposal], index: Indexed, *, limit: int) -> Grounded:
    """The sentences whose quotes are in the transcript and support them (but ``Proposal.about``), and which
    invent nothing, in order, at most ``limit``."""
    kept: list[Quoted] = []
    dropped: list[str] = []
    seen: set[str] = set()
    proposed = 0
    for p in proposals:
        proposed += 1
        sentence, quote = " ".join(p.sentence.split()), " ".join(p.quote.split())
        if not sentence or " ".join(words(sentence)) in seen:
            dropped.append(f"{sentence[:80]!r}: empty or repeated")
            continue
        placed = index.place(quote, cut=p.cut)
        if placed is None:
            dropped.append(f"{sentence[:80]!r}: its quote {quote[:80]!r} is not in the transcript")
            continue
        invented = _invented(sentence, index)
        if invented is not None:
            dropped.append(f"{sentence[:80]!r}: {invented} is not in the transcript")
            continue
        near, said_by = index.around(*placed, cut=p.cut)
        why = _names_nothing(sentence) if p.about else unsupported(sentence, near, said_by)
        if why is not None:
            dropped.append(f"{sentence[:80]!r}: its quote {quote[:80]!r} does not say it ({why})")
            continue
        if len(kept) >= limit:
            dropped.append(f"{sentence[:80]!r}: over {limit} sentences")
            continue
        seen.add(" ".join(words(sentence)))
        first, end = placed
        passage = index.passage(first, end)  # the transcript's words, as it says them
        kept.append(Quoted(sentence, passage, index.times[first][0], index.times[end][1]))
    return Grounded(kept, dropped, proposed)


def rank_dictionary(dictionary: Iterable[str], index: Indexed) -> list[str]:
    """The owner's topics, most spoken of first (then by name): the order the model sees is ours, not the
    order they were stored or sent in."""

    def weight(name: str) -> int:
        return sum(index.counts.get(_stem(w), 0) for w in words(name))

    unique = {" ".join(words(n)): n.strip() for n in dictionary if words(n)}
    return sorted(unique.values(), key=lambda n: (-weight(n), n.casefold(), n))


@dataclass(frozen=True)
class TopicProposal:
    name: str
    quote: str = ""
    cut: bool = False  # as a Proposal's


def ground_topics(
    proposals: Iterable[TopicProposal], dictionary: Iterable[str], index: Indexed
) -> tuple[list[str], list[str]]:
    """The topics kept (at most ``MAX_TOPICS``, dictionary spellings) and why others were refused."""
    known = {" ".join(words(n)): n.strip() for n in dictionary if words(n)}
    chosen: dict[str, str] = {}
    refused: list[str] = []
    new = 0
    for p in proposals:
        key = " ".join(words(p.name))
        if not key or key in chosen:
            continue
        located = index.locate(p.quote, cut=p.cut) if p.quote else None
        where = located[2] if located else None
        if key in known:
            # The owner's own name, if the transcript speaks of it or the model quoted where it does:
            # a name picked for its place in a list is not a topic of this recording.
            if where is not None or any(index.says(w) for w in words(known[key])):
                chosen[key] = known[key]
            else:
                refused.append(f"{known[key][:60]!r}: the transcript neither says it nor was quoted for it")
            continue
        name_words = words(p.name)
        if where is None or not any(_stem(w) in {_stem(q) for q in words(where)} for w in name_words):
            refused.append(f"{p.name[:60]!r}: not in the dictionary, and no quote of the transcript says it")
            continue
        if len(name_words) > 6:
            refused.append(f"{p.name[:60]!r}: too long for a topic")
            continue
        if new >= MAX_NEW_TOPICS:
            refused.append(f"{p.name[:60]!r}: at most {MAX_NEW_TOPICS} new topics a recording")
            continue
        new += 1
        chosen[key] = " ".join(p.name.split())

    def weight(name: str) -> int:
        return sum(index.counts.get(_stem(w), 0) for w in words(name))

    ranked = sorted(chosen.values(), key=lambda n: (-weight(n), n.casefold(), n))
    for cut in ranked[MAX_TOPICS:]:
        refused.append(f"{cut[:60]!r}: over {MAX_TOPICS} topics")
    return ranked[:MAX_TOPICS], refused


@functools.cache
def _identifier() -> Any:
    import py3langid.langid as langid

    return langid.LanguageIdentifier.from_modelpath(langid.MODEL_DIR / langid.MODEL_FILE, norm_probs=True)


# Below this probability the text is not in the language (measured: a Russian sentence scores ru 0.36
# beside bg 0.40; an English one ru 0.0000; German for en 0.0005).
_LANGUAGE_FLOOR = 0.05


def in_language(text: str, language: str) -> bool:
    """Whether ``text`` reads as ``language`` (an ISO 639-1 code); True when nothing can be told."""
    if not language or not words(text):
        return True
    ranked = dict(_identifier().rank(text))
    if language not in ranked:
        return True  # a language the identifier does not know: nothing to say
    return float(ranked[language]) >= _LANGUAGE_FLOOR


def detect_language(text: str) -> str:
    """The language ``text`` is most likely in ("" for no words)."""
    if not words(text):
        return ""
    lang, _ = _identifier().classify(text[:20000])
    return str(lang)
