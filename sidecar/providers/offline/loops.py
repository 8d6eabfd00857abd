"""A decoder's loop, cut: the same run of words written again and again to the end of a window.

On loud noise or music a window's decoding can fall into a loop ("I do not agree with this association
of three new places that have been." twelve times over, to the window's last token: PF15, English at
0 dB of noise). Decoding one window after another, Whisper notices by the text's gzip compression ratio
and decodes the window again at a higher temperature; decoding a batch of windows at once, faster-whisper
has no such fallback and hands the loop on as words. Here a window whose text compresses beyond
``LOOPING_RATIO`` (faster-whisper's own threshold for "looping") keeps each looping run once: every run of
``LONG_RUN`` words or more said ``TIMES`` times or more in a row, and every shorter run ("of the few of the
few…") said ``SHORT_TIMES`` times or more (and a last copy the window's end cut short); a loop can also come
back after other words, so in such a window a sentence of ``LONG_RUN`` words or more said ``TIMES`` times or
more is kept the first time only. What a person repeats — "no, no, no", a phrase or a sentence said twice —
is fewer and stays, and a window that does not loop is untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["LONG_RUN", "LOOPING_RATIO", "SHORT_TIMES", "TIMES", "cut", "cut_loops", "cut_repeated_sentences"]

LOOPING_RATIO = 2.4  # faster-whisper's compression_ratio_threshold
LONG_RUN = 4  # words
TIMES = 3  # in a row, a run of LONG_RUN words or more
SHORT_TIMES = 6  # in a row, a shorter run
_LONGEST_RUN = 60  # words: a window holds at most a few hundred

T = TypeVar("T")


def _bare(word: str) -> str:
    return word.strip().strip(".,!?;:…«»\"'“”„-—").casefold()


def cut_loops(items: Sequence[T], word: Callable[[T], str]) -> list[T]:
    """``items`` (words, in order; ``word`` reads each one's text) with every looping run kept once (the
    first): ``LONG_RUN`` words or more that come ``TIMES`` times or more in a row, or fewer words that come
    ``SHORT_TIMES`` times or more."""
    keys = [_bare(word(item)) for item in items]
    out: list[T] = []
    i = 0
    while i < len(items):
        # The shortest run first: a loop of one sentence is also one of two sentences, said half as often.
        for n in range(1, min(_LONGEST_RUN, (len(items) - i) // TIMES) + 1):
            run = keys[i : i + n]
            end = i + n
            while keys[end : end + n] == run:
                end += n
            if end - i >= (TIMES if n >= LONG_RUN else SHORT_TIMES) * n:
                out.extend(items[i : i + n])
                rest = keys[end:]
                # The loop ran to the window's end: a last copy cut short there goes too.
                i = len(items) if len(rest) < n and rest == run[: len(rest)] else end
                break
        else:
            out.append(items[i])
            i += 1
    return out


_SENTENCE_END = (".", "!", "?", "…")


def cut_repeated_sentences(items: Sequence[T], word: Callable[[T], str]) -> list[T]:
    """``items`` (a looping window's words) with each sentence of ``LONG_RUN`` words or more that comes
    ``TIMES`` times or more kept the first time only: the loop that comes back after other words ("For
    the B-thing moves to the city… With that… For the B-thing moves to the city…"). A last copy the
    window's end cut short counts, and goes. A sentence said twice stays: a recording of repeated
    sentences (the bench's Russian voice, read in shuffled rounds) says some twice in thirty seconds,
    which compresses past ``LOOPING_RATIO`` too.
    """
    sentences: list[list[T]] = [[]]
    for item in items:
        sentences[-1].append(item)
        if word(item).strip().endswith(_SENTENCE_END):
            sentences.append([])
    if not sentences[-1]:
        sentences.pop()
    keys = [tuple(_bare(word(w)) for w in sentence) for sentence in sentences]
    if keys and not word(sentences[-1][-1]).strip().endswith(_SENTENCE_END):
        # Cut short by the window's end: a copy of the longest earlier sentence it begins, if any.
        last = keys[-1]
        begun = [k for k in keys[:-1] if len(k) >= max(LONG_RUN, len(last)) and k[: len(last)] == last]
        if begun and len(last) >= LONG_RUN:
            keys[-1] = max(begun, key=len)
    said: dict[tuple[str, ...], int] = {}
    for key in keys:
        said[key] = said.get(key, 0) + 1
    out: list[T] = []
    seen: set[tuple[str, ...]] = set()
    for sentence, key in zip(sentences, keys, strict=True):
        if len(key) >= LONG_RUN and said[key] >= TIMES and key in seen:
            continue
        out.extend(sentence)
        seen.add(key)
    return out


def cut(items: Sequence[T], word: Callable[[T], str]) -> list[T]:
    """A looping window's words with both kinds of loop cut: runs in a row, then sentences said again."""
    return cut_repeated_sentences(cut_loops(items, word), word)
