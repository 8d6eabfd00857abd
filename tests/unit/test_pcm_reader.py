"""Reading 16 kHz mono PCM by sample range (sidecar.media.pcm), from several threads at once."""

from __future__ import annotations

import random
import threading
import wave
from pathlib import Path

import numpy as np

from sidecar.media.pcm import PcmReader


def _ramp(path: Path, frames: int) -> np.ndarray:
    """A WAV whose every sample says where it is (its index, wrapped), and those samples as floats."""
    values = (np.arange(frames) % 32768).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(values.tobytes())
    return values.astype(np.float32) / 32768.0


def test_threads_reading_at_once_each_get_their_own_range(tmp_path: Path) -> None:
    """Windows decoded in streams read the same file at once: no read may land where another sought."""
    frames = 16000 * 60
    expected = _ramp(tmp_path / "ramp.wav", frames)
    wrong: list[tuple[int, int]] = []
    start = threading.Barrier(8)

    with PcmReader(tmp_path / "ramp.wav") as pcm:

        def reader(seed: int) -> None:
            rng = random.Random(seed)
            start.wait()
            for _ in range(300):
                a = rng.randrange(frames - 16000)
                b = a + rng.randrange(1, 16000)
                if not np.array_equal(pcm.read(a, b), expected[a:b]):
                    wrong.append((a, b))

        threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert wrong == []


def test_a_range_past_the_end_is_clipped(tmp_path: Path) -> None:
    expected = _ramp(tmp_path / "ramp.wav", 1000)
    with PcmReader(tmp_path / "ramp.wav") as pcm:
        assert np.array_equal(pcm.read(900, 5000), expected[900:])
        assert pcm.read(2000, 3000).size == 0
        assert np.array_equal(pcm.read(-5, 10), expected[:10])
