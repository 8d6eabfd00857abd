"""A fake recognizer for long synthetic recordings: it hears which committed clip is where.

The long recordings of the tests are digital silence with spoken clips at
known times (``testkit.audio.long_recording``). The fake cloud providers
decode the audio they are sent exactly as a real service would have to,
find the stretches of sound in it, and name each by the clip whose loudness
envelope it matches best, so what comes back depends on the audio actually
sent: a piece cut in the wrong place, shifted, or sent twice shows in the
transcript.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
import numpy.typing as npt

from testkit.audio import clip_text

RATE = 16000
FRAME = 320  # 20 ms
LOUD = 0.01  # RMS of a frame with sound in it
GAP = 1.0  # seconds of quiet that end a stretch (clips pause less than this inside)
BINS = 64


@dataclass(frozen=True)
class Heard:
    start: float  # seconds from the start of the audio sent
    end: float
    text: str


def decode(data: bytes) -> npt.NDArray[Any]:
    """Any container PyAV reads, as 16 kHz mono float samples."""
    resampler = av.AudioResampler(format="flt", layout="mono", rate=RATE)
    chunks: list[npt.NDArray[Any]] = []
    with av.open(io.BytesIO(data), mode="r") as inp:
        for frame in inp.decode(audio=0):
            chunks.extend(f.to_ndarray().reshape(-1) for f in resampler.resample(frame))
    chunks.extend(f.to_ndarray().reshape(-1) for f in resampler.resample(None))
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)


def _loudness(samples: npt.NDArray[Any]) -> npt.NDArray[Any]:
    frames = samples[: len(samples) // FRAME * FRAME].reshape(-1, FRAME).astype(np.float64)
    loud: npt.NDArray[Any] = np.sqrt((frames**2).mean(axis=1))
    return loud


def _stretches(loud: npt.NDArray[Any]) -> list[tuple[int, int]]:
    """Frame ranges with sound, quiet gaps shorter than ``GAP`` bridged."""
    on = np.nonzero(loud > LOUD)[0]
    if not len(on):
        return []
    out: list[tuple[int, int]] = []
    start = prev = int(on[0])
    for i in on[1:]:
        if (i - prev) * FRAME / RATE > GAP:
            out.append((start, prev + 1))
            start = int(i)
        prev = int(i)
    out.append((start, prev + 1))
    return out


def _envelope(loud: npt.NDArray[Any]) -> npt.NDArray[Any]:
    e = np.interp(np.linspace(0, len(loud) - 1, BINS), np.arange(len(loud)), loud)
    e = e - e.mean()
    unit: npt.NDArray[Any] = e / (np.linalg.norm(e) or 1.0)
    return unit


class Listener:
    """Knows the clips by their envelopes; names the stretches of sound in audio it is given."""

    def __init__(self, clips: list[Path]) -> None:
        self._known: list[tuple[str, float, npt.NDArray[Any]]] = []
        for path in clips:
            loud = _loudness(decode(path.read_bytes()))
            [(a, b)] = _stretches(loud)
            self._known.append((clip_text(path), (b - a) * FRAME / RATE, _envelope(loud[a:b])))

    def hear(self, data: bytes) -> tuple[float, list[Heard]]:
        """How long the audio is (seconds), and what is said in it when."""
        samples = decode(data)
        loud = _loudness(samples)
        heard = []
        for a, b in _stretches(loud):
            length, envelope = (b - a) * FRAME / RATE, _envelope(loud[a:b])
            text = max(self._known, key=lambda k: float(envelope @ k[2]) - abs(length - k[1]))[0]
            heard.append(Heard(a * FRAME / RATE, b * FRAME / RATE, text))
        return len(samples) / RATE, heard
