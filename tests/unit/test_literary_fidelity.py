"""The fidelity check (``sidecar.literary.fidelity``), pure code: what a model's corrected paragraph may not
change of its source, in Russian and in English, and what it may (a misheard word, a dictionary's name)."""

from __future__ import annotations

import pytest

from sidecar.literary.fidelity import known_names, refusal

EN = "We decided that Anna will not ship the billing page before Friday, and 12 people agreed."
RU = "Мы решили, что Анна не будет выпускать страницу оплаты до пятницы, и 12 человек согласились."


@pytest.mark.parametrize(
    ("language", "source", "corrected", "reason"),
    [
        # An invented number: a digit changed, a number added, a number word said as digits.
        ("en", EN, EN.replace("12", "13"), "a number changed: 12 → 13"),
        ("en", "Two of us agreed.", "Two of us agreed, 5 times.", "a number added: 5"),
        ("en", "We need five servers.", "We need 5 servers.", "a number changed: five → 5"),
        ("ru", RU, RU.replace("12", "21"), "a number changed: 12 → 21"),
        ("ru", "Договор подписан на пять лет.", "Договор подписан на шесть лет.", "a number changed: пять → шесть"),
        ("ru", "Нужно три сервера.", "Нужно 3 сервера.", "a number changed: три → 3"),
        # A changed name, inside a sentence and at its start (known as a name elsewhere in the transcript).
        ("en", EN, EN.replace("Anna", "Hannah"), "a name not in the source or the dictionary: Hannah (was Anna)"),
        ("ru", RU, RU.replace("Анна", "Аня"), "a name not in the source or the dictionary: Аня (was Анна)"),
        ("ru", RU, RU.replace("Анна ", ""), "a name dropped: Анна"),
        # A dropped (or added) negation.
        ("en", EN, EN.replace("will not", "will"), "a negation dropped: not"),
        ("en", "Anna won't ship it.", "Anna will ship it.", "a negation dropped: n't"),
        (
            "en",
            "It is possible by Friday.",
            "It is impossible by Friday.",
            "a negation changed: 'possible' → 'impossible'",
        ),
        ("ru", RU, RU.replace("не будет", "будет"), "a negation dropped: не"),
        ("ru", "Это возможно сделать.", "Это невозможно сделать.", "a negation changed: 'возможно' → 'невозможно'"),
        ("ru", "Он пришёл вовремя.", "Он не пришёл вовремя.", "a negation added: не"),
    ],
)
def test_the_check_refuses_what_changes_the_meaning(language: str, source: str, corrected: str, reason: str) -> None:
    assert refusal(source, corrected, language) == reason


def test_a_word_at_a_sentences_start_is_held_as_a_name_unless_the_transcript_writes_it_in_lower_case() -> None:
    known = known_names(["Yesterday Anna said so."])
    assert refusal("Anna will ship it.", "Hannah will ship it.", "en", known=known) == (
        "a name not in the source or the dictionary: Hannah (was Anna)"
    )
    known_ru = known_names(["Вчера Анна так сказала."])
    assert refusal("Анна выпустит это.", "Аня выпустит это.", "ru", known=known_ru) == (
        "a name not in the source or the dictionary: Аня (was Анна)"
    )
    # Without that, a sentence's capitalized first word is held as a name; one the transcript writes in lower
    # case is a common word, and may be mended ("Their" misheard for "There").
    assert refusal("Their is a problem.", "There is a problem.", "en") == (
        "a name not in the source or the dictionary: There (was Their)"
    )
    known = known_names(["Yesterday Anna said so, and their car is there."])
    assert refusal("Their is a problem.", "There is a problem.", "en", known=known) is None


@pytest.mark.parametrize(
    ("language", "source", "corrected"),
    [
        ("en", "The whether is nice and we ship at noon.", "The weather is nice and we ship at noon."),
        ("en", "We deploy it on cuber netties every day.", "We deploy it on Kubernetes every day."),
        ("en", "Anna said: ship it!", "Anna said, ship it."),  # punctuation and case are not changes
        ("ru", "Мы запустили кубер нетис вчера вечером.", "Мы запустили Kubernetes вчера вечером."),
        (
            "ru",
            "Мы обсудили новый релис в понедельник, все согласны.",
            "Мы обсудили новый релиз в понедельник, все согласны.",
        ),
        ("ru", "Анна напишет заметки к пятнице.", "Анна напишет заметки к пятнице."),
    ],
)
def test_a_misheard_word_and_a_dictionary_name_may_be_mended(language: str, source: str, corrected: str) -> None:
    assert refusal(source, corrected, language, dictionary=["Kubernetes", "Billing"]) is None


def test_a_name_mended_to_the_dictionarys_spelling_is_kept_and_another_is_not() -> None:
    source = "We moved the cluster to Cubernetes last week."
    assert refusal(source, "We moved the cluster to Kubernetes last week.", "en", dictionary=["Kubernetes"]) is None
    assert refusal(source, "We moved the cluster to Nomad last week.", "en", dictionary=["Kubernetes", "Nomad"]) == (
        "a name changed: Cubernetes → Nomad"
    )


