"""Who said what (SP1): speaker turns laid over a timed transcript, and the labels people read.

A diarizer answers with turns (start, end, speaker) that know nothing of the
words; a provider may put a label on its segments itself. Either way the
transcript ends with ``speaker`` on its segments (and words where known),
numbered "Speaker 1", "Speaker 2", … in order of first appearance, and no
labels at all when only one speaker was found: a single-speaker recording
looks exactly as it would without diarization.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.transcript import Segment, Transcript, Word

__all__ = ["Turn", "assign", "numbered"]


@dataclass(frozen=True)
class Turn:
    start: float  # seconds
    end: float
    speaker: str


def assign(transcript: Transcript, turns: Sequence[Turn]) -> Transcript:
    """``transcript`` with each word (or unworded segment) given the speaker it overlaps most.

    A segment whose words change speaker is split there, so every segment has one speaker.
    """
    if not turns:
        return transcript
    ordered = sorted(turns, key=lambda t: t.start)
    segments: list[Segment] = []
    for segment in transcript.segments:
        if not segment.words:
            segments.append(segment.model_copy(update={"speaker": _speaker_of(segment.start, segment.end, ordered)}))
            continue
        words = [w.model_copy(update={"speaker": _speaker_of(w.start, w.end, ordered)}) for w in segment.words]
        segments.extend(_split_by_speaker(segment, words))
    return transcript.model_copy(update={"segments": segments})


def numbered(transcript: Transcript) -> Transcript:
    """Labels renamed "Speaker N" by first appearance; all removed when fewer than two speakers."""
    names: dict[str, str] = {}
    for segment in transcript.segments:
        for label in [segment.speaker, *(w.speaker for w in segment.words or [])]:
            if label is not None and label not in names:
                names[label] = f"Speaker {len(names) + 1}"
    keep = len(names) > 1

    def name(label: str | None) -> str | None:
        return names[label] if keep and label is not None else None

    return transcript.model_copy(
        update={
            "segments": [
                s.model_copy(
                    update={
                        "speaker": name(s.speaker),
                        "words": [w.model_copy(update={"speaker": name(w.speaker)}) for w in s.words]
                        if s.words is not None
                        else None,
                    }
                )
                for s in transcript.segments
            ]
        }
    )


def _speaker_of(start: float, end: float, turns: Sequence[Turn]) -> str:
    """The speaker with the most overlap with [start, end]; with none, the nearest turn's."""
    overlap: dict[str, float] = defaultdict(float)
    for turn in turns:
        if turn.start >= end:
            break
        if turn.end > start:
            overlap[turn.speaker] += min(end, turn.end) - max(start, turn.start)
    if overlap:
        return max(overlap.items(), key=lambda kv: kv[1])[0]
    middle = (start + end) / 2
    return min(turns, key=lambda t: max(t.start - middle, middle - t.end, 0.0)).speaker


def _split_by_speaker(segment: Segment, words: list[Word]) -> list[Segment]:
    runs: list[list[Word]] = []
    for word in words:
        if runs and runs[-1][-1].speaker == word.speaker:
            runs[-1].append(word)
        else:
            runs.append([word])
    if len(runs) == 1:
        return [segment.model_copy(update={"words": words, "speaker": words[0].speaker})]
    spaced = any(w.word[:1].isspace() for w in words)
    return [
        Segment(
            start=run[0].start if i else segment.start,
            end=run[-1].end if i + 1 < len(runs) else segment.end,
            text="".join(w.word for w in run).strip() if spaced else " ".join(w.word.strip() for w in run),
            words=run,
            speaker=run[0].speaker,
        )
        for i, run in enumerate(runs)
    ]
