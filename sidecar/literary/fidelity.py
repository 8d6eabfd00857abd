"""The fidelity check: whether a language model's corrected paragraph still says what its source said.

Pure code, no model: a model that proofreads the literary text may mend what the recognizer misheard
and nothing else, and this is where that is decided. The corrected paragraph is compared with its
source span (the rule-based paragraph) and refused, with the reason in words, when

- a **number** is not kept exactly: digits (with their separators) and the language's number words,
  counted ("five" → "5" is refused too: how a number was said stays as it was said);
- a **name** is not kept: one of the source's is missing and no name of the owner's dictionary that
  reads like it took its place, or one appears that is neither the source's nor the dictionary's. A
  name is a capitalized word inside a sentence, a word with a capital or a digit past its first
  letter ("iPhone", "GPT4"), a Latin word in a Cyrillic text, or, at a sentence's start, a capitalized
  word not known as a common one (one the transcript writes in lower case);
- a **negation** is added or dropped (ru не, ни, нет, нельзя, никто…, a word gaining or losing
  "не"/"ни"; en not, no, never, n't, nothing…, a word gaining or losing "un"/"in"/"dis");
- a word is **added** that replaces nothing heard, or **dropped** without a word in its place (a
  misheard word is mended, not taken out), or **more words change** than the bound
  (``MIN_CHANGED`` words, or ``CHANGED_SHARE`` of the paragraph's if more), or a changed stretch
  **reads unlike** what was heard (a misheard word sounds like the right one: their letters alike at
  ``LEAST_LIKENESS`` at least), or, given what the whole transcript says (``known_names``), a word
  comes in that the recording never says and the owner's dictionary does not have;
- (English) a word only **changes its form** — gains or loses an ending (-s, -es, -ed, -ing; -d after e)
  or is lengthened into another word it begins ("app" → "application"): a recognizer mishears a word as
  another that sounds like it ("wood" → "would"), and a model that re-inflects one it heard right
  changes what was said (measured on PF14's hour: "builds" → "build", "meetings" → "meeting", "move"
  → "moved", "app" → "application" were half of the model's fixes, and raised the word errors);
- (Russian) a word only **changes its form** — another form of the same dictionary word ("по неделям" →
  "по недели", "с серверов" → "с сервера": all of the fixes that raised PF14's Russian hour's word
  errors) — unless the heard form breaks the grammar the new one mends ("на северным берегу" → "на
  северном берегу"; ``russian_forms``);
- a word is **cut short** by two letters or more into one it begins («малоко» → «мало»).

Case and punctuation alone are not changes (the rule-based edition set them).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher

from sidecar.literary import russian_forms

__all__ = ["CHANGED_SHARE", "LEAST_LIKENESS", "MIN_CHANGED", "Known", "known_names", "refusal"]

MIN_CHANGED = 2  # words any paragraph may have changed
CHANGED_SHARE = 0.2  # of a longer paragraph's words
LEAST_LIKENESS = 0.4  # letters alike between a changed stretch and what replaced it (difflib's ratio)

# A token: a word with its inner hyphens and apostrophes, or a number with its separators.
_TOKEN = re.compile(r"\d+(?:[.,:/]\d+)*|[^\W\d_]+(?:['’\-][^\W\d_]+)*(?:\d+)?", re.UNICODE)
_DIGITS = re.compile(r"\d+(?:[.,:/]\d+)*")
_SENTENCE_END = re.compile(r"[.!?…][\"'»”’)\]]*\s*$")
_OPENING = re.compile(r"[«\"“„‘(\[]\s*$")
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
_LATIN = re.compile(r"[a-z]", re.IGNORECASE)

_NUMBER_WORDS: dict[str, re.Pattern[str]] = {
    "ru": re.compile(
        r"ноль|нол[яюеь]м?|нул[яюеь]м?|полтор[аы]|"
        r"од(?:ин|на|но|ного|ной|ному|ним|ну|ном|них|ни|ними)|"
        r"дв(?:а|е|ух|ум|умя)|тр(?:и|[её]х|[её]м|емя)|четыр(?:е|[её]х|[её]м|ьмя)|"
        r"(?:пят|шест|девят|десят)(?:ь|и|ью)|(?:сем|восем|восьм)(?:ь|и|ью)|"
        r"(?:одиннадцат|двенадцат|тринадцат|четырнадцат|пятнадцат|шестнадцат|семнадцат|восемнадцат"
        r"|девятнадцат|двадцат|тридцат)(?:ь|и|ью)|сорок[а]?|девяност[оа]|ст[оа]|"
        r"(?:пят|шест|сем|восем|восьм)(?:ь|и)?десят(?:и|ью)?|"
        r"(?:двест|двухсот|трист|трехсот|трёхсот|четырест|четырехсот|четырёхсот)\w*|"
        r"(?:пят|шест|сем|восем|восьм|девят)(?:ь|и)?с[оа]т\w*|"
        r"тысяч\w*|миллион\w*|миллиард\w*|"
        r"перв(?:ый|ая|ое|ые|ого|ой|ому|ым|ых|ую|ом|ыми)|"
        r"втор(?:ой|ая|ое|ые|ого|ому|ым|ых|ую|ом|ыми)|трет(?:ий|ья|ье|ьи|ьего|ьей|ьему|ьим|ьих|ью|ьем)|"
        r"(?:четв[её]рт|пят|шест|седьм|восьм|девят|десят)(?:ый|ой|ая|ое|ые|ого|ому|ым|ых|ую|ом|ыми)"
    ),
    "en": re.compile(
        r"zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
        r"(?:thir|four|fif|six|seven|eigh|nine)teen|(?:twen|thir|for|fif|six|seven|eigh|nine)ty|"
        r"hundred|thousand|million|billion|dozen|half|"
        r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
        r"(?:thir|four|fif|six|seven|eigh|nine)teenth|(?:twen|thir|for|fif|six|seven|eigh|nine)tieth|"
        r"hundredth|thousandth|once|twice|"
        r"(?:twen|thir|for|fif|six|seven|eigh|nine)ty-(?:one|two|three|four|five|six|seven|eight|nine)"
    ),
}

_NEGATIONS: dict[str, frozenset[str]] = {
    "ru": frozenset(
        "не ни нет нельзя никто никого никому никем ничто ничего ничему ничем никогда нигде никуда ниоткуда "
        "никак никакой никакая никакое никакие никакого никакой никаких нисколько ничей ничья ничьё ничье "
        "незачем некогда негде некуда".split()
    ),
    "en": frozenset("not no never nothing nobody none neither nor nowhere cannot without noone".split()),
}
_NEGATING_PREFIXES: dict[str, tuple[str, ...]] = {
    "ru": ("не", "ни"),
    "en": ("un", "in", "im", "il", "ir", "dis", "non"),
}


@dataclass(frozen=True)
class _Token:
    text: str  # as written
    key: str  # what compares: case-folded, ё read as е
    starts_sentence: bool


def _fold(word: str) -> str:
    return word.casefold().replace("ё", "е").replace("’", "'")


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    last = 0
    for m in _TOKEN.finditer(text):
        before = text[last : m.start()]
        # A sentence starts the text, follows a sentence's end, or opens a quote or a bracket.
        starts = not out or _SENTENCE_END.search(before) is not None or _OPENING.search(before) is not None
        out.append(_Token(m.group(), _fold(m.group()), starts))
        last = m.end()
    return out


@dataclass(frozen=True)
class Known:
    """What the whole transcript tells of its words: those it capitalizes inside a sentence (and the
    dictionary's) are names, those it writes in lower case are common words. A capitalized word at a
    sentence's start is a name unless it is known as a common word."""

    names: frozenset[str] = frozenset()
    common: frozenset[str] = frozenset()
    said: frozenset[str] = frozenset()  # every word of the transcript (what a mended word must be, or a name)


def known_names(texts: Iterable[str], dictionary: Iterable[str] = ()) -> Known:
    """``Known`` of ``texts`` (by their keys: case-folded, ё read as е)."""
    names = {_fold(w) for name in dictionary for w in _TOKEN.findall(name)}
    common: set[str] = set()
    said: set[str] = set()
    for text in texts:
        for t in _tokens(text):
            said.add(t.key)
            if not t.text[:1].isalpha():
                continue
            if t.text[:1].islower():
                common.add(t.key)
            elif not t.starts_sentence:
                names.add(t.key)
    return Known(frozenset(names), frozenset(common - names), frozenset(said))


def _is_name(token: _Token, cyrillic_text: bool, known: Known) -> bool:
    word = token.text
    if not word[:1].isalpha():
        return False
    if any(c.isupper() or c.isdigit() for c in word[1:]):
        return True  # "iPhone", "API", "GPT4"
    if cyrillic_text and _LATIN.search(word):
        return True
    if not word[:1].isupper():
        return False
    return not token.starts_sentence or token.key in known.names or token.key not in known.common


def _numbers(tokens: list[_Token], language: str) -> Counter[str]:
    words = _NUMBER_WORDS.get(language)
    out: Counter[str] = Counter()
    for t in tokens:
        if _DIGITS.fullmatch(t.text) or (words is not None and words.fullmatch(t.key)):
            out[t.key] += 1
    return out


def _negations(tokens: list[_Token], language: str) -> Counter[str]:
    words = _NEGATIONS.get(language, frozenset())
    out: Counter[str] = Counter()
    for t in tokens:
        if t.key in words:
            out[t.key] += 1
        elif language == "en" and t.key.endswith("n't"):
            out["n't"] += 1
    return out


def _reads_like(a: str, b: str) -> float:
    return SequenceMatcher(None, a.replace(" ", ""), b.replace(" ", ""), autojunk=False).ratio()


def _shown(counter: Counter[str]) -> str:
    return ", ".join(sorted(counter.elements()))


def refusal(
    source: str,
    corrected: str,
    language: str,
    *,
    dictionary: Iterable[str] = (),
    known: Known | None = None,
) -> str | None:
    """Why ``corrected`` may not replace ``source`` (a paragraph in ``language``: ru, en), in words for the
    owner; None when it keeps everything it must. ``dictionary``: the owner's names a misheard word may be
    corrected to; ``known``: what the transcript tells of its words (``known_names``; without it, every
    capitalized word at a sentence's start is held as a name)."""
    language = (language or "").split("-")[0].lower()
    src, out = _tokens(source), _tokens(corrected)
    if not out:
        return "the model's paragraph is empty"
    # Numbers, exactly.
    src_n, out_n = _numbers(src, language), _numbers(out, language)
    if src_n != out_n:
        gone, new = src_n - out_n, out_n - src_n
        if gone and new:
            return f"a number changed: {_shown(gone)} → {_shown(new)}"
        return f"a number dropped: {_shown(gone)}" if gone else f"a number added: {_shown(new)}"
    # Names: kept, or mended to the dictionary's.
    dictionary_words = {_fold(w) for name in dictionary for w in _TOKEN.findall(name)}
    known = known or Known()
    names_known = Known(known.names | dictionary_words, known.common - dictionary_words)
    cyrillic = _CYRILLIC.search(source) is not None and language != "en"
    src_names = Counter(t.text for t in src if _is_name(t, cyrillic, names_known))
    out_names = Counter(t.text for t in out if _is_name(t, cyrillic, names_known))
    gone_names, new_names = src_names - out_names, out_names - src_names
    invented = [n for n in new_names if _fold(n) not in dictionary_words]
    if invented:
        was = f" (was {_shown(gone_names)})" if gone_names else ""
        return f"a name not in the source or the dictionary: {', '.join(sorted(invented))}{was}"
    for name in gone_names:
        mended = [n for n in new_names if _reads_like(_fold(n), _fold(name)) >= LEAST_LIKENESS]
        if not mended:
            shown = f" → {_shown(new_names)}" if new_names else ""
            return f"a name changed: {name}{shown}" if new_names else f"a name dropped: {name}"
    # Negations, exactly.
    src_neg, out_neg = _negations(src, language), _negations(out, language)
    if src_neg != out_neg:
        gone, new = src_neg - out_neg, out_neg - src_neg
        return f"a negation dropped: {_shown(gone)}" if gone else f"a negation added: {_shown(new)}"
    # The rest: few words changed, each stretch like what was heard, none added from nothing.
    a, b = [t.key for t in src], [t.key for t in out]
    changed = 0
    prefixes = _NEGATING_PREFIXES.get(language, ())
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        heard, meant = " ".join(a[i1:i2]), " ".join(b[j1:j2])
        if op == "insert":
            return f"words added: {' '.join(t.text for t in out[j1:j2])!r}"
        if op == "delete":  # a misheard word is mended, not taken out
            return f"words dropped: {' '.join(t.text for t in src[i1:i2])!r}"
        changed += max(i2 - i1, j2 - j1)
        if op == "replace":
            for k, (x, y) in enumerate(zip(a[i1:i2], b[j1:j2], strict=False)):
                if any(x == p + y or y == p + x for p in prefixes):
                    return f"a negation changed: {x!r} → {y!r}"
                if _cut_short(x, y):
                    return f"a word cut short: {x!r} → {y!r}"
                if language == "en" and _another_form(x, y):
                    return f"only a word's form changed: {x!r} → {y!r}"
                if language == "ru" and russian_forms.same_word(x, y):
                    if not russian_forms.mends_agreement(x, b, j1 + k):
                        return f"only a word's form changed: {x!r} → {y!r}"
            if _reads_like(heard, meant) < LEAST_LIKENESS and not _dictionary_mend(meant, dictionary_words):
                return f"{heard!r} → {meant!r} reads unlike what was heard"
    # A word the paragraph did not have is one the recording says elsewhere, or the owner's: a recognizer
    # mishears a word the speakers use, and a model that brings one of its own invents it.
    if known.said:
        vocabulary = set(a) | known.said | dictionary_words
        unheard = [t.text for t in out if t.key not in vocabulary]
        if unheard:
            return f"a word the recording never says: {', '.join(unheard[:3])}"
    bound = max(MIN_CHANGED, math.ceil(CHANGED_SHARE * len(a)))
    if changed > bound:
        return f"{changed} of {len(a)} words changed (at most {bound})"
    return None


# English endings a word gains or loses without being another word.
_EN_ENDINGS = ("s", "es", "ed", "ing", "'s")
# A word lengthened by this many letters or more into another it begins is not a misheard one ("app" → "application").
_LENGTHENED = 4


def _another_form(x: str, y: str) -> bool:
    """Whether two different English words are one word in two forms: an ending gained or lost, or one
    lengthened into a longer word it begins. Short words (an → and, to → too) are misheard as such."""
    short, long = sorted((x, y), key=len)
    if short == long or len(short) < 3 or not long.startswith(short):
        return False
    ending = long[len(short) :]
    return ending in _EN_ENDINGS or (ending == "d" and short.endswith("e")) or len(ending) >= _LENGTHENED


def _cut_short(heard: str, meant: str) -> bool:
    """Whether a word was cut short by two letters or more into another it begins ("малоко" → "мало"): a
    recognizer mishears a word as one that sounds like it, not as the same word with a syllable more."""
    return len(meant) >= 3 and heard.startswith(meant) and len(heard) - len(meant) >= 2


def _dictionary_mend(meant: str, dictionary_words: Collection[str]) -> bool:
    """Whether a changed stretch became words of the owner's dictionary (a name the recognizer did not
    know is often heard as words that look nothing like it)."""
    words = meant.split()
    return bool(words) and all(w in dictionary_words for w in words)