def test_added_words_a_rewrite_and_too_many_changes_are_refused() -> None:
    source = "the meeting starts at noon and we talk about the budget for the next quarter"
    assert refusal(source, source.replace("at noon", "at noon sharp"), "en") == "words added: 'sharp'"
    assert refusal(source, source.replace(" next", ""), "en") == "words dropped: 'next'"
    assert (
        refusal(source, source.replace("budget", "weather"), "en") == "'budget' → 'weather' reads unlike what was heard"
    )
    many = "the meting stats at nun and wee tack about the budge for the nest quarter"
    assert refusal(many, source, "en") == "7 of 15 words changed (at most 3)"
    assert refusal("тут", "", "ru") == "the model's paragraph is empty"


def test_a_word_the_recording_never_says_is_refused_unless_the_dictionary_has_it() -> None:
    known = known_names(["The route is about eight percent shorter.", "It runs on the whole fleet."])
    source = "The root is about eight percent shorter."
    assert refusal(source, "The route is about eight percent shorter.", "en", known=known) is None
    assert refusal(source, "The road is about eight percent shorter.", "en", known=known) == (
        "a word the recording never says: road"
    )
    assert refusal(source, "The Rout is about eight percent shorter.", "en", dictionary=["Rout"], known=known) is None
    known_ru = known_names(["Новый релиз выходит в пятницу.", "У нас планёрка по релису."])
    assert refusal("У нас планёрка по релису.", "У нас планёрка по релизу.", "ru", known=known_ru) == (
        "a word the recording never says: релизу"
    )


@pytest.mark.parametrize(
    ("source", "corrected", "reason"),
    [
        # What a 1.5B model "fixed" in PF14's hour, every one of them right as heard.
        ("The mobile builds are slow.", "The mobile build are slow.", "only a word's form changed: 'builds' → 'build'"),
        ("I had fourteen meetings.", "I had fourteen meeting.", "only a word's form changed: 'meetings' → 'meeting'"),
        ("The photos move to storage.", "The photos moved to storage.", "only a word's form changed: 'move' → 'moved'"),
        ("The app uploads it.", "The application uploads it.", "only a word's form changed: 'app' → 'application'"),
    ],
)
def test_an_english_word_put_in_another_form_is_refused(source: str, corrected: str, reason: str) -> None:
    assert refusal(source, corrected, "en") == reason


def test_an_english_word_misheard_as_a_sound_alike_or_a_short_one_may_be_mended() -> None:
    for source, corrected in [
        ("I wood not do that.", "I would not do that."),
        ("The revue takes a day.", "The review takes a day."),
        ("Bread an milk.", "Bread and milk."),
        ("What is in scoop?", "What is in scope?"),
    ]:
        assert refusal(source, corrected, "en") is None, (source, corrected)


@pytest.mark.parametrize(
    ("source", "corrected", "reason"),
    [
        # What a 1.5B model "fixed" in PF14's Russian hour, every one of them right as heard.
        (
            "Дежурства по неделям, по два человека.",
            "Дежурства по недели, по два человека.",
            "only a word's form changed: 'неделям' → 'недели'",
        ),
        (
            "Сегодня смотрим отзывы покупателей.",
            "Сегодня смотрим отзывы покупатели.",
            "only a word's form changed: 'покупателей' → 'покупатели'",
        ),
        (
            "Игорь, начни с серверов, это самая большая строка.",
            "Игорь, начни с сервера, это самая большая строка.",
            "only a word's form changed: 'серверов' → 'сервера'",
        ),
        (
            "Пишешь «малоко» — ничего не находится.",
            "Пишешь «мало» — ничего не находится.",
            "a word cut short: 'малоко' → 'мало'",
        ),
        # Both forms stand after their preposition ("в ветки", "в ветке"): which was said is the recording's.
        ("Держи экраны в ветки.", "Держи экраны в ветке.", "only a word's form changed: 'ветки' → 'ветке'"),
    ],
)
def test_a_russian_word_put_in_another_form_is_refused(source: str, corrected: str, reason: str | None) -> None:
    assert refusal(source, corrected, "ru") == reason


@pytest.mark.parametrize(
    ("source", "corrected"),
    [
        # A wrong ending the recognizer wrote, mended: the heard form agrees with nothing beside it.
        ("Маяк на северным берегу.", "Маяк на северном берегу."),
        ("Мы говорили о новым релизе.", "Мы говорили о новом релизе."),
        ("Это важная задачу для нас.", "Это важная задача для нас."),
        ("Пришли к выводом, что всё готово.", "Пришли к выводу, что всё готово."),
        ("Код лежит в отдельной ветки.", "Код лежит в отдельной ветке."),
        # A sound-alike, not another form.
        ("Проверим на тестовом стене.", "Проверим на тестовом стенде."),
    ],
)
def test_a_russian_wrong_ending_or_sound_alike_may_be_mended(source: str, corrected: str) -> None:
    assert refusal(source, corrected, "ru") is None
