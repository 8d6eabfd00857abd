"""From a transcript to a grounded brief and topics, in requests that each fit the model's context.

The model reads the transcript compacted (``compact``: no times, no fillers,
short speaker labels). A transcript that fits is one request. A longer one (a
six-hour meeting) is read in parts, each within the context, at least one per
sentence of the brief (each part a stretch of the meeting), and as many at
once as the server answers at once (``Chat.parallel``): each part gives its
share of notes (sentences with quotes, checked against the whole transcript
at once, so nothing ungrounded travels on), then the model picks, by number,
the notes that make the brief of the whole and chooses the topics, in as
many rounds as the notes need to fit. Every request of a transcript starts
with the same instructions, so a server with a prompt cache reads them once.
The brief is checked again (``grounding``): what is kept is what the
transcript says, in the order the meeting said it.

Every answer is parsed against the schema. The brief of a transcript that
fits one request holds at least one sentence (a voice note has no decisions,
and a model free to write none wrote none); a short one (``NOTE_TOKENS``) is
asked with shorter instructions. An answer that gives nothing usable (not the
JSON, another language, no sentence the transcript backs) is followed by one
simpler request; both failing, there is no brief and ``Insights.missing``
says why (both not JSON: the step halts ``unparsable_answer``). A part's or
the pick's answer that is not JSON is asked for once more, then the step
halts ``unparsable_answer``.
A request the server says is too long for its context makes the parts smaller.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError

from sidecar.insights import parts as cutting
from sidecar.insights.chat import ContextExceeded
from sidecar.insights.compact import compact_lines, compact_text, short_label, without_labels
from sidecar.insights.grounding import (
    Grounded,
    Indexed,
    Proposal,
    Quoted,
    TopicProposal,
    detect_language,
    ground_brief,
    ground_topics,
    in_language,
    rank_dictionary,
    stem,
    words,
)
from sidecar.insights.prompt import (
    MAX_QUOTE,
    MAX_SENTENCE,
    answer_schema,
    messages_for,
    note_line,
    note_messages,
    note_schema,
    pick_schema,
    simple_messages,
    simple_schema,
    without_times,
)
from sidecar.outcome import HaltCode, PermanentError

__all__ = ["Chat", "Engine", "Insights", "Source", "summarize"]

_T = TypeVar("_T")
_R = TypeVar("_R")

log = logging.getLogger("transcriber.insights")

# Tokens kept for the answer, and (besides the instructions, counted) for the JSON around the data and a retry's line.
ANSWER_TOKENS = 1024
OVERHEAD_TOKENS = 200
# The dictionary takes at most this share of what a request may hold.
DICTIONARY_SHARE = 0.2
NOTES_PER_PART = 5
# A note at its longest (MAX_QUOTE and MAX_SENTENCE characters, about three to a token, and its JSON): a part is
# asked for no more notes than its answer has room for, or the answer is cut off and is not JSON.
TOKENS_PER_NOTE = 150
# A quote this long may have been cut by the answer's length limit (the grammar may stop some characters short of
# MAX_QUOTE: measured, Russian quotes stopped at 91-93 characters of 100; at 70 of 70).
CUT_QUOTE = int(MAX_QUOTE * 0.85)
# The transcript tokens of one part at most (0: as many as the context holds).
PART_TOKENS = 0
# A transcript read in parts is cut into one part per sentence of the brief, none smaller than this; each is laid
# out this much larger than an even share (a part ends after a whole line, a little under its room), so that the
# shares make as many parts as meant, not one more.
LEAST_PART_TOKENS = 1000
STRETCH_SLACK = 1.1
# A transcript (or part) is asked for at least one sentence per this many tokens, up to LEAST_SENTENCES.
TOKENS_PER_SENTENCE = 800
LEAST_SENTENCES = 3
# A transcript of at most this many tokens (about two minutes of speech) is a short recording, a voice note: asked
# with shorter instructions, its sentences naming their lines by number and its topics by name (``note_schema``).
NOTE_TOKENS = 600


class Chat(Protocol):
    name: str
    who: str
    model: str
    context_tokens: int
    parallel: int  # requests the server answers at once

    async def complete(self, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int) -> str: ...

    async def count_tokens(self, text: str) -> int: ...


class Engine(Protocol):
    """Where answers come from for one step: ``async with engine.open() as chat``."""

    name: str

    def open(self) -> AbstractAsyncContextManager[Chat]: ...


@dataclass(frozen=True)
class Source:
    """What the step reads: the transcript and the owner's dictionary."""

    text: str
    segments: Sequence[dict[str, Any]] = ()
    language: str = ""
    topics: Sequence[str] = ()


