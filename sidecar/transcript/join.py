"""Joining the transcripts of a recording's pieces into one (LA2): every word once, in the recording's times.

Each piece's transcript is shifted by the piece's offset. Pieces cut in a
pause meet without overlap, and joining is concatenation. Pieces that
overlap (no pause was found near the cut) both heard the words in the
overlap, and each cut through a word at its own edge; the join picks one
moment in the overlap that falls inside no word of either piece, as near
the middle of the overlap as possible (far from both edges), and keeps the
earlier piece's words before it and the later piece's words after it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.transcript.model import Segment, Transcript, Word
from sidecar.transcript.speakers import VoiceLinker, talk_of

__all__ = ["PieceResult", "join"]


@dataclass(frozen=True)
class PieceResult:
    """A piece's transcript (times from the piece's start) and where the piece lies in the recording."""

    start: float  # seconds
    end: float
    transcript: Transcript


def join(pieces: Sequence[PieceResult]) -> Transcript:
    names = _speaker_names(pieces)
    shifted = [_shift(p.transcript, p.start, n) for p, n in zip(pieces, names, strict=True)]
    bounds: list[tuple[float, float]] = []  # per piece: keep words whose middle is in [lo, hi)
    for i, piece in enumerate(pieces):
        lo = bounds[-1][1] if bounds else float("-inf")
        hi = float("inf")
        if i + 1 < len(pieces):
            nxt = pieces[i + 1]
            if nxt.start < piece.end:
                hi = _cut(shifted[i], shifted[i + 1], nxt.start, piece.end)
            else:
                hi = nxt.start
        bounds.append((lo, hi))
    segments: list[Segment] = []
    texts: list[str] = []
    for transcript, (lo, hi) in zip(shifted, bounds, strict=True):
        kept = [s for s in (_within(seg, lo, hi) for seg in transcript.segments) if s is not None]
        segments.extend(kept)
        # A piece kept whole keeps the provider's own text (its punctuation and
        # spacing may differ from its segments'); a trimmed one is its segments.
        whole = kept == transcript.segments
        texts.append(transcript.text.strip() if whole else " ".join(s.text for s in kept if s.text))
    languages = Counter(t.transcript.language for t in pieces if t.transcript.language)
    durations = [p.end for p in pieces]
    return Transcript(
        text=" ".join(t for t in texts if t),
        segments=segments,
        language=languages.most_common(1)[0][0] if languages else None,
        duration=max(durations) if durations else None,
    )


def _speaker_names(pieces: Sequence[PieceResult]) -> list[dict[str, str]]:
    """Per piece, its speaker labels → the recording's.

    Labels are a piece's own: "0" in one piece is not "0" in the next. Where
    every piece with speakers brought their voice embeddings (the offline
    diarizer), the same voice is matched across pieces; otherwise each
    piece's speakers stay apart.
    """
    talks = [talk_of(p.transcript.segments) for p in pieces]
    if len(pieces) > 1 and all(p.transcript.voices for p, talk in zip(pieces, talks, strict=True) if talk):
        linker = VoiceLinker()
        return [linker.link(talk, p.transcript.voices or {}) for p, talk in zip(pieces, talks, strict=True)]
    prefix = len(pieces) > 1
    return [{label: f"{i}/{label}" if prefix else label for label in talk} for i, talk in enumerate(talks)]


def _shift(t: Transcript, by: float, names: dict[str, str]) -> Transcript:
    def speaker(label: str | None) -> str | None:
        return names.get(label, label) if label is not None else None

    def word(w: Word) -> Word:
        return w.model_copy(
            update={"start": round(w.start + by, 3), "end": round(w.end + by, 3), "speaker": speaker(w.speaker)}
        )

    return t.model_copy(
        update={
            "segments": [
                s.model_copy(
                    update={
                        "start": round(s.start + by, 3),
                        "end": round(s.end + by, 3),
                        "words": [word(w) for w in s.words] if s.words is not None else None,
                        "speaker": speaker(s.speaker),
                    }
                )
                for s in t.segments
            ]
        }
    )


def _words(t: Transcript) -> list[Word]:
    return [w for s in t.segments for w in (s.words or [])]


def _cut(before: Transcript, after: Transcript, lo: float, hi: float) -> float:
    """A moment in the overlap [lo, hi] inside no word of either transcript, nearest the middle."""
    middle = (lo + hi) / 2
    words = [w for w in (*_words(before), *_words(after)) if w.end > lo and w.start < hi]
    if not words:
        spans = [(s.start, s.end) for t in (before, after) for s in t.segments if s.end > lo and s.start < hi]
    else:
        spans = [(w.start, w.end) for w in words]
    candidates = {middle, lo, hi} | {a for a, _ in spans} | {b for _, b in spans}
    free = [c for c in candidates if lo <= c <= hi and not any(a < c < b for a, b in spans)]
    return min(free, key=lambda c: abs(c - middle)) if free else middle


def _within(segment: Segment, lo: float, hi: float) -> Segment | None:
    """The part of ``segment`` whose words' middles lie in [lo, hi); None if nothing is left."""
    if not segment.words:
        middle = (segment.start + segment.end) / 2
        return segment if lo <= middle < hi else None
    kept = [w for w in segment.words if lo <= (w.start + w.end) / 2 < hi]
    if not kept:
        return None
    if len(kept) == len(segment.words):
        return segment
    spaced = any(w.word[:1].isspace() for w in kept)
    text = "".join(w.word for w in kept).strip() if spaced else " ".join(w.word.strip() for w in kept)
    return Segment(start=kept[0].start, end=kept[-1].end, text=text, words=kept, speaker=segment.speaker)
