"""Normalization with the real PyAV on media generated at test time."""

from __future__ import annotations

import json
import os
import random
import resource
import struct
import subprocess
import sys
import threading
import time
import wave
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import anyio
import numpy as np
import pytest

from sidecar.media import audio
from sidecar.media.audio import AudioSpec, NormalizeCancelled, normalize
from sidecar.outcome import HaltCode, PermanentError
from sidecar.runtime.threads import run_in_thread
from testkit.audio import decode_info, tone_frames, write_audio, write_video_only
from testkit.flac_bomb import LYING, write_flac_bomb

OPUS = AudioSpec("ogg_opus", 16000, 1, 32000)
LONG_MINUTES = 20


def _no_leftovers(directory: Path) -> None:
    assert not [p.name for p in directory.iterdir() if p.name.endswith(".part")]


# --- inputs ------------------------------------------------------------------

INPUTS: dict[str, Callable[[Path], Path]] = {
    "wav": lambda d: write_audio(d / "in.wav", 2.0, codec="pcm_s16le"),
    "flac": lambda d: write_audio(d / "in.flac", 2.0, codec="flac", rate=48000),
    "mp3": lambda d: write_audio(d / "in.mp3", 2.0, codec="libmp3lame", bit_rate=128000),
    "ogg-opus": lambda d: write_audio(d / "in.ogg", 2.0, codec="libopus", rate=48000, bit_rate=64000),
    "m4a-aac": lambda d: write_audio(d / "in.m4a", 2.0, codec="aac", bit_rate=96000),
    "mp4-video+aac": lambda d: write_audio(d / "in.mp4", 2.0, codec="aac", video=True),
    "mkv-video+opus": lambda d: write_audio(d / "in.mkv", 2.0, codec="libopus", rate=48000, video=True),
    "wav-mono-8k": lambda d: write_audio(d / "in8k.wav", 2.0, codec="pcm_s16le", rate=8000, channels=1),
}


@pytest.mark.parametrize("kind", list(INPUTS))
def test_every_container_normalizes_to_16k_mono_opus(tmp_path: Path, kind: str) -> None:
    src = INPUTS[kind](tmp_path)
    dst = tmp_path / "out.ogg"

    result = normalize(src, dst, OPUS)

    assert result.path == dst and dst.is_file()
    assert result.format == "ogg_opus"
    assert result.size == dst.stat().st_size
    assert abs(result.duration_ms - 2000) <= 100, result
    got = decode_info(dst)
    assert (got.container, got.codec, got.channels) == ("ogg", "opus", 1)
    assert abs(got.seconds - 2.0) <= 0.1
    _no_leftovers(tmp_path)


@pytest.mark.parametrize(
    ("spec", "container", "codec", "rate", "channels"),
    [
        (AudioSpec("wav_pcm16", 16000, 1, None), "wav", "pcm_s16le", 16000, 1),
        (AudioSpec("wav_pcm16", 8000, 2, None), "wav", "pcm_s16le", 8000, 2),
        (AudioSpec("flac", 16000, 1, None), "flac", "flac", 16000, 1),
        (AudioSpec("mp3", 16000, 1, 32000), "mp3", "mp3", 16000, 1),
        (AudioSpec("mp3", 44100, 2, 96000), "mp3", "mp3", 44100, 2),
        # Opus always decodes at 48 kHz, whatever rate was encoded.
        (AudioSpec("ogg_opus", 16000, 1, 24000), "ogg", "opus", 48000, 1),
        (AudioSpec("ogg_opus", 48000, 2, 64000), "ogg", "opus", 48000, 2),
    ],
)
def test_every_output_format(
    tmp_path: Path, spec: AudioSpec, container: str, codec: str, rate: int, channels: int
) -> None:
    src = write_audio(tmp_path / "in.wav", 1.5, codec="pcm_s16le", rate=44100, channels=2)
    dst = tmp_path / "out.bin"

    result = normalize(src, dst, spec)

    got = decode_info(dst)
    assert got.container == container
    assert got.codec.startswith(codec)  # FFmpeg names its MP3 decoder "mp3float"
    assert (got.rate, got.channels) == (rate, channels)
    assert abs(got.seconds - 1.5) <= 0.1
    assert abs(result.duration_ms - 1500) <= 50