@dataclass
class Insights:
    brief: list[Quoted]
    topics: list[str]
    language: str
    proposed: int
    requests: int = 0
    notes: list[str] = field(default_factory=list)  # for the journal: what was dropped and why
    missing: str = ""  # no brief: why, in words for the owner

    def __post_init__(self) -> None:
        if not self.brief and not self.missing:
            self.missing = "no sentence the model proposed is backed by the transcript"

    @property
    def text(self) -> str:
        return " ".join(q.sentence for q in self.brief)


@dataclass(frozen=True)
class _Attempt:
    """One request's answer (None: not the JSON), what of it survived, and why it is of no use when nothing did."""

    answer: _Answer | None
    grounded: Grounded
    why: str


class _Sentence(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sentence: str
    quote: str = ""


class _Topic(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    quote: str = ""


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    brief: list[_Sentence] = []
    topics: list[_Topic | str] = []
    keep: list[int] = []  # the combining request's: numbers of notes
    about: str = ""  # a voice note's: what it is about
    points: list[int] = []  # a voice note's: the numbers of its lines that say its separate points


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse_answer(content: str) -> _Answer | None:
    """The answer as the schema has it, or None. Code fences and text around one JSON object are tolerated."""
    text = _FENCE.sub("", content.strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1])
        return _Answer.model_validate(data)
    except (ValueError, ValidationError):
        return None


def _topics(
    answer: _Answer, labels: set[str], lines: Sequence[str] = (), dictionary: Sequence[str] = ()
) -> list[TopicProposal]:
    known = {" ".join(words(n)) for n in dictionary}
    out = []
    for t in answer.topics:
        if isinstance(t, str):
            # A voice note's topics are bare names. A new one is backed by the sentence that says one of its words;
            # the owner's own, chosen by the model, by the sentence nearest to it (as a meeting's model quotes one):
            # a category ("Travel") is seldom said, and a note about a delayed flight is about it.
            quote = _saying(lines, words(t)) or (_closest(lines, t) if " ".join(words(t)) in known else "")
            out.append(TopicProposal(t, without_labels(quote, labels)))
        else:
            quote = without_labels(without_times(t.quote), labels)
            out.append(TopicProposal(t.name, quote, cut=len(t.quote) >= CUT_QUOTE))
    return out


def _proposals(answer: _Answer, labels: set[str], lines: Sequence[str] = ()) -> list[Proposal]:
    out = [
        Proposal(
            _unlabelled(s.sentence, labels),
            without_labels(without_times(s.quote), labels),
            cut=len(s.quote) >= CUT_QUOTE,
        )
        for s in answer.brief
    ]
    about = _about(answer, labels)
    if about:
        # A voice note's sentence on what it is about, backed by the sentence of the transcript nearest to it;
        # then its points: the lines it numbered, as they were said (each its own quote).
        out.append(Proposal(about, without_labels(_closest(lines, about), labels), about=True))
    for n in dict.fromkeys(answer.points):
        if 1 <= n <= len(lines):
            said = without_labels(_point(lines[n - 1]), labels)
            out.append(Proposal(said, said))
    return out


def _about(answer: _Answer, labels: set[str]) -> str:
    """A voice note's sentence on what it is about, as the brief shows it ("" for none)."""
    about = _unlabelled(" ".join(answer.about.split()), labels)
    if about[-1:].isalnum():  # the brief reads its sentences one after another: this one ends as one
        about += "."
    return about


_SENTENCES = re.compile(r"(?<=[.!?…])\s+")


def _sentences_of(lines: Sequence[str]) -> list[str]:
    return [p for line in lines for p in _SENTENCES.split(line) if words(p)]


def _closest(lines: Sequence[str], sentence: str) -> str:
    """The sentence of ``lines`` that shares most words (by stem) with ``sentence``, the first on a tie."""
    said = {stem(w) for w in words(sentence)}
    return max(_sentences_of(lines), key=lambda p: len(said & {stem(w) for w in words(p)}), default="")


def _point(line: str) -> str:
    """A numbered line as a point of the brief: its sentences up to a brief sentence's length."""
    kept = ""
    for part in _SENTENCES.split(line):
        if kept and len(kept) + len(part) >= MAX_SENTENCE:
            break
        kept = f"{kept} {part}".strip()
    return kept[:MAX_SENTENCE]


def _saying(lines: Sequence[str], name_words: Sequence[str]) -> str:
    """The first sentence of ``lines`` that says one of ``name_words`` (by stem), or ""."""
    stems = {stem(w) for w in name_words}
    return next((p for p in _sentences_of(lines) if stems & {stem(w) for w in words(p)}), "")


def _unlabelled(sentence: str, labels: set[str]) -> str:
    """A sentence without the speaker's label a model copied its line with ("S2: We ship on Friday.")."""
    head, colon, rest = sentence.partition(":")
    return rest.strip() if colon and head.strip() in labels and rest.strip() else sentence


class _Run:
    def __init__(
        self,
        chat: Chat,
        source: Source,
        sentences: int,
        on_progress: Callable[[float], Awaitable[None]] | None,
        answer_tokens: int = ANSWER_TOKENS,
        part_tokens: int = 0,
    ) -> None:
        self.chat = chat
        self.answer_tokens = answer_tokens
        self.per_part = max(1, min(NOTES_PER_PART, answer_tokens // TOKENS_PER_NOTE))
        self.part_tokens = part_tokens
        self.language = source.language or detect_language(source.text)
        self.index = Indexed(source.text, source.segments, self.language)
        self.dictionary = rank_dictionary(source.topics, self.index)
        self.sentences = sentences
        self.schema = answer_schema(sentences)
        self.on_progress = on_progress
        self.requests = 0
        self.notes: list[str] = []
        self.note_lines: list[str] = []  # a voice note's lines, as its request numbered them
        segs = [s for s in source.segments if str(s.get("text", "")).strip()]
        self.labels = {short_label(s.get("speaker")) for s in segs} - {""}
        if segs:
            self.lines = compact_lines(segs, self.language)
        else:
            said = [compact_text(p, self.language) for p in re.split(r"(?<=[.!?…])\s+", source.text)]
            self.lines = [p for p in said if p.strip()]

    async def ask(
        self, messages_of: Callable[[bool, bool], list[dict[str, str]]], schema: dict[str, Any] | None = None
    ) -> _Answer:
        """One answer parsed; a second request if the first was not the JSON asked for."""
        for again in (False, True):
            self.requests += 1
            content = await self.chat.complete(messages_of(False, again), schema or self.schema, self.answer_tokens)
            answer = parse_answer(content)
            if answer is not None:
                return answer
            log.info(
                "the model's answer was not the JSON asked for (%d characters)%s",
                len(content),
                "" if again else "; asking again",
            )
        raise PermanentError(
            HaltCode.UNPARSABLE_ANSWER,
            f"{self.chat.who} answered twice with something that is "
            "not the JSON asked for; set the insights row back to queued to try again (another model may do better)",
        )

    async def tokens(self, text: str) -> int:
        return await self.chat.count_tokens(text)

    async def budget(self) -> int:
        """Tokens the data of one request may take: the context less the answer and the longest instructions."""
        longest = messages_for(notes=[], dictionary=[], language=self.language, sentences=self.sentences)
        instructions = await self.tokens(longest[0]["content"])
        return self.chat.context_tokens - self.answer_tokens - instructions - OVERHEAD_TOKENS

    async def fit_dictionary(self, budget: int) -> tuple[list[str], int]:
        """The most spoken-of names of the owner's dictionary that fit their share of a request,
        and the tokens they take."""
        share = int(budget * DICTIONARY_SHARE)
        kept, used = await cutting.fitting(self.dictionary, share, self.tokens)
        if len(kept) < len(self.dictionary):
            self.notes.append(
                f"the dictionary has {len(self.dictionary)} topics; the {len(kept)} most spoken of were offered"
            )
        return kept, used

    async def parts(self, lines: list[str], room: int) -> list[list[str]]:
        """``lines`` cut into parts that each fit ``room`` tokens (a line longer than that is cut too)."""
        try:
            return await cutting.parts(lines, room, self.tokens)
        except cutting.Overflow as exc:
            raise ContextExceeded(str(exc)) from exc

    async def run(self) -> Insights:
        budget = await self.budget()
        for _ in range(4):
            try:
                return await self._within(budget)
            except ContextExceeded as exc:
                self.notes.append(f"a request did not fit the model's context ({exc}); parts made smaller")
                budget = int(budget * 0.6)
        raise PermanentError(
            HaltCode.PROVIDER_REJECTED,
            f"the model's context is too small for even small parts of this transcript ({self.chat.context_tokens} "
            "tokens configured): set [insights] context_tokens to what the model takes",
        )

    async def _within(self, budget: int) -> Insights:
        dictionary, used = await self.fit_dictionary(budget)
        room = budget - used
        if room < 200:
            raise ContextExceeded("no room left for the transcript")
        part_room = min(room, self.part_tokens) if self.part_tokens else room
        parts = await self.parts(self.lines, part_room)
        if len(parts) <= 1:
            return await self._final(parts[0] if parts else [], dictionary)
        parts = await self._stretches(parts, part_room)
        # Each part's few most important notes: a part of an hour's meeting asked for five wrote five, most of
        # them minor, and the pick kept one stretch of the meeting (measured: 1 of its 30 decisions found).
        per_part = min(self.per_part, math.ceil(self.sentences / len(parts)))
        done = 0

        async def notes_of(i: int, part: list[str]) -> list[Quoted]:
            nonlocal done
            schema = answer_schema(per_part, topics=False, least=await self._least(part, per_part))
            answer = await self.ask(
                functools.partial(self._part_messages, part, dictionary, (i + 1, len(parts))), schema
            )
            kept = ground_brief(_proposals(answer, self.labels), self.index, limit=per_part)
            done += 1
            if self.on_progress is not None:
                await self.on_progress(done / (len(parts) + 1))
            return self._in_language(kept.kept)

        found = await self._each(notes_of, parts)
        return await self._combine([q for notes in found for q in notes], dictionary, room)

    async def _stretches(self, parts: list[list[str]], room: int) -> list[list[str]]:
        """A transcript that needs parts, cut into as many as the brief has sentences (each part then gives
        the brief of its stretch of the meeting) where that leaves none under ``LEAST_PART_TOKENS``: a model
        reads a short prompt faster than a long one (attention grows with it; 2 cores: 59 tokens/s at 2,700
        tokens, 48 at 6,800), and the notes it writes are what a brief costs most to write."""
        if len(parts) >= self.sentences:  # a six-hour meeting: its transcript is not counted once more
            return parts
        total = await self.tokens(cutting.render(self.lines))
        stretches = min(self.sentences, total // LEAST_PART_TOKENS)
        if stretches <= len(parts):
            return parts
        return await self.parts(self.lines, min(room, math.ceil(total * STRETCH_SLACK / stretches)))

    async def _least(self, lines: list[str], most: int) -> int:
        """The sentences a transcript this long is asked for at least: a small model that stops after one
        sentence leaves most decisions out (measured), and ungrounded ones are dropped anyway."""
        tokens = await self.tokens(json.dumps(lines, ensure_ascii=False))
        return min(LEAST_SENTENCES, most, tokens // TOKENS_PER_SENTENCE)

    async def _each(self, work: Callable[[int, _T], Awaitable[_R]], items: list[_T]) -> list[_R]:
        """``work`` on each item, as many at once as the server answers at once; results in order."""
        if self.chat.parallel <= 1 or len(items) <= 1:
            return [await work(i, item) for i, item in enumerate(items)]
        results: dict[int, _R] = {}
        failed: list[BaseException] = []
        limiter = anyio.CapacityLimiter(self.chat.parallel)

        async def one(i: int, item: _T, cancel: anyio.CancelScope) -> None:
            async with limiter:
                try:
                    results[i] = await work(i, item)
                except Exception as exc:  # the first failure ends the others: it is the step's
                    failed.append(exc)
                    cancel.cancel()

        async with anyio.create_task_group() as tg:
            for i, item in enumerate(items):
                tg.start_soon(one, i, item, tg.cancel_scope)
        if failed:
            raise failed[0]
        return [results[i] for i in range(len(items))]

    def _in_language(self, notes: list[Quoted]) -> list[Quoted]:
        """A part's notes in the transcript's language (one in another could not be fixed by asking again)."""
        kept = []
        for q in notes:
            if in_language(q.sentence, self.language):
                kept.append(q)
            else:
                self.notes.append(f"note dropped: {q.sentence[:80]!r} is not in {self.language}")
        return kept

    def _part_messages(
        self, lines: list[str], dictionary: list[str], part: tuple[int, int], firm: bool, again: bool
    ) -> list[dict[str, str]]:
        return messages_for(
            lines=lines,
            dictionary=dictionary,
            language=self.language,
            sentences=self.sentences,  # the instructions are the same for every request of a transcript
            part=part,
            retry_json=again,
        )

    def _notes_messages(
        self, notes: list[Quoted], dictionary: list[str], sentences: int, firm: bool, again: bool
    ) -> list[dict[str, str]]:
        return messages_for(
            notes=[note_line(i, q.sentence, q.quote) for i, q in enumerate(notes, 1)],
            dictionary=dictionary,
            language=self.language,
            sentences=sentences,
            retry_json=again,
        )

    def _messages(self, lines: list[str], dictionary: list[str], firm: bool, again: bool) -> list[dict[str, str]]:
        return messages_for(
            lines=lines,
            dictionary=dictionary,
            language=self.language,
            sentences=self.sentences,
            firm_language=firm,
            retry_json=again,
        )

    async def _combine(self, notes: list[Quoted], dictionary: list[str], room: int) -> Insights:
        """The notes of many parts: the model picks those that make the brief, in rounds until they fit one
        request, and the topics with the last."""
        while True:
            rendered = [note_line(i + 1, note.sentence, note.quote) for i, note in enumerate(notes)]
            groups: list[list[Quoted]] = []
            for group, _ in await cutting.groups(rendered, room, self.tokens):
                at = sum(len(g) for g in groups)
                groups.append(notes[at : at + len(group)])
            groups = groups or [[]]
            if len(groups) == 1:
                return await self._picked_brief(groups[0], dictionary)

            async def pick(i: int, group: list[Quoted]) -> list[Quoted]:
                answer = await self.ask(
                    functools.partial(self._notes_messages, group, dictionary, self.per_part),
                    pick_schema(self.per_part, len(group)),
                )
                return _picked(answer, group, self.per_part)

            combined = [q for kept in await self._each(pick, groups) for q in kept]
            if len(combined) >= len(notes):
                combined = combined[: max(1, len(notes) // 2)]
            notes = combined

    async def _picked_brief(self, notes: list[Quoted], dictionary: list[str]) -> Insights:
        """The brief of a long transcript: the notes the model picks (each checked again), and its topics."""
        answer = await self.ask(
            functools.partial(self._notes_messages, notes, dictionary, self.sentences),
            pick_schema(self.sentences, len(notes)),
        )
        picked = _picked(answer, notes, self.sentences)
        grounded = ground_brief([Proposal(q.sentence, q.quote) for q in picked], self.index, limit=self.sentences)
        return self._insights(grounded, answer)

    async def _final(self, lines: list[str], dictionary: list[str]) -> Insights:
        """The brief of a transcript that fits one request: asked for as usual, and, when that answer gives
        nothing usable (not the JSON, not in the transcript's language, no sentence the transcript backs), once
        more with a simpler request (one sentence on what it is about). Both failing: no brief, and why."""
        # At least one sentence, whatever the length: a voice note has no decisions, and a model free to write
        # none wrote none (measured: six plain sentences, "brief": []).
        tokens = await self.tokens(json.dumps(lines, ensure_ascii=False))
        least = max(1, min(LEAST_SENTENCES, self.sentences, tokens // TOKENS_PER_SENTENCE))
        if tokens <= NOTE_TOKENS:
            self.note_lines = lines
            schema = note_schema(self.sentences, len(lines), self.language)
            messages = note_messages(
                lines=lines, dictionary=dictionary, language=self.language, sentences=self.sentences
            )
        else:
            schema = answer_schema(self.sentences, least=least)
            messages = self._messages(lines, dictionary, False, False)
        first = await self._attempt(messages, schema)
        if first.grounded.kept:
            return self._insights(first.grounded, first.answer)
        self.notes.append(f"nothing usable in the first answer ({first.why}): asked once more, more simply")
        second = await self._attempt(
            simple_messages(lines=lines, dictionary=dictionary, language=self.language),
            simple_schema(self.language),
            about=True,
        )
        missing = (
            f"the model's first answer gave nothing usable ({first.why}), nor did a simpler request ({second.why})"
        )
        if second.grounded.kept or (first.answer is None and second.answer is not None):
            found = self._insights(second.grounded, second.answer, proposed=first.grounded.proposed, also=first.answer)
            found.missing = "" if found.brief else missing
            return found
        if first.answer is None and second.answer is None:
            raise PermanentError(
                HaltCode.UNPARSABLE_ANSWER,
                f"{self.chat.who} answered twice with something that is not the JSON asked for: no brief; set the "
                "insights row back to queued to try again (another model may do better)",
            )
        found = self._insights(first.grounded, first.answer, proposed=second.grounded.proposed, also=second.answer)
        found.missing = missing
        return found

    async def _attempt(self, messages: list[dict[str, str]], schema: dict[str, Any], about: bool = False) -> _Attempt:
        """One request, its answer parsed, in the transcript's language and grounded (``about``: its sentences say
        what the recording is about, in words of their own: ``Proposal.about``); why it is of no use if so."""
        self.requests += 1
        content = await self.chat.complete(messages, schema, self.answer_tokens)
        answer = parse_answer(content)
        if answer is None:
            log.info("the model's answer was not the JSON asked for (%d characters)", len(content))
            return _Attempt(None, Grounded([], [], 0), "its answer was not the JSON asked for")
        proposals = _proposals(answer, self.labels, self.note_lines)
        if about:
            proposals = [replace(p, about=True) for p in proposals]
        said_about = _about(answer, self.labels)
        if said_about and not in_language(said_about, self.language):
            # A voice note's points are its own lines, always in its language: its "about" is checked alone.
            self.notes.append(f"sentence dropped: {said_about[:80]!r}: not in {self.language}")
            proposals = [p for p in proposals if p.sentence != said_about]
        if proposals and not in_language(" ".join(p.sentence for p in proposals), self.language):
            dropped = [f"{p.sentence[:80]!r}: not in {self.language}" for p in proposals]
            return _Attempt(answer, Grounded([], dropped, len(proposals)), f"its brief was not in {self.language}")
        grounded = ground_brief(proposals, self.index, limit=self.sentences)
        if not proposals:
            return _Attempt(answer, grounded, "it proposed no sentence")
        return _Attempt(answer, grounded, f"none of its {len(proposals)} sentences is backed by the transcript")

    def _insights(
        self, grounded: Grounded, answer: _Answer | None, proposed: int = 0, also: _Answer | None = None
    ) -> Insights:
        """What is kept of ``answer``; ``proposed``: sentences another answer proposed; ``also``: another answer
        whose topics count after this one's (the simpler request's answer may name none, or the first's be lost)."""
        proposals = [
            t
            for a in (answer, also)
            if a is not None
            for t in _topics(a, self.labels, self.note_lines, self.dictionary)
        ]
        topics, refused = ground_topics(proposals, self.dictionary, self.index)
        if not topics and grounded.kept:
            # Every recording with speech is about something: the owner's name the transcript speaks of most.
            said = [n for n in self.dictionary if any(self.index.says(w) for w in words(n))]
            if said:
                topics = said[:1]
                self.notes.append(f"no topic of the answer kept: {said[0]!r}, the dictionary's most spoken of")
        self.notes += [f"sentence dropped: {d}" for d in grounded.dropped]
        self.notes += [f"topic refused: {r}" for r in refused]
        # In the order the meeting said them (the model's order means nothing; a long meeting's notes already
        # are): a reader follows the brief, and its quotes' times, from the start. A voice note's sentence on what
        # it is about comes first, its points after.
        about = _about(answer, self.labels) if answer is not None else ""
        brief = sorted(grounded.kept, key=lambda q: (q.sentence != about, q.start, q.end))
        return Insights(
            brief=brief,
            topics=topics,
            language=self.language,
            proposed=grounded.proposed + proposed,
            requests=self.requests,
            notes=self.notes,
        )


async def summarize(
    chat: Chat,
    source: Source,
    *,
    sentences: int = 5,
    on_progress: Callable[[float], Awaitable[None]] | None = None,
    answer_tokens: int = ANSWER_TOKENS,
    part_tokens: int = PART_TOKENS,
) -> Insights:
    """The grounded brief and the topics of ``source``, asked of ``chat`` (each answer at most ``answer_tokens``,
    a transcript longer than ``part_tokens`` read in parts; 0: as long as the context holds)."""
    return await _Run(chat, source, sentences, on_progress, answer_tokens, part_tokens).run()


def _picked(answer: _Answer, notes: list[Quoted], limit: int) -> list[Quoted]:
    """The notes whose numbers the answer gives, in the transcript's order, at most ``limit`` (none valid:
    the first ones, so that no brief is lost to a wrong number)."""
    numbers = sorted({n for n in answer.keep if 1 <= n <= len(notes)})
    return [notes[n - 1] for n in numbers][:limit] if numbers else notes[:limit]
