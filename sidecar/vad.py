"""Where the speech is: voice activity detection with the Silero VAD that faster-whisper ships.

The model (``faster_whisper/assets/silero_vad_v6.onnx``) runs on onnxruntime
at a few hundred times real time, no torch needed. Audio is fed a block at a
time, so finding the speech of a six-hour recording holds one block in
memory, never the recording. Blocks end at quiet moments (``audio.pcm_chunks``),
so a region that meets a block's edge ends at a pause too.

Regions are what everything downstream works from: the recognizer decodes
only them (silence and noise never reach the model, so it cannot invent words
there), the language is voted on windows of them, and long recordings are
cut between them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["MAX_REGION_SECONDS", "SAMPLE_RATE", "Region", "find_speech", "find_speech_in_blocks", "speech_seconds"]

SAMPLE_RATE = 16000
# Whisper reads 30-second windows: no region is longer, so any region fits one.
MAX_REGION_SECONDS = 30.0
_MAX_REGION = int(MAX_REGION_SECONDS * SAMPLE_RATE)


@dataclass(frozen=True)
class Region:
    """Speech from ``start`` to ``end`` (samples at 16 kHz, end exclusive)."""

    start: int
    end: int

    @property
    def samples(self) -> int:
        return self.end - self.start

    def shifted(self, by: int) -> Region:
        return Region(self.start + by, self.end + by)


def _options() -> object:
    from faster_whisper.vad import VadOptions

    # The batched decoder's own defaults: regions of at most 30 s, split at
    # pauses of 160 ms or more, each padded by 400 ms of context.
    return VadOptions(max_speech_duration_s=MAX_REGION_SECONDS, min_silence_duration_ms=160)


def find_speech(audio: npt.NDArray[np.float32], offset: int = 0) -> list[Region]:
    """The speech regions of ``audio`` (16 kHz mono float), shifted by ``offset`` samples."""
    if audio.size == 0:
        return []
    from faster_whisper.vad import get_speech_timestamps

    found = get_speech_timestamps(audio, _options(), sampling_rate=SAMPLE_RATE)
    regions: list[Region] = []
    for item in found:
        start, end = int(item["start"]), min(int(item["end"]), audio.size)
        # Guard the 30-second promise even if padding stretched a region past it.
        while end - start > _MAX_REGION:
            regions.append(Region(start + offset, start + _MAX_REGION + offset))
            start += _MAX_REGION
        if end > start:
            regions.append(Region(start + offset, end + offset))
    return regions


def find_speech_in_blocks(blocks: Iterable[npt.NDArray[np.float32]]) -> tuple[list[Region], int]:
    """Regions of consecutive blocks of one recording, and its length in samples."""
    regions: list[Region] = []
    offset = 0
    for block in blocks:
        regions.extend(find_speech(block, offset))
        offset += block.size
    return regions, offset


def speech_seconds(regions: Sequence[Region]) -> float:
    return sum(r.samples for r in regions) / SAMPLE_RATE