def test_pcm_duration_is_exact(tmp_path: Path) -> None:
    src = write_audio(tmp_path / "in.flac", 3.25, codec="flac", rate=44100, channels=2)
    result = normalize(src, tmp_path / "out.wav", AudioSpec("wav_pcm16", bitrate=None))
    assert result.duration_ms == 3250
    assert 0 < result.size - 3.25 * 16000 * 2 < 200  # the samples and a header


def test_unknown_spec_is_a_programming_error(tmp_path: Path) -> None:
    src = write_audio(tmp_path / "in.wav", 0.5, codec="pcm_s16le")
    with pytest.raises(ValueError, match="unknown audio format"):
        normalize(src, tmp_path / "out", AudioSpec("aiff"))


# --- bad inputs ----------------------------------------------------------------


def _random_bytes(d: Path) -> Path:
    # Seeded: about one random file in 200 holds what the demuxer takes for a stream of another kind
    # ("no audio track", also a clear answer, but not this case's).
    (d / "noise.wav").write_bytes(random.Random(0).randbytes(64_000))
    return d / "noise.wav"


def _text(d: Path) -> Path:
    (d / "notes.txt").write_text("Meeting notes.\nNothing to hear here.\n" * 50)
    return d / "notes.txt"


def _empty(d: Path) -> Path:
    (d / "empty.mp3").write_bytes(b"")
    return d / "empty.mp3"


def _header_only(d: Path) -> Path:
    data = write_audio(d / "full.wav", 1.0, codec="pcm_s16le").read_bytes()
    (d / "cut.wav").write_bytes(data[: data.index(b"data") + 8])  # every header, not one sample
    return d / "cut.wav"


def _truncated_ogg(d: Path) -> Path:
    full = write_audio(d / "full.ogg", 1.0, codec="libopus", rate=48000)
    (d / "cut.ogg").write_bytes(full.read_bytes()[:120])  # the ID page, no audio
    return d / "cut.ogg"


def _missing(d: Path) -> Path:
    return d / "never-uploaded.wav"


BAD: dict[str, Callable[[Path], Path]] = {
    "random-bytes-as-wav": _random_bytes,
    "text-file": _text,
    "zero-length": _empty,
    "ogg-truncated": _truncated_ogg,
    "video-without-audio": lambda d: write_video_only(d / "picture.mp4"),
    "missing": _missing,
}


@pytest.mark.parametrize("kind", list(BAD))
def test_bad_input_is_unsupported_media(tmp_path: Path, kind: str) -> None:
    src = BAD[kind](tmp_path)
    dst = tmp_path / "out.ogg"

    with pytest.raises(PermanentError) as caught:
        normalize(src, dst, OPUS)

    assert caught.value.code is HaltCode.UNSUPPORTED_MEDIA
    reason = str(caught.value)
    assert reason.startswith("the file")
    assert str(tmp_path) not in reason  # shown to the owner: no paths
    assert not dst.exists()
    _no_leftovers(tmp_path)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("video-without-audio", "no audio track"),
        ("zero-length", "empty"),
        # Cut inside its header pages: the demuxer finds no stream at all, or one it cannot read.
        ("ogg-truncated", "not a readable audio or video file|no audio track"),
        ("random-bytes-as-wav", "not a readable audio or video file"),
    ],
)
def test_bad_input_reasons_are_specific(tmp_path: Path, kind: str, expected: str) -> None:
    with pytest.raises(PermanentError, match=expected):
        normalize(BAD[kind](tmp_path), tmp_path / "out.ogg", OPUS)


def _wav(path: Path, samples: np.ndarray, rate: int = 16000) -> Path:
    """A 16-bit WAV of ``samples`` (frames × channels, floats in -1..1), any channel count."""
    channels = samples.shape[1]
    data = (samples * 32767).astype("<i2").tobytes()
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * 2 * channels, 2 * channels, 16)
    body = b"WAVEfmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


