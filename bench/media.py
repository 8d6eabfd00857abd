"""Generated inputs: speech-like audio (voiced tones under a syllable envelope, plus noise).

Long files are built from a one-minute encoded piece: a CBR MP3 stream
written without an ID3 tag or a Xing/Info header can be repeated byte for
byte and stays one valid stream (each piece starts with an empty bit
reservoir), so a 3-hour file costs one minute of encoding. Results are cached
under bench/out/cache.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
from av.audio.stream import AudioStream

from bench.common import CACHE

_LAYOUTS = {1: "mono", 2: "stereo"}


def speech_like(
    seconds: float, rate: int, channels: int = 1, *, seed: int = 7, chunk: int = 1152
) -> Iterator[np.ndarray]:
    """Float32 planar chunks (channels × n) of a voice-like signal: a wandering pitch with
    harmonics, gated by a ~4 Hz syllable envelope with pauses, over low noise."""
    rng = np.random.default_rng(seed)
    total = int(seconds * rate)
    done = 0
    phase = 0.0
    while done < total:
        n = min(chunk, total - done)
        t = (done + np.arange(n)) / rate
        pitch = 140 + 40 * np.sin(2 * math.pi * 0.3 * t) + 15 * np.sin(2 * math.pi * 1.7 * t)
        ph = phase + np.cumsum(2 * math.pi * pitch / rate)
        phase = float(ph[-1])
        voice = 0.5 * np.sin(ph) + 0.25 * np.sin(2 * ph) + 0.12 * np.sin(3 * ph) + 0.06 * np.sin(5 * ph)
        syllable = np.clip(np.sin(2 * math.pi * 4.0 * t), 0, None)
        phrase = (np.sin(2 * math.pi * 0.23 * t) > -0.6).astype(np.float32)
        sig = 0.4 * voice * syllable * phrase + 0.01 * rng.standard_normal(n)
        block = np.repeat(sig.astype(np.float32)[None, :], channels, axis=0)
        yield block
        done += n


def _encode(
    path: Path,
    fmt: str,
    codec: str,
    seconds: float,
    rate: int,
    channels: int,
    bitrate: int | None,
    options: dict[str, str] | None = None,
    stream_options: dict[str, str] | None = None,
) -> None:
    with av.open(str(path), mode="w", format=fmt, options=options or {}) as out:
        stream = out.add_stream(codec, rate=rate, options=stream_options or {})
        assert isinstance(stream, AudioStream)
        stream.layout = _LAYOUTS[channels]
        if bitrate:
            stream.bit_rate = bitrate
        pts = 0
        for block in speech_like(seconds, rate, channels):
            frame = av.AudioFrame.from_ndarray(block, format="fltp", layout=_LAYOUTS[channels])
            frame.sample_rate = rate
            frame.pts = pts
            pts += block.shape[1]
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)


def _cached(name: str) -> tuple[Path, bool]:
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / name
    return path, path.is_file() and path.stat().st_size > 0


def mp3_piece(rate: int, channels: int, bitrate: int, seconds: int = 60) -> Path:
    """A headerless CBR MP3 of ``seconds`` (no ID3, no Xing), concatenable."""
    path, ok = _cached(f"piece-{seconds}s-{rate}-{channels}ch-{bitrate // 1000}k.mp3")
    if not ok:
        tmp = path.with_suffix(".part")
        _encode(
            tmp,
            "mp3",
            "libmp3lame",
            seconds,
            rate,
            channels,
            bitrate,
            options={"write_xing": "0", "id3v2_version": "0", "write_id3v1": "0"},
        )
        tmp.replace(path)
    return path


def long_mp3(seconds: int, rate: int = 16000, channels: int = 1, bitrate: int = 24000) -> Path:
    """An MP3 of ``seconds`` (a multiple of 60) made of repeated one-minute pieces."""
    if seconds % 60:
        raise ValueError("long_mp3 takes whole minutes")
    piece = mp3_piece(rate, channels, bitrate)
    path, ok = _cached(f"long-{seconds}s-{rate}-{channels}ch-{bitrate // 1000}k.mp3")
    if not ok:
        tmp = path.with_suffix(".part")
        with tmp.open("wb") as out:
            for _ in range(seconds // 60):
                with piece.open("rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
        tmp.replace(path)
    return path


def behind_silence(audio: Path, ms: int) -> Path:
    """``audio`` (a 16-bit WAV) with ``ms`` milliseconds of silence before it, cached (PF9's offsets)."""
    import wave

    if ms == 0:
        return audio
    path, ok = _cached(f"{audio.stem}-at{ms}ms.wav")
    if not ok:
        with wave.open(str(audio), "rb") as src:
            params, frames = src.getparams(), src.readframes(src.getnframes())
        silence = b"\0" * (params.sampwidth * params.nchannels * params.framerate * ms // 1000)
        tmp = path.with_suffix(".part")
        with wave.open(str(tmp), "wb") as out:
            out.setparams(params)
            out.writeframes(silence + frames)
        tmp.replace(path)
    return path


def opus_clip(seconds: float = 5.0) -> Path:
    """A short Ogg/Opus clip, mono 48 kHz (what a phone voice note looks like)."""
    path, ok = _cached(f"clip-{seconds:g}s.ogg")
    if not ok:
        tmp = path.with_name(path.stem + ".part.ogg")
        _encode(tmp, "ogg", "libopus", seconds, 48000, 1, 32000)
        tmp.replace(path)
    return path


def duration_s(path: Path) -> float:
    """Decoded duration (exact: counts samples)."""
    samples = 0
    rate = 0
    with av.open(str(path)) as c:
        for frame in c.decode(audio=0):
            samples += frame.samples
            rate = frame.sample_rate
    return samples / rate if rate else 0.0
