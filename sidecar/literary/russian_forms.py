"""Whether a Russian word was only put in another form, and whether that form mends the sentence's grammar.

A recognizer writes Russian words it heard right in the case the speaker said; a small model that
proofreads a paragraph moves some of them into another case ("по неделям" → "по недели", "отзывы
покупателей" → "отзывы покупатели": PF14's hour). But a recognizer's own errors are often a wrong ending
too ("на северным берегу" for "на северном берегу"), and those are what a proofread should mend. The two
are told apart by grammar, with pymorphy3's dictionary (OpenCorpora): a change within one word's forms
is a fix only where the heard form agrees with none of its neighbours, and the new form agrees with one
(an adjective with its noun in case and number, a preposition with the case it takes).
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pymorphy3 is untyped; its parse objects are read through ``_Parse``
    from pymorphy3 import MorphAnalyzer

__all__ = ["known_word", "mends_agreement", "same_word"]

# Cases a preposition takes (the common ones). ``loc2``/``gen2``/``acc2`` are read as their main case.
_PREPOSITION_CASES: dict[str, frozenset[str]] = {
    **{p: frozenset({"loct", "accs"}) for p in ("в", "во", "на")},
    **{p: frozenset({"loct"}) for p in ("о", "об", "обо", "при")},
    **{p: frozenset({"datv"}) for p in ("к", "ко", "благодаря", "согласно", "навстречу")},
    "по": frozenset({"datv", "loct", "accs"}),
    **{p: frozenset({"gent", "ablt", "accs"}) for p in ("с", "со")},
    **{p: frozenset({"ablt", "accs"}) for p in ("за", "под", "подо")},
    **{p: frozenset({"ablt"}) for p in ("над", "надо", "перед", "передо", "между")},
    **{p: frozenset({"accs"}) for p in ("через", "про", "сквозь")},
    **{
        p: frozenset({"gent"})
        for p in (
            "у", "от", "ото", "для", "без", "безо", "из", "изо", "до", "около", "после", "вокруг", "кроме",
            "против", "среди", "мимо", "вместо", "возле", "внутри", "вдоль", "из-за", "из-под",
        )
    },
}  # fmt: skip
_CASE = {"loc2": "loct", "gen2": "gent", "gen1": "gent", "acc2": "accs", "voct": "nomn"}
_ADJECTIVES = frozenset({"ADJF", "PRTF"})
_NOUNS = frozenset({"NOUN", "NPRO"})


# A dictionary reading of a word: (normal form, part of speech, case, number, gender).
_Reading = tuple[str, str | None, str | None, str | None, str | None]


@cache
def _analyzer() -> MorphAnalyzer:
    import pymorphy3  # its dictionary loads in about 0.1 s; only a Russian proofread needs it

    return pymorphy3.MorphAnalyzer()


@lru_cache(maxsize=4096)
def _parses(word: str) -> tuple[_Reading, ...]:
    """Each dictionary reading of ``word`` (a paragraph asks about the same few words again and again)."""
    out: list[_Reading] = []
    for p in _analyzer().parse(word.replace("ё", "е")):
        if not p.is_known:
            continue
        tag = p.tag
        out.append((p.normal_form, tag.POS, _CASE.get(tag.case, tag.case), tag.number, tag.gender))
    return tuple(out)


def same_word(heard: str, meant: str) -> bool:
    """Whether two different Russian words are forms of one dictionary word ("неделям", "недели")."""
    if heard == meant:
        return False
    lemmas = {(form, pos) for form, pos, *_ in _parses(heard)}
    return any((form, pos) in lemmas for form, pos, *_ in _parses(meant))


def _agree(a: _Reading, b: _Reading) -> bool:
    """An adjective and a noun in one case and number (and one gender in the singular)."""
    _, _, case, number, gender = a
    _, _, other_case, other_number, other_gender = b
    if case != other_case or number != other_number:
        return False
    return number == "plur" or gender is None or other_gender is None or gender == other_gender


def _fits(words: list[str], i: int, word: str) -> bool | None:
    """Whether ``word`` at ``words[i]`` fits the grammar around it: some reading in a case its preposition
    takes (the word before it, or the one before an adjective before it) and, for an adjective, agreeing
    with the noun after it, for a noun, with the adjective before it. None: nothing around it to check."""
    before = words[i - 1] if i > 0 else None
    after = words[i + 1] if i + 1 < len(words) else None
    preposition = before if before in _PREPOSITION_CASES else None
    if preposition is None and i > 1 and words[i - 2] in _PREPOSITION_CASES and before is not None:
        if any(pos in _ADJECTIVES for _, pos, *_ in _parses(before)):
            preposition = words[i - 2]
    checked = False
    for reading in _parses(word):
        pos, case = reading[1], reading[2]
        constrained = preposition is not None
        fits = preposition is None or case in _PREPOSITION_CASES[preposition]
        partner = after if pos in _ADJECTIVES else before if pos in _NOUNS else None
        if partner is not None and partner not in _PREPOSITION_CASES:
            kinds = _NOUNS if pos in _ADJECTIVES else _ADJECTIVES
            partners = [r for r in _parses(partner) if r[1] in kinds]
            if partners:
                constrained = True
                fits = fits and any(_agree(reading, r) for r in partners)
        if not constrained:
            return None  # a reading nothing around it can confirm or refute (a verb "правила")
        checked = True
        if fits:
            return True
    return False if checked else None


def mends_agreement(heard: str, words: list[str], i: int) -> bool:
    """Whether ``words[i]`` (a corrected paragraph's lower-case words) put for ``heard`` mends the grammar:
    the heard form fits nothing around it that can be checked, the new one fits ("на северным берегу" →
    "на северном берегу", "в отдельной ветки" → "в отдельной ветке")."""
    return _fits(words, i, heard) is False and _fits(words, i, words[i]) is True


def known_word(word: str) -> bool:
    """Whether ``word`` (lower case) is in the dictionary: a form of some Russian word."""
    return any(p.is_known for p in _analyzer().parse(word.replace("ё", "е")))
