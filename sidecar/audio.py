"""Audio probing and normalization with PyAV (its wheels bundle FFmpeg).

``normalize`` turns whatever the owner uploaded (any container FFmpeg can
read, audio or video) into the one form a provider asks for (``AudioSpec``):
it decodes the first audio stream, resamples and encodes frame by frame, so
memory stays flat whatever the length of the input. It blocks; callers run
it in a worker thread (``threads.run_in_thread``) and may stop it through ``cancel``.

Failures are classified where they enter: media that cannot be read is
``UNSUPPORTED_MEDIA``, media over the provider's caps is ``TOO_LONG``. Their
reasons are shown to the owner, so they speak of "the file", never of paths.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

import av
import av.error
import numpy as np
import numpy.typing as npt
from av.audio.frame import AudioFrame
from av.audio.resampler import AudioResampler
from av.audio.stream import AudioStream
from av.container import InputContainer, OutputContainer

from sidecar.outcome import HaltCode, PermanentError, TranscriberError
from sidecar.pcm import PcmReader, quiet_cut

__all__ = [
    "FORMATS",
    "AudioSpec",
    "NormalizeCancelled",
    "Normalized",
    "Probe",
    "normalize",
    "probe",
]


class NormalizeCancelled(TranscriberError):
    """``normalize`` stopped because its ``cancel`` event was set."""


@dataclass(frozen=True)
class AudioSpec:
    """What normalize must produce for a provider."""

    format: str  # "ogg_opus" | "wav_pcm16" | "flac" | "mp3"
    sample_rate: int = 16000
    channels: int = 1
    bitrate: int | None = 32000  # for lossy formats, bits/s
    max_bytes: int | None = None  # of one file (for a provider: of one piece)
    max_duration: timedelta | None = None  # of the whole input: longer is too_long
    max_piece: timedelta | None = None  # the longest piece a provider takes (sidecar.pieces)

    def piece_seconds(self) -> float | None:
        """The longest piece in seconds, from ``max_piece`` and, at this bitrate, ``max_bytes`` (with room)."""
        caps = []
        if self.max_piece is not None:
            caps.append(self.max_piece.total_seconds())
        if self.max_bytes is not None:
            bytes_per_second = (self.bitrate or 16 * self.sample_rate * self.channels) / 8
            caps.append(self.max_bytes * _RETRY_MARGIN / bytes_per_second)
        return min(caps) if caps else None


@dataclass(frozen=True)
class Probe:
    duration_ms: int | None  # None when the container does not say
    has_audio: bool
    container: str


@dataclass(frozen=True)
class Normalized:
    path: Path
    format: str
    duration_ms: int
    size: int


@dataclass(frozen=True)
class _Target:
    container: str
    codec: str
    sample_format: str
    lossy: bool
    extension: str  # a file of this format is named *.{extension}
    content_type: str
    rates: tuple[int, ...] | None = None  # sample rates the encoder accepts; None: any
    default_bitrate: int = 0
    min_bitrate: int = 0
    options: tuple[tuple[str, str], ...] = ()


# The audio formats normalize can write, declared once: providers name them in
# their AudioSpec and take the file name and content type from here.
FORMATS: dict[str, _Target] = {
    # libopus only runs at these rates; any of them decodes at 48 kHz later.
    # "voip" tunes the encoder for speech intelligibility at low bitrates.
    "ogg_opus": _Target(
        "ogg",
        "libopus",
        "flt",
        lossy=True,
        extension="ogg",
        content_type="audio/ogg",
        rates=(8000, 12000, 16000, 24000, 48000),
        default_bitrate=32000,
        min_bitrate=6000,
        options=(("application", "voip"),),
    ),
    "wav_pcm16": _Target("wav", "pcm_s16le", "s16", lossy=False, extension="wav", content_type="audio/wav"),
    "flac": _Target("flac", "flac", "s16", lossy=False, extension="flac", content_type="audio/flac"),
    "mp3": _Target(
        "mp3",
        "libmp3lame",
        "fltp",
        lossy=True,
        extension="mp3",
        content_type="audio/mpeg",
        rates=(8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
        default_bitrate=48000,
        min_bitrate=8000,
    ),
}

_LAYOUTS = {1: "mono", 2: "stereo"}

# Probed durations of some containers (VBR MP3 without a header, raw AAC) are
# estimates from the bitrate; reject on the probe only when the excess is
# clear, the decoded duration is checked exactly anyway.
_PROBE_TOLERANCE = 1.05
# Bitrate headroom on the retry: container overhead does not scale down.
_RETRY_MARGIN = 0.9
# How often (in decoded frames) the growing output is measured against max_bytes.
_SIZE_CHECK_EVERY = 64


def probe(path: Path) -> Probe:
    """What the container says about ``path``, without decoding it."""
    with _open_input(path) as container:
        stream = container.streams.audio[0] if container.streams.audio else None
        return Probe(
            duration_ms=_probed_duration_ms(container, stream),
            has_audio=stream is not None,
            container=container.format.name,
        )


def normalize(src: Path, dst: Path, spec: AudioSpec, *, cancel: threading.Event | None = None) -> Normalized:
    """Decode ``src``'s first audio stream and write it to ``dst`` in ``spec``'s form.

    Raises ``PermanentError`` (``UNSUPPORTED_MEDIA`` or ``TOO_LONG``) when the
    file cannot become what the spec asks, ``NormalizeCancelled`` when
    ``cancel`` is set. ``dst`` appears only once it is complete.
    """
    target = FORMATS.get(spec.format)
    if target is None:
        raise ValueError(f"unknown audio format {spec.format!r}")
    if spec.channels not in _LAYOUTS:
        raise ValueError(f"unsupported channel count {spec.channels}")
    rate = _encoder_rate(target, spec.sample_rate)
    cancel = cancel or threading.Event()

    with _open_input(src) as container:
        if not container.streams.audio:
            raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, "the file has no audio track")
        probed_ms = _probed_duration_ms(container, container.streams.audio[0])
    if probed_ms is None and spec.max_duration is not None:
        # The header does not say: count before writing anything. Decoding
        # alone is cheap, and a small file that unpacks to hundreds of hours
        # (constant FLAC frames) halts here without a byte written.
        probed_ms = _counted_duration_ms(src, spec.max_duration, cancel)
    _check_probed(probed_ms, spec, target, rate)

    bitrate = None
    if target.lossy:
        bitrate = spec.bitrate or target.default_bitrate
        if probed_ms and spec.max_bytes:
            # Aim under the cap from the start rather than encode twice; below
            # the codec's floor, the size check after encoding decides.
            bitrate = max(target.min_bitrate, min(bitrate, _fitting_bitrate(spec.max_bytes, probed_ms)))

    part = dst.with_name(f".{dst.name}.part")
    try:
        duration_ms = _transcode(src, part, spec, target, rate, bitrate, cancel)
        size = part.stat().st_size
        if spec.max_bytes is not None and size > spec.max_bytes:
            retry = _retry_bitrate(target, bitrate, size, spec.max_bytes)
            if retry is None:
                raise _too_big(size, spec.max_bytes)
            duration_ms = _transcode(src, part, spec, target, rate, retry, cancel)
            size = part.stat().st_size
            if size > spec.max_bytes:
                raise _too_big(size, spec.max_bytes)
        os.replace(part, dst)
    finally:
        part.unlink(missing_ok=True)
    return Normalized(path=dst, format=spec.format, duration_ms=duration_ms, size=size)


def encode_pcm(
    pcm: PcmReader, start: int, end: int, dst: Path, spec: AudioSpec, *, cancel: threading.Event | None = None
) -> Normalized:
    """Samples ``start`` to ``end`` of a 16 kHz mono PCM file, written to ``dst`` in ``spec``'s form.

    Read and encoded a few seconds at a time: memory stays flat whatever the piece's length.
    ``dst`` appears only once it is complete.
    """
    target = FORMATS[spec.format]
    rate = _encoder_rate(target, spec.sample_rate)
    cancel = cancel or threading.Event()
    part = dst.with_name(f".{dst.name}.part")
    written = 0
    try:
        out = av.open(str(part), mode="w", format=target.container)
        try:
            stream = _add_output_stream(out, target, rate, spec.channels, spec.bitrate if target.lossy else None)
            resampler = AudioResampler(format=target.sample_format, layout=_LAYOUTS[spec.channels], rate=rate)
            time_base = Fraction(1, rate)
            step = pcm.rate * 5
            for at in range(start, end, step):
                if cancel.is_set():
                    raise NormalizeCancelled("normalization was cancelled")
                block = pcm.read(at, min(at + step, end))
                frame = AudioFrame.from_ndarray(block.reshape(1, -1), format="flt", layout="mono")
                frame.sample_rate = pcm.rate
                for converted in resampler.resample(frame):
                    converted.pts, converted.time_base = written, time_base
                    written += converted.samples
                    out.mux(stream.encode(converted))
            for converted in resampler.resample(None):
                converted.pts, converted.time_base = written, time_base
                written += converted.samples
                out.mux(stream.encode(converted))
            out.mux(stream.encode(None))
        finally:
            out.close()
        size = part.stat().st_size
        if spec.max_bytes is not None and size > spec.max_bytes:
            raise _too_big(size, spec.max_bytes)
        os.replace(part, dst)
    finally:
        part.unlink(missing_ok=True)
    return Normalized(path=dst, format=spec.format, duration_ms=(end - start) * 1000 // pcm.rate, size=size)


def pcm_chunks(
    path: Path,
    *,
    rate: int = 16000,
    seconds: float = 600.0,
    cancel: threading.Event | None = None,
) -> Iterator[npt.NDArray[np.float32]]:
    """The first audio track as mono float32 PCM at ``rate``, in pieces of about ``seconds``.

    Streaming: memory holds one piece, whatever the file's length. Each piece
    ends at the quietest tenth of a second in its last 10 seconds, so a cut
    rarely falls inside a word; the rest carries over to the next piece.
    """
    cancel = cancel or threading.Event()
    target = int(seconds * rate)
    parts: list[npt.NDArray[np.float32]] = []
    held = 0
    with _open_input(path) as inp:
        if not inp.streams.audio:
            raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, "the file has no audio track")
        stream = inp.streams.audio[0]
        resampler = AudioResampler(format="flt", layout="mono", rate=rate)
        frames = itertools.chain(_decoded_frames(inp, stream, cancel), [None])
        for frame in frames:
            for out in resampler.resample(frame):
                data = out.to_ndarray().reshape(-1).astype(np.float32, copy=False)
                parts.append(data)
                held += data.size
            while held >= target:
                buf = np.concatenate(parts)
                cut = quiet_cut(buf[:target], rate)
                yield buf[:cut]
                parts, held = [buf[cut:]], buf.size - cut
    if held:
        yield np.concatenate(parts)


# --- internals ---------------------------------------------------------------


@contextlib.contextmanager
def _open_input(path: Path) -> Iterator[InputContainer]:
    try:
        size = path.stat().st_size
    except FileNotFoundError as e:
        raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, "the file is missing") from e
    if size == 0:
        raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, "the file is empty")
    try:
        container = av.open(str(path), mode="r")
    except av.error.FFmpegError as e:
        raise PermanentError(
            HaltCode.UNSUPPORTED_MEDIA,
            f"the file is not a readable audio or video file ({_ffmpeg_reason(e)})",
        ) from e
    try:
        yield container
    finally:
        container.close()


def _ffmpeg_reason(e: av.error.FFmpegError) -> str:
    # str(e) carries the file name; the bare FFmpeg message does not.
    return (e.strerror or type(e).__name__).strip().rstrip(".").lower()


def _probed_duration_ms(container: InputContainer, stream: AudioStream | None) -> int | None:
    if stream is not None and stream.duration is not None and stream.time_base is not None:
        ms = stream.duration * stream.time_base * 1000
        if ms > 0:
            return int(ms)
    if container.duration is not None and container.duration > 0:
        return container.duration // 1000  # AV_TIME_BASE is microseconds
    return None


def _counted_duration_ms(path: Path, limit: timedelta, cancel: threading.Event) -> int:
    """The decoded length of ``path``'s audio, or ``_too_long`` as soon as it passes ``limit``."""
    limit_ms = _ms(limit)
    seconds = Fraction(0)
    with _open_input(path) as inp:
        for frame in _decoded_frames(inp, inp.streams.audio[0], cancel):
            if frame.sample_rate:
                seconds += Fraction(frame.samples, frame.sample_rate)
            if seconds * 1000 > limit_ms:
                raise _too_long(None, limit)
    return int(seconds * 1000)


