"""Media generated at test time with PyAV, and the committed speech clips.

Everything here streams: a long input is written chunk by chunk, so a
twenty-minute fixture costs disk, not memory.

``python -m testkit.audio`` regenerates ``tests/data/speech`` and
``samples/`` from their texts with Debian's ``flite`` (voice ``slt``),
``tests/data/speech_ru`` with ``festival``'s Russian voice (``festvox-ru``),
and the dialogues in ``tests/data/dialogues`` (both engines, ``sox`` for a
second Russian speaker), each beside a JSON table of who speaks when.
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
from av.container import OutputContainer
from av.video.frame import VideoFrame

ROOT = Path(__file__).resolve().parent.parent
SPEECH_DIR = ROOT / "tests" / "data" / "speech"
CLIPS_JSON = SPEECH_DIR / "clips.json"
SAMPLE = ROOT / "samples" / "sample.ogg"
SAMPLE_TEXT = ROOT / "samples" / "sample.txt"
RU_SPEECH_DIR = ROOT / "tests" / "data" / "speech_ru"
RU_CLIPS_JSON = RU_SPEECH_DIR / "clips.json"
DIALOGUE_DIR = ROOT / "tests" / "data" / "dialogues"

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


def _audio_stream(out: OutputContainer, codec: str, rate: int, channels: int, bit_rate: int | None) -> AudioStream:
    """An audio stream of ``out`` in ``codec`` at ``rate``, ``channels`` and, when given, ``bit_rate``."""
    stream = out.add_stream(codec, rate=rate)
    assert isinstance(stream, AudioStream)
    stream.layout = _LAYOUTS[channels]
    if bit_rate is not None:
        stream.bit_rate = bit_rate
    return stream


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
        audio = _audio_stream(out, codec, rate, channels, bit_rate)
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


def compose_wav(parts: list[Path | float], dst: Path, *, noise: float = 0.0, seed: int = 0) -> Path:
    """One 16 kHz mono WAV of ``parts`` in order: a file is its decoded audio, a number that many seconds of quiet.

    ``noise`` > 0 fills the quiet with white noise of that amplitude instead of silence.
    """
    rate = 16000
    rng = np.random.default_rng(seed)
    with av.open(str(dst), mode="w", format="wav") as out:
        stream = out.add_stream("pcm_s16le", rate=rate)
        stream.layout = "mono"
        pts = 0

        def emit(frame: AudioFrame) -> None:
            nonlocal pts
            frame.pts = pts
            frame.time_base = Fraction(1, rate)
            pts += frame.samples
            out.mux(stream.encode(frame))

        for part in parts:
            if isinstance(part, Path):
                resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
                with av.open(str(part)) as inp:
                    for decoded in inp.decode(audio=0):
                        for frame in resampler.resample(decoded):
                            emit(frame)
                for frame in resampler.resample(None):
                    emit(frame)
                continue
            left = round(part * rate)
            while left > 0:
                n = min(left, rate)
                quiet = (rng.standard_normal(n) * noise * 32767).astype(np.int16) if noise else np.zeros(n, np.int16)
                frame = AudioFrame.from_ndarray(quiet.reshape(1, -1), format="s16", layout="mono")
                frame.sample_rate = rate
                emit(frame)
                left -= n
        out.mux(stream.encode(None))
    return dst


def reencode(
    src: Path,
    dst: Path,
    *,
    codec: str,
    container: str | None = None,
    rate: int = 16000,
    channels: int = 1,
    bit_rate: int | None = None,
) -> Path:
    """``src``'s audio in ``codec`` inside ``dst``'s container (or ``container``), at ``rate`` and
    ``channels``: e.g. a spoken clip as AMR-NB (``libopencore_amrnb``, 8 kHz mono, in ``amr``)."""
    with av.open(str(dst), mode="w", format=container) as out:
        stream = _audio_stream(out, codec, rate, channels, bit_rate)
        resampler = av.AudioResampler(format=stream.format.name, layout=_LAYOUTS[channels], rate=rate)
        with av.open(str(src)) as inp:
            for decoded in inp.decode(audio=0):
                decoded.pts = None
                for frame in resampler.resample(decoded):
                    out.mux(stream.encode(frame))
        for frame in resampler.resample(None):
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

# Russian for the multilingual models: no digits, abbreviations, Latin letters or "ё".
RU_CLIPS: dict[str, str] = {
    "coffee.ogg": "Сегодня утром я пил кофе на кухне и читал новости.",
    "dacha.ogg": "Мы поедем на дачу в субботу, если не будет дождя.",
    "window.ogg": "Пожалуйста, закройте окно, в комнате стало очень холодно.",
    "doctor.ogg": "Моя сестра работает врачом в большой городской больнице.",
    "park.ogg": "Вечером мы долго гуляли по парку и разговаривали о жизни.",
    "shopping.ogg": "Не забудь купить хлеб, молоко и немного свежих овощей.",
    "train.ogg": "Поезд отправляется с третьего пути через несколько минут.",
    "yard.ogg": "Дети играют во дворе, а собака бегает вокруг них.",
    "book.ogg": "Я давно хотел прочитать эту книгу, но никак не находил времени.",
    "weather.ogg": "Завтра будет солнечно и тепло, поэтому возьми с собой воду.",
}


@dataclass(frozen=True)
class Voice:
    """A synthetic speaker: a flite voice, or festival's Russian voice shifted by ``pitch`` cents."""

    engine: str  # "flite" | "festival_ru"
    name: str = ""
    pitch: int = 0


