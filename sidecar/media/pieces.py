"""The piece plan: where a long recording is cut so that each piece fits what its provider takes (LA1, LA2).

A provider declares the longest piece it takes (SpeechKit: under 4 hours and
1 GB; an OpenAI-compatible server: what fits 25 MB at a bitrate that keeps
words; the offline engine: an hour, so a crash or a stop costs at most one
piece of work). A recording within that is one piece. A longer one is cut
into pieces of about equal length, each cut placed in a pause between the
speech regions voice activity detection found, near the balanced point and
never past the cap. Where no pause lies within reach, the pieces overlap
(``overlap_seconds``) and the join drops the doubled words by their times
(``sidecar.transcript.join``).

The plan is made once, at normalize, and kept as the pieces' file rows, so a
retry cuts the same way. A piece without speech is kept but never sent to be
recognized; a recording without speech is one such piece.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.media.vad import SAMPLE_RATE, Region

__all__ = ["Piece", "PieceLimits", "plan"]


@dataclass(frozen=True)
class PieceLimits:
    max_seconds: float  # the longest piece the provider takes
    window_seconds: float = 300.0  # how far from its balanced point a cut may move to meet a pause
    overlap_seconds: float = 10.0  # overlap of two pieces cut where no pause was found
    min_pause_seconds: float = 0.2  # the shortest gap between speech regions that counts as a pause


@dataclass(frozen=True)
class Piece:
    """Samples ``start`` to ``end`` (16 kHz) of the recording; it may overlap the piece before it."""

    index: int
    start: int
    end: int

    @property
    def offset_ms(self) -> int:
        return self.start * 1000 // SAMPLE_RATE

    @property
    def duration_ms(self) -> int:
        return (self.end - self.start) * 1000 // SAMPLE_RATE

    def speech_ms(self, regions: Sequence[Region]) -> int:
        """How much of ``regions`` lies in this piece (ms)."""
        inside = sum(max(0, min(r.end, self.end) - max(r.start, self.start)) for r in regions)
        return inside * 1000 // SAMPLE_RATE


def plan(regions: Sequence[Region], total: int, limits: PieceLimits) -> list[Piece]:
    """The pieces of a recording of ``total`` samples whose speech is ``regions``."""
    if total <= 0:
        return []
    if not regions:
        return [Piece(0, 0, total)]  # kept whole, never sent: there is nothing to recognize
    cap = int(limits.max_seconds * SAMPLE_RATE)
    if total <= cap:
        return [Piece(0, 0, total)]
    window = int(limits.window_seconds * SAMPLE_RATE)
    half_overlap = int(limits.overlap_seconds * SAMPLE_RATE) // 2
    pauses = _pauses(regions, total, int(limits.min_pause_seconds * SAMPLE_RATE))
    count = math.ceil(total / cap)
    while True:  # the fewest balanced pieces whose last one also fits
        pieces = _balanced(pauses, total, count, cap=cap, window=window, half_overlap=half_overlap)
        if pieces[-1].end - pieces[-1].start <= cap:
            return pieces
        count += 1


def _balanced(pauses: list[int], total: int, count: int, *, cap: int, window: int, half_overlap: int) -> list[Piece]:
    pieces: list[Piece] = []
    start = 0
    for left in range(count, 1, -1):
        target = start + (total - start) // left
        latest = start + cap
        cut = _nearest(pauses, target, lo=max(target - window, start + 1), hi=min(target + window, latest))
        if cut is not None:
            pieces.append(Piece(len(pieces), start, cut))
            start = cut
        else:
            # No pause within reach: overlapping pieces of equal length (the overlap counted in),
            # the join keeps each word once.
            length = min(cap, (total - start + 2 * half_overlap * (left - 1)) // left)
            pieces.append(Piece(len(pieces), start, start + length))
            start += length - 2 * half_overlap
    pieces.append(Piece(len(pieces), start, total))
    return pieces


def _pauses(regions: Sequence[Region], total: int, shortest: int) -> list[int]:
    """The middle of every gap of at least ``shortest`` samples between speech (and before and after it)."""
    mids: list[int] = []
    edges = [(0, regions[0].start), *((a.end, b.start) for a, b in itertools.pairwise(regions))]
    edges.append((regions[-1].end, total))
    for a, b in edges:
        if b - a >= shortest:
            mids.append((a + b) // 2)
    return mids


def _nearest(points: list[int], target: int, *, lo: int, hi: int) -> int | None:
    inside = [p for p in points if lo <= p <= hi]
    return min(inside, key=lambda p: abs(p - target)) if inside else None
