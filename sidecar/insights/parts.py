"""A transcript cut into parts that each fit a request, with few token counts.

A part is measured as a request carries it: the JSON array of its strings,
counted by the model's own tokenizer (``count``). Counting may be a round trip
(the offline engine's ``/tokenize``), so parts are not found by counting every
prefix: a part is laid out by an estimate (characters per token, learnt from
every count so far), counted once, cut back in proportion when it is over, and
let grow once when it is well under. One or two counts a part, whatever the
number of lines (a six-hour meeting at an 8k context: 13 counts for 13 parts,
where counting each line took 2,160; ``tests/unit/test_insights_parts.py``).

Where a part ends: after a whole line, when one fits. A line longer than a
part (one long unpunctuated block, a transcript without segments) is cut
inside: at the last sentence end within reach, else at the last space, else
anywhere that splits no character (a surrogate pair, a letter and its
combining marks, an emoji sequence, a flag) — unless one such character is
itself longer than a part. Joining the strings of every part, in order, gives
the lines' text back: nothing lost, nothing twice; a line cut in pieces ends
one part and begins the next.
"""

from __future__ import annotations

import bisect
import json
import re
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["Count", "Overflow", "fitting", "groups", "parts"]

Count = Callable[[str], Awaitable[int]]
T = TypeVar("T")


class Overflow(Exception):
    """Not even one character (or one item) fits the room."""


# A part is aimed at this share of the room, so that a fair estimate lands under it ...
_AIM = 0.95
# ... and one that lands under this share is let grow once.
_GROW_BELOW = 0.8
# The first estimate of characters per token, before anything is counted.
_FIRST_RATIO = 3.0
# Counts for one part, at most, before the last one that fitted is taken (or, when none has
# fitted yet, the part is halved until one does).
_TRIES = 4


def render(items: Sequence[Any]) -> str:
    """A part as a request carries it (``prompt.messages_for``: the JSON document's array)."""
    return json.dumps(list(items), ensure_ascii=False)


async def parts(lines: Sequence[str], room: int, count: Count) -> list[list[str]]:
    """``lines`` cut into parts whose JSON each counts at most ``room`` tokens; a line longer than
    that is cut into pieces (see the module's docstring). Raises ``Overflow`` if nothing fits."""
    return [p for p, _ in await _Packer(room, count, raw=False).run([_Line(line) for line in lines])]


async def groups(items: Sequence[T], room: int, count: Count) -> list[tuple[list[T], int]]:
    """``items`` in order, in groups whose JSON each counts at most ``room`` tokens, with each
    group's count. Items are never cut: one that alone is over ``room`` is a group of its own
    (its count says so)."""
    texts = [json.dumps(item, ensure_ascii=False) for item in items]
    found = await _Packer(room, count, raw=True).run([_Line(t, raw=True) for t in texts])
    out: list[tuple[list[T], int]] = []
    at = 0
    for group, tokens in found:
        out.append((list(items[at : at + len(group)]), tokens))
        at += len(group)
    return out


async def fitting(items: Sequence[T], room: int, count: Count) -> tuple[list[T], int]:
    """The first items, in order, whose JSON counts at most ``room`` tokens, and their count."""
    if not items:
        return [], 0
    texts = [json.dumps(item, ensure_ascii=False) for item in items]
    group, _, tokens = await _Packer(room, count, raw=True).part([_Line(t, raw=True) for t in texts], (0, 0))
    return (list(items[: len(group)]), tokens) if tokens <= room else ([], 0)


# --- lines ---------------------------------------------------------------------------------

_ESCAPED = re.compile(r'["\\\x00-\x1f]')
_SHORT = {'"', "\\", "\n", "\r", "\t", "\b", "\f"}  # escaped in 2 characters; other controls in 6