def test_a_file_of_no_samples_is_an_empty_recording(tmp_path: Path) -> None:
    # A WAV header and not one sample: nothing to hear, nothing damaged (L5).
    for src in (_wav(tmp_path / "zero.wav", np.zeros((0, 1))), _header_only(tmp_path)):
        result = normalize(src, tmp_path / "out.wav", AudioSpec("wav_pcm16", max_duration=timedelta(hours=6)))
        assert (result.duration_ms, result.path.is_file()) == (0, True)
        assert decode_info(result.path).seconds == 0.0
        _no_leftovers(tmp_path)


@pytest.mark.parametrize("channels", [9, 255])
def test_channels_the_resampler_cannot_mix_are_mixed_here(tmp_path: Path, channels: int) -> None:
    # FFmpeg's resampler refuses a count it has no layout for (9, 17, 32, 255
    # in a WAV: "Invalid argument"); the channels are averaged instead.
    rate = 16000
    tone = 0.5 * np.sin(np.arange(rate // 2) * 2 * np.pi * 440 / rate)
    src = _wav(tmp_path / "many.wav", np.repeat(tone[:, None], channels, axis=1), rate)
    result = normalize(src, tmp_path / "out.wav", AudioSpec("wav_pcm16", max_duration=timedelta(hours=6)))
    assert (result.duration_ms, result.source_channels) == (500, channels)
    with wave.open(str(result.path)) as w:
        assert (w.getnchannels(), w.getframerate()) == (1, rate)
        got = np.frombuffer(w.readframes(w.getnframes()), "<i2") / 32767
    assert abs(np.abs(got).max() - 0.5) < 0.02  # the same tone in every channel: the same tone


# --- caps --------------------------------------------------------------------


def _halted_too_long(src: Path, dst: Path, spec: AudioSpec) -> str:
    """Normalizes ``src``, which must halt too_long: the reason it gives."""
    with pytest.raises(PermanentError) as caught:
        normalize(src, dst, spec)
    assert caught.value.code is HaltCode.TOO_LONG
    return str(caught.value)


def test_too_long_by_probe(tmp_path: Path) -> None:
    src = write_audio(tmp_path / "in.flac", 3.0, codec="flac")
    spec = AudioSpec("ogg_opus", max_duration=timedelta(seconds=1))
    assert _halted_too_long(src, tmp_path / "out.ogg", spec) == "the audio is 0:00:03 long (limit 0:00:01)"


def test_too_long_by_decoding_when_the_container_does_not_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audio, "_probed_duration_ms", lambda *_: None)
    src = write_audio(tmp_path / "in.mp3", 3.0, codec="libmp3lame")
    reason = _halted_too_long(src, tmp_path / "out.wav", AudioSpec("wav_pcm16", max_duration=timedelta(seconds=2)))
    assert "(limit 0:00:02)" in reason
    assert not (tmp_path / "out.wav").exists()
    _no_leftovers(tmp_path)


def test_within_the_duration_limit_passes(tmp_path: Path) -> None:
    src = write_audio(tmp_path / "in.wav", 2.0, codec="pcm_s16le")
    result = normalize(src, tmp_path / "out.ogg", AudioSpec("ogg_opus", max_duration=timedelta(seconds=2)))
    assert abs(result.duration_ms - 2000) <= 20


def test_lossless_over_max_bytes_is_too_long(tmp_path: Path) -> None:
    src = write_audio(tmp_path / "in.wav", 2.0, codec="pcm_s16le")
    reason = _halted_too_long(src, tmp_path / "out.flac", AudioSpec("flac", max_bytes=10_000))
    assert reason.endswith("(limit 10 kB)")
    _no_leftovers(tmp_path)


def test_lossy_output_shrinks_to_fit_max_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # With no aim from the length the first pass runs at the spec's bitrate,
    # overshoots, and the one retry must pick a bitrate that fits.
    monkeypatch.setattr(audio, "_fitting_bitrate", lambda *_: 10**9)
    src = write_audio(tmp_path / "in.wav", 4.0, codec="pcm_s16le")
    cap = 12_000
    result = normalize(src, tmp_path / "out.ogg", AudioSpec("ogg_opus", bitrate=64000, max_bytes=cap))
    assert result.size <= cap
    assert abs(decode_info(result.path).seconds - 4.0) <= 0.1


def test_lossy_that_cannot_fit_is_too_long(tmp_path: Path) -> None:
    src = write_audio(tmp_path / "in.wav", 4.0, codec="pcm_s16le")
    reason = _halted_too_long(src, tmp_path / "out.mp3", AudioSpec("mp3", max_bytes=1_000))
    assert reason.endswith("(limit 1 kB)")


# --- streaming, cancellation, threads ------------------------------------------


@pytest.fixture(scope="module")
def long_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twenty minutes of tone, written chunk by chunk."""
    path = tmp_path_factory.mktemp("long") / "long.wav"
    import av

    with av.open(str(path), mode="w") as out:
        stream = out.add_stream("pcm_s16le", rate=16000)
        stream.layout = "mono"
        for frame in tone_frames(LONG_MINUTES * 60, 16000):
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def test_cancel_stops_promptly(long_wav: Path, tmp_path: Path) -> None:
    cancel = threading.Event()
    outcome: list[BaseException | None] = []

    def work() -> None:
        try:
            normalize(long_wav, tmp_path / "out.ogg", OPUS, cancel=cancel)
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    worker = threading.Thread(target=work)
    worker.start()
    time.sleep(0.5)
    assert worker.is_alive(), "twenty minutes of audio should take longer than half a second"
    cancel.set()
    set_at = time.perf_counter()
    worker.join(timeout=10)
    stopped_in = time.perf_counter() - set_at

    assert not worker.is_alive()
    assert isinstance(outcome[0], NormalizeCancelled)
    # A full run takes about 15 s here; the bound leaves room for a loaded machine.
    assert stopped_in < 5.0, stopped_in
    assert not (tmp_path / "out.ogg").exists()
    _no_leftovers(tmp_path)


def test_already_cancelled_does_no_work(long_wav: Path, tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    started = time.perf_counter()
    with pytest.raises(NormalizeCancelled):
        normalize(long_wav, tmp_path / "out.wav", AudioSpec("wav_pcm16"), cancel=cancel)
    assert time.perf_counter() - started < 5.0  # a full run takes about 15 s


_RSS_SCRIPT = """
import json, resource, sys, time
from pathlib import Path
from sidecar.media.audio import AudioSpec, normalize
src, dst, seconds = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
if seconds:
    import av
    with av.open(str(src), "w") as out:
        from testkit.audio import tone_frames
        s = out.add_stream("pcm_s16le", rate=16000)
        s.layout = "mono"
        for f in tone_frames(seconds, 16000):
            out.mux(s.encode(f))
        out.mux(s.encode(None))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
r = normalize(src, dst, AudioSpec("wav_pcm16", 16000, 1, None))
print(json.dumps({"rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "before_kb": before,
                  "seconds": time.perf_counter() - t, "duration_ms": r.duration_ms}))
"""


def _peak(src: Path, dst: Path, generate_seconds: float = 0) -> dict[str, float]:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(src), str(dst), str(generate_seconds)],
        check=True,
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def test_memory_does_not_grow_with_length(long_wav: Path, tmp_path: Path) -> None:
    short = _peak(tmp_path / "short.wav", tmp_path / "short-out.wav", generate_seconds=30)
    long = _peak(long_wav, tmp_path / "long-out.wav")
    assert long["duration_ms"] == LONG_MINUTES * 60_000
    # Twenty minutes of 16 kHz float samples would be 77 MB; streaming keeps it flat.
    growth_mb = (long["rss_kb"] - short["rss_kb"]) / 1024
    print(
        f"normalize {LONG_MINUTES} min WAV->WAV16k: {long['seconds']:.2f} s "
        f"({LONG_MINUTES * 60 / long['seconds']:.0f}x real time), peak RSS {long['rss_kb'] / 1024:.0f} MB, "
        f"vs 30 s input {short['rss_kb'] / 1024:.0f} MB"
    )
    assert growth_mb < 15, growth_mb


def test_concurrent_normalizations(tmp_path: Path) -> None:
    srcs = [write_audio(tmp_path / f"in{i}.mp3", 1.0 + i / 2, codec="libmp3lame") for i in range(4)]
    results: dict[int, int] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = normalize(srcs[i], tmp_path / f"out{i}.ogg", OPUS).duration_ms
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    for i in range(4):
        assert abs(results[i] - (1000 + i * 500)) <= 100


def test_run_in_thread_waits_for_the_work_to_stop() -> None:
    stopped = threading.Event()

    def stubborn(cancel: threading.Event) -> int:
        while not cancel.wait(0.01):
            pass
        time.sleep(0.2)  # winding down takes a moment
        stopped.set()
        raise NormalizeCancelled("stopped")

    async def main() -> None:
        with anyio.move_on_after(0.2):
            await run_in_thread(stubborn)
        # The scope has been left: the thread must have finished by now.
        assert stopped.is_set()

    anyio.run(main)


def test_run_in_thread_returns_and_raises() -> None:
    async def main() -> None:
        assert await run_in_thread(lambda cancel: 41 + 1) == 42
        with pytest.raises(PermanentError):
            await run_in_thread(lambda cancel: normalize(Path("/nonexistent/x.wav"), Path("/tmp/y.wav"), OPUS))

    anyio.run(main)


def test_normalize_through_run_in_thread_is_cancelled_with_the_scope(long_wav: Path, tmp_path: Path) -> None:
    async def main() -> float:
        with anyio.move_on_after(0.3):
            await run_in_thread(lambda cancel: normalize(long_wav, tmp_path / "out.ogg", OPUS, cancel=cancel))
        return time.perf_counter()

    started = time.perf_counter()
    ended = anyio.run(main)
    assert ended - started < 5.0  # cancelled after 0.3 s; a full run takes about 15 s
    assert not (tmp_path / "out.ogg").exists()
    _no_leftovers(tmp_path)


def test_a_truncated_file_yields_what_it_holds(tmp_path: Path) -> None:
    # An interrupted upload: the part that arrived is still worth transcribing.
    full = write_audio(tmp_path / "full.mp3", 4.0, codec="libmp3lame", bit_rate=64000).read_bytes()
    cut = tmp_path / "cut.mp3"
    cut.write_bytes(full[: len(full) // 2])
    result = normalize(cut, tmp_path / "out.wav", AudioSpec("wav_pcm16"))
    assert 1500 <= result.duration_ms <= 2500


def test_damage_in_the_middle_is_skipped(tmp_path: Path) -> None:
    data = bytearray(write_audio(tmp_path / "full.mp3", 4.0, codec="libmp3lame", bit_rate=64000).read_bytes())
    middle = len(data) // 2
    data[middle : middle + 2000] = random.Random(1).randbytes(2000)
    damaged = tmp_path / "damaged.mp3"
    damaged.write_bytes(bytes(data))
    result = normalize(damaged, tmp_path / "out.wav", AudioSpec("wav_pcm16"))
    assert 3000 <= result.duration_ms <= 4100


def _declared_ms(path: Path) -> int | None:
    """The length the container's header declares (what normalize believes before decoding)."""
    with audio._open_input(path) as container:
        return audio._probed_duration_ms(container, container.streams.audio[0])


def _normalize_under_a_write_limit(src: Path, dst: Path, limit: int) -> tuple[subprocess.CompletedProcess[str], float]:
    """``normalize`` to 16 kHz PCM (a six-hour cap) in a child that may write no file larger than ``limit``.

    Writing past the limit kills the child (SIGXFSZ); what it prints is the halt.
    """
    child = f"""
from datetime import timedelta
from pathlib import Path
from sidecar.media.audio import AudioSpec, normalize
from sidecar.outcome import PermanentError
try:
    normalize(Path({str(src)!r}), Path({str(dst)!r}), AudioSpec("wav_pcm16", max_duration=timedelta(hours=6)))
except PermanentError as e:
    print(e.code.value, e)
"""

    def limit_writes() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, preexec_fn=limit_writes, timeout=120, check=False
    )
    return done, time.monotonic() - started


