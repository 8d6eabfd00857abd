"""Word error counting for recognition tests and benchmarks."""

from __future__ import annotations

import re


def _words(text: str) -> list[str]:
    return re.sub(r"[^\w\s']", " ", text.lower()).split()


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(edit distance in words, reference length) after lowercasing and dropping punctuation."""
    ref, hyp = _words(reference), _words(hypothesis)
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        current = [i]
        for j, h in enumerate(hyp, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h)))
        previous = current
    return previous[-1], len(ref)


def wer(reference: str, hypothesis: str) -> float:
    errors, n = word_errors(reference, hypothesis)
    return errors / max(n, 1)


def names_heard(text: str, names: list[str]) -> int:
    """How many of ``names`` the text holds, each word of a name by its first five letters (Russian
    names change their endings: "Кшесинская" is said "Кшесинской")."""
    said = text.lower()
    return sum(all(part[:5].lower() in said for part in name.split()) for name in names)
