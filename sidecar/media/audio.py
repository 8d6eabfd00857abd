"""Audio normalization with PyAV (its wheels bundle FFmpeg).

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
from av.audio.frame import AudioFrame
from av.audio.resampler import AudioResampler
from av.audio.stream import AudioStream
from av.container import InputContainer, OutputContainer

from sidecar.media.pcm import PcmReader
from sidecar.outcome import HaltCode, PermanentError, TranscriberError

__all__ = [
    "FORMATS",
    "AudioSpec",
    "NormalizeCancelled",
    "Normalized",
    "normalize",
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
    max_piece: timedelta | None = None  # the longest piece a provider takes (sidecar.media.pieces)

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
class Normalized:
    path: Path
    format: str
    duration_ms: int
    size: int
    source_channels: int = 0  # how many channels the original had (mixed into spec.channels)


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
# Audio written on a header's word beyond what it declared, before decoding
# alone takes over (a few hundred kB of 16 kHz PCM).
_UNCONFIRMED_SLACK_MS = 10_000
# Bitrate headroom on the retry: container overhead does not scale down.
_RETRY_MARGIN = 0.9
# How often (in decoded frames) the growing output is measured against max_bytes.
_SIZE_CHECK_EVERY = 64


def normalize(src: Path, dst: Path, spec: AudioSpec, *, cancel: threading.Event | None = None) -> Normalized:
    """Decode ``src``'s first audio stream and write it to ``dst`` in ``spec``'s form.

    The decoded length is the only length trusted. A header that says the
    audio is longer than ``spec.max_duration`` halts at once; one that says
    less is believed only as far as writing goes: past what it declared,
    nothing more is written, the rest is counted by decoding alone, and
    only a length within the limit is then written in full. So a small file
    that declares a second and unpacks to a hundred hours costs a few
    hundred kilobytes of output before it halts, and a file whose header is
    merely wrong costs one more decoding.

    Raises ``PermanentError`` (``UNSUPPORTED_MEDIA`` or ``TOO_LONG``) when the
    file cannot become what the spec asks, ``NormalizeCancelled`` when
    ``cancel`` is set. ``dst`` appears only once it is complete. A file
    whose audio track holds no samples at all (a WAV header and nothing
    else) becomes an empty file of ``spec``'s form, 0 ms long: a recording
    without speech, not a damaged one.
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
        declared_ms = _probed_duration_ms(container, container.streams.audio[0])
    # A header that admits to more than the limit is believed: nothing is decoded.
    _check_probed(declared_ms, spec, target, rate)

    part = dst.with_name(f".{dst.name}.part")
    try:
        # Written as far as the header declared (nothing when it does not say);
        # a longer stream is counted to its end, then written again, its length known.
        known_ms, confirmed = declared_ms, False
        written: _Written | None = None
        for _ in range(2):
            try:
                written = _fitted(src, part, spec, target, rate, known_ms, confirmed, cancel)
                break
            except _Unconfirmed as longer:
                known_ms, confirmed = longer.counted_ms, True
                _check_probed(known_ms, spec, target, rate)
        if written is None:  # pragma: no cover - a second decoding of the same file counts the same
            raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, "the file decodes differently each time")
        os.replace(part, dst)
    finally:
        part.unlink(missing_ok=True)
    return Normalized(
        path=dst,
        format=spec.format,
        duration_ms=written.duration_ms,
        size=written.size,
        source_channels=written.source_channels,
    )


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
            out.start_encoding()  # a file of no samples is still a file: its headers
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


@dataclass(frozen=True)
class _Written:
    duration_ms: int
    size: int
    source_channels: int


class _Unconfirmed(Exception):
    """Decoding went past the length the header declared; ``counted_ms`` is the whole length, counted."""

    def __init__(self, counted_ms: int) -> None:
        super().__init__(f"{counted_ms} ms")
        self.counted_ms = counted_ms


