"""From a transcript to a grounded brief and topics, in requests that each fit the model's context.

A transcript that fits is one request. A longer one (a six-hour meeting) is
read in parts, each within the context: each part gives notes (sentences with
quotes, checked against the whole transcript at once, so nothing ungrounded
travels on), then the notes give the brief of the whole, in as many rounds as
they need to fit. The final answer is checked again (``grounding``): what is
kept is what the transcript says.

Every answer is parsed against the schema; one that is not that JSON is asked
for once more, then the step halts ``unparsable_answer``. A brief not in the
transcript's language is asked for once more, then dropped (topics kept).
A request the server says is too long for its context makes the parts smaller.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from sidecar.insights import parts as cutting
from sidecar.insights.chat import ContextExceeded
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
)
from sidecar.insights.prompt import answer_schema, line_of, messages_for, without_times
from sidecar.outcome import HaltCode, PermanentError

__all__ = ["Chat", "Engine", "Insights", "Source", "summarize"]

log = logging.getLogger("transcriber.insights")

# Tokens kept for the answer, and for the instructions and the JSON around the data.
ANSWER_TOKENS = 1024
OVERHEAD_TOKENS = 700
# The dictionary takes at most this share of what a request may hold.
DICTIONARY_SHARE = 0.2
NOTES_PER_PART = 5


class Chat(Protocol):
    name: str
    who: str
    model: str
    context_tokens: int

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

    @property
    def text(self) -> str:
        return " ".join(q.sentence for q in self.brief)


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


def _topics(answer: _Answer) -> list[TopicProposal]:
    out = []
    for t in answer.topics:
        out.append(TopicProposal(t) if isinstance(t, str) else TopicProposal(t.name, without_times(t.quote)))
    return out


def _proposals(answer: _Answer) -> list[Proposal]:
    return [Proposal(s.sentence, without_times(s.quote)) for s in answer.brief]


class _Run:
    def __init__(
        self,
        chat: Chat,
        source: Source,
        sentences: int,
        on_progress: Callable[[float], Awaitable[None]] | None,
        answer_tokens: int = ANSWER_TOKENS,
    ) -> None:
        self.chat = chat
        self.answer_tokens = answer_tokens
        self.index = Indexed(source.text, source.segments)
        self.language = source.language or detect_language(source.text)
        self.dictionary = rank_dictionary(source.topics, self.index)
        self.sentences = sentences
        self.schema = answer_schema(sentences)
        self.on_progress = on_progress
        self.requests = 0
        self.notes: list[str] = []
        segs = [s for s in source.segments if str(s.get("text", "")).strip()]
        if segs:
            self.lines = [line_of(float(s.get("start") or 0), str(s["text"])) for s in segs]
        else:
            self.lines = [line_of(0, p) for p in re.split(r"(?<=[.!?…])\s+", source.text) if p.strip()]

    async def ask(self, messages_of: Callable[[bool, bool], list[dict[str, str]]]) -> _Answer:
        """One answer parsed; a second request if the first was not the JSON asked for."""
        for again in (False, True):
            self.requests += 1
            content = await self.chat.complete(messages_of(False, again), self.schema, self.answer_tokens)
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
        """Tokens the data of one request may take."""
        return self.chat.context_tokens - self.answer_tokens - OVERHEAD_TOKENS

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
        parts = await self.parts(self.lines, room)
        if len(parts) <= 1:
            final = await self._final(
                lambda firm, again: self._messages(parts[0] if parts else [], dictionary, firm, again)
            )
            return final
        notes: list[dict[str, Any]] = []
        for i, part in enumerate(parts, 1):
            answer = await self.ask(functools.partial(self._part_messages, part, dictionary, (i, len(parts))))
            kept = ground_brief(_proposals(answer), self.index, limit=NOTES_PER_PART)
            notes += [
                {"time": line_of(q.start, "").strip(), "sentence": q.sentence, "quote": q.quote} for q in kept.kept
            ]
            if self.on_progress is not None:
                await self.on_progress(i / (len(parts) + 1))
        return await self._reduce(notes, dictionary, room)

    def _part_messages(
        self, lines: list[str], dictionary: list[str], part: tuple[int, int], firm: bool, again: bool
    ) -> list[dict[str, str]]:
        return messages_for(
            lines=lines,
            dictionary=dictionary,
            language=self.language,
            sentences=NOTES_PER_PART,
            part=part,
            retry_json=again,
        )

    def _notes_messages(
        self, notes: list[dict[str, Any]], dictionary: list[str], sentences: int, firm: bool, again: bool
    ) -> list[dict[str, str]]:
        return messages_for(
            notes=notes,
            dictionary=dictionary,
            language=self.language,
            sentences=sentences,
            firm_language=firm,
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

    async def _reduce(self, notes: list[dict[str, Any]], dictionary: list[str], room: int) -> Insights:
        """Notes of many parts, combined in rounds until they fit one request."""
        while True:
            groups = [group for group, _ in await cutting.groups(notes, room, self.tokens)] or [[]]
            if len(groups) == 1:
                return await self._final(functools.partial(self._notes_messages, groups[0], dictionary, self.sentences))
            combined: list[dict[str, Any]] = []
            for group in groups:
                answer = await self.ask(functools.partial(self._notes_messages, group, dictionary, NOTES_PER_PART))
                kept = ground_brief(_proposals(answer), self.index, limit=NOTES_PER_PART)
                combined += [
                    {"time": line_of(q.start, "").strip(), "sentence": q.sentence, "quote": q.quote} for q in kept.kept
                ]
            if len(combined) >= len(notes):
                combined = combined[: max(1, len(notes) // 2)]
            notes = combined

    async def _final(self, messages_of: Callable[[bool, bool], list[dict[str, str]]]) -> Insights:
        answer = await self.ask(lambda firm, again: messages_of(False, again))
        proposals = _proposals(answer)
        if proposals and not in_language(" ".join(p.sentence for p in proposals), self.language):
            self.notes.append(f"the brief was not in {self.language}; asked again")
            answer_again = await self.ask(lambda firm, again: messages_of(True, again))
            again_proposals = _proposals(answer_again)
            if again_proposals and not in_language(" ".join(p.sentence for p in again_proposals), self.language):
                self.notes.append(f"the brief was again not in {self.language}: no brief")
                proposals = []
            else:
                answer, proposals = answer_again, again_proposals
        grounded: Grounded = ground_brief(proposals, self.index, limit=self.sentences)
        topics, refused = ground_topics(_topics(answer), self.dictionary, self.index)
        self.notes += [f"sentence dropped: {d}" for d in grounded.dropped]
        self.notes += [f"topic refused: {r}" for r in refused]
        return Insights(
            brief=grounded.kept,
            topics=topics,
            language=self.language,
            proposed=grounded.proposed,
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
) -> Insights:
    """The grounded brief and the topics of ``source``, asked of ``chat`` (each answer at most ``answer_tokens``)."""
    return await _Run(chat, source, sentences, on_progress, answer_tokens).run()