def test_a_flac_bomb_is_too_long_before_a_byte_is_written(tmp_path: Path) -> None:
    # 642 KiB of FLAC that decodes to 100 hours, its header silent on the length.
    # The child may write at most 1 MiB: decoding into the output first would
    # be killed by the limit (SIGXFSZ) long before reaching the 6-hour cap.
    bomb = write_flac_bomb(tmp_path / "bomb.flac", hours=100)
    done, _ = _normalize_under_a_write_limit(bomb, tmp_path / "out.wav", 1 << 20)
    assert done.returncode == 0, (done.returncode, done.stderr[-500:])
    assert done.stdout.strip() == "too_long the audio is longer than allowed (limit 6:00:00)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.flac"]


@pytest.mark.parametrize("shape", list(LYING))
def test_a_header_that_declares_a_second_is_not_trusted(tmp_path: Path, shape: str) -> None:
    # Each declares 1 s (STREAMINFO, Matroska's Duration, Ogg's granule
    # positions) and holds 100 hours: believed, it bought six hours of PCM
    # (690 MB) before the cap. Past what the header declared nothing more is
    # written; the rest is only decoded, and halts at the cap.
    suffix, write = LYING[shape]
    bomb = write(tmp_path / f"bomb{suffix}", 100)
    assert _declared_ms(bomb) == 1000
    done, took = _normalize_under_a_write_limit(bomb, tmp_path / "out.wav", 4 << 20)
    assert done.returncode == 0, (done.returncode, done.stderr[-500:])
    assert done.stdout.strip() == "too_long the audio is longer than allowed (limit 6:00:00)"
    assert sorted(p.name for p in tmp_path.iterdir()) == [bomb.name]
    assert took < 110  # the child's own limit is 120 s; these finish in seconds


