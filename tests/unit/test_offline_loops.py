"""A decoder's loop cut (``sidecar.providers.offline.loops``): the words a batched window wrote again and
again kept once, what a person repeats kept as said."""

from __future__ import annotations

from typing import Any

from sidecar.providers.offline.loops import cut_loops, cut_repeated_sentences

# A window of PF15's English at 0 dB of noise, decoded at the beam of five (its end, as written).
LOOPED = (
    "The crunch of the crunch of wisdom, all in others. "
    + "I do not agree with this association of three new places that have been. " * 12
    + "I do not agree with this association"
)


def words(text: str) -> list[str]:
    return text.split()


def test_a_loop_to_the_windows_end_is_kept_once_and_its_cut_short_copy_goes() -> None:
    assert " ".join(cut_loops(words(LOOPED), str)) == (
        "The crunch of the crunch of wisdom, all in others. "
        "I do not agree with this association of three new places that have been."
    )


def test_a_loop_in_the_middle_is_kept_once_and_what_follows_stays() -> None:
    text = "We met. " + "Send the report to Anna. " * 4 + "Then we left."
    assert " ".join(cut_loops(words(text), str)) == "We met. Send the report to Anna. Then we left."


def test_a_short_run_looping_many_times_is_kept_once() -> None:
    text = "I will see one" + " of the few" * 11
    assert " ".join(cut_loops(words(text), str)) == "I will see one of the few"


def test_what_people_repeat_stays() -> None:
    for said in [
        "No, no, no, no, no, we ship on Friday.",  # a short run, five times
        "Send the report to Anna. Send the report to Anna. Then leave.",  # a phrase said twice
        "я я я думаю, что релиз будет в пятницу",
        "",
    ]:
        assert " ".join(cut_loops(words(said), str)) == said


def test_the_words_times_are_kept_and_the_case_and_punctuation_of_a_copy_do_not_hide_it() -> None:
    timed: list[dict[str, Any]] = []
    for k, w in enumerate(words("Мы договорились. " + "Релиз в пятницу, без отката. релиз в пятницу без отката " * 3)):
        timed.append({"start": k * 0.5, "end": k * 0.5 + 0.4, "word": " " + w})
    kept = cut_loops(timed, lambda w: str(w["word"]))
    assert [w["word"].strip() for w in kept] == "Мы договорились. Релиз в пятницу, без отката.".split()
    assert [w["start"] for w in kept] == [k * 0.5 for k in range(7)]


# Another window of PF15's English at 0 dB of noise: the loop comes back after other words.
RETURNING = (
    "For the B-thing moves to the city to cause the threat to complete the damage. "
    "With that, where I buy a B-port, I'll answer to that subject in the future. Yes. "
    "For the B-thing moves to the city to cause the threat to complete the damage. Yes. "
    "For the b-thing moves to the city to cause the threat to complete the damage "
)


def test_in_a_looping_window_a_sentence_said_again_is_kept_the_first_time_and_short_ones_stay() -> None:
    assert " ".join(cut_repeated_sentences(words(RETURNING), str)) == (
        "For the B-thing moves to the city to cause the threat to complete the damage. "
        "With that, where I buy a B-port, I'll answer to that subject in the future. Yes. Yes."
    )
    timed = [{"word": " " + w, "start": float(k)} for k, w in enumerate(words(RETURNING))]
    kept = cut_repeated_sentences(timed, lambda w: str(w["word"]))
    assert [w["start"] for w in kept] == [float(k) for k in range(31)] + [46.0]


# A window of the bench's Russian voice (its sentences read in shuffled rounds): it compresses past the
# looping ratio, two of its sentences are said twice, and the server's text keeps them as said.
SAID_TWICE = (
    "Моя сестра работает врачом в большой городской больнице. "
    "Поистотравляет состреть его пути через несколько минут. "
    "Завтра будет солнечно и тепло, поэтому возьми с собой воду. "
    "Моя сестра работает врачом в большой городской больнице. "
    "Поистотравляет состреть его пути через несколько минут. "
    "Сегодня утром я пел кофе на кухне и читал новости."
)


def test_a_sentence_said_twice_stays_and_a_third_time_goes() -> None:
    assert " ".join(cut_repeated_sentences(words(SAID_TWICE), str)) == SAID_TWICE
    # Said a third time, it loops: kept the first time only, a copy the window's end cut short counted too.
    once = SAID_TWICE.replace("воду. Моя сестра работает врачом в большой городской больнице.", "воду.")
    assert once.count("Моя сестра") == 1
    third = SAID_TWICE + " Моя сестра работает врачом в большой городской больнице."
    assert " ".join(cut_repeated_sentences(words(third), str)) == once
    cut_short = SAID_TWICE + " Моя сестра работает врачом в большой"
    assert " ".join(cut_repeated_sentences(words(cut_short), str)) == once