def _fitted(
    src: Path,
    dst: Path,
    spec: AudioSpec,
    target: _Target,
    rate: int,
    known_ms: int | None,
    confirmed: bool,
    cancel: threading.Event,
) -> _Written:
    """``src`` in ``spec``'s form within ``spec.max_bytes``: encoded once, and once more lower if it overshot."""
    bitrate = None
    if target.lossy:
        bitrate = spec.bitrate or target.default_bitrate
        if known_ms and spec.max_bytes:
            # Aim under the cap from the start rather than encode twice; below
            # the codec's floor, the size check after encoding decides.
            bitrate = max(target.min_bitrate, min(bitrate, _fitting_bitrate(spec.max_bytes, known_ms)))
    budget = None if confirmed else _allowance(known_ms or 0)
    written = _transcode(src, dst, spec, target, rate, bitrate, cancel, budget)
    if spec.max_bytes is not None and written.size > spec.max_bytes:
        retry = _retry_bitrate(target, bitrate, written.size, spec.max_bytes)
        if retry is None:
            raise _too_big(written.size, spec.max_bytes)
        written = _transcode(src, dst, spec, target, rate, retry, cancel, None)  # its length now decoded
        if written.size > spec.max_bytes:
            raise _too_big(written.size, spec.max_bytes)
    return written


def _allowance(declared_ms: int) -> int:
    """How much audio (ms) is written on a header's word before decoding confirms it."""
    return int(declared_ms * _PROBE_TOLERANCE) + _UNCONFIRMED_SLACK_MS if declared_ms else 0