SLT = Voice("flite", "slt")
RU = Voice("festival_ru")


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SystemExit(f"{name} is not installed (apt-get install -y {package})")
    return path


def _synthesize(text: str, voice: Voice, wav: Path) -> None:
    """``text`` spoken by ``voice`` into the WAV ``wav``."""
    if voice.engine == "flite":
        subprocess.run([_tool("flite", "flite"), "-voice", voice.name, "-t", text, "-o", str(wav)], check=True)
        return
    # The voice reads UTF-8 (KOI8-R fails in its letter-to-sound rules).
    source = wav.with_suffix(".txt")
    source.write_text(text + "\n", encoding="utf-8")
    raw = wav.with_suffix(".raw.wav") if voice.pitch else wav
    text2wave = _tool("text2wave", "festival festvox-ru")
    subprocess.run([text2wave, "-eval", "(voice_msu_ru_nsh_clunits)", str(source), "-o", str(raw)], check=True)
    if voice.pitch:
        # -G: sox lowers the gain itself where the effect would clip.
        subprocess.run([_tool("sox", "sox"), "-G", str(raw), str(wav), "pitch", str(voice.pitch)], check=True)


def _encode(wav: Path, dst: Path, *, minutes: int = 1) -> None:
    """``wav`` as 16 kHz mono Ogg/Opus at 24 kbit/s, the form of every committed clip."""
    from datetime import timedelta

    from sidecar.media.audio import normalize
    from sidecar.providers.base import AudioSpec

    normalize(wav, dst, AudioSpec("ogg_opus", 16000, 1, 24000, max_duration=timedelta(minutes=minutes)))


def speak(text: str, dst: Path, voice: Voice = SLT) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "speech.wav"
        _synthesize(text, voice, wav)
        _encode(wav, dst)


