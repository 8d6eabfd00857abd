"""The committed meeting transcripts of known content (PF11) and how a brief is scored on them."""

from __future__ import annotations

import pytest

from testkit.meetings import LANGUAGES, Decision, hour, sittings, ten_minutes


@pytest.mark.parametrize("language", LANGUAGES)
def test_six_sittings_timed_in_order_make_an_hour(language: str) -> None:
    parts = sittings(language)
    assert len(parts) == 6
    for part in parts:
        assert 8 <= part.minutes <= 13, part.title
        assert len(part.decisions) == 5
        ends = [0.0]
        for seg in part.segments:
            assert ends[-1] <= seg["start"] < seg["end"]
            assert seg["text"].strip() and seg["speaker"]
            ends.append(seg["end"])
    whole = hour(language)
    assert 58 <= whole.minutes <= 63
    assert len(whole.decisions) == 30
    assert whole.segments[-1]["end"] > parts[-1].segments[-1]["end"]
    assert 1_100 <= ten_minutes(language).words <= 1_500


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_decision_is_said_in_its_sitting_and_found_in_its_own_words(language: str) -> None:
    for part in sittings(language):
        for decision in part.decisions:
            assert decision.found_in(decision.text), decision
            assert any(decision.found_in(s["text"]) for s in part.segments), decision


def test_a_decision_needs_every_group_in_one_sentence() -> None:
    d = Decision("Offline sync moves to 3.3", (("offline",), ("3 3", "later", "cut")))
    assert d.found_in("Offline sync was cut from the release.")
    assert d.found_in("The team moved offline sync to release 3.3.")
    assert not d.found_in("Offline sync was discussed at length.")
    assert not d.found_in("The release 3.2 ships with 3 known bugs and 3 fixes.")  # "3 3" must be adjacent
    assert ten_minutes("en").found(["Offline sync was discussed.", "It moves later."]) == []


def test_keywords_are_word_beginnings_whatever_the_case_and_yo() -> None:
    d = Decision("Двух стажёров", (("стажер",), ("двух", "вместо")))
    assert d.found_in("Решили взять ДВУХ СТАЖЁРОВ.")
    assert not d.found_in("Решили взять двух внештатных сотрудников.")
    assert not Decision("x", (("app store",),)).found_in("the app is in the store")