def _transcode(
    src: Path,
    dst: Path,
    spec: AudioSpec,
    target: _Target,
    rate: int,
    bitrate: int | None,
    cancel: threading.Event,
    budget_ms: int | None,
) -> _Written:
    """One pass from ``src`` to ``dst``.

    Writes at most ``budget_ms`` of audio (None: the length is confirmed,
    write it all); decoding past it goes on without writing and ends in
    ``_Unconfirmed`` with the whole length, or in ``too_long`` the moment the
    decoded audio passes ``spec.max_duration``.
    """
    max_duration = spec.max_duration
    limit_ms = _ms(max_duration) if max_duration is not None else None
    check_size = spec.max_bytes is not None and not target.lossy
    written = 0
    frames_seen = 0
    # Decoded nanoseconds, at the source's own rate: integers, as a Fraction per frame costs more
    # than the decoding of a small frame (a six-hour count of 120 ms packets is 180,000 of them);
    # rounding down loses under a nanosecond a frame.
    decoded_ns = 0
    limit_ns = limit_ms * 1_000_000 if limit_ms is not None else None
    budget_ns = budget_ms * 1_000_000 if budget_ms is not None else None
    counting = False  # past the budget: decoding only
    channels = 0
    time_base = Fraction(1, rate)

    with _open_input(src) as inp:
        if not inp.streams.audio:
            raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, "the file has no audio track")
        decoding = _Decoding(inp, inp.streams.audio[0], cancel)
        out = av.open(str(dst), mode="w", format=target.container)
        try:
            out_stream = _add_output_stream(out, target, rate, spec.channels, bitrate)
            mono = _MonoFeed(target.sample_format, _LAYOUTS[spec.channels], rate)

            def emit(frames: list[AudioFrame]) -> None:
                nonlocal written
                for frame in frames:
                    frame.pts = written
                    frame.time_base = time_base
                    written += frame.samples
                    out.mux(out_stream.encode(frame))

            for frame in decoding.frames():
                if frame.sample_rate:
                    decoded_ns += frame.samples * 1_000_000_000 // frame.sample_rate
                if limit_ns is not None and max_duration is not None and decoded_ns > limit_ns:
                    raise _too_long(None, max_duration)
                if counting or (budget_ns is not None and decoded_ns > budget_ns):
                    counting = True
                    continue
                channels = max(channels, frame.layout.nb_channels)
                emit(mono.resample(frame))
                frames_seen += 1
                if check_size and frames_seen % _SIZE_CHECK_EVERY == 0:
                    size = dst.stat().st_size
                    if spec.max_bytes is not None and size > spec.max_bytes:
                        raise _too_big(size, spec.max_bytes)
            if counting:
                raise _Unconfirmed(decoded_ns // 1_000_000)
            emit(mono.resample(None))
            if written == 0 and decoding.damaged:
                raise PermanentError(
                    HaltCode.UNSUPPORTED_MEDIA,
                    "the file's audio track could not be decoded (empty, truncated or damaged)",
                )
            out.start_encoding()  # a file of no samples is still a file: its headers
            out.mux(out_stream.encode(None))
        except av.error.FFmpegError as exc:
            if isinstance(exc, (OSError, MemoryError)):
                raise  # the disk or the memory, not the file: worth another attempt
            raise PermanentError(
                HaltCode.UNSUPPORTED_MEDIA, f"the file's audio could not be converted ({_ffmpeg_reason(exc)})"
            ) from exc
        finally:
            out.close()
    return _Written(written * 1000 // rate, dst.stat().st_size, channels)


class _MonoFeed:
    """Frames of any shape → frames of the output's format, layout and rate.

    FFmpeg's resampler mixes down only layouts it knows (mono, stereo, 5.1,
    or a count it has a default layout for); a stream of another count (9,
    17, 255 channels in a WAV) is mixed here first, every channel weighed
    alike. Some streams change rate or layout midway (concatenated MP3s,
    broadcast AAC): a resampler is built for one shape, so each new shape
    gets its own.
    """

    def __init__(self, sample_format: str, layout: str, rate: int) -> None:
        self._format, self._layout, self._rate = sample_format, layout, rate
        self._resampler: AudioResampler | None = None
        self._shape: tuple[str, str, int] | None = None
        self._mix = False

    def resample(self, frame: AudioFrame | None) -> list[AudioFrame]:
        if frame is None:
            return self._resampler.resample(None) if self._resampler is not None else []
        out: list[AudioFrame] = []
        shape = (frame.format.name, frame.layout.name, frame.sample_rate)
        if self._resampler is None or shape != self._shape:
            if self._resampler is not None:
                out += self._resampler.resample(None)
            self._resampler = AudioResampler(format=self._format, layout=self._layout, rate=self._rate)
            self._shape = shape
            try:
                self._mix = False
                return out + self._resampler.resample(frame)
            except av.error.ArgumentError:
                # The resampler refused this layout before taking any of it: mix it down here.
                self._resampler = AudioResampler(format=self._format, layout=self._layout, rate=self._rate)
                self._mix = True
        return out + self._resampler.resample(_mixed_down(frame) if self._mix else frame)


def _mixed_down(frame: AudioFrame) -> AudioFrame:
    """The frame's channels averaged into one, as float samples."""
    data = frame.to_ndarray()
    channels = frame.layout.nb_channels
    if not frame.format.is_planar:
        data = data.reshape(-1, channels).T
    samples = data.astype(np.float64)
    kind = frame.format.name.rstrip("p")
    if kind == "u8":
        samples = (samples - 128.0) / 128.0
    elif kind in ("s16", "s32", "s64"):
        samples /= float(1 << (frame.format.bytes * 8 - 1))
    mono = AudioFrame.from_ndarray(samples.mean(axis=0).astype(np.float32).reshape(1, -1), format="flt", layout="mono")
    mono.sample_rate = frame.sample_rate
    return mono


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


class _Decoding:
    """Frames of ``stream``, tolerating damage after the first good frame.

    A packet that fails to decode is skipped; a demuxer error ends the
    stream (a truncated upload still yields what it holds). Either marks the
    decoding ``damaged``: a stream that yields nothing and was never damaged
    holds no samples (a WAV header and nothing else), one that was is
    unreadable. That judgement is the caller's.
    """

    def __init__(self, inp: InputContainer, stream: AudioStream, cancel: threading.Event) -> None:
        self._inp, self._stream, self._cancel = inp, stream, cancel
        self.damaged = False

    def frames(self) -> Iterator[AudioFrame]:
        packets = self._inp.demux(self._stream)
        while True:
            if self._cancel.is_set():
                raise NormalizeCancelled("normalization was cancelled")
            try:
                packet = next(packets)
            except StopIteration:
                return
            except av.error.FFmpegError:
                self.damaged = True
                return
            try:
                frames = packet.decode()
            except av.error.FFmpegError:
                self.damaged = True
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
