"""Joining pieces: 0 lost and 0 doubled words over hundreds of cuts forced into speech (LA2).

The recognizer here is simulated over a known timeline of words, as a real
one behaves at a piece's edges: each word wholly inside the piece comes back
with its times a little off; a word the edge cuts through comes back as a
fragment or not at all.
"""

from __future__ import annotations

import random

from sidecar.media.pieces import PieceLimits, plan
from sidecar.media.vad import SAMPLE_RATE, Region
from sidecar.transcript.join import PieceResult, join
from sidecar.transcript.model import Segment, Transcript, Word

VOCABULARY = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar".split()


def timeline(rng: random.Random, seconds: float) -> list[Word]:
    """Continuous speech: words of 0.15–0.7 s with gaps of 0–0.12 s, never a pause."""
    words, t = [], 0.3
    while t < seconds - 1:
        length = rng.uniform(0.15, 0.7)
        words.append(Word(start=round(t, 3), end=round(t + length, 3), word=" " + rng.choice(VOCABULARY)))
        t += length + rng.uniform(0.0, 0.12)
    return words


def recognize(words: list[Word], start: float, end: float, rng: random.Random) -> Transcript:
    """What a recognizer hears in [start, end], in the piece's own times."""
    heard: list[Word] = []
    for w in words:
        if w.end <= start or w.start >= end:
            continue
        if w.start < start or w.end > end:  # cut by the edge
            if rng.random() < 0.5:
                a, b = max(w.start, start), min(w.end, end)
                heard.append(Word(start=a - start, end=b - start, word=" " + w.word.strip()[:2] + "-"))
            continue
        jitter = rng.uniform(-0.04, 0.04)
        heard.append(
            Word(start=max(w.start - start + jitter, 0), end=min(w.end - start + jitter, end - start), word=w.word)
        )
    segments = [
        Segment(start=chunk[0].start, end=chunk[-1].end, text="".join(x.word for x in chunk).strip(), words=chunk)
        for chunk in (heard[i : i + 12] for i in range(0, len(heard), 12))
    ]
    return Transcript(text=" ".join(s.text for s in segments), segments=segments, language="en")


def test_two_hundred_cuts_in_continuous_speech_lose_and_double_no_word() -> None:
    rng = random.Random(20261201)
    seconds = 3000.0
    words = timeline(rng, seconds)
    total = int(seconds * SAMPLE_RATE)
    # No pause anywhere: every cut is forced into speech, with overlaps.
    pieces = plan([Region(0, total)], total, PieceLimits(max_seconds=14, window_seconds=2, overlap_seconds=4))
    assert len(pieces) - 1 >= 200
    results = [
        PieceResult(
            p.start / SAMPLE_RATE,
            p.end / SAMPLE_RATE,
            recognize(words, p.start / SAMPLE_RATE, p.end / SAMPLE_RATE, rng),
        )
        for p in pieces
    ]
    joined = join(results)
    got = [w.word.strip() for s in joined.segments for w in s.words or []]
    assert got == [w.word.strip() for w in words]  # every word, once, in order
    starts = [w.start for s in joined.segments for w in s.words or []]
    assert starts == sorted(starts) and abs(starts[0] - words[0].start) < 0.05


def test_pieces_cut_in_pauses_are_concatenated_with_their_offsets() -> None:
    first = Transcript(text="hello there", segments=[Segment(start=1.0, end=2.0, text="hello there")])
    second = Transcript(
        text="general kenobi",
        segments=[
            Segment(start=0.5, end=1.5, text="general kenobi", words=[Word(start=0.5, end=1.5, word=" general kenobi")])
        ],
        language="en",
    )
    joined = join([PieceResult(0, 3600, first), PieceResult(3600, 5000, second)])
    assert joined.text == "hello there general kenobi"
    assert [(s.start, s.end) for s in joined.segments] == [(1.0, 2.0), (3600.5, 3601.5)]
    assert joined.language == "en" and joined.duration == 5000
