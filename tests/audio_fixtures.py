"""Media generated at test time with PyAV, and the committed speech clips.

Everything here streams: a long input is written chunk by chunk, so a
twenty-minute fixture costs disk, not memory.

``python -m tests.audio_fixtures`` regenerates ``tests/data/speech`` and
``samples/`` from their texts with Debian's ``flite`` (voice ``slt``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from av.audio.frame import AudioFrame
from av.audio.stream import AudioStream
from av.video.frame import VideoFrame

ROOT = Path(__file__).resolve().parent.parent
SPEECH_DIR = ROOT / "tests" / "data" / "speech"
CLIPS_JSON = SPEECH_DIR / "clips.json"
SAMPLE = ROOT / "samples" / "sample.ogg"
SAMPLE_TEXT = ROOT / "samples" / "sample.txt"

_CHUNK = 1024
_LAYOUTS = {1: "mono", 2: "stereo"}


def tone_frames(
    seconds: float,
    rate: int,
    channels: int = 1,
    *,
    freq: float = 440.0,
    amplitude: float = 0.3,
    fmt: str = "s16",
) -> Iterator[AudioFrame]:
    """A sine tone as frames of ``_CHUNK`` samples (the last one shorter)."""
    total = round(seconds * rate)
    done = 0
    while done < total:
        n = min(_CHUNK, total - done)
        t = (np.arange(done, done + n) / rate).astype(np.float64)
        wave = amplitude * np.sin(2 * np.pi * freq * t)
        if fmt == "s16":
            mono = (wave * 32767).astype(np.int16)
        else:
            mono = wave.astype(np.float32)
        if fmt.endswith("p"):
            data = np.tile(mono, (channels, 1))
        else:
            data = np.repeat(mono, channels).reshape(1, -1)
        frame = AudioFrame.from_ndarray(data, format=fmt, layout=_LAYOUTS[channels])
        frame.sample_rate = rate
        frame.pts = done
        frame.time_base = Fraction(1, rate)
        done += n
        yield frame


def write_audio(
    path: Path,
    seconds: float,
    *,
    codec: str,
    rate: int = 44100,
    channels: int = 2,
    container: str | None = None,
    bit_rate: int | None = None,
    video: bool = False,
) -> Path:
    """A tone in ``codec`` inside ``path``'s container, optionally beside a tiny video track."""
    with av.open(str(path), mode="w", format=container) as out:
        audio = out.add_stream(codec, rate=rate)
        assert isinstance(audio, AudioStream)
        audio.layout = _LAYOUTS[channels]
        if bit_rate is not None:
            audio.bit_rate = bit_rate
        picture = out.add_stream("mpeg4", rate=10) if video else None
        if picture is not None:
            picture.width = picture.height = 64
            picture.pix_fmt = "yuv420p"
        next_picture = 0
        # The encoder converts to its own sample format and frame size.
        for frame in tone_frames(seconds, rate, channels):
            if picture is not None:
                # Interleave roughly in time so the muxer need not buffer.
                while next_picture / 10 <= (frame.pts or 0) / rate:
                    image = VideoFrame.from_ndarray(np.full((64, 64, 3), 90, np.uint8), format="rgb24")
                    image.pts = next_picture
                    out.mux(picture.encode(image.reformat(format="yuv420p")))
                    next_picture += 1
            out.mux(audio.encode(frame))
        out.mux(audio.encode(None))
        if picture is not None:
            out.mux(picture.encode(None))
    return path


def write_video_only(path: Path, seconds: float = 1.0) -> Path:
    """An MP4 with a picture and no sound at all."""
    with av.open(str(path), mode="w") as out:
        picture = out.add_stream("mpeg4", rate=10)
        picture.width = picture.height = 64
        picture.pix_fmt = "yuv420p"
        for i in range(round(seconds * 10)):
            image = VideoFrame.from_ndarray(np.full((64, 64, 3), i * 20 % 255, np.uint8), format="rgb24")
            image.pts = i
            out.mux(picture.encode(image.reformat(format="yuv420p")))
        out.mux(picture.encode(None))
    return path


@dataclass(frozen=True)
class Decoded:
    container: str
    codec: str
    rate: int
    channels: int
    seconds: float  # from the decoded samples, not the header


def decode_info(path: Path) -> Decoded:
    with av.open(str(path)) as inp:
        stream = inp.streams.audio[0]
        samples = 0
        rate = stream.rate
        for frame in inp.decode(stream):
            samples += frame.samples
            rate = frame.sample_rate
        return Decoded(
            container=inp.format.name,
            codec=stream.codec_context.name,
            rate=stream.rate,
            channels=stream.channels,
            seconds=samples / rate,
        )


def concat_to_wav(sources: list[Path], dst: Path, *, repeat: int = 1, gap: float = 0.5) -> Path:
    """The sources, decoded to 16 kHz mono and played ``repeat`` times with gaps, in one WAV."""
    rate = 16000
    with av.open(str(dst), mode="w", format="wav") as out:
        stream = out.add_stream("pcm_s16le", rate=rate)
        stream.layout = "mono"
        pts = 0
        silence = np.zeros((1, round(gap * rate)), np.int16)
        for _ in range(repeat):
            for src in sources:
                resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
                with av.open(str(src)) as inp:
                    frames = [f for fr in inp.decode(audio=0) for f in resampler.resample(fr)]
                frames += resampler.resample(None)
                quiet = AudioFrame.from_ndarray(silence, format="s16", layout="mono")
                quiet.sample_rate = rate
                for frame in [*frames, quiet]:
                    frame.pts = pts
                    frame.time_base = Fraction(1, rate)
                    pts += frame.samples
                    out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return dst


# --- the committed speech ------------------------------------------------------

CLIPS: dict[str, str] = {
    "fox.ogg": "The quick brown fox jumps over the lazy dog.",
    "report.ogg": "Please send the final report to the whole team before the end of the week.",
    "clocks.ogg": "It was a bright cold day in April, and the clocks were striking loudly.",
    "trees.ogg": "We should plant more trees along the river next spring.",
    "weather.ogg": "The weather today is sunny with a light wind from the west.",
    "station.ogg": "Can you tell me where the nearest train station is?",
}

SAMPLE_SENTENCES = "Hello, and welcome. This is a short recording made to show how the service turns speech into text."


def _speak(text: str, dst: Path) -> None:
    from datetime import timedelta

    from sidecar.audio import normalize
    from sidecar.providers.base import AudioSpec

    flite = shutil.which("flite")
    if flite is None:
        raise SystemExit("flite is not installed (apt-get install -y flite)")
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "speech.wav"
        subprocess.run([flite, "-voice", "slt", "-t", text, "-o", str(wav)], check=True)
        normalize(wav, dst, AudioSpec("ogg_opus", 16000, 1, 24000, max_duration=timedelta(minutes=1)))


def regenerate() -> None:
    SPEECH_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in CLIPS.items():
        _speak(text, SPEECH_DIR / name)
    CLIPS_JSON.write_text(json.dumps(CLIPS, indent=2) + "\n", encoding="utf-8")
    SAMPLE.parent.mkdir(parents=True, exist_ok=True)
    _speak(SAMPLE_SENTENCES, SAMPLE)
    SAMPLE_TEXT.write_text(SAMPLE_SENTENCES + "\n", encoding="utf-8")


if __name__ == "__main__":
    regenerate()
    sys.exit(0)
