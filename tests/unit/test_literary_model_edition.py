"""The model edition (``sidecar.literary.model_edition``) against a fake engine: a misheard word mended with
the paragraph's time span and speaker kept; an answer that is garbage, in another language, invents a
number or does not come in time leaves the rules' paragraph and says why; a model that keeps failing is
not asked again; a long transcript is asked paragraph by paragraph in bounded requests, each paragraph
handed on before the next is asked. And the literary step on the twin: the reasons in the paragraphs,
the journal and the outcome; no model (or ``proofread = false``) leaves the rule-based step as it was."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from sidecar.insights.offline import EngineFailed
from sidecar.literary.doubtful import doubtful
from sidecar.literary.edition import Paragraph
from sidecar.literary.model_edition import FAILURES_IN_A_ROW, Edition, edition, proofread
from sidecar.outcome import Advance, CredentialsRefused, RetryableError, StepResult, Verdict
from sidecar.pipeline.pool import WorkerPool
from sidecar.serving.assembly import pipeline
from sidecar.settings import InsightsSettings
from sidecar.steps import insights, literary
from sidecar.steps.base import Step, StepContext
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import Claimed
from tests.support.fakes import StubProvider
from tests.support.sidecar import twin_settings

pytestmark = pytest.mark.anyio

Messages = list[dict[str, str]]
Answer = Callable[[str], Any]  # the paragraph asked about → the answer's JSON, its text, or an exception


class FakeChat:
    """A chat that answers by the paragraph asked about; it keeps every request."""

    name = "fake"
    who = "the fake model"
    model = "fake-model"
    parallel = 1

    def __init__(self, answer: Answer, *, context: int = 8192, delay: float = 0.0) -> None:
        self.answer = answer
        self.context_tokens = context
        self.delay = delay
        self.requests: list[Messages] = []

    async def complete(self, messages: Messages, schema: dict[str, Any], max_tokens: int) -> str:
        self.requests.append(messages)
        await anyio.sleep(self.delay)
        out = self.answer(json.loads(messages[-1]["content"])["paragraph"])
        if isinstance(out, BaseException):
            raise out
        return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)

    async def count_tokens(self, text: str) -> int:
        return len(text) // 3 + 1


class FakeEngine:
    name = "fake"

    def __init__(self, chat: FakeChat, *, fails_to_start: bool = False) -> None:
        self.chat = chat
        self.fails_to_start = fails_to_start
        self.opened = 0

    @asynccontextmanager
    async def open(self) -> AsyncIterator[FakeChat]:
        self.opened += 1
        if self.fails_to_start:
            raise EngineFailed("the offline engine could not load model.gguf: not a GGUF file")
        yield self.chat


def fixes(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"fixes": [{"heard": h, "meant": m} for h, m in pairs]}


EN = [
    Paragraph(0.0, 9.5, "Speaker 1", "The whether is nice, so we ship the billing page on Friday."),
    Paragraph(10.0, 14.0, "Speaker 2", "Anna will not write the 3 release notes on the weather."),
]
RU = [
    Paragraph(0.0, 6.0, "Speaker 1", "Мы обсудили новый релис и решили выпустить его в пятницу."),
    Paragraph(7.0, 12.0, "Speaker 2", "Анна не будет писать 3 заметки про релиз."),
]


async def all_of(chat: FakeChat, paragraphs: list[Paragraph], language: str, **kw: Any) -> list[Any]:
    return [p async for p in proofread(chat, paragraphs, language, ["Billing", "Kubernetes"], **kw)]


async def test_a_misheard_word_is_mended_and_every_paragraph_keeps_its_time_span_and_speaker() -> None:
    chat = FakeChat(lambda p: fixes(("whether", "weather")) if "whether" in p else fixes())
    out = await all_of(chat, EN, "en")
    assert [p.as_json() for p in out] == [
        {
            "start": 0.0,
            "end": 9.5,
            "speaker": "Speaker 1",
            "text": "The weather is nice, so we ship the billing page on Friday.",
            "proofread": "model",
        },
        {**EN[1].as_json(), "proofread": "model"},
    ]
    assert out[0].changed and not out[1].changed
    # Each request: the paragraph, the one before as it came out, the owner's dictionary.
    second = json.loads(chat.requests[1][-1]["content"])
    assert second["before"] == "The weather is nice, so we ship the billing page on Friday."
    assert second["dictionary"] == ["Billing", "Kubernetes"]
    assert "English" in chat.requests[0][0]["content"]


async def test_a_russian_paragraph_is_mended_in_russian() -> None:
    chat = FakeChat(lambda p: fixes(("релис", "релиз")) if "релис" in p else fixes())
    out = await all_of(chat, RU, "ru")
    assert out[0].paragraph.text == "Мы обсудили новый релиз и решили выпустить его в пятницу."
    assert (out[0].paragraph.start, out[0].paragraph.end, out[0].paragraph.speaker) == (0.0, 6.0, "Speaker 1")
    assert "Russian" in chat.requests[0][0]["content"]


async def test_a_word_no_dictionary_knows_is_shown_beside_the_recordings_word_that_reads_like_it() -> None:
    chat = FakeChat(lambda p: fixes())
    await all_of(chat, RU, "ru")
    # "релис" is no Russian word; the recording says "релиз" in the next paragraph.
    first, second = (json.loads(r[-1]["content"]) for r in chat.requests)
    assert first["doubtful"] == [{"word": "релис", "said elsewhere": "релиз"}]
    assert "doubtful" not in second  # every word of it is a dictionary's
    assert '"doubtful"' in chat.requests[0][0]["content"]


def test_doubtful_words_are_only_unknown_lower_case_words_with_a_known_sound_alike() -> None:
    said = {"релиз", "релиза", "стенде", "стене", "колоска", "колосок", "дата"}
    assert doubtful("Дата релиса, стене и Колоска.", said, "ru") == [("релиса", "релиза")]
    assert doubtful("Дата релиса.", {"дата", "релиса"}, "ru") == []  # nothing like it said
    assert doubtful("The relese date.", {"release", "date"}, "en") == []  # no dictionary at hand


@pytest.mark.parametrize(
    ("source", "answer", "reason"),
    [
        (EN[0], "Sure! The paragraph looks fine to me.", "the model's answer was not the JSON asked for"),
        (EN[0], '{"fixes": "none"}', "the model's answer was not the JSON asked for"),
        (EN[0], fixes(("whether", "погода")), "the model's words are not in English"),
        (RU[0], fixes(("релис", "release")), "the model's words are not in Russian"),
        (EN[1], fixes(("3", "4")), "a number changed: 3 → 4"),
        (RU[1], fixes(("Анна", "Аня")), "a name not in the source or the dictionary: Аня (was Анна)"),
        (RU[1], fixes(("не будет", "будет")), "a negation dropped: не"),
        (
            EN[0],
            fixes(("billing page", "invoice screen")),
            "'billing page' → 'invoice screen' reads unlike what was heard",
        ),
    ],
)
async def test_an_answer_that_fails_leaves_the_rules_paragraph_and_says_why(
    source: Paragraph, answer: Any, reason: str
) -> None:
    language = "ru" if source in RU else "en"
    out = await all_of(FakeChat(lambda p: answer), [source], language)
    assert (out[0].paragraph, out[0].by, out[0].reason) == (source, "rules", reason)
    assert out[0].as_json() == {**source.as_json(), "proofread": "rules", "reason": reason}


async def test_each_fix_is_kept_only_if_the_paragraph_still_passes_the_check() -> None:
    answer = fixes(
        ("whether", "weather"),  # misheard: kept
        ("nice", "nice"),  # no change: passed over
        ("the cat", "the dog"),  # words the paragraph does not have: passed over
        ("Friday", "Monday"),  # a name changed: refused, the rest stays
        ("so we", "so"),  # words dropped: refused
    )
    out = await all_of(FakeChat(lambda p: answer if "whether" in p else fixes()), EN, "en")
    assert (out[0].by, out[0].changed, out[0].reason) == ("model", True, "")
    assert out[0].paragraph.text == "The weather is nice, so we ship the billing page on Friday."


async def test_a_model_that_does_not_answer_in_time_leaves_the_rules_paragraph_with_the_reason() -> None:
    chat = FakeChat(lambda p: fixes(), delay=5)
    with anyio.fail_after(3):
        out = await all_of(chat, EN[:1], "en", answer_within=0.05)
    assert (out[0].by, out[0].reason) == ("rules", "no answer from the model within 0.05 s")
    assert out[0].paragraph == EN[0]


async def test_a_model_that_keeps_failing_is_not_asked_again() -> None:
    chat = FakeChat(lambda p: RetryableError("the chat server at chat.test answered 503"))
    paragraphs = [Paragraph(i * 5.0, i * 5.0 + 4, None, f"Point {i} is done.") for i in range(8)]
    out = await all_of(chat, paragraphs, "en")
    assert len(chat.requests) == FAILURES_IN_A_ROW
    assert [p.by for p in out] == ["rules"] * 8
    assert out[0].reason == "the model could not be asked: the chat server at chat.test answered 503"
    assert out[-1].reason == (
        "not asked: the model failed (3 paragraphs in a row), the last time: "
        "the model could not be asked: the chat server at chat.test answered 503"
    )


async def test_refused_credentials_stop_the_asking_at_once() -> None:
    chat = FakeChat(lambda p: CredentialsRefused("the chat server at chat.test refused our key (401)"))
    out = await all_of(chat, EN, "en")
    assert len(chat.requests) == 1
    assert out[1].reason.startswith("not asked: the model failed, the last time: the model could not be asked: ")


async def test_an_engine_that_cannot_start_leaves_every_paragraph_the_rules_words() -> None:
    engine = FakeEngine(FakeChat(lambda p: fixes()), fails_to_start=True)
    out = await edition(engine, EN, "en")
    assert out.paragraphs == EN
    assert {s["reason"] for s in out.segments} == {
        "not asked: the model's engine failed: the offline engine could not load model.gguf: not a GGUF file"
    }
    assert out.summary == "proofread by fake: 0 corrected, 0 found right, 2 kept as the rules made them (2 not asked)"


async def test_a_long_transcript_is_asked_paragraph_by_paragraph_in_bounded_requests() -> None:
    long = [Paragraph(i * 6.0, i * 6.0 + 5, None, f"Item {i} ships on day {i % 30}. " * 30) for i in range(2000)]
    chat = FakeChat(lambda p: fixes())
    progress: list[float] = []

    async def on_progress(value: float) -> None:
        progress.append(value)

    said = proofread(chat, long, "en", [f"Name {i}" for i in range(1000)], on_progress=on_progress)
    first = await said.__anext__()
    # Handed on before the next paragraph is asked: nothing of the text's answers piles up.
    assert first.paragraph == long[0] and len(chat.requests) == 1
    async for _ in said:
        pass
    assert len(chat.requests) == 2000
    longest = max(sum(len(m["content"]) for m in r) for r in chat.requests)
    assert longest < 2 * len(long[0].text) + 3000  # the paragraph, the end of the one before, part of the dictionary
    assert 90 <= len(progress) <= 101 and progress[-1] == 1.0


# -- the step, on the twin -----------------------------------------------------------------------------------

SEGMENTS: list[dict[str, Any]] = [
    {"start": 0.0, "end": 4.0, "text": "um, the whether is nice so we ship on Friday.", "speaker": "Speaker 1"},
    {"start": 9.0, "end": 12.0, "text": "uh Anna will not write the 3 notes on the weather.", "speaker": "Speaker 2"},
]


def steps(segments: list[dict[str, Any]]) -> dict[str, Step]:
    async def advance(ctx: StepContext) -> StepResult:
        return Advance("test step done")

    async def finalize(ctx: StepContext) -> StepResult:
        await ctx.session.put_text("transcript", " ".join(s["text"] for s in segments), segments, language="en")
        return Advance("transcript stored")

    return {
        "normalize": advance,
        "submit": advance,
        "poll": advance,
        "finalize": finalize,
        "literary": literary.run,
        "insights": insights.run,
    }


@asynccontextmanager
async def model_pool(
    storage: InMemoryStorage, engine: FakeEngine | None, segments: list[dict[str, Any]] = SEGMENTS, **insights: Any
) -> AsyncIterator[WorkerPool]:
    """The real pool on the twin, the model ``engine`` configured (None: none is)."""
    settings = twin_settings()
    if engine is not None:
        settings.insights = InsightsSettings(provider="openai", model="fake-model", **insights)
    chosen = steps(segments)
    async with pipeline(settings, steps=chosen, provider=StubProvider(), storage=storage, insights=engine) as pool:
        yield pool


async def literary_text(pool: WorkerPool, storage: InMemoryStorage, rid: str) -> Verdict:
    leases = pool.runner.table.leases
    while storage.row(rid).state != "done":
        got = await storage.claim(leases(), follow_ups=pool.runner.follow_up_leases())
        assert isinstance(got, Claimed)
        assert await pool.runner.run(got) is Verdict.ADVANCED
    got = await storage.claim(leases(), follow_ups=pool.runner.follow_up_leases())
    assert isinstance(got, Claimed) and got.claim.queue == "literary"
    return await pool.runner.run(got)


async def test_the_step_stores_the_model_edition_with_each_paragraphs_reason_and_tells_the_owner(
    storage: InMemoryStorage,
) -> None:
    rid = storage.add_record()
    storage.dictionaries["sender"] = ["Billing"]

    def answer(paragraph: str) -> Any:
        return fixes(("whether", "weather")) if "whether" in paragraph else fixes(("3", "three"))

    engine = FakeEngine(FakeChat(answer))
    async with model_pool(storage, engine) as pool:
        assert await literary_text(pool, storage, rid) is Verdict.ADVANCED
    text = storage.texts[(rid, "literary")]
    assert text.segments == [
        {
            "start": 0.0,
            "end": 4.0,
            "speaker": "Speaker 1",
            "text": "The weather is nice so we ship on Friday.",
            "proofread": "model",
        },
        {
            "start": 9.0,
            "end": 12.0,
            "speaker": "Speaker 2",
            "text": "Anna will not write the 3 notes on the weather.",
            "proofread": "rules",
            "reason": "a number changed: 3 → three",
        },
    ]
    assert text.content == (
        "Speaker 1: The weather is nice so we ship on Friday.\n\n"
        "Speaker 2: Anna will not write the 3 notes on the weather."
    )
    assert json.loads(engine.chat.requests[0][-1]["content"])["dictionary"] == ["Billing"]
    journal = [(e.stage, e.kind, e.text) for e in storage.journal_of(rid)]
    assert (
        "literary",
        "note",
        "literary: paragraph at 00:09 kept as the rules made it: a number changed: 3 → three",
    ) in (journal)
    assert journal[-1] == (
        "literary",
        "advanced",
        "literary text of 2 paragraphs (proofread by fake (fake-model): 1 corrected, 0 found right, "
        "1 kept as the rules made them (1 a number changed))",
    )
    assert storage.literary_of(rid).progress == 1.0  # type: ignore[union-attr]


async def test_without_a_model_or_with_proofread_off_the_step_stays_rule_based(storage: InMemoryStorage) -> None:
    engine = FakeEngine(FakeChat(lambda p: fixes(("whether", "weather"))))
    for model, proofreads in ((None, True), (engine, False)):
        rid = storage.add_record()
        async with model_pool(storage, model, proofread=proofreads) as pool:
            assert await literary_text(pool, storage, rid) is Verdict.ADVANCED
        text = storage.texts[(rid, "literary")]
        assert text.segments == [
            {"start": 0.0, "end": 4.0, "speaker": "Speaker 1", "text": "The whether is nice so we ship on Friday."},
            {
                "start": 9.0,
                "end": 12.0,
                "speaker": "Speaker 2",
                "text": "Anna will not write the 3 notes on the weather.",
            },
        ]
        assert storage.journal_of(rid)[-1].text == "literary text of 2 paragraphs (rule-based edition)"
    assert engine.opened == 0


async def test_an_empty_transcript_gives_an_empty_text_and_done_without_asking_the_model(
    storage: InMemoryStorage,
) -> None:
    engine = FakeEngine(FakeChat(lambda p: fixes()))
    rid = storage.add_record()
    silent = [{"start": 0.0, "end": 30.0, "text": "", "speaker": None}]
    async with model_pool(storage, engine, silent) as pool:
        assert await literary_text(pool, storage, rid) is Verdict.ADVANCED
    assert storage.texts[(rid, "literary")].content == "" and storage.texts[(rid, "literary")].segments == []
    assert storage.literary_of(rid).state == "done"  # type: ignore[union-attr]
    assert storage.journal_of(rid)[-1].text == "no speech in the transcript: the literary text is empty"
    assert engine.opened == 0


def test_an_editions_summary_counts_the_reasons() -> None:
    out = Edition(provider="offline", model="m.gguf")
    assert out.summary == "proofread by offline (m.gguf): 0 corrected, 0 found right"


async def test_the_rules_text_is_there_to_read_while_the_model_proofreads(storage: InMemoryStorage) -> None:
    rid = storage.add_record()
    seen: list[str] = []

    def answer(paragraph: str) -> Any:
        # Asked about a paragraph, the text stored so far is the rules' (a proofread hour takes minutes).
        text = storage.texts.get((rid, "literary"))
        seen.append(text.content if text is not None else "")
        return fixes(("whether", "weather")) if "whether" in paragraph else fixes()

    async with model_pool(storage, FakeEngine(FakeChat(answer))) as pool:
        assert await literary_text(pool, storage, rid) is Verdict.ADVANCED
    assert seen and all(s.startswith("Speaker 1: The whether is nice") for s in seen)
    assert storage.texts[(rid, "literary")].content.startswith("Speaker 1: The weather is nice")