def regenerate_speech_ru() -> None:
    RU_SPEECH_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in RU_CLIPS.items():
        speak(text, RU_SPEECH_DIR / name, RU)
    RU_CLIPS_JSON.write_text(json.dumps(RU_CLIPS, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


# --- the committed dialogues, for diarization ------------------------------------


@dataclass(frozen=True)
class Dialogue:
    """Who speaks with which voice, and the turns in order as (speaker, sentence)."""

    voices: dict[str, Voice]
    turns: tuple[tuple[str, str], ...]


DIALOGUES: dict[str, Dialogue] = {
    "en_2speakers": Dialogue(
        {"A": SLT, "B": Voice("flite", "rms")},
        (
            ("A", "Good morning everyone, thanks for joining, shall we start with the status of the mobile release?"),
            ("B", "The new build passed all the tests yesterday, and the beta testers seem happy so far."),
            ("A", "Did anyone report problems with the new login screen during this round of testing?"),
            ("B", "Only one person did, and it turned out to be a slow network on their side."),
            ("A", "Then I think we can safely plan the public release for the middle of next week."),
            ("B", "I agree, but I would like one more day to update the help pages first."),
            ("A", "Let us say Thursday morning, and I will tell the marketing team about the date."),
            ("B", "Perfect, I will send you the final checklist and the release notes before the end of the day."),
        ),
    ),
    "en_3speakers": Dialogue(
        {"A": SLT, "B": Voice("flite", "awb"), "C": Voice("flite", "kal16")},
        (
            ("A", "Let us look at the budget for the office move before we run out of time."),
            ("B", "The movers sent their quote this morning, and it is a little higher than we expected."),
            ("C", "We could save some money if we move the old furniture ourselves over the weekend."),
            ("A", "I like that idea, but we need to make sure nobody gets hurt lifting heavy desks."),
            ("B", "I can ask the building manager whether we may borrow their trolleys on Saturday."),
            ("C", "And I will make a list of everything that has to be packed by Friday."),
            ("A", "Good, please also check which of the old computers can simply be recycled."),
            ("C", "Most of them are at least seven years old, so I would recycle nearly all of them."),
            ("B", "Then let us meet again on Wednesday and agree on the final plan."),
        ),
    ),
    "en_4speakers": Dialogue(
        {"A": SLT, "B": Voice("flite", "rms"), "C": Voice("flite", "awb"), "D": Voice("flite", "kal16")},
        (
            ("A", "Welcome back, everyone, today I would like to talk about the customer survey results."),
            ("B", "Most customers said the app is easy to use, but the search is far too slow."),
            ("C", "We already know why, because the search index is rebuilt every single night."),
            ("D", "If we update the index during the day instead, the results will be fresh and fast."),
            ("A", "How long would that change take, and who could start working on it?"),
            ("C", "I think it takes about two weeks, and I can start on Monday."),
            ("B", "Customers also asked for a dark mode, which comes up in almost every review."),
            ("D", "That one is easy, I can build a first version while the search work is going on."),
            ("A", "Great, let us write both tasks down and check the progress at our next meeting."),
            ("B", "I will share the full survey report with everybody after this call."),
        ),
    ),
    # One Russian voice exists; the second speaker is the same voice four semitones lower.
    "ru_2speakers": Dialogue(
        {"A": RU, "B": Voice("festival_ru", pitch=-400)},
        (
            ("A", "Привет, ты уже решил, куда поедешь летом в отпуск?"),
            ("B", "Пока нет, но я думаю поехать к морю на две недели."),
            ("A", "Хорошая идея, в прошлом году мы отдыхали на юге и остались довольны."),
            ("B", "А где вы жили, в гостинице или снимали квартиру у местных?"),
            ("A", "Мы снимали небольшую квартиру недалеко от пляжа, это было удобно и недорого."),
            ("B", "Тогда пришли мне, пожалуйста, телефон хозяйки, я тоже хочу там остановиться."),
            ("A", "Конечно, вечером найду его и отправлю тебе сообщение."),
            ("B", "Спасибо большое, тогда я сегодня же посмотрю билеты на поезд."),
            ("A", "Только покупай заранее, летом билеты на юг быстро заканчиваются."),
            ("B", "Хорошо, я так и сделаю, спасибо за совет."),
        ),
    ),
}

_RATE = 16000
_GAPS = (0.5, 0.3, 0.7, 0.4, 0.8, 0.35, 0.6, 0.45, 0.75, 0.55)  # seconds between turns, in turn
_EDGE = 0.5  # seconds of silence before the first turn and after the last
_PEAK = 0.7  # every turn is scaled to this peak, so no voice drowns another
_SPEECH = 0.01  # above this amplitude (of full scale) a sample is speech


def _pcm(path: Path) -> np.ndarray:
    """``path`` decoded to 16 kHz mono float samples."""
    resampler = av.AudioResampler(format="flt", layout="mono", rate=_RATE)
    with av.open(str(path)) as inp:
        frames = [f for fr in inp.decode(audio=0) for f in resampler.resample(fr)]
    frames += resampler.resample(None)
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames])


def _turn(samples: np.ndarray) -> np.ndarray:
    """One turn scaled to ``_PEAK``, without the silence the synthesizer put around it."""
    scaled: np.ndarray = samples * (_PEAK / float(np.abs(samples).max()))
    loud = np.flatnonzero(np.abs(scaled) > _SPEECH)
    return scaled[loud[0] : loud[-1] + 1]