@dataclass
class _Line:
    """A line, and how long any piece of it is as a JSON string (``raw``: already JSON, whole)."""

    text: str
    raw: bool = False

    def __post_init__(self) -> None:
        self._at = [] if self.raw else [m.start() for m in _ESCAPED.finditer(self.text)]
        self._extra: list[int] = []
        total = 0
        for i in self._at:
            total += 1 if self.text[i] in _SHORT else 5
            self._extra.append(total)

    def json_len(self, a: int, b: int) -> int:
        """``len(json.dumps(text[a:b], ensure_ascii=False))``, without building it."""
        if self.raw:
            return b - a
        return b - a + 2 + self._extra_before(b) - self._extra_before(a)

    def _extra_before(self, i: int) -> int:
        k = bisect.bisect_left(self._at, i)
        return self._extra[k - 1] if k else 0

    def prefix_within(self, a: int, length: int) -> int:
        """The end of the longest piece from ``a`` whose JSON is at most ``length`` characters."""
        lo, hi = a, len(self.text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.json_len(a, mid) <= length:
                lo = mid
            else:
                hi = mid - 1
        return lo


# --- where a piece of a line ends ----------------------------------------------------------

_SENTENCE_END = re.compile(r"[.!?…。！？]+[\"'”’»)\]]*\s+")
_SPACE = re.compile(r"\s+")


def _cut(text: str, a: int, end: int) -> int:
    """Where a piece of ``text`` from ``a`` that may reach ``end`` (exclusive) should end.

    The last sentence end, else the last run of spaces, in its second half; else the last
    place that splits no character; ``a + 1`` at least.
    """
    if end >= len(text):
        return len(text)
    half = a + (end - a) // 2
    for pattern in (_SENTENCE_END, _SPACE):
        last = -1
        for m in pattern.finditer(text, half, end):
            last = m.end()
        last = _grapheme_start(text, last) if last > half else -1  # a space run may end inside "\r\n"
        if last > half:
            return last
    at = _grapheme_start(text, end)
    return at if at > a else max(end, a + 1)


_ZWJ = "\u200d"


def _extends(c: str) -> bool:
    """Whether ``c`` belongs with the character before it (a combining mark, a joiner, a variation
    selector, a skin tone, an emoji tag, the low half of a surrogate pair)."""
    o = ord(c)
    return (
        unicodedata.category(c) in ("Mn", "Me", "Mc")
        or c == _ZWJ
        or 0xFE00 <= o <= 0xFE0F
        or 0xE0100 <= o <= 0xE01EF
        or 0x1F3FB <= o <= 0x1F3FF
        or 0xE0020 <= o <= 0xE007F
        or 0xDC00 <= o <= 0xDFFF
    )


def _regional(c: str) -> bool:
    return 0x1F1E6 <= ord(c) <= 0x1F1FF


def _grapheme_start(text: str, i: int) -> int:
    """The last place at or before ``i`` that splits no character as a reader sees it (0 if none)."""
    while i > 0:
        c, before = text[i], text[i - 1]
        if _extends(c) or before == _ZWJ or (c == "\n" and before == "\r"):
            i -= 1
            continue
        if _regional(c) and _regional(before):
            run = 0  # a flag is two regional indicators: cut only between pairs
            while i - run - 1 >= 0 and _regional(text[i - run - 1]):
                run += 1
            if run % 2:
                i -= 1
                continue
        return i
    return 0


# --- packing -------------------------------------------------------------------------------


class _Packer:
    """Parts of lines (``raw``: of JSON texts, never cut) within ``room`` tokens each."""

    def __init__(self, room: int, count: Count, *, raw: bool) -> None:
        self.room = room
        self.count = count
        self.raw = raw
        self.ratio = _FIRST_RATIO  # characters of JSON per token, as last counted

    def render(self, items: list[str]) -> str:
        return "[" + ", ".join(items) + "]" if self.raw else render(items)

    async def run(self, lines: list[_Line]) -> list[tuple[list[str], int]]:
        out: list[tuple[list[str], int]] = []
        at = (0, 0)  # the next line, and where in it the next part begins
        while at[0] < len(lines):
            part, at, tokens = await self.part(lines, at)
            out.append((part, tokens))
        return out

    async def part(self, lines: list[_Line], start: tuple[int, int]) -> tuple[list[str], tuple[int, int], int]:
        """The next part from ``start``: its strings, where the one after it begins, its count."""
        cut = not self.raw
        goal = int(self.room * _AIM * self.ratio)
        fitted: tuple[list[str], tuple[int, int], int] | None = None
        grown = False
        for tries in range(1, 1000):
            end = self._take(lines, start, goal, cut=cut)
            items = _items(lines, start, end)
            text = self.render(items)
            if fitted is not None and end <= fitted[1]:
                return fitted  # a grown part that is no longer: the one that fitted
            tokens = await self.count(text)
            if tokens > 0:
                self.ratio = len(text) / tokens
            if tokens <= self.room:
                fitted = (items, end, tokens)
                if grown or tokens >= self.room * _GROW_BELOW or end[0] >= len(lines) or tries >= _TRIES:
                    return fitted
                grown = True
                goal = max(int(self.room * _AIM * self.ratio), len(text) + 1)
                continue
            if fitted is not None:
                return fitted  # the grown part went over: the one before it
            if not cut and _single(start, end):
                return items, end, tokens  # one item over the room on its own: a group of its own
            shorter = int(len(text) * self.room / tokens * _AIM)
            goal = min(shorter, len(text) - 1) if tries < _TRIES else len(text) // 2
            if _single(start, end) and _smallest(lines, start, end):
                raise Overflow(
                    f"one character of the transcript counts {tokens} tokens, more than the {self.room} available"
                )
        raise AssertionError("unreachable: every try shortens the part")

    @staticmethod
    def _take(lines: list[_Line], start: tuple[int, int], goal: int, *, cut: bool) -> tuple[int, int]:
        """Where a part from ``start`` of about ``goal`` characters of JSON ends: after the last whole
        line within it, or (no line within it, and ``cut``) inside the first line."""
        i, a = start
        used = 2  # the array's brackets
        j = i
        while j < len(lines):
            size = lines[j].json_len(a if j == i else 0, len(lines[j].text)) + (2 if j > i else 0)
            if used + size > goal and j > i:
                break
            if used + size > goal:  # the first line alone is longer than the part
                if not cut:
                    return (j + 1, 0)
                line = lines[j]
                reach = line.prefix_within(a, goal - used)
                end = _cut(line.text, a, max(reach, a + 1))
                return (j + 1, 0) if end >= len(line.text) else (j, end)
            used += size
            j += 1
        return (j, 0)


def _items(lines: list[_Line], start: tuple[int, int], end: tuple[int, int]) -> list[str]:
    """The strings of a part from ``start`` to ``end`` (line, place in it)."""
    (i, a), (j, b) = start, end
    if i == j:
        return [lines[i].text[a:b]]
    out = [lines[i].text[a:]] + [line.text for line in lines[i + 1 : j]]
    if b:
        out.append(lines[j].text[:b])
    return out


def _single(start: tuple[int, int], end: tuple[int, int]) -> bool:
    """Whether a part holds (a piece of) one line only."""
    return end[0] == start[0] or (end[0] == start[0] + 1 and end[1] == 0)


def _smallest(lines: list[_Line], start: tuple[int, int], end: tuple[int, int]) -> bool:
    """Whether a part of one line holds one code point at most (nothing smaller can be cut)."""
    i, a = start
    b = end[1] if end[0] == i else len(lines[i].text)
    return b - a <= 1
