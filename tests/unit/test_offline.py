"""The offline provider with the real bundled model, and the instant provider."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from sidecar.audio import normalize
from sidecar.outcome import HaltCode, PermanentError
from sidecar.providers import offline
from sidecar.providers.base import Provider, StartRequest
from sidecar.providers.instant import InstantProvider
from sidecar.providers.offline import (
    BUNDLED_DIGESTS,
    ModelIntegrityError,
    ModelLoadError,
    OfflineProvider,
    bundled_model_dir,
    verify_model_dir,
)
from sidecar.settings import OfflineSettings
from sidecar.transcript import Transcript
from tests.audio_fixtures import concat_to_wav, decode_info
from tests.wer import word_errors

ROOT = Path(__file__).resolve().parents[2]
SPEECH = ROOT / "tests" / "data" / "speech"
CLIPS: dict[str, str] = json.loads((SPEECH / "clips.json").read_text(encoding="utf-8"))
SAMPLE = ROOT / "samples" / "sample.ogg"
SAMPLE_TEXT = (ROOT / "samples" / "sample.txt").read_text(encoding="utf-8")


def test_word_errors() -> None:
    assert word_errors("The cat sat.", "the cat sat") == (0, 3)
    assert word_errors("the cat sat", "the bat sat down") == (2, 3)
    assert word_errors("a b c", "") == (3, 3)


def _request(audio: Path, key: str = "rec1-1") -> StartRequest:
    return StartRequest(audio=audio, format="ogg_opus", duration_ms=0, attempt_key=key)


async def _no_progress(field: str, value: str) -> None:
    raise AssertionError(f"unexpected progress {field}={value}")


@pytest.fixture(scope="module")
def provider() -> Iterator[OfflineProvider]:
    p = OfflineProvider(OfflineSettings())
    p.load()
    yield p
    anyio.run(p.aclose)


def test_it_is_a_provider(provider: OfflineProvider) -> None:
    p: Provider = provider
    assert p.name == "offline"
    assert p.model == "tiny.en"
    spec = p.audio_spec
    assert (spec.format, spec.sample_rate, spec.channels) == ("wav_pcm16", 16000, 1)
    assert spec.max_bytes is None and spec.max_duration is None


def test_clips_word_error_rate(provider: OfflineProvider) -> None:
    errors = words = 0
    audio_seconds = busy = 0.0
    for name, reference in CLIPS.items():
        started = time.perf_counter()
        result = anyio.run(provider.start, _request(SPEECH / name, f"clip-{name}"), _no_progress)
        busy += time.perf_counter() - started
        assert result.operation_id == f"offline-clip-{name}"
        assert result.raw is not None
        transcript = provider.parse(result.raw)
        assert transcript.duration is not None
        audio_seconds += transcript.duration
        e, n = word_errors(reference, transcript.text)
        errors, words = errors + e, words + n
        print(f"{name}: {e}/{n} | {transcript.text}")
    wer = errors / words
    print(f"offline tiny.en on {len(CLIPS)} clips: WER {wer:.3f}, RTF {busy / audio_seconds:.3f}")
    assert wer <= 0.15


def test_raw_result_shape(provider: OfflineProvider) -> None:
    result = anyio.run(provider.start, _request(SPEECH / "fox.ogg"), _no_progress)
    assert result.raw is not None
    document = json.loads(result.raw)
    assert set(document) == {"text", "language", "duration", "segments"}
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


def test_cancellation_stops_recognition(provider: OfflineProvider, tmp_path: Path) -> None:
    names = [SPEECH / name for name in CLIPS]
    short = concat_to_wav(names, tmp_path / "short.wav", repeat=2)
    long = concat_to_wav(names, tmp_path / "long.wav", repeat=14)
    assert decode_info(long).seconds > 250
    # The reference, measured here and now (a loaded machine slows both alike):
    # recognizing a seventh of the long file, about two 30-second windows.
    t0 = time.perf_counter()
    anyio.run(provider.start, _request(short), _no_progress)
    reference = time.perf_counter() - t0

    async def main() -> float:
        with anyio.move_on_after(1.0):
            await provider.start(_request(long), _no_progress)
            raise AssertionError("four minutes of speech recognized within a second")
        return time.perf_counter()

    started = time.perf_counter()
    ended = anyio.run(main)
    # The event is checked between segments, and segments come a 30-second window
    # at a time, so the stop lands within a window or so of the cancel; running to
    # the end would take about seven references.
    assert ended - started < 1.0 + 2 * reference, (ended - started, reference)


def test_cancel_event_before_start(provider: OfflineProvider) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(offline.RecognitionCancelled):
        provider.recognize(SPEECH / "fox.ogg", cancel)


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
        provider.recognize(junk, threading.Event())
    assert caught.value.code is HaltCode.UNSUPPORTED_MEDIA


# --- model integrity -----------------------------------------------------------


def _copy_model(dst: Path) -> Path:
    """The bundled model in ``dst``: the big files linked, the small ones copied for tampering."""
    src = bundled_model_dir()
    dst.mkdir()
    for name in BUNDLED_DIGESTS:
        if name in ("config.json", "vocabulary.txt"):
            shutil.copyfile(src / name, dst / name)
        else:
            (dst / name).symlink_to(src / name)
    return dst


def test_bundled_model_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    verify_model_dir(bundled_model_dir())
    hashed: list[str] = []
    real = offline.hashlib.sha256

    def counting_sha256(*args: bytes) -> object:
        hashed.append("file")
        return real(*args)

    monkeypatch.setattr(offline.hashlib, "sha256", counting_sha256)
    verify_model_dir(bundled_model_dir())  # remembered: no second hash of 75 MB
    assert hashed == []


def test_tampered_file_is_refused(tmp_path: Path) -> None:
    model = _copy_model(tmp_path / "model")
    vocabulary = model / "vocabulary.txt"
    data = bytearray(vocabulary.read_bytes())
    data[100] ^= 0x01  # same size, different content
    vocabulary.write_bytes(bytes(data))

    with pytest.raises(ModelIntegrityError) as caught:
        verify_model_dir(model)
    message = str(caught.value)
    assert "vocabulary.txt" in message
    assert BUNDLED_DIGESTS["vocabulary.txt"].sha256 in message
    assert "refusing" in message


def test_wrong_size_and_missing_files_are_refused(tmp_path: Path) -> None:
    model = _copy_model(tmp_path / "model")
    (model / "config.json").write_text("{}")
    with pytest.raises(ModelIntegrityError, match=r"config\.json .* is 2 bytes, expected 2,317"):
        verify_model_dir(model)
    (model / "config.json").unlink()
    with pytest.raises(ModelIntegrityError, match=r"config\.json is missing"):
        verify_model_dir(model)


def test_a_file_changed_after_verification_is_checked_again(tmp_path: Path) -> None:
    model = _copy_model(tmp_path / "model")
    verify_model_dir(model)
    config = model / "config.json"
    config.write_bytes(config.read_bytes().replace(b"{", b"[", 1))
    with pytest.raises(ModelIntegrityError, match=r"config\.json"):
        verify_model_dir(model)


def test_provider_refuses_a_tampered_bundled_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _copy_model(tmp_path / "model")
    (model / "config.json").write_bytes((model / "config.json").read_bytes().replace(b"50257", b"50258"))
    monkeypatch.setattr(offline, "bundled_model_dir", lambda: model)

    fresh = OfflineProvider(OfflineSettings())
    with pytest.raises(ModelIntegrityError, match=r"config\.json .* has sha256 [0-9a-f]{64}, expected 14b1b4"):
        anyio.run(fresh.start, _request(SPEECH / "fox.ogg"), _no_progress)


def test_a_local_model_directory_loads_without_the_bundled_digests(tmp_path: Path) -> None:
    model = _copy_model(tmp_path / "model")
    local = OfflineProvider(OfflineSettings(model=str(model), beam_size=1))
    assert local.model == str(model)
    result = anyio.run(local.start, _request(SPEECH / "station.ogg"), _no_progress)
    assert result.raw is not None
    e, n = word_errors(CLIPS["station.ogg"], local.parse(result.raw).text)
    assert e / n <= 0.2


def test_a_missing_model_directory_is_a_load_error(tmp_path: Path) -> None:
    missing = OfflineProvider(OfflineSettings(model=str(tmp_path / "nowhere")))
    with pytest.raises(ModelLoadError, match="does not exist"):
        anyio.run(missing.start, _request(SPEECH / "fox.ogg"), _no_progress)


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


def test_long_audio_is_recognized_piece_by_piece_with_true_times(
    provider: OfflineProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pieces of 15 s over a ~50 s file: several cuts, each at a pause between clips
    monkeypatch.setattr(offline, "CHUNK_SECONDS", 15.0)
    names = list(CLIPS)
    long = concat_to_wav([SPEECH / n for n in names], tmp_path / "long.wav", repeat=2, gap=1.5)
    total = decode_info(long).seconds
    reference = " ".join(CLIPS[n] for n in names * 2)
    raw = anyio.run(lambda: provider.start(_request(long), _no_progress))
    t = provider.parse(raw.raw or b"")
    errors, n = word_errors(reference, t.text)
    assert errors / n <= 0.15, t.text
    starts = [s.start for s in t.segments]
    assert starts == sorted(starts)
    assert t.segments[-1].end > 30.0  # times past the first pieces carry their offset
    assert t.duration == pytest.approx(total, abs=0.05)