def _write_wav(path: Path, samples: np.ndarray) -> None:
    with av.open(str(path), mode="w", format="wav") as out:
        stream = out.add_stream("pcm_s16le", rate=_RATE)
        stream.layout = "mono"
        frame = AudioFrame.from_ndarray((samples * 32767).astype(np.int16).reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = _RATE
        frame.pts = 0
        frame.time_base = Fraction(1, _RATE)
        out.mux(stream.encode(frame))
        out.mux(stream.encode(None))


def build_dialogue(dialogue: Dialogue, dst: Path) -> dict[str, object]:
    """Write ``dialogue`` to ``dst`` (Ogg/Opus); its turns timed from where their samples lie."""
    parts = [np.zeros(round(_EDGE * _RATE), np.float32)]
    placed = round(_EDGE * _RATE)
    turns: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (speaker, text) in enumerate(dialogue.turns):
            wav = Path(tmp) / f"turn{i}.wav"
            _synthesize(text, dialogue.voices[speaker], wav)
            speech = _turn(_pcm(wav))
            last = i == len(dialogue.turns) - 1
            silence = np.zeros(round((_EDGE if last else _GAPS[i % len(_GAPS)]) * _RATE), np.float32)
            turns.append(
                {
                    "start": round(placed / _RATE, 3),
                    "end": round((placed + len(speech)) / _RATE, 3),
                    "speaker": speaker,
                    "text": text,
                }
            )
            parts += [speech, silence]
            placed += len(speech) + len(silence)
        whole = Path(tmp) / "dialogue.wav"
        _write_wav(whole, np.concatenate(parts))
        _encode(whole, dst, minutes=2)
    return {"speakers": len(dialogue.voices), "turns": turns}


def regenerate_dialogues() -> None:
    DIALOGUE_DIR.mkdir(parents=True, exist_ok=True)
    for name, dialogue in DIALOGUES.items():
        table = build_dialogue(dialogue, DIALOGUE_DIR / f"{name}.ogg")
        text = json.dumps(table, ensure_ascii=False, indent=2) + "\n"
        (DIALOGUE_DIR / f"{name}.json").write_text(text, encoding="utf-8")


def regenerate() -> None:
    SPEECH_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in CLIPS.items():
        speak(text, SPEECH_DIR / name)
    CLIPS_JSON.write_text(json.dumps(CLIPS, indent=2) + "\n", encoding="utf-8")
    SAMPLE.parent.mkdir(parents=True, exist_ok=True)
    speak(SAMPLE_SENTENCES, SAMPLE)
    SAMPLE_TEXT.write_text(SAMPLE_SENTENCES + "\n", encoding="utf-8")
    regenerate_speech_ru()
    regenerate_dialogues()


if __name__ == "__main__":
    regenerate()
    sys.exit(0)


def speech_wav_bytes(seconds: float = 1.0) -> bytes:
    """A WAV of spoken words (a committed clip, repeated or cut to ``seconds``).

    For tests whose pipeline must send something to a provider: voice activity
    detection finds no speech in a tone, and a recording without speech is
    never sent anywhere.
    """
    clip = _pcm(SPEECH_DIR / "fox.ogg")
    n = round(seconds * _RATE)
    samples = np.tile(clip, -(-n // len(clip)))[:n]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "speech.wav"
        _write_wav(path, samples)
        return path.read_bytes()


def clip_text(path: Path) -> str:
    """What is said in a committed clip."""
    return (RU_CLIPS if path.parent == RU_SPEECH_DIR else CLIPS)[path.name]


@dataclass(frozen=True)
class Placed:
    """A clip placed in a long recording: what is said, from when (seconds)."""

    at: float
    text: str


def long_recording(dst: Path, seconds: float, clips: list[tuple[float, Path]]) -> list[Placed]:
    """A long FLAC: digital silence with each clip at its time (sorted, not overlapping).

    Silence costs almost nothing in FLAC, so a six-hour recording is a few MB
    and written in seconds; what is said where comes back for checking.
    """
    samples = {path: (_pcm(path) * 32767).astype(np.int16) for _, path in clips}
    placed: list[Placed] = []
    block = 10 * _RATE
    with av.open(str(dst), mode="w", format="flac") as out:
        stream = out.add_stream("flac", rate=_RATE)
        stream.layout = "mono"
        pts = 0

        def emit(chunk: np.ndarray) -> None:
            nonlocal pts
            for i in range(0, len(chunk), block):
                frame = AudioFrame.from_ndarray(chunk[i : i + block].reshape(1, -1), format="s16", layout="mono")
                frame.sample_rate = _RATE
                frame.pts = pts
                frame.time_base = Fraction(1, _RATE)
                pts += frame.samples
                out.mux(stream.encode(frame))

        for at, path in sorted(clips):
            start = round(at * _RATE)
            if start < pts:
                raise ValueError(f"{path.name} at {at} s overlaps the clip before it")
            emit(np.zeros(start - pts, np.int16))
            placed.append(Placed(pts / _RATE, clip_text(path)))
            emit(samples[path])
        emit(np.zeros(max(0, round(seconds * _RATE) - pts), np.int16))
        out.mux(stream.encode(None))
    return placed