def _encoder_rate(target: _Target, wanted: int) -> int:
    if target.rates is None or wanted in target.rates:
        return wanted
    higher = [r for r in target.rates if r >= wanted]
    return min(higher) if higher else max(target.rates)


def _check_probed(probed_ms: int | None, spec: AudioSpec, target: _Target, rate: int) -> None:
    if probed_ms is None:
        return
    if spec.max_duration is not None and probed_ms > _ms(spec.max_duration) * _PROBE_TOLERANCE:
        raise _too_long(probed_ms, spec.max_duration)
    if spec.max_bytes is not None and target.codec == "pcm_s16le":
        # PCM size is known in advance: no need to decode an hour to learn it.
        expected = 44 + probed_ms * rate * spec.channels * 2 // 1000
        if expected > spec.max_bytes * _PROBE_TOLERANCE:
            raise _too_big(expected, spec.max_bytes)


def _fitting_bitrate(max_bytes: int, duration_ms: int) -> int:
    return int(max_bytes * 8 * 1000 / max(duration_ms, 1) * _RETRY_MARGIN)


def _retry_bitrate(target: _Target, bitrate: int | None, size: int, max_bytes: int) -> int | None:
    if not target.lossy or bitrate is None:
        return None
    lower = int(bitrate * max_bytes / size * _RETRY_MARGIN)
    return lower if lower >= target.min_bitrate else None


