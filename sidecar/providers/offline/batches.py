"""Batched decoding for the offline engine (T1): the speech of a piece, several 30-second windows at once.

The model reads 30 seconds at a time. Decoding those windows one after the
other (each waiting on the last) leaves most of the CPU's work per step
unbatched; faster-whisper's ``BatchedInferencePipeline`` decodes a batch of
windows together, and never conditions a window on the previous text, so it
cannot fall into the temperature-fallback loops sequential decoding meets on
repetitive speech.

The windows are ours, not the pipeline's: speech regions (found once, by
``vad``) are **packed** into windows of up to 30 seconds of audio. A short
pause between two regions stays in the window as it was spoken (it tells the
model where a sentence ends); a longer one is left out, so a window holds
speech, not silence. The model's cost is per window whatever it holds: a
recording of phrases 16 seconds apart, decoded stretch by stretch of the
recording, cost 2.8 windows of audio for each window of speech (bench PF9).
Each window remembers where its stretches lie in the recording, and every
time decoded in it is mapped back there.

Windows are decoded a group at a time from a compact array (the windows back
to back), so memory is bounded by the group, not the piece.

Only the decoder takes a batch as one (``_WindowByWindow``): the encoder and
the word alignment read one window at a time. Each holds a matrix per head
for every window it reads at once (the encoder 1,500 × 1,500, the alignment
tokens × 1,500 in every layer), and together they were slower too: on 2
cores four windows encoded at once took 2.07 s against 1.7 s one after
another, and their peak 0.3 GB more; six windows aligned at once 2.8 s and
287 MB against 1.8 s and 42 MB one at a time, the same word times.

With ``[offline] threads`` set below the cores, batches are decoded in
**streams**: as many at once as the cores hold, each from a thread of its own
on a replica of the model, the ``batch_size`` windows shared among them
(``in_streams``; ``streams_and_threads`` in ``sidecar.runtime.threads``).
Decoding is one token after another and each step's products are small, so
a batch gains little from each thread added; on 2 cores through the pipeline
the two ways were level (that function's docstring has the figures), on
more cores streams are what keeps them busy. Segments still come out in the
recording's order.

The language, when it is to be found (``language=None``), is voted on the
encoder's own output for windows spread through the piece, which are decoded
first: the vote costs no encoder pass of its own (one 30-second encoder pass
is about a third of a window's decoding on 2 cores).

The windows encoded before any decoding starts (the vote's, else the first
batch's) may be read by another copy of the model (``ahead``), one on more
threads: the engine hands one over when the speakers would otherwise take
the other CPUs from the start (``OfflineEngine.ahead_threads`` says when).
An encoder pass is one large product that every thread shares; a decoding
step is not.
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections import defaultdict
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from sidecar.media import heap, vad
from sidecar.providers.offline import loops
from sidecar.providers.offline.pace import Pace

__all__ = [
    "GROUP",
    "KEEP_PAUSE",
    "MIN_SAMPLES",
    "VOTE_WINDOWS",
    "WINDOW",
    "Window",
    "decode",
    "in_streams",
    "segment_of",
    "sentences",
    "windows",
]

SAMPLE_RATE = vad.SAMPLE_RATE
WINDOW = 30 * SAMPLE_RATE
# Windows decoded per call (held as samples and features at once): 8 × 30 s is 15 MB.
GROUP = 8
# The engine crashed on windows of 160–319 samples (faster-whisper 1.2.1):
# a window shorter than a second is padded with silence up to one.
MIN_SAMPLES = SAMPLE_RATE
# A pause between two regions up to this long stays in the window; a longer one is left out.
# Regions carry 400 ms of their own context on each side (vad), so speech never meets speech.
KEEP_PAUSE = SAMPLE_RATE
# The language vote: up to this many windows, spread through the piece.
VOTE_WINDOWS = 5


@dataclass(frozen=True)
class Window:
    """Stretches of the recording packed back to back, at most ``WINDOW`` samples in all.

    ``stretches``: (start, end) samples of the recording, in order and apart.
    """

    stretches: tuple[tuple[int, int], ...]

    @property
    def start(self) -> int:
        return self.stretches[0][0]

    @property
    def end(self) -> int:
        return self.stretches[-1][1]

    @property
    def samples(self) -> int:
        return sum(b - a for a, b in self.stretches)

    def in_recording(self, seconds: float) -> float:
        """A time in this window (seconds from its first sample) as a time of the recording.

        A time in the pause left out between two stretches (none can be: nothing was there) or
        past the end is held to the nearest stretch's edge.
        """
        at = max(0.0, seconds) * SAMPLE_RATE
        held = 0
        for a, b in self.stretches:
            if at <= held + (b - a):
                return round((a + at - held) / SAMPLE_RATE, 3)
            held += b - a
        return round(self.end / SAMPLE_RATE, 3)


def windows(regions: Sequence[vad.Region], limit: int = WINDOW, keep_pause: int = KEEP_PAUSE) -> list[Window]:
    """The regions packed into windows of at most ``limit`` samples, in order.

    A region joins the last stretch when the pause before it is at most ``keep_pause`` (the pause
    stays), else it starts a stretch of its own in the same window; a window that cannot take the
    region whole is closed. A region longer than a window (vad promises none) is split.
    """
    out: list[list[tuple[int, int]]] = []
    held = 0
    for r in regions:
        for start in range(r.start, r.end, limit):
            end = min(r.end, start + limit)
            if out:
                last_start, last_end = out[-1][-1]
                joined = start - last_end <= keep_pause
                cost = end - last_end if joined else end - start
                if held + cost <= limit:
                    if joined:
                        out[-1][-1] = (last_start, end)
                    else:
                        out[-1].append((start, end))
                    held += cost
                    continue
            out.append([(start, end)])
            held = end - start
    return [Window(tuple(w)) for w in out]


class _Stopped(Exception):
    """Raised inside faster-whisper's batch, between two windows, when the recognition is cancelled."""


