"""The offline engine: faster-whisper on this machine, in the calling thread.

By default it runs Whisper base multilingual from wheels (``models``),
its files checked against their published digests before the first load.

Recognition (``OfflineEngine.recognize``, blocking: the provider runs it in a
worker thread):

1. **Where the speech is**: the regions normalize found (``speech``, kept with
   the piece), so speech is searched for once per recording; for a piece
   stored without them, Silero VAD (``vad``) over the whole file, a block at a
   time. Only those regions are ever decoded, so silence, music and noise
   cannot come back as invented words, and a recording with no speech ends
   with an empty transcript.
2. **Which language**: the one asked (the sender's hint, else
   ``[offline] language``), or, with ``auto``, a vote of the model's language
   probabilities over up to five windows of speech spread through the file:
   a recording that opens with silence, music or a minute of another
   language is still found right. Batched decoding votes on the encoder's own
   output for the windows it decodes first (``batches``).
3. **Decoding**: the regions, packed into windows of up to 30 seconds,
   decoded ``[offline] batch_size`` windows at a time (``batches``; memory
   bounded by a group of windows, whatever the length), with word timestamps,
   in the recording's own times. With ``batch_size = 1`` the regions are
   joined into groups and decoded one window after another instead.
4. **Speakers** (with the ``diarize`` extra): who speaks when, found in a
   thread of their own while the words are decoded (``diarizer.Alongside``),
   then laid over the words.

As it goes it tells the caller the language (as soon as it is known), what it
is doing (recognizing, finding speakers) and how far it has come: with
speakers, recognition counts for ``RECOGNITION_SHARE`` of a piece's
progress and speakers for the rest, both as they go, so progress keeps
moving until the later of the two is done.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import tempfile
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sidecar.activity import Activity
from sidecar.media import audio as audio_io
from sidecar.media import heap, vad
from sidecar.media.pcm import PcmReader, is_pcm16_mono
from sidecar.outcome import HaltCode, PermanentError, RetryableError, TranscriberError
from sidecar.providers.base import AudioSpec
from sidecar.providers.offline import batches as offline_batches
from sidecar.providers.offline import diarizer
from sidecar.providers.offline.models import BUNDLED, DEFAULT_MODEL, ModelLoadError, load_model, model_directory
from sidecar.providers.offline.pace import Pace
from sidecar.runtime.threads import openmp_fits, openmp_replicas, streams_and_threads, threads_for, usable_cpus
from sidecar.settings import OfflineSettings
from sidecar.transcript.languages import AUTO, code_of
from sidecar.transcript.model import Transcript
from sidecar.transcript.speakers import assign

log = logging.getLogger("transcriber.offline")

__all__ = ["OfflineEngine", "RecognitionCancelled", "split_at_pauses", "vote_language"]

SAMPLE_RATE = vad.SAMPLE_RATE
# The longest piece of a recording recognized in one go.
PIECE = timedelta(hours=1)
# Regions are decoded in groups of at most this much speech (memory, and how
# often a cancellation is noticed between groups).
GROUP_SECONDS = 600.0
# Words this far apart in one decoded segment were in different speech regions.
SPLIT_PAUSE = 2.0
# Groups shorter than a second are padded up to one (see offline_batches).
MIN_SAMPLES = offline_batches.MIN_SAMPLES
# Language vote: windows of up to 30 s of speech (what the model reads at once).
VOTE_WINDOWS = 5
_WINDOW = 30 * SAMPLE_RATE
# With speakers, the share of a piece's progress that recognition counts for; finding
# the speakers counts for the rest. Measured (PF10, an hour of dialogues, one worker on
# 2 cores): 210 s to recognize, 110 s more with speakers, so about two thirds.
RECOGNITION_SHARE = 0.65
# While the words are done and the speakers are not: how often progress is told (and a cancel seen).
_SPEAKERS_TICK = 1.0


class RecognitionCancelled(TranscriberError):
    """Recognition stopped because it was cancelled."""


class OfflineEngine:
    """faster-whisper with the settings' model, threads and speakers; every call blocks the calling thread."""

    def __init__(self, settings: OfflineSettings, *, workers: int = 1) -> None:
        self._settings = settings
        self.model = settings.model or DEFAULT_MODEL
        # Every worker of this process may be decoding at once, each on the CPUs this process may
        # use (its affinity and cgroup quota, not the host's), less those the speakers take beside
        # it (diarizer.Alongside): measured on a 30-second note, 2 cores, speakers on, one decoding
        # thread beside the speakers' one (2.9-3.2 s) beat two beside it (3.3-3.5 s: three busy
        # threads on two cores). Batched decoding runs ``streams`` batches of a recording at once
        # when ``threads`` is set below the cores (streams_and_threads). The model has a replica for
        # each call that may run at once, a worker's or a stream's, unless their threads would outnumber
        # the CPUs (below); a call beyond them waits for one.
        wanted = settings.diarize if settings.diarize is not None else diarizer.installed()
        cpus = usable_cpus()
        speakers = max(1, cpus // 2) if wanted else 0
        cores = max(1, cpus - speakers)
        if settings.batch_size > 1:
            self.streams, self.threads = streams_and_threads(settings.threads, cores)
        else:
            self.streams, self.threads = 1, threads_for(settings.threads, cores)
        self.diarizer = diarizer.OfflineDiarizer(speakers) if wanted else None
        # With speakers, a short recording (one batch of windows) decoded alone has its windows
        # encoded on every CPU by a copy of the model loaded for that (about 120 MB; CTranslate2 fixes
        # a model's threads when it loads), and its speakers start after them: on a 30-second note,
        # 2 cores, no AMX, the engine's 2.5-2.8 s became 2.2-2.3 s (the encoder 0.77 s on one thread,
        # 0.47 s on two; on two beside the speakers' thread, 0.9 s). Decoding stays on its own
        # threads: a second thread made a step slower, not faster (measured in a script, which
        # openmp_replicas' effect slowed too: not measured again). A longer recording's speakers
        # take longer than its words, and start at once (``_segments``).
        self.ahead_threads = (
            cpus if wanted and self.streams == 1 and settings.batch_size > 1 and self.threads < cpus else 0
        )
        # Replicas for every worker and stream, unless OpenMP's threads would then outnumber the CPUs:
        # then the workers share (openmp_replicas says why), and the copy is left out if it still would.
        calls = max(1, workers, self.streams)
        self.replicas = openmp_replicas(calls, self.streams, self.threads, cpus, self.ahead_threads)
        if self.ahead_threads and not openmp_fits(self.replicas, self.threads, cpus, self.ahead_threads):
            self.ahead_threads = 0
        self._decoding = 0
        self._decoding_lock = threading.Lock()

    def load(self) -> Any:
        """The model, verified and loaded on first use (once per process), with its copy for the first
        windows when there is one (``ahead_threads``)."""
        return self._load()[0]

    def _load(self) -> tuple[Any, Any | None]:
        """The model, and the copy that encodes a lone recording's first windows on every CPU (or None)."""
        ref, compute_type = self._ref(), self._settings.compute_type
        model = load_model(ref, compute_type, self.threads, self.replicas)
        return model, load_model(ref, compute_type, self.ahead_threads, 1) if self.ahead_threads else None

    def _ref(self) -> str:
        name = self.model
        if name in BUNDLED:
            return str(model_directory(name, self._settings.cache_dir).resolve())
        candidate = Path(name).expanduser()
        if candidate.is_dir():
            return str(candidate.resolve())
        if name.startswith(("/", ".", "~")):
            # Clearly meant as a directory: do not let it fall through to a hub lookup.
            raise ModelLoadError(f"the offline model directory {candidate} does not exist")
        return name  # a model name; faster-whisper fetches it from the hub

    @contextmanager
    def _turn(self) -> Iterator[bool]:
        """A recognition's time in this engine: True when no other is decoding beside it."""
        with self._decoding_lock:
            self._decoding += 1
            alone = self._decoding == 1
        try:
            yield alone
        finally:
            with self._decoding_lock:
                self._decoding -= 1

    def recognize(
        self,
        audio: Path,
        cancel: threading.Event,
        *,
        speech: Sequence[tuple[int, int]] | None = None,
        language: str | None = None,
        words: Sequence[str] = (),
        report: Callable[[float], None] | None = None,
        found_language: Callable[[str], None] | None = None,
        doing: Callable[[Activity], None] | None = None,
    ) -> bytes:
        """Recognize ``audio``: the JSON of a ``Transcript`` (segments with word timings, the language used).

        ``speech``: where the speech is ((start, end) in ms of ``audio``), as normalize found it;
        None: searched for here. ``words``: names and terms the sender taught; the decoder is
        biased towards them (faster-whisper's ``hotwords``: they stand before each window as text
        said earlier).

        ``report`` is told how many seconds of ``audio`` are done (with speakers, recognition
        counts for ``RECOGNITION_SHARE`` of them), ``found_language`` the language as soon as
        it is known, ``doing`` each change of what this is doing; all from this thread.
        """
        _check(cancel)
        model, ahead = self._load()
        if doing is not None:
            doing(Activity.RECOGNIZING)
        with self._turn() as alone, _pcm16(audio, cancel) as pcm:
            if speech is None:
                regions, frames = vad.find_speech_in_blocks(
                    _watched(pcm.blocks(vad.BLOCK_SECONDS), cancel), usable_cpus()
                )
            else:
                regions, frames = _regions(speech, pcm.frames), pcm.frames
            # The language asked for, else voted: by the batched decoder on the encoder's output of the
            # windows it decodes first (no pass of its own), or here for one-window-at-a-time decoding.
            chosen = self._language(model, regions, language)
            if chosen is None and regions and self._settings.batch_size <= 1:
                chosen = self._vote(model, pcm, regions)
            voted: list[str] = []

            def heard(code: str) -> None:
                voted.append(code)
                if found_language is not None:
                    found_language(code)

            if chosen is not None:
                heard(chosen)
            duration = frames / SAMPLE_RATE
            # Speakers are found beside the words (diarizer.Alongside says why), once there is speech;
            # alone, once the first windows are encoded (``ahead_threads`` says why).
            ahead = ahead if alone else None
            speakers = None
            if self.diarizer is not None and regions:
                speakers = diarizer.Alongside(self.diarizer, pcm.path, later=ahead is not None)
            progress = _Progress(report, duration, speakers)
            try:
                segments: list[dict[str, Any]] = []
                hotwords = " ".join(words) or None
                batched = self._settings.batch_size > 1
                on_ahead = speakers.start if speakers is not None and ahead is not None else None
                for segment in self._segments(
                    model, pcm, regions, chosen, cancel, heard, hotwords, progress, ahead, on_ahead
                ):
                    segments.extend(split_at_pauses(segment))
                    if not batched:  # batched decoding tells its progress window by window (pace)
                        progress.words(segment["end"])
                _check(cancel)
                found = None
                if speakers is not None and segments:
                    progress.words(duration)  # the words are done: their share in full
                    if not speakers.wait(0) and doing is not None:
                        doing(Activity.FINDING_SPEAKERS)
                    while not speakers.wait(_SPEAKERS_TICK):
                        _check(cancel)
                        progress.tell()
                    found = speakers.result()
                    progress.tell()
            finally:
                if speakers is not None:
                    speakers.stop()  # at once when finished; after its window when the words failed
                heap.trim()  # what decoding kept for reuse handed back while the worker waits (heap says why)
        document = {
            "text": " ".join(s["text"] for s in segments if s["text"]),
            "language": voted[0] if voted else None,
            "duration": _r(frames / SAMPLE_RATE),
            "segments": segments,
        }
        if found is not None and found.turns:
            # The voices travel with the result, so finalize can match speakers across pieces.
            transcript = assign(Transcript.model_validate(document), found.turns)
            transcript = transcript.model_copy(update={"voices": found.voices})
            return transcript.model_dump_json(exclude_none=True).encode()
        return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()

    def _language(self, model: Any, regions: Sequence[vad.Region], asked: str | None) -> str | None:
        """The language asked for (the sender's hint, else the settings'); None: to be voted (or no speech)."""
        wanted = asked or self._settings.language or AUTO
        if wanted != AUTO:
            return code_of(wanted) or wanted
        if not model.model.is_multilingual:
            return "en"
        return None

    def _vote(self, model: Any, pcm: PcmReader, regions: Sequence[vad.Region]) -> str:
        try:
            return vote_language(model, pcm, regions)
        except Exception as e:
            raise _engine_failure(e) from e

    def _segments(
        self,
        model: Any,
        pcm: PcmReader,
        regions: Sequence[vad.Region],
        language: str | None,
        cancel: threading.Event,
        on_language: Callable[[str], None],
        hotwords: str | None = None,
        progress: _Progress | None = None,
        ahead: Any | None = None,
        on_ahead: Callable[[], None] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The recording's segments in its own times: batched (T1; the language voted there when
        ``language`` is None; ``progress`` told window by window; the first windows encoded by
        ``ahead``, then ``on_ahead`` told), or one window after another."""
        if self._settings.batch_size > 1:
            spans = offline_batches.windows(regions)
            if len(spans) > self._settings.batch_size and on_ahead is not None:
                # Longer than its first batch: its speakers take longer than its words (an hour of
                # dialogues, 2 cores: 294 s with them at once, 317 s after the vote), so they start now.
                on_ahead()
                ahead = on_ahead = None
            pace = None
            if progress is not None and spans:
                # Windows done as a share of the recording: each window is about as much work.
                share = progress.duration / len(spans)
                pace = Pace(lambda windows: progress.words(windows * share), self._settings.beam_size)
            try:
                yield from offline_batches.decode(
                    model,
                    pcm,
                    spans,
                    language=language,
                    beam_size=self._settings.beam_size,
                    batch_size=self._settings.batch_size,
                    cancel=cancel,
                    on_language=on_language,
                    hotwords=hotwords,
                    pace=pace,
                    streams=self.streams,
                    ahead=ahead,
                    on_ahead=on_ahead,
                )
            except TranscriberError:
                raise
            except Exception as e:
                raise _engine_failure(e) from e
            finally:
                if pace is not None:
                    pace.close()
            return
        for group in _groups(regions, int(GROUP_SECONDS * SAMPLE_RATE)):
            yield from self._decode(model, pcm, group, language, cancel, hotwords)

    def _decode(
        self,
        model: Any,
        pcm: PcmReader,
        group: Sequence[vad.Region],
        language: str | None,
        cancel: threading.Event,
        hotwords: str | None,
    ) -> Iterator[dict[str, Any]]:
        from faster_whisper.transcribe import restore_speech_timestamps

        speech = _join(pcm, group)
        chunks = [{"start": r.start, "end": r.end} for r in group]
        try:
            # condition_on_previous_text=False: on long audio, conditioning on
            # its own earlier output made the model loop or drop sentences.
            segments, _info = model.transcribe(
                speech,
                language=language,
                beam_size=self._settings.beam_size,
                word_timestamps=True,
                condition_on_previous_text=False,
                vad_filter=False,
                hotwords=hotwords,
            )
            # Segments come lazily, one 30-second window at a time, mapped from
            # the joined speech back to the recording's times.
            for segment in restore_speech_timestamps(segments, chunks, SAMPLE_RATE):
                if cancel.is_set():
                    segments.close()
                    raise RecognitionCancelled("recognition was cancelled")
                yield {
                    "start": _r(segment.start),
                    "end": _r(segment.end),
                    "text": segment.text.strip(),
                    "words": [{"start": _r(w.start), "end": _r(w.end), "word": w.word} for w in segment.words or ()],
                }
        except TranscriberError:
            raise
        except Exception as e:
            raise _engine_failure(e) from e


class _Progress:
    """Seconds of the piece done, told to ``report``: the words' share and the speakers' together."""

    def __init__(
        self, report: Callable[[float], None] | None, duration: float, speakers: diarizer.Alongside | None
    ) -> None:
        self._report, self.duration, self._speakers = report, duration, speakers
        self._share = RECOGNITION_SHARE if speakers is not None else 1.0
        self._words = 0.0

    def words(self, seconds: float) -> None:
        self._words = max(self._words, seconds)
        self.tell()

    def tell(self) -> None:
        if self._report is None:
            return
        speakers = self._speakers.done if self._speakers is not None else 0.0
        self._report(min(self._words, self.duration) * self._share + self.duration * (1 - self._share) * speakers)


def split_at_pauses(segment: dict[str, Any], pause: float = SPLIT_PAUSE) -> Iterator[dict[str, Any]]:
    """A segment cut where its words are ``pause`` seconds or more apart.

    Speech regions are decoded joined, so one segment can span two regions
    minutes apart in the recording; as a subtitle cue it would stay on screen
    through the silence between them.
    """
    words = segment["words"]
    if len(words) < 2 or all(b["start"] - a["end"] < pause for a, b in itertools.pairwise(words)):
        yield segment
        return
    run = [words[0]]
    for a, b in itertools.pairwise(words):
        if b["start"] - a["end"] >= pause:
            yield offline_batches.segment_of(run)
            run = []
        run.append(b)
    yield offline_batches.segment_of(run)


def vote_language(model: Any, pcm: PcmReader, regions: Sequence[vad.Region], *, windows: int = VOTE_WINDOWS) -> str:
    """The language with the most probability over windows of speech spread through the recording.

    Each window (up to 30 s of speech) adds the model's probability of every
    language, weighted by how much speech it holds: one window of music,
    silence or another voice at the start cannot outvote the rest.
    """
    total = sum(r.samples for r in regions)
    count = max(1, min(windows, math.ceil(total / _WINDOW)))
    starts: list[int] = []
    done = 0
    targets = [total * (k + 0.5) / count for k in range(count)]
    for i, r in enumerate(regions):
        while targets and done + r.samples > targets[0]:
            targets.pop(0)
            if not starts or starts[-1] != i:
                starts.append(i)
        done += r.samples
    votes: dict[str, float] = defaultdict(float)
    for i in starts:
        window = _join(pcm, _take(regions[i:], _WINDOW), limit=_WINDOW)
        _language, _probability, ranked = model.detect_language(audio=window)
        weight = min(window.size, _WINDOW) / _WINDOW
        for code, probability in ranked:
            votes[code] += probability * weight
    return max(votes, key=lambda code: votes[code])


# --- helpers ---------------------------------------------------------------------


def _check(cancel: threading.Event) -> None:
    if cancel.is_set():
        raise RecognitionCancelled("recognition was cancelled")


def _watched(blocks: Iterator[npt.NDArray[np.float32]], cancel: threading.Event) -> Iterator[npt.NDArray[np.float32]]:
    for block in blocks:
        _check(cancel)
        yield block


@contextmanager
def _pcm16(path: Path, cancel: threading.Event) -> Iterator[PcmReader]:
    """``path`` as 16 kHz mono PCM: read in place when it already is, else converted to a temporary file."""
    if is_pcm16_mono(path, SAMPLE_RATE):
        with PcmReader(path) as reader:
            yield reader
        return
    with tempfile.TemporaryDirectory(prefix="transcriber-pcm-") as tmp:
        spec = AudioSpec(format="wav_pcm16", sample_rate=SAMPLE_RATE, channels=1, bitrate=None)
        try:
            converted = audio_io.normalize(path, Path(tmp) / "audio.wav", spec, cancel=cancel)
        except audio_io.NormalizeCancelled as e:
            raise RecognitionCancelled("recognition was cancelled") from e
        with PcmReader(converted.path) as reader:
            yield reader


def _regions(speech: Sequence[tuple[int, int]], frames: int) -> list[vad.Region]:
    """Regions in ms (as stored with a piece) as regions of its samples, within its ``frames``."""
    per_ms = SAMPLE_RATE // 1000
    longest = int(vad.MAX_REGION_SECONDS * SAMPLE_RATE)
    regions: list[vad.Region] = []
    for start_ms, end_ms in speech:
        # Kept to the promises of vad's own regions (in order, apart, none past 30 s) whatever
        # the rounding to milliseconds did.
        start = max(start_ms * per_ms, regions[-1].end if regions else 0)
        end = min(frames, end_ms * per_ms, start + longest)
        if end > start:
            regions.append(vad.Region(start, end))
    return regions


def _groups(regions: Sequence[vad.Region], max_samples: int) -> Iterator[list[vad.Region]]:
    group: list[vad.Region] = []
    held = 0
    for r in regions:
        if group and held + r.samples > max_samples:
            yield group
            group, held = [], 0
        group.append(r)
        held += r.samples
    if group:
        yield group


def _take(regions: Sequence[vad.Region], samples: int) -> list[vad.Region]:
    """The first regions that together hold ``samples`` of speech (at least one)."""
    taken: list[vad.Region] = []
    held = 0
    for r in regions:
        if taken and held >= samples:
            break
        taken.append(r)
        held += r.samples
    return taken


def _join(pcm: PcmReader, regions: Sequence[vad.Region], *, limit: int | None = None) -> npt.NDArray[np.float32]:
    """The regions' samples back to back, cut at ``limit``, padded to at least ``MIN_SAMPLES``."""
    parts = [pcm.read(r.start, r.end) for r in regions]
    joined = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    if limit is not None:
        joined = joined[:limit]
    if joined.size < MIN_SAMPLES:
        joined = np.pad(joined, (0, MIN_SAMPLES - joined.size))
    return joined


def _engine_failure(error: Exception) -> TranscriberError:
    """An engine error, classified: out of memory may pass; anything else repeats on the same input."""
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, MemoryError) or "bad_alloc" in text or "out of memory" in text.lower():
        return RetryableError(f"the offline engine ran out of memory ({text[:300]})")
    return PermanentError(
        HaltCode.PROVIDER_FAILED,
        f"the offline engine failed on this recording ({text[:300]}); the same input fails the same way, "
        "so it is not retried",
    )


def _r(seconds: float) -> float:
    return round(float(seconds), 3)