def _transcode(
    src: Path,
    dst: Path,
    spec: AudioSpec,
    target: _Target,
    rate: int,
    bitrate: int | None,
    cancel: threading.Event,
) -> int:
    """One pass from ``src`` to ``dst``; the decoded duration in ms."""
    max_duration = spec.max_duration
    limit_samples = _ms(max_duration) * rate // 1000 if max_duration is not None else None
    check_size = spec.max_bytes is not None and not target.lossy
    written = 0
    frames_seen = 0
    decoded_any = False
    time_base = Fraction(1, rate)

    with _open_input(src) as inp:
        if not inp.streams.audio:
            raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, "the file has no audio track")
        in_stream = inp.streams.audio[0]
        out = av.open(str(dst), mode="w", format=target.container)
        try:
            out_stream = _add_output_stream(out, target, rate, spec.channels, bitrate)
            resampler: AudioResampler | None = None
            source_shape: tuple[str, str, int] | None = None

            def emit(frames: list[AudioFrame]) -> None:
                nonlocal written
                for frame in frames:
                    frame.pts = written
                    frame.time_base = time_base
                    written += frame.samples
                    out.mux(out_stream.encode(frame))
                if max_duration is not None and limit_samples is not None and written > limit_samples:
                    raise _too_long(None, max_duration)

            for frame in _decoded_frames(inp, in_stream, cancel):
                decoded_any = True
                shape = (frame.format.name, frame.layout.name, frame.sample_rate)
                if resampler is None or shape != source_shape:
                    # Some streams change rate or layout midway (concatenated
                    # MP3s, broadcast AAC); a resampler is built for one shape.
                    if resampler is not None:
                        emit(resampler.resample(None))
                    resampler = AudioResampler(format=target.sample_format, layout=_LAYOUTS[spec.channels], rate=rate)
                    source_shape = shape
                emit(resampler.resample(frame))
                frames_seen += 1
                if check_size and frames_seen % _SIZE_CHECK_EVERY == 0:
                    size = dst.stat().st_size
                    if spec.max_bytes is not None and size > spec.max_bytes:
                        raise _too_big(size, spec.max_bytes)
            if resampler is not None:
                emit(resampler.resample(None))
            if written == 0:
                reason = "holds no samples" if decoded_any else "could not be decoded (empty, truncated or damaged)"
                raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, f"the file's audio track {reason}")
            out.mux(out_stream.encode(None))
        finally:
            out.close()
    return written * 1000 // rate


