"""Reading 16 kHz mono 16-bit PCM WAV by sample ranges, without decoding the rest.

The offline engine's input is normalized to exactly this form, so any stretch
of a six-hour recording (a speech region, a window to vote on the language)
is one seek and one read away, and memory holds only that stretch.
"""

from __future__ import annotations

import threading
import wave
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import numpy as np
import numpy.typing as npt

__all__ = ["PcmReader", "is_pcm16_mono", "quiet_cut"]

_SCALE = 1.0 / 32768.0


def is_pcm16_mono(path: Path, rate: int = 16000) -> bool:
    """Whether ``path`` is a WAV file this reader can read directly."""
    try:
        with wave.open(str(path), "rb") as w:
            return (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getcomptype()) == (1, 2, rate, "NONE")
    except (wave.Error, EOFError, OSError):
        return False


class PcmReader:
    """Float32 samples of a 16-bit mono WAV, read by range, from any thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._wave = wave.open(str(path), "rb")
        # A read is a seek and a read of one file position: two threads reading at once (windows
        # decoded in streams) would each read from where the other had sought.
        self._lock = threading.Lock()
        self.rate = self._wave.getframerate()
        self.frames = self._wave.getnframes()

    def __enter__(self) -> PcmReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._wave.close()

    def read(self, start: int, end: int) -> npt.NDArray[np.float32]:
        """Samples ``start`` to ``end`` (clipped to the file) as float32 in [-1, 1)."""
        start = max(0, min(start, self.frames))
        end = max(start, min(end, self.frames))
        with self._lock:
            self._wave.setpos(start)
            data = self._wave.readframes(end - start)
        return (np.frombuffer(data, dtype="<i2").astype(np.float32)) * np.float32(_SCALE)

    def blocks(self, seconds: float) -> Iterator[npt.NDArray[np.float32]]:
        """The whole file in consecutive blocks of about ``seconds``, each ending at a quiet moment."""
        size = max(int(seconds * self.rate), 1)
        start = 0
        while start < self.frames:
            block = self.read(start, start + size)
            if start + block.size < self.frames:
                # A copy, not a view: the view would hold the whole read while the block is kept.
                block = block[: quiet_cut(block, self.rate)].copy()
            yield block
            start += block.size


def quiet_cut(block: npt.NDArray[np.float32], rate: int, *, look_back: float = 10.0) -> int:
    """Where to end ``block``: after its quietest tenth of a second within the last ``look_back`` seconds.

    So that a cut between blocks rarely falls inside a word.
    """
    window = max(rate // 10, 1)
    first = max(block.size - int(look_back * rate), 0)
    tail = block[first:]
    usable = tail.size // window * window
    if usable == 0:
        return block.size
    energy = np.square(tail[:usable].reshape(-1, window)).mean(axis=1)
    return first + (int(np.argmin(energy)) + 1) * window
