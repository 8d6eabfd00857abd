"""A sentence of the brief is kept only where its quote supports it (``sidecar.insights.support``), tested on
the small model's real answers (tests/data/insights/answers.json, written by ``bench.insights_answers``, each
sentence labelled by hand) read as the insights step reads them, and on sentences of those answers put beside
another of their quotes — a true quote beside a sentence it does not say."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sidecar.insights.compact import short_label
from sidecar.insights.grounding import Indexed, Proposal, ground_brief
from sidecar.insights.summarize import _proposals, parse_answer
from sidecar.insights.support import same_word, unsupported

ANSWERS = Path(__file__).resolve().parents[1] / "data" / "insights" / "answers.json"
CAPTURED: list[dict[str, Any]] = json.loads(ANSWERS.read_text(encoding="utf-8"))["transcripts"]


def index_of(item: dict[str, Any]) -> Indexed:
    segments = item["segments"]
    return Indexed(" ".join(s["text"] for s in segments), segments, item["language"])


def proposals_of(item: dict[str, Any]) -> list[Proposal]:
    """The answers' sentences as the step makes them proposals (speakers' labels off, quotes cut at the limit)."""
    labels = {short_label(s.get("speaker")) for s in item["segments"]} - {""}
    out = []
    for content in item["answers"]:
        answer = parse_answer(content)
        assert answer is not None, content
        out += _proposals(answer, labels)
    return out


@pytest.mark.parametrize("item", CAPTURED, ids=[i["name"] for i in CAPTURED])
def test_the_small_models_sentences_are_kept_or_refused_as_labelled(item: dict[str, Any]) -> None:
    index = index_of(item)
    proposals = proposals_of(item)
    assert [p.sentence for p in proposals] == [label["sentence"] for label in item["labels"]]
    grounded = ground_brief(proposals, index, limit=len(proposals))
    kept = [q.sentence for q in grounded.kept]
    assert kept == [label["sentence"] for label in item["labels"] if label["kept"]], grounded.dropped
    refused = [label["sentence"] for label in item["labels"] if not label["kept"]]
    assert [d.split("': ", 1)[0].strip("'") for d in grounded.dropped] == [s[:80] for s in refused]


def test_a_true_quote_that_says_something_else_is_what_is_refused() -> None:
    """The meeting's refused sentence stands beside a quote the transcript does say: the old check (quote found,
    no invented name or number) kept it; the quote's neighbourhood says nothing of what it claims."""
    meeting = next(i for i in CAPTURED if i["name"] == "en-meeting-start")
    index = index_of(meeting)
    [wrong] = [p for p in proposals_of(meeting) if p.sentence == "The meeting is about the release date."]
    assert index.locate(wrong.quote, cut=wrong.cut) is not None
    assert index.says("release") and index.says("date")  # said in the transcript, not near the quote
    [dropped] = ground_brief([wrong], index, limit=5).dropped
    assert "does not say it" in dropped and "release" in dropped


@pytest.mark.parametrize("item", [i for i in CAPTURED if "note" in i["name"]], ids=lambda i: i["name"])
def test_a_sentence_beside_another_sentences_quote_is_refused(item: dict[str, Any]) -> None:
    """Each clip of a voice note is about something else: every real sentence beside the quote of another
    (shifted by one and by two) is refused, each for what its quote does not say."""
    index = index_of(item)
    proposals = proposals_of(item)
    for shift in (1, 2):
        swapped = [Proposal(p.sentence, proposals[(k + shift) % len(proposals)].quote) for k, p in enumerate(proposals)]
        grounded = ground_brief(swapped, index, limit=len(swapped))
        assert grounded.kept == [], [(q.sentence, q.quote) for q in grounded.kept]
        assert all("does not say it" in d or "is not in the transcript" in d for d in grounded.dropped)