def decode(
    model: Any,
    pcm: Any,
    spans: Sequence[Window],
    *,
    language: str | None,
    beam_size: int,
    batch_size: int,
    cancel: threading.Event,
    on_language: Callable[[str], None] | None = None,
    hotwords: str | None = None,
    pace: Pace | None = None,
    streams: int = 1,
    ahead: Any | None = None,
    on_ahead: Callable[[], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """Segments (recording times, words included) of the windows, in order, a batch at a time.

    ``language`` None: voted first, on windows spread through ``spans`` (``on_language`` hears it
    before any segment comes); those windows' segments wait for their turn.

    ``ahead``: a copy of the model on more threads, whose encoder reads the windows encoded before
    any decoding starts (the vote's, else the first batch's; ``on_ahead`` is told once they are).

    ``hotwords``: names and terms the decoder is biased towards (faster-whisper's own).
    ``pace`` hears each window read, decoded and aligned (``pace`` says why).

    ``cancel`` set: no more segments. It is seen before each window the encoder or the alignment
    reads, so a stop waits for at most one batch's decoding (a batch of 8 on one thread of a
    speakers' run took longer than a service manager's patience), and the caller sees it set.
    """
    try:
        if not spans:
            return
        streams = max(1, min(streams, batch_size))
        encoder = _WindowByWindow(model, cancel, pace, ahead)

        def decoded(chosen: list[int], language: str) -> Iterator[tuple[int, dict[str, Any]]]:
            """(window index, segment) of the windows ``chosen``, in their order."""
            if streams == 1:
                # Whole batches per group, as for the first one: only the piece's last batch may run short.
                size = batch_size * max(1, GROUP // batch_size)
                for start in range(0, len(chosen), size):
                    group = chosen[start : start + size]
                    yield from _decode_group(encoder, pcm, spans, group, language, beam_size, batch_size, hotwords)
                    if cancel.is_set():  # before asking for more: the next batch is decoded on demand
                        return
                    # A group's buffers handed back before the next (an hour's peak 971 → 959 MB at batch 6).
                    heap.trim()
                return
            each = batch_size // streams

            def one(batch: list[int]) -> list[tuple[int, dict[str, Any]]]:
                return list(_decode_group(encoder, pcm, spans, batch, language, beam_size, each, hotwords))

            yield from in_streams([chosen[s : s + each] for s in range(0, len(chosen), each)], one, streams)

        held: dict[int, list[dict[str, Any]]] = defaultdict(list)
        first: list[int] = []
        if language is None:
            first = spread(len(spans), VOTE_WINDOWS)
            language = _vote(encoder, pcm, [spans[i] for i in first], streams)
            if on_ahead is not None:
                on_ahead()
            if on_language is not None:
                on_language(language)
            first = sorted(first + filling(first, len(spans), batch_size))
            # The voted windows' encoder output is let go as their batches take it: none outlives this group.
            for i, segment in decoded(first, language):
                held[i].append(segment)
            if cancel.is_set():
                return
        elif on_ahead is not None:
            if ahead is not None:  # the first batch read now, on the copy's threads, and kept for its turn
                _encode_kept(encoder, pcm, spans[:batch_size], streams)
            on_ahead()
        rest = [i for i in range(len(spans)) if i not in set(first)]
        waiting = sorted(held)
        while waiting and (not rest or waiting[0] < rest[0]):  # decoded first and due first: out now
            yield from held.pop(waiting.pop(0))
        for i, segment in decoded(rest, language):
            while waiting and waiting[0] < i:
                yield from held.pop(waiting.pop(0))
            yield segment
            if cancel.is_set():
                return
        for i in waiting:
            yield from held.pop(i)
    except _Stopped:  # raised between two windows: the caller sees ``cancel`` set
        return


T = TypeVar("T")


def in_streams(
    batches: Sequence[list[int]], run: Callable[[list[int]], list[T]], streams: int
) -> Generator[T, None, None]:
    """What ``run`` gives for each batch, in the batches' order, ``streams`` batches run at once.

    Each runs in a thread of its own (the decoder releases the GIL while it works). A batch that
    failed raises here, in its turn. When the caller stops early or a batch failed, the batches
    not yet started are dropped and those running are waited for (a cancel ends them at their
    next window), so nothing is left decoding behind the caller.
    """
    pool = ThreadPoolExecutor(max_workers=streams, thread_name_prefix="decoding")
    try:
        for running in [pool.submit(run, batch) for batch in batches]:
            yield from running.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def spread(count: int, most: int) -> list[int]:
    """Up to ``most`` indices of ``count`` items, spread evenly through them (the middle of each share)."""
    if count <= 0:
        return []
    n = min(most, count)
    return sorted({min(count - 1, int((k + 0.5) * count / n)) for k in range(n)})


def filling(chosen: Sequence[int], count: int, batch_size: int) -> list[int]:
    """The first indices of ``count`` windows not in ``chosen`` that fill its last batch.

    The voted windows are decoded as a group of their own; five of them in batches of four left
    a batch of one, and a batch costs nearly its full decoding time however few windows it holds
    (tokens come one step after another): measured on ten minutes of Russian, 1.9 s for one window
    against 5.4 s for four. Filled up, only a piece's very last batch can run short.
    """
    taken = set(chosen)
    want = -len(chosen) % batch_size
    return [i for i in range(count) if i not in taken][:want]


def _decode_group(
    model: Any,
    pcm: Any,
    spans: Sequence[Window],
    chosen: Sequence[int],
    language: str,
    beam_size: int,
    batch_size: int,
    hotwords: str | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(window index, segment) of the windows ``chosen`` (indices into ``spans``), in their order."""
    from faster_whisper import BatchedInferencePipeline

    if not chosen:
        return
    group = [spans[i] for i in chosen]
    audio, placed = _compact(pcm, group)
    clips = [{"start": a / SAMPLE_RATE, "end": (a + size) / SAMPLE_RATE} for a, size in placed]
    starts = [a / SAMPLE_RATE for a, _ in placed]
    segments, _info = BatchedInferencePipeline(model).transcribe(
        audio,
        language=language,
        beam_size=beam_size,
        batch_size=batch_size,
        word_timestamps=True,
        # One segment per window: with timestamps, a window's last sentence was
        # sometimes dropped (nothing seeks back as sequential decoding does).
        # Segments are cut at sentence ends from the word times instead.
        without_timestamps=True,
        vad_filter=False,
        clip_timestamps=clips,
        hotwords=hotwords,
    )
    for segment in segments:
        # By the segment's middle: its start is rounded to 1 ms and may fall just before its window's.
        k = max(0, bisect.bisect_right(starts, (segment.start + segment.end) / 2 + 0.005) - 1)
        at, window = starts[k], group[k]

        def moved(t: float, at: float = at, window: Window = window) -> float:
            return window.in_recording(float(t) - at)

        words = [{"start": moved(w.start), "end": moved(w.end), "word": w.word} for w in segment.words or ()]
        looping = segment.compression_ratio > loops.LOOPING_RATIO
        if looping:  # no fallback decoding here as one window at a time has: the loop is cut (loops says why)
            words = loops.cut(words, lambda w: str(w["word"]))
        if not words:
            text = segment.text.strip()
            if looping:
                text = " ".join(loops.cut(text.split(), str))
            yield chosen[k], {"start": moved(segment.start), "end": moved(segment.end), "text": text, "words": []}
        else:
            for piece in sentences(words):
                yield chosen[k], piece


def _compact(pcm: Any, group: Sequence[Window]) -> tuple[npt.NDArray[np.float32], list[tuple[int, int]]]:
    """The windows' samples back to back (each padded to ``MIN_SAMPLES``): where each begins, its length."""
    parts: list[npt.NDArray[np.float32]] = []
    placed: list[tuple[int, int]] = []
    at = 0
    for w in group:
        samples = np.concatenate([pcm.read(a, b) for a, b in w.stretches])
        if samples.size < MIN_SAMPLES:
            samples = np.pad(samples, (0, MIN_SAMPLES - samples.size))
        placed.append((at, samples.size))
        parts.append(samples)
        at += samples.size
    return np.concatenate(parts).astype(np.float32, copy=False), placed


# --- the language, voted on the encoder's output ------------------------------------


def _vote(encoder: _WindowByWindow, pcm: Any, group: Sequence[Window], streams: int = 1) -> str:
    """The language with the most probability over ``group``, each window weighted by the speech it holds.

    One window of music, silence or another voice at the start cannot outvote the rest. The
    encoder's output for these windows is kept in ``encoder`` for their decoding; in streams,
    ``streams`` windows are encoded at once.
    """
    encoded, placed = _encode_kept(encoder, pcm, group, streams)
    votes: dict[str, float] = defaultdict(float)
    for (_a, size), ranked in zip(placed, encoder.model.detect_language(encoded), strict=True):
        weight = min(size, WINDOW) / WINDOW
        for token, probability in ranked:
            votes[token[2:-2]] += probability * weight  # "<|ru|>" → "ru"
    return max(votes, key=lambda code: votes[code])


def _encode_kept(
    encoder: _WindowByWindow, pcm: Any, group: Sequence[Window], streams: int
) -> tuple[Any, list[tuple[int, int]]]:
    """The encoder's output for ``group``, kept in ``encoder`` for their decoding; where each window lies."""
    audio, placed = _compact(pcm, group)
    features = np.stack([encoder.features(audio[a : a + size]) for a, size in placed])
    return encoder.encode_kept(features, streams), placed


class _WindowByWindow:
    """The model, except that its encoder and word alignment read one window at a time, and what the
    encoder read for the vote is kept.

    Handed to ``BatchedInferencePipeline`` in the model's place: it asks ``encode`` for each
    batch's features and ``add_word_timestamps`` for its words. Each window is encoded and
    aligned on its own (the module's docstring says why) and the results joined for the batch;
    a window the vote already encoded is answered from what was kept, and let go. Before each
    window, a cancel stops the batch (``_Stopped``). Everything else is the model's own.

    ``ahead``: the copy of the model whose encoder reads what is kept (``decode`` says when).
    """

    def __init__(self, model: Any, cancel: threading.Event, pace: Pace | None = None, ahead: Any | None = None) -> None:
        self._inner = model
        self._cancel = cancel
        self._pace = pace
        self._ahead = ahead
        self._kept: dict[bytes, npt.NDArray[np.float32]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def model(self) -> Any:
        """The CTranslate2 model, its decoder's calls timed for ``pace``."""
        return self._inner.model if self._pace is None else _PacedDecoder(self._inner.model, self._pace)

    def features(self, samples: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """A window's features exactly as ``BatchedInferencePipeline.transcribe`` computes them for a clip."""
        from faster_whisper.audio import pad_or_trim

        return np.asarray(pad_or_trim(self._inner.feature_extractor(samples)[..., :-1]), dtype=np.float32)

    def encode_kept(self, features: npt.NDArray[np.float32], streams: int = 1) -> Any:
        """The encoder's output for ``features`` (the vote's windows), kept until their batch asks for it.

        In streams the windows are encoded ``streams`` at once, each on a thread of its own: one after another
        on a stream's thread, they would leave the other cores idle.
        """
        if streams > 1:
            rows = list(in_streams([[k] for k in range(len(features))], lambda k: [self._one(features[k[0]])], streams))
        else:
            rows = [self._one(f, self._ahead) for f in features]
        for f, row in zip(features, rows, strict=True):
            self._kept[_key(f)] = row
        return _as_batch(rows)

    def encode(self, features: npt.NDArray[np.float32]) -> Any:
        """What the decoder asks for a batch: each window encoded on its own, or handed over if kept."""
        if features.ndim == 2:
            features = np.expand_dims(features, 0)
        rows = []
        for f in features:
            kept = self._kept.pop(_key(f), None) if self._kept else None
            if kept is None and self._pace is not None:
                self._pace.encoding()
            rows.append(self._one(f) if kept is None else kept)
            if self._pace is not None:
                self._pace.encoded()
        return _as_batch(rows)

    def add_word_timestamps(self, *args: Any) -> Any:
        """The model's own, run on this object, so that the ``find_alignment`` it calls is the one below."""
        from faster_whisper.transcribe import WhisperModel

        return WhisperModel.add_word_timestamps(self, *args)

    def find_alignment(
        self, tokenizer: Any, text_tokens: list[list[int]], encoder_output: Any, num_frames: list[int], *args: Any
    ) -> list[Any]:
        """The words' alignment of a batch, window after window."""
        rows = np.asarray(encoder_output, dtype=np.float32)
        found: list[Any] = []
        for i, tokens in enumerate(text_tokens):
            self._check()
            found += self._inner.find_alignment(tokenizer, [tokens], _as_batch([rows[i]]), [num_frames[i]], *args)
            if self._pace is not None:
                self._pace.aligned()
        return found

    def _check(self) -> None:
        if self._cancel.is_set():
            raise _Stopped

    def _one(self, features: npt.NDArray[np.float32], model: Any | None = None) -> npt.NDArray[np.float32]:
        self._check()
        encoded: npt.NDArray[np.float32] = np.asarray(
            (model or self._inner).encode(np.ascontiguousarray(features[np.newaxis])), dtype=np.float32
        )[0]
        return encoded


class _PacedDecoder:
    """The CTranslate2 model, except that ``pace`` hears when a batch's decoding starts and ends."""

    def __init__(self, inner: Any, pace: Pace) -> None:
        self._inner, self._pace = inner, pace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def generate(self, features: Any, prompts: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        self._pace.generating(len(prompts))
        try:
            return self._inner.generate(features, prompts, *args, **kwargs)
        finally:
            self._pace.generated()


def _as_batch(rows: Sequence[npt.NDArray[np.float32]]) -> Any:
    """Encoder rows (one per window) as the one array the model's calls take."""
    import ctranslate2

    return ctranslate2.StorageView.from_array(np.ascontiguousarray(np.stack(rows)))


def _key(features: npt.NDArray[np.float32]) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(features).tobytes(), digest_size=16).digest()


# --- segments ----------------------------------------------------------------------------

_SENTENCE_END = (".", "?", "!", "…", "。", "？", "！")


def sentences(words: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Segments of whole sentences (a word ending in . ? ! closes one), from timed words."""
    run: list[dict[str, Any]] = []
    for w in words:
        run.append(w)
        if w["word"].strip().endswith(_SENTENCE_END):
            yield segment_of(run)
            run = []
    if run:
        yield segment_of(run)


def segment_of(words: list[dict[str, Any]]) -> dict[str, Any]:
    """One segment of consecutive timed words (faster-whisper's words carry their leading space)."""
    text = "".join(w["word"] for w in words).strip()
    return {"start": words[0]["start"], "end": words[-1]["end"], "text": text, "words": words}
