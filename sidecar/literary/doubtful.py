"""Doubtful words: those of a paragraph no dictionary knows, each beside a word said elsewhere in the
recording that reads like it ("релис" where the meeting says "релиз" too).

A recognizer that mishears a term usually does not mishear it every time: the same word comes out right
in one window and as a sound-alike in the next. The recording's own words are the best guess of what was
meant, and a small model that proofreads a paragraph on its own does not see them (measured on PF14's
Russian hour: "релис" was found right in every paragraph). They are shown to it as candidates; the model
decides, and the fidelity check still holds each fix. Only where a dictionary of the language is at hand
(Russian); elsewhere there are none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from difflib import SequenceMatcher

from sidecar.literary import russian_forms

__all__ = ["MAX_DOUBTFUL", "doubtful"]

MAX_DOUBTFUL = 4  # candidates shown with one paragraph
_LIKENESS = 0.8  # letters alike (difflib's ratio): "релис"/"релиз" 0.8, "релиса"/"релиза" 0.83
_SHORTEST = 4  # letters: shorter words are too many alike

_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*", re.UNICODE)
_DICTIONARIES: dict[str, Callable[[str], bool]] = {"ru": russian_forms.known_word}


def doubtful(text: str, said: Collection[str], language: str) -> list[tuple[str, str]]:
    """(word as written in ``text``, the recording's word that reads like it), for words no dictionary of
    ``language`` knows; ``said``: every word of the recording (lower case, ё read as е)."""
    known = _DICTIONARIES.get(language)
    if known is None:
        return []
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for m in _WORD.finditer(text):
        word = m.group()
        key = word.casefold().replace("ё", "е")
        if len(key) < _SHORTEST or key in seen or not word[:1].islower() or known(key):
            continue
        seen.add(key)
        alike = [
            (SequenceMatcher(None, key, other, autojunk=False).ratio(), other)
            for other in said
            if abs(len(other) - len(key)) <= 1 and other[:2] == key[:2] and other != key
        ]
        best = max(((r, o) for r, o in alike if r >= _LIKENESS and known(o)), default=None)
        if best is not None:
            out.append((word, best[1]))
            if len(out) == MAX_DOUBTFUL:
                break
    return out