# Sentences written for this test beside the real transcripts' quotes: paraphrases a reader would accept,
# inflected as Russian inflects, and the negations a small model drops or adds.
SAID = [
    (
        "ru-note-a",
        "Пожалуйста, отправьте договор Игорю Смирнову",
        "Договор нужно отправить Игорю Смирнову до конца недели.",
        None,
    ),
    (
        "ru-note-a",
        "Пожалуйста, отправьте договор Игорю Смирнову",
        "Игорь Смирнов получит договор до конца недели.",
        None,
    ),
    ("ru-note-a", "Совещание перенесли на четверг", "Совещание перенесено на четверг: директор в Казани.", None),
    (
        "ru-note-a",
        "Ольга Петровна просила не закрывать отчёт",
        "Ольга Петровна просила закрыть отчёт до пятницы.",
        "not",
    ),
    ("ru-note-a", "Я не согласен с этим решением", "Решение все поддержали.", "words"),
    # A freer paraphrase is refused too: the check errs on the side of showing nothing.
    ("ru-note-b", "Мост через реку закрыт на ремонт до весны", "Мост через реку не закрыт.", "not"),
    ("ru-note-b", "Мост через реку закрыт на ремонт до весны", "Мост закрыли на ремонт до весны.", None),
    (
        "ru-note-b",
        "Бюджет проекта составляет три миллиона рублей",
        "Бюджет проекта составляет 3 миллиона рублей.",
        "number",
    ),
    (
        "en-note-a",
        "Margaret asked us not to close the report",
        "Margaret asked us to close the report before Friday.",
        "not",
    ),
    (
        "en-note-a",
        "Margaret asked us not to close the report",
        "Margaret wants the report kept open until Friday.",
        "words",
    ),
    (
        "en-note-a",
        "Margaret asked us not to close the report",
        "Margaret asked that the report stay open until Friday.",
        None,
    ),
    (
        "en-note-a",
        "Please send the contract to Peter Collins",
        "Please send the contract to Peter Morgan this week.",
        "name",
    ),
    ("en-note-b", "The bridge over the river is closed for repairs", "The bridge isn't closed.", "not"),
    (
        "en-note-b",
        "The flight from Chicago is delayed by forty minutes",
        "The Chicago flight is forty minutes late.",
        None,
    ),
]


@pytest.mark.parametrize(("name", "quote", "sentence", "why"), SAID, ids=[s[2][:40] for s in SAID])
def test_paraphrases_are_kept_and_what_the_quote_does_not_say_is_refused(
    name: str, quote: str, sentence: str, why: str | None
) -> None:
    item = next(i for i in CAPTURED if i["name"] == name)
    grounded = ground_brief([Proposal(sentence, quote)], index_of(item), limit=1)
    if why is None:
        assert [q.sentence for q in grounded.kept] == [sentence], grounded.dropped
    else:
        [dropped] = grounded.dropped
        expected = {"not": "it says", "words": "of the sentence's", "number": "the number", "name": "the name"}[why]
        assert expected in dropped, dropped


def test_words_are_one_word_whatever_their_ending() -> None:
    for a, b in [("игорь", "игорю"), ("релиз", "релизу"), ("date", "dates"), ("report", "reported"), ("bus", "buses")]:
        assert same_word(a, b) and same_word(b, a), (a, b)
    for a, b in [("cat", "car"), ("начнем", "начинаем"), ("agree", "disagree"), ("meeting", "metal")]:
        assert not same_word(a, b), (a, b)
    assert unsupported("We do not ship on Friday.", ["we", "ship", "on", "friday"]) is not None
    assert unsupported("We don't ship on Friday.", ["we", "don", "t", "ship", "on", "friday"]) is None


def test_a_sentence_on_what_the_recording_is_about_is_in_words_of_its_own() -> None:
    """A voice note's "about" and the simpler request's sentence: their quote is only where the recording says it
    best, so their words need not be the quote's; what the transcript never says is refused all the same."""
    note = next(i for i in CAPTURED if i["name"] == "en-note-b")
    index = index_of(note)
    quote = "The bridge over the river is closed for repairs until spring."
    about = Proposal("A note on city news: sales, works and travel.", quote, about=True)
    assert [q.sentence for q in ground_brief([about], index, limit=1).kept] == [about.sentence]
    assert ground_brief([replace(about, about=False)], index, limit=1).kept == []
    invented = Proposal("A note on 3 bridges.", quote, about=True)
    assert ground_brief([invented], index, limit=1).kept == []


def test_the_check_costs_nothing_beside_the_model() -> None:
    """A six-hour transcript without punctuation (one sentence: its neighbourhood is capped) and a brief of
    five sentences: grounded in well under a second."""
    segments: list[dict[str, Any]] = [
        {"start": i * 10.0, "end": i * 10.0 + 9, "text": f"we went through point {i} and agreed to ship part {i} soon"}
        for i in range(2160)
    ]
    index = Indexed(" ".join(s["text"] for s in segments), segments, "en")
    flat = Indexed(" ".join(s["text"] for s in segments), [], "en")
    proposals = [Proposal(f"Part {i} ships soon.", f"agreed to ship part {i} soon") for i in range(0, 2000, 400)]
    started = time.perf_counter()
    for ix in (index, flat):
        assert len(ground_brief(proposals, ix, limit=5).kept) == 5
    assert time.perf_counter() - started < 1.0
