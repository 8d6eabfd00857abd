"""The piece plan: cuts in pauses, within the cap, balanced; overlaps only where no pause is within reach."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from sidecar.media.pieces import Piece, PieceLimits, plan
from sidecar.media.vad import SAMPLE_RATE, Region

S = SAMPLE_RATE


def speech_every(seconds: float, total: float, *, talk: float, gap: float) -> list[Region]:
    """Regions of ``talk`` seconds with ``gap`` seconds between them, over ``total`` seconds."""
    out, t = [], 0.0
    while t + talk <= total:
        out.append(Region(int(t * S), int((t + talk) * S)))
        t += talk + gap
    return out


def test_a_recording_within_the_cap_is_one_piece_and_silence_is_none() -> None:
    regions = [Region(S, 2 * S)]
    assert plan(regions, 3600 * S, PieceLimits(max_seconds=4 * 3600)) == [Piece(0, 0, 3600 * S)]
    assert plan([], 3600 * S, PieceLimits(max_seconds=60)) == [Piece(0, 0, 3600 * S)]  # kept, never sent
    assert Piece(0, 0, 3600 * S).speech_ms([]) == 0
    assert Piece(0, S, 3 * S).speech_ms(regions) == 1000


@pytest.mark.parametrize(("hours", "cap_hours"), [(6, 4), (6, 2.2), (6, 2), (6, 1), (6.5, 2)])
def test_long_recordings_are_cut_in_pauses_into_balanced_pieces_within_the_cap(hours: float, cap_hours: float) -> None:
    total = int(hours * 3600 * S)
    regions = speech_every(0, hours * 3600, talk=25, gap=1.5)
    got = plan(regions, total, PieceLimits(max_seconds=cap_hours * 3600))
    fewest = math.ceil(hours / cap_hours)
    assert fewest <= len(got) <= fewest + 1  # one more when the pauses fall just short of exact division
    assert got[0].start == 0 and got[-1].end == total
    for a, b in itertools.pairwise(got):
        assert a.end == b.start  # contiguous: a pause was found every time
        assert not any(r.start < a.end < r.end for r in regions)  # never inside speech
    lengths = [p.end - p.start for p in got]
    assert max(lengths) <= cap_hours * 3600 * S
    assert max(lengths) - min(lengths) <= 2 * 300 * S + 30 * S  # balanced, within the search window


def test_without_a_pause_the_pieces_overlap_and_stay_within_the_cap() -> None:
    total = 3 * 3600 * S
    continuous = [Region(0, total)]  # music, or speech with no gap at all
    got = plan(continuous, total, PieceLimits(max_seconds=3600, overlap_seconds=10))
    assert len(got) in (3, 4)
    for a, b in itertools.pairwise(got):
        assert a.end - b.start == 10 * S  # ten seconds heard twice
    assert all(p.end - p.start <= 3600 * S for p in got)
    assert got[-1].end == total


def test_random_plans_always_cover_the_recording_within_the_cap() -> None:
    rng = random.Random(7)
    for _ in range(200):
        total = int(rng.uniform(1, 8) * 3600 * S)
        regions, t = [], rng.uniform(0, 5)
        while t < total / S - 30:
            talk = rng.uniform(0.5, 30)
            regions.append(Region(int(t * S), int(min(t + talk, total / S) * S)))
            t += talk + rng.choice([0.05, 0.1, 0.3, 2.0])
        limits = PieceLimits(max_seconds=rng.choice([1800, 3600, 7200, 14400]), window_seconds=rng.choice([5, 60, 300]))
        got = plan(regions, total, limits)
        assert got[0].start == 0 and got[-1].end == total
        assert all(0 < p.end - p.start <= limits.max_seconds * S for p in got)
        assert all(b.start <= a.end and b.start > a.start for a, b in itertools.pairwise(got))
        assert [p.index for p in got] == list(range(len(got)))