def test_a_full_disk_is_not_the_files_fault(tmp_path: Path) -> None:
    # Converter errors on odd media halt unsupported_media; a write the disk
    # refuses (EFBIG here, ENOSPC alike) stays an error worth another attempt.
    src = write_audio(tmp_path / "minute.wav", 60.0, codec="pcm_s16le")
    done, _ = _normalize_under_a_write_limit(src, tmp_path / "out.wav", 256 << 10)
    assert done.returncode == 1 and done.stdout == ""
    assert "OSError: [Errno 27] File too large" in done.stderr


def test_a_header_that_says_too_little_costs_a_second_decoding_not_the_recording(tmp_path: Path) -> None:
    # Two minutes of tone in a FLAC whose STREAMINFO claims one second: within
    # the cap, so once counted it is written whole, its decoded length kept.
    honest = write_audio(tmp_path / "honest.flac", 120.0, codec="flac", rate=16000)
    data = bytearray(honest.read_bytes())
    at = data.index(b"fLaC") + 4 + 4 + 10  # STREAMINFO's rate/channels/bits/total field
    packed = int.from_bytes(data[at : at + 8], "big")
    data[at : at + 8] = ((packed & ~((1 << 36) - 1)) | 16000).to_bytes(8, "big")
    liar = tmp_path / "liar.flac"
    liar.write_bytes(bytes(data))
    assert _declared_ms(liar) == 1000

    result = normalize(liar, tmp_path / "out.wav", AudioSpec("wav_pcm16", max_duration=timedelta(hours=6)))
    assert abs(result.duration_ms - 120_000) <= 20
    assert abs(decode_info(result.path).seconds - 120.0) <= 0.02
    _no_leftovers(tmp_path)
