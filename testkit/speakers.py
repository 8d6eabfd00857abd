"""Scoring speaker labels against the committed dialogues' turn tables (SP3)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import simpleder

from sidecar.transcript.model import Segment
from sidecar.transcript.speakers import Turn

DIALOGUE_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "dialogues"


@dataclass(frozen=True)
class Dialogue:
    audio: Path
    speakers: int
    turns: list[Turn]  # the reference: who speaks when


def dialogues() -> list[Dialogue]:
    out = []
    for table in sorted(DIALOGUE_DIR.glob("*.json")):
        data = json.loads(table.read_text(encoding="utf-8"))
        turns = [Turn(float(t["start"]), float(t["end"]), str(t["speaker"])) for t in data["turns"]]
        out.append(Dialogue(table.with_suffix(".ogg"), int(data["speakers"]), turns))
    return out


def meeting(dst: Path, minutes: float) -> tuple[Path, list[Turn]]:
    """The dialogues played in turn (half-second gaps) to at least ``minutes``, one 16 kHz WAV;
    the reference turns labelled by voice, so a voice heard in two dialogues is one speaker."""
    from testkit.audio import DIALOGUES, concat_to_wav, decode_info

    parts = dialogues()
    lengths = [decode_info(d.audio).seconds + 0.5 for d in parts]  # concat_to_wav's gap after each
    repeat = max(1, int(-(-minutes * 60 // sum(lengths))))
    turns: list[Turn] = []
    offset = 0.0
    for _ in range(repeat):
        for dialogue, length in zip(parts, lengths, strict=True):
            voices = DIALOGUES[dialogue.audio.stem].voices
            for t in dialogue.turns:
                v = voices[t.speaker]
                voice = f"{v.engine}:{v.name}:{v.pitch}"
                turns.append(Turn(t.start + offset, t.end + offset, voice))
            offset += length
    return concat_to_wav([d.audio for d in parts], dst, repeat=repeat), turns


def der(reference: Sequence[Turn], hypothesis: Sequence[Turn]) -> float:
    """Diarization error rate (missed + false alarm + confusion, over the reference's speech)."""
    return float(
        simpleder.DER(
            [(t.speaker, t.start, t.end) for t in reference],
            [(t.speaker, t.start, t.end) for t in hypothesis],
        )
    )


def segment_agreement(reference: Sequence[Turn], segments: Sequence[Segment]) -> float:
    """The share of labelled segments whose speaker is the reference speaker at their middle,
    under the best one-to-one naming (each label counted for the reference speaker it mostly meets)."""
    pairs = []
    for s in segments:
        middle = (s.start + s.end) / 2
        truth = min(reference, key=lambda t: max(t.start - middle, middle - t.end, 0.0)).speaker
        pairs.append((s.speaker, truth))
    if not pairs:
        return 0.0
    naming: dict[str | None, str] = {}
    for label in {label for label, _ in pairs}:
        naming[label] = Counter(truth for got, truth in pairs if got == label).most_common(1)[0][0]
    if len(set(naming.values())) < len(naming):
        return 0.0  # two labels for one person, or one label for two: not a right answer
    return sum(naming[label] == truth for label, truth in pairs) / len(pairs)