def _add_output_stream(
    out: OutputContainer, target: _Target, rate: int, channels: int, bitrate: int | None
) -> AudioStream:
    stream = out.add_stream(target.codec, rate=rate, options=dict(target.options))
    if not isinstance(stream, AudioStream):  # pragma: no cover - FORMATS holds audio codecs only
        raise TypeError(f"{target.codec} is not an audio codec")
    stream.layout = _LAYOUTS[channels]
    stream.format = target.sample_format
    if bitrate is not None:
        stream.bit_rate = bitrate
    return stream


def _decoded_frames(inp: InputContainer, stream: AudioStream, cancel: threading.Event) -> Iterator[AudioFrame]:
    """Frames of ``stream``, tolerating damage after the first good frame.

    A packet that fails to decode is skipped; a demuxer error ends the stream
    (a truncated upload still yields what it holds). Whether anything at all
    decoded is the caller's judgement.
    """
    packets = inp.demux(stream)
    while True:
        if cancel.is_set():
            raise NormalizeCancelled("normalization was cancelled")
        try:
            packet = next(packets)
        except StopIteration:
            return
        except av.error.FFmpegError:
            return
        try:
            frames = packet.decode()
        except av.error.FFmpegError:
            continue
        yield from frames


def _ms(delta: timedelta) -> int:
    return math.floor(delta.total_seconds() * 1000)


def _clock(ms: int, *, round_up: bool = False) -> str:
    # Lengths round up and limits down, so a length never reads as within its limit.
    seconds = -(-ms // 1000) if round_up else ms // 1000
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _too_long(duration_ms: int | None, limit: timedelta) -> PermanentError:
    # Decoding stops at the limit, so the full length is known only from a probe.
    length = f"{_clock(duration_ms, round_up=True)} long" if duration_ms is not None else "longer than allowed"
    return PermanentError(HaltCode.TOO_LONG, f"the audio is {length} (limit {_clock(_ms(limit))})")


def _too_big(size: int, limit: int) -> PermanentError:
    return PermanentError(
        HaltCode.TOO_LONG,
        f"the audio takes {_size_text(size)} in the form the provider reads (limit {_size_text(limit)})",
    )


def _size_text(size: int) -> str:
    if size < 1_000_000:
        return f"{size / 1000:.0f} kB"
    return f"{size / 1_000_000:.1f} MB"
