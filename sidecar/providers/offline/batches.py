"""Batched decoding for the offline engine (T1): the speech of a piece, several 30-second windows at once.

The model reads 30 seconds at a time. Decoding those windows one after the
other (each waiting on the last) leaves most of the CPU's work per step
unbatched; faster-whisper's ``BatchedInferencePipeline`` decodes a batch of
windows together, and never conditions a window on the previous text, so it
cannot fall into the temperature-fallback loops sequential decoding meets on
repetitive speech.

The windows are ours, not the pipeline's: consecutive speech regions (found
once, by ``vad``) are merged while they fit in 30 seconds of the recording,
so a window is a stretch of the recording as it was spoken, pauses inside it
kept. Windows are decoded a group at a time from a compact array (the
windows back to back), so memory is bounded by the group, not the piece, and
each window's results are shifted back to where it lies in the recording.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sidecar.media import vad
from sidecar.media.pcm import PcmReader

SAMPLE_RATE = vad.SAMPLE_RATE
WINDOW = 30 * SAMPLE_RATE
# Windows decoded per call (held as samples and features at once): 8 × 30 s is 15 MB.
GROUP = 8
# The engine crashed on windows of 160–319 samples (faster-whisper 1.2.1):
# a window shorter than a second is padded with silence up to one.
MIN_SAMPLES = SAMPLE_RATE


@dataclass(frozen=True)
class Window:
    """A stretch of the recording holding one or more speech regions, at most 30 s long."""

    start: int  # samples
    end: int


def windows(regions: Sequence[vad.Region], limit: int = WINDOW) -> list[Window]:
    """Consecutive regions merged while the stretch from the first's start to the last's end fits ``limit``."""
    out: list[Window] = []
    for r in regions:
        if out and r.end - out[-1].start <= limit:
            out[-1] = Window(out[-1].start, r.end)
            continue
        # A region longer than a window (vad promises none) is split, never cut short.
        for start in range(r.start, r.end, limit):
            out.append(Window(start, min(r.end, start + limit)))
    return out


def decode(
    model: Any,
    pcm: PcmReader,
    spans: Sequence[Window],
    *,
    language: str | None,
    beam_size: int,
    batch_size: int,
    cancel: threading.Event,
) -> Iterator[dict[str, Any]]:
    """Segments (recording times, words included) of the windows, in order, a batch at a time."""
    from faster_whisper import BatchedInferencePipeline

    for first in range(0, len(spans), GROUP):
        group = spans[first : first + GROUP]
        audio, placed = _compact(pcm, group)
        clips = [{"start": a / SAMPLE_RATE, "end": (a + size) / SAMPLE_RATE} for a, size, _ in placed]
        starts = [a / SAMPLE_RATE for a, _, _ in placed]
        segments, _info = BatchedInferencePipeline(model).transcribe(
            audio,
            language=language,
            beam_size=beam_size,
            batch_size=batch_size,
            word_timestamps=True,
            # One segment per window: with timestamps, a window's last sentence was
            # sometimes dropped (nothing seeks back as sequential decoding does).
            # Segments are cut at sentence ends from the word times instead.
            without_timestamps=True,
            vad_filter=False,
            clip_timestamps=clips,
        )
        for segment in segments:
            if cancel.is_set():
                return
            # By the segment's middle: its start is rounded to 1 ms and may fall just before its window's.
            i = max(0, bisect.bisect_right(starts, (segment.start + segment.end) / 2 + 0.005) - 1)
            at, _size, window = placed[i]
            shift = (window.start - at) / SAMPLE_RATE
            edge = window.end / SAMPLE_RATE

            def moved(t: float, shift: float = shift, edge: float = edge) -> float:
                return round(min(float(t) + shift, edge), 3)

            words = [{"start": moved(w.start), "end": moved(w.end), "word": w.word} for w in segment.words or ()]
            if not words:
                text = segment.text.strip()
                yield {"start": moved(segment.start), "end": moved(segment.end), "text": text, "words": []}
            else:
                yield from sentences(words)
            if cancel.is_set():  # before asking for more: the next batch is decoded on demand
                return


def _compact(pcm: PcmReader, group: Sequence[Window]) -> tuple[np.ndarray, list[tuple[int, int, Window]]]:
    """The windows' samples back to back (each padded to ``MIN_SAMPLES``): where each begins, its length."""
    parts: list[np.ndarray] = []
    placed: list[tuple[int, int, Window]] = []
    at = 0
    for w in group:
        samples = pcm.read(w.start, w.end)
        if samples.size < MIN_SAMPLES:
            samples = np.pad(samples, (0, MIN_SAMPLES - samples.size))
        placed.append((at, samples.size, w))
        parts.append(samples)
        at += samples.size
    return np.concatenate(parts).astype(np.float32, copy=False), placed


_SENTENCE_END = (".", "?", "!", "…", "。", "？", "！")


def sentences(words: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Segments of whole sentences (a word ending in . ? ! closes one), from timed words."""
    run: list[dict[str, Any]] = []
    for w in words:
        run.append(w)
        if w["word"].strip().endswith(_SENTENCE_END):
            yield segment_of(run)
            run = []
    if run:
        yield segment_of(run)


def segment_of(words: list[dict[str, Any]]) -> dict[str, Any]:
    """One segment of consecutive timed words (faster-whisper's words carry their leading space)."""
    text = "".join(w["word"] for w in words).strip()
    return {"start": words[0]["start"], "end": words[-1]["end"], "text": text, "words": words}
