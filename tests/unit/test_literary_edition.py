"""The rule-based edition (``sidecar/literary/edition.py``): per language, fillers and stutters out,
sentence case, typography, paragraphs by turn and pause, every paragraph's span and speaker kept."""

from __future__ import annotations

import itertools
import time
from typing import Any

from sidecar.literary.edition import NBSP, clean, edit, render


def seg(start: float, end: float, text: str, speaker: str | None = None, words: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"start": start, "end": end, "text": text}
    if speaker is not None:
        out["speaker"] = speaker
    if words is not None:
        out["words"] = words
    return out


# -- Russian ---------------------------------------------------------------------------


def test_russian_fillers_and_stutters_go_and_nothing_else_changes() -> None:
    got = clean("эм, я я я думаю, что ну-у маяк на северном берегу э светил всю ночь.", "ru")
    assert got == "Я думаю, что маяк на северном берегу светил всю ночь."


def test_russian_filler_variants() -> None:
    assert clean("ээ мы м-м пошли ммм домой эээ", "ru") == "Мы пошли домой"
    # "ну" alone is a word of the sentence, not a filler; "да, да" is said on purpose.
    assert clean("ну пошли. да, да, пошли", "ru") == "Ну пошли. Да, да, пошли"


def test_russian_cut_off_start_is_dropped() -> None:
    assert clean("ко- конечно мы придём", "ru") == "Конечно мы придём"


def test_russian_typography() -> None:
    got = clean('он сказал "завтра" - и ушёл. ёлка осталась', "ru")
    assert got == f"Он сказал «завтра»{NBSP}— и ушёл. Ёлка осталась"
    # A hyphen inside a word is a hyphen.
    assert clean("кто-то пришёл", "ru") == "Кто-то пришёл"


def test_sentence_case_never_lowers_a_letter() -> None:
    assert clean("встреча в Москве. потом в ООО Ромашка? да! и всё", "ru") == (
        "Встреча в Москве. Потом в ООО Ромашка? Да! И всё"
    )


def test_a_filler_that_ended_a_sentence_leaves_its_full_stop() -> None:
    assert clean("мы закончили эм. потом обед", "ru") == "Мы закончили. Потом обед"


# -- English ---------------------------------------------------------------------------


def test_english_fillers_stutters_and_typography() -> None:
    got = clean("uh so I I think, um, we're done er with the \"plan\" and the boys' room", "en")
    assert got == "So I think, we’re done with the “plan” and the boys’ room"


def test_a_phrase_said_twice_at_once_is_said_once() -> None:
    assert clean("let us let us begin. we will, we will see", "en") == "Let us begin. We will see"
    assert clean("я думаю я думаю, что да. Так. Так.", "ru") == "Я думаю, что да. Так. Так."


def test_english_kept_repeats_and_numbers() -> None:
    assert clean("it was very very cold, 12 12 degrees", "en") == "It was very very cold, 12 12 degrees"


def test_other_languages_get_case_and_stutters_only() -> None:
    assert clean('ich ich gehe "heute" - ja', "de") == 'Ich gehe "heute" - ja'


# -- Paragraphs --------------------------------------------------------------------------


def test_paragraphs_by_speaker_turn_keep_span_and_speaker() -> None:
    got = edit(
        [
            seg(0.0, 2.0, "привет всем", "Speaker 1"),
            seg(2.1, 4.0, "начнём", "Speaker 1"),
            seg(4.2, 6.5, "да давайте", "Speaker 2"),
            seg(6.6, 8.0, "эм", "Speaker 1"),
            seg(8.1, 9.0, "хорошо", "Speaker 1"),
        ],
        "ru",
    )
    assert [(p.start, p.end, p.speaker, p.text) for p in got] == [
        (0.0, 4.0, "Speaker 1", "Привет всем начнём"),
        (4.2, 6.5, "Speaker 2", "Да давайте"),
        (6.6, 9.0, "Speaker 1", "Хорошо"),
    ]
    assert render(got) == "Speaker 1: Привет всем начнём\n\nSpeaker 2: Да давайте\n\nSpeaker 1: Хорошо"


def test_paragraphs_by_pause_between_segments_and_between_timed_words() -> None:
    words = [
        {"start": 10.0, "end": 10.4, "word": "first"},
        {"start": 10.5, "end": 11.0, "word": "part."},
        {"start": 14.0, "end": 14.5, "word": "second"},
        {"start": 14.6, "end": 15.0, "word": "part."},
    ]
    got = edit(
        [
            seg(0.0, 1.0, "hello."),
            seg(1.5, 3.0, "still here."),
            seg(5.5, 7.0, "later on."),
            seg(10.0, 15.0, "first part. second part.", words=words),
        ],
        "en",
    )
    assert [(p.start, p.end, p.text) for p in got] == [
        (0.0, 3.0, "Hello. Still here."),
        (5.5, 7.0, "Later on."),
        (10.0, 11.0, "First part."),
        (14.0, 15.0, "Second part."),
    ]
    assert all(p.speaker is None for p in got)


def test_a_long_paragraph_ends_at_a_sentence_end() -> None:
    sentence = "this is a sentence of the meeting that goes on."
    got = edit([seg(i, i + 0.9, sentence) for i in range(40)], "en", max_chars=200)
    assert len(got) > 1
    assert all(len(p.text) < 400 for p in got)
    assert all(p.text.endswith(".") for p in got)
    assert got[0].start == 0 and got[-1].end == 39.9
    # Spans follow each other without a gap or an overlap: nothing was lost.
    assert all(a.end < b.start for a, b in itertools.pairwise(got))
    assert sum(p.text.count("sentence") for p in got) == 40


def test_segments_with_times_that_are_none_keep_their_words() -> None:
    got = edit(
        [
            {"start": "abc", "end": None, "text": "first words."},
            {"start": 1.0, "end": float("nan"), "text": "second words.", "words": [{"word": "second", "start": "x"}]},
            "not a segment",
        ],
        "en",
    )
    assert [(p.start, p.end, p.text) for p in got] == [(0.0, 1.0, "First words. Second words.")]


def test_an_empty_or_silent_transcript_gives_no_paragraph() -> None:
    assert edit([], "ru") == []
    assert edit([seg(0, 1, "эм"), seg(1, 2, "  "), seg(3, 4, "м-м")], "ru") == []
    assert render([]) == ""


def test_an_hour_is_edited_in_well_under_two_seconds() -> None:
    line = "ну-у я я думаю, что эм маяк на северном берегу светил - всю ночь"
    segments = [seg(i * 4.0, i * 4.0 + 3.5, line, f"Speaker {i // 20 % 3 + 1}") for i in range(900)]
    began = time.perf_counter()
    got = edit(segments, "ru")
    took = time.perf_counter() - began
    assert got and took < 2.0
