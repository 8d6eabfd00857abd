"""Whether a quote supports the sentence beside it.

A small model writes a sentence and puts beside it a quote the transcript
does say, but one that says something else (measured, Qwen2.5-Coder-1.5B:
"The meeting is about the release date." beside "This is the planning
meeting for Routewise 3.2, and we have about ten"). The quote's
neighbourhood — the transcript's sentence(s) it is in, the speakers who said
them (``Indexed.around``) — must say what the sentence says:

- every number the sentence writes in digits, and every name it gives (a
  capitalised word not at its start), is said there;
- more than ``MIN_SHARE`` of its other content words are said there (a
  paraphrase keeps most of its words: "moved" → "rescheduled" is fine,
  a sentence about something else keeps almost none);
- what one of them negates, the other does not say without negation ("we
  will not ship on Friday" does not support "We ship on Friday").

Words are compared by their beginnings (``same_word``), not by a stemmer:
Russian inflection changes the end of a word ("Игорь"/"Игорю",
"релиз"/"релизу"), and the languages the service takes are many. Words of
no content (articles, pronouns, auxiliaries, the verbs a summary reports
with: "mentions", "говорит") are left out in English and Russian; in other
languages every word counts, which asks more of a paraphrase, never less.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["MIN_SHARE", "content_words", "negated", "same_word", "unsupported"]

# More than this share of a sentence's content words must be said in its quote's neighbourhood (measured on the
# small model's real answers, tests/data/insights/answers.json: its paraphrases and copies say 60 % to 100 % of
# their words there, its sentence beside a passage that says something else 33 %).
MIN_SHARE = 0.5
# Words this short say little alone (and a prefix of one matches too much).
_SHORTEST = 3
_WORD = re.compile(r"\w+", re.UNICODE)

_NO_CONTENT = frozenset(
    """
    the and but nor for yet are was were been being has have had does did done will would shall should can could
    may might must need needs this that these those there here then than with from into onto about over under
    after before again also just only very some any all each every more most such own same too out off its our
    ours your yours his her hers him she they them their theirs what which who whom whose when where why how
    not per via due let lets get got gets one ones until till since within during while because though although
    whether either neither both upon among against toward towards

    say says said saying tell tells told mention mentions mentioned note notes noted state states stated
    explain explains explained discuss discusses discussed talk talks talked speak speaks spoke speaker speakers
    suggest suggests suggested

    как что это этот эта эти это того тому тем том так там тут где когда если или либо уже еще ещё очень только
    также тоже при про над под для без через после перед между все всё весь вся всех всем они оно она его ему
    ней нем них нас вас нам вам мне меня тебя тебе себя свой своя свои было были была быть будет будут есть
    чтобы потому поэтому тогда вот ведь даже надо нужно можно который которая которые которое пока хотя если

    говорит говорят сказал сказала сказали отметил отметила отметили упомянул упомянула упомянули сообщил
    сообщила сообщили обсудили обсуждают предложил предложила предложили спикер
    """.replace("ё", "е").split()
)
# Words that deny what follows them.
_NEGATORS = frozenset({"not", "no", "never", "cannot", "не", "нет", "ни", "никогда", "нельзя"})
# Prefixes that deny the word they start ("disagree" says "do not agree"): such a word is said where its rest is.
_DENYING_PREFIXES = ("dis", "non", "un", "не")
# A negation reaches the first content word among the next few ("do not be late": late).
_NEGATION_REACH = 3


def _fold(word: str) -> str:
    return word.casefold().replace("ё", "е")


def same_word(a: str, b: str) -> bool:
    """Whether two folded words are one word, inflected or not: they begin alike for all but the shorter one's
    last letter, at least three letters, at most five ("игорь"/"игорю", "date"/"dates", "report"/"reported")."""
    shorter = min(len(a), len(b))
    need = max(_SHORTEST, min(shorter - 1, 5))
    return shorter >= need and a[:need] == b[:need]


def _said(word: str, among: Iterable[str]) -> bool:
    return any(same_word(word, w) for w in among)


def _said_or_denied(word: str, among: Sequence[str]) -> bool:
    """Whether ``word`` is said ``among`` those words, or its rest after a denying prefix is."""
    if _said(word, among):
        return True
    return any(
        word.startswith(p) and len(word) - len(p) >= _SHORTEST and _said(word[len(p) :], among)
        for p in _DENYING_PREFIXES
    )


def _is_negator(words: Sequence[str], i: int) -> bool:
    # English contractions split at the apostrophe: "don't" is "don", "t".
    return words[i] in _NEGATORS or (words[i] == "t" and i > 0 and words[i - 1].endswith("n"))


def _names(sentence: str, tokens: Sequence[re.Match[str]]) -> list[str]:
    """The words of ``sentence`` that are names: capitalised, not all capitals, not where a sentence starts."""
    out = []
    for k in range(1, len(tokens)):
        token, before = tokens[k].group(), sentence[tokens[k - 1].end() : tokens[k].start()]
        if token[:1].isupper() and not token.isupper() and not any(c in before for c in ".!?…"):
            out.append(token)
    return out


def content_words(words: Iterable[str]) -> list[str]:
    """The folded words that carry content: no digits (numbers are checked apart), none shorter than three
    letters, none of the English or Russian words of no content."""
    return [w for w in words if len(w) >= _SHORTEST and not w.isdigit() and w not in _NO_CONTENT]


def negated(words: Sequence[str]) -> list[str]:
    """The content words ``words`` (folded, in order) negate."""
    out = []
    for i in range(len(words)):
        if not _is_negator(words, i):
            continue
        for w in words[i + 1 : i + 1 + _NEGATION_REACH]:
            if content_words([w]):
                out.append(w)
                break
    return out


def unsupported(sentence: str, near: Sequence[str], speakers: Iterable[str] = ()) -> str | None:
    """Why the words ``near`` (folded, in order: the quote's neighbourhood) do not support ``sentence``,
    or None when they do. ``speakers``: the folded words of who said them."""
    found_tokens = list(_WORD.finditer(sentence))
    said = [_fold(m.group()) for m in found_tokens]
    heard = [*near, *speakers]
    for number in (w for w in said if w.isdigit()):
        if number not in near:
            return f"the number {number} is not said there"
    for name in _names(sentence, found_tokens):
        if not _said(_fold(name), heard):
            return f"the name {name!r} is not said there"
    content = content_words(said)
    if content:
        found = [w for w in content if _said_or_denied(w, heard)]
        if len(found) <= MIN_SHARE * len(content):
            missing = [w for w in content if w not in found]
            return f"it says {len(found)} of the sentence's {len(content)} words; not {', '.join(missing[:4])}"
    denied_there, denied_here = negated(near), negated(said)
    for w in denied_there:
        if _said(w, content) and not _said(w, denied_here):
            return f"it says not {w!r}"
    for w in denied_here:
        if _said(w, near) and not _said(w, denied_there):
            return f"it says {w!r}, the sentence not"
    return None
