"""Recordings nobody tuned to: other voices, speeds, noise, music and the telephone band.

The bench's own recordings (PF6, PF9) are one voice per language, clean, at
its own pace. These are new sentences (names, numbers, negations: what a
meeting says) read by other voices — flite's ``rms``, ``awb`` and ``kal`` in
English, festival's Russian voice shifted in pitch in Russian (the one
Russian voice Debian has) — each heard in eight conditions made at bench
time from the committed clean clips:

``clean``; ``noise10``/``noise0`` (a steady hiss with a hum, at 10 and 0 dB
under the speech); ``music10``/``music0`` (a synthesized bed of chords,
bass and a beat, at 10 and 0 dB); ``phone`` (300–3,400 Hz, 8 kHz, as a
telephone carries it); ``slow``/``fast`` (the same voice at 0.9× and 1.1×
the speed, pitch kept).

The voices fall in two sets fixed before any tuning: ``tuning`` (looked at
while choosing the engine's defaults) and ``held_out`` (never looked at then;
reported apart, so a default fitted to the first cannot pass unnoticed).

``python -m bench.voices generate`` writes the clean clips into
``bench/data/voices`` (Debian's ``flite``, ``festival`` with ``festvox-ru``
and ``sox``); the bench reads only the committed clips.
"""

from __future__ import annotations

import json
import random
import sys
import wave
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import av
import av.error
import numpy as np
import numpy.typing as npt

from bench.common import CACHE, ROOT

DATA = ROOT / "bench" / "data" / "voices"
RATE = 16000

SENTENCES = {
    "ru": (
        "Совещание перенесли на четверг, потому что директор уехал в Казань.",
        "В прошлом году мы продали больше двух тысяч велосипедов.",
        "Ольга Петровна просила не закрывать отчёт до пятницы.",
        "Маяк на северном берегу светил всю ночь, а рыбаки вернулись к обеду.",
        "Дети построили во дворе снежную крепость с высокими башнями.",
        "Мост через реку закрыт на ремонт до весны.",
        "Встречаемся у фонтана в семь часов вечера, не опаздывай.",
        "Новый сотрудник начнёт работу пятнадцатого марта.",
        "Бюджет проекта составляет три миллиона рублей.",
        "Я не согласен с этим решением, его нужно обсудить ещё раз.",
        "Самолёт из Новосибирска задерживается на сорок минут.",
        "В библиотеке открыли новый читальный зал для студентов.",
        "Пожалуйста, отправьте договор Игорю Смирнову до конца недели.",
        "Осенью в лесу много грибов, но собирать их нужно осторожно.",
        "Наша команда выиграла турнир со счётом три один.",
        "Врач посоветовал больше гулять и меньше сидеть за компьютером.",
    ),
    "en": (
        "The meeting moved to Thursday because the director flew to Denver.",
        "Last year we sold more than two thousand bicycles.",
        "Margaret asked us not to close the report before Friday.",
        "The lighthouse on the northern shore burned all night long.",
        "The children built a snow castle with tall towers in the yard.",
        "The bridge over the river is closed for repairs until spring.",
        "Let us meet at the fountain at seven in the evening, do not be late.",
        "The new engineer starts work on the fifteenth of March.",
        "The project budget is three million dollars.",
        "I do not agree with this decision, we need to discuss it again.",
        "The flight from Chicago is delayed by forty minutes.",
        "The library opened a new reading room for students.",
        "Please send the contract to Peter Collins by the end of the week.",
        "There are many mushrooms in the forest in autumn, but pick them carefully.",
        "Our team won the tournament three to one.",
        "The doctor advised me to walk more and sit less at the computer.",
    ),
}


@dataclass(frozen=True)
class Speaker:
    """A voice of the set: its folder under ``DATA``, its language, and which set it belongs to."""

    name: str
    language: str
    engine: str  # "flite" | "festival_ru"
    voice: str = ""
    pitch: int = 0
    held_out: bool = False


SPEAKERS = (
    Speaker("en-rms", "en", "flite", "rms"),
    Speaker("ru-low", "ru", "festival_ru", pitch=-250),
    Speaker("en-awb", "en", "flite", "awb", held_out=True),
    Speaker("en-kal", "en", "flite", "kal", held_out=True),
    Speaker("ru-high", "ru", "festival_ru", pitch=300, held_out=True),
)

CONDITIONS = ("clean", "noise10", "noise0", "music10", "music0", "phone", "slow", "fast")


def generate() -> None:
    """The clean clips of every speaker, synthesized and encoded as the committed clips are."""
    from testkit.audio import Voice, speak

    for s in SPEAKERS:
        folder = DATA / s.name
        folder.mkdir(parents=True, exist_ok=True)
        texts = {}
        for i, text in enumerate(SENTENCES[s.language]):
            name = f"{i:02d}.ogg"
            speak(text, folder / name, Voice(s.engine, s.voice, s.pitch))
            texts[name] = text
        (folder / "clips.json").write_text(json.dumps(texts, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def recording(speaker: Speaker, condition: str, *, rounds: int = 2, pause: float = 0.5) -> tuple[Path, str]:
    """The speaker's clips in seeded shuffled rounds, in ``condition``: a 16 kHz mono WAV and its text."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"voices-{speaker.name}-{condition}-{rounds}.wav"
    text_path = path.with_suffix(".txt")
    if path.is_file() and text_path.is_file():
        return path, text_path.read_text(encoding="utf-8")
    clips = json.loads((DATA / speaker.name / "clips.json").read_text(encoding="utf-8"))
    rng = random.Random(f"{speaker.name}-{condition}")
    parts: list[npt.NDArray[np.float32]] = []
    said: list[str] = []
    gap = np.zeros(int(RATE * pause), dtype=np.float32)
    for _ in range(rounds):
        for name in rng.sample(sorted(clips), len(clips)):
            parts += [_decoded(DATA / speaker.name / name), gap]
            said.append(clips[name])
    clean = np.concatenate(parts)
    heard = CHANGES[condition](clean, rng.randrange(2**31))
    _write(path, heard)
    text_path.write_text(" ".join(said), encoding="utf-8")
    return path, " ".join(said)


# --- the conditions ---------------------------------------------------------------------


def _noise(speech: npt.NDArray[np.float32], seed: int, snr: float) -> npt.NDArray[np.float32]:
    """A hiss shaped towards the low end (pink-ish) with a 50 Hz hum, ``snr`` dB under the speech."""
    rng = np.random.default_rng(seed)
    white = rng.standard_normal(speech.size).astype(np.float32)
    spectrum = np.fft.rfft(white)
    spectrum /= np.sqrt(np.maximum(np.fft.rfftfreq(white.size, 1 / RATE), 20.0))
    bed = np.fft.irfft(spectrum, n=white.size).astype(np.float32)
    t = np.arange(speech.size) / RATE
    bed += (0.3 * np.std(bed) * np.sin(2 * np.pi * 50 * t)).astype(np.float32)
    return _mixed(speech, bed, snr)


def _music(speech: npt.NDArray[np.float32], seed: int, snr: float) -> npt.NDArray[np.float32]:
    """A bed of chords changing every two seconds, a bass line and a beat, ``snr`` dB under the speech."""
    rng = np.random.default_rng(seed)
    t = np.arange(speech.size) / RATE
    roots = rng.choice([196.0, 220.0, 246.9, 261.6, 293.7], size=int(t[-1] // 2) + 2)
    root = roots[(t // 2).astype(int)]
    chord = sum(np.sin(2 * np.pi * root * ratio * t) for ratio in (1.0, 1.26, 1.5, 2.0))
    bass = np.sin(2 * np.pi * root / 2 * t)
    beat = np.exp(-((t % 0.5) * 30)) * rng.standard_normal(t.size)
    bed = (0.5 * chord + 0.7 * bass + 0.6 * beat).astype(np.float32)
    return _mixed(speech, bed, snr)


def _mixed(speech: npt.NDArray[np.float32], bed: npt.NDArray[np.float32], snr: float) -> npt.NDArray[np.float32]:
    loud = np.abs(speech) > 0.01  # the speech's own loudness, not its pauses'
    level = float(np.sqrt(np.mean(speech[loud] ** 2))) if loud.any() else 0.1
    bed = bed * (level / max(float(np.sqrt(np.mean(bed**2))), 1e-9) / 10 ** (snr / 20))
    out = speech + bed
    return (out / max(1.0, float(np.max(np.abs(out))) / 0.95)).astype(np.float32)


def _filtered(audio: npt.NDArray[np.float32], chain: list[tuple[str, str]]) -> npt.NDArray[np.float32]:
    """``audio`` through FFmpeg's audio filters (PyAV's filter graph), back at 16 kHz."""
    graph = av.filter.Graph()
    nodes = [graph.add_abuffer(format="flt", sample_rate=RATE, layout="mono")]
    nodes += [graph.add(name, argument) for name, argument in [*chain, ("aresample", str(RATE))]]
    nodes.append(graph.add("abuffersink"))
    graph.link_nodes(*nodes).configure()
    frame = av.AudioFrame.from_ndarray(audio[None, :].astype(np.float32), format="flt", layout="mono")
    frame.sample_rate, frame.pts = RATE, 0
    graph.push(frame)
    graph.push(None)
    out: list[npt.NDArray[np.float32]] = []
    while True:
        try:
            pulled = graph.pull()
            out.append(np.asarray(pulled.to_ndarray(), dtype=np.float32).reshape(-1))
        except (av.error.EOFError, av.error.BlockingIOError):
            break
    return np.concatenate(out).astype(np.float32)


CHANGES: dict[str, Callable[[npt.NDArray[np.float32], int], npt.NDArray[np.float32]]] = {
    "clean": lambda a, _seed: a,
    "noise10": lambda a, seed: _noise(a, seed, 10.0),
    "noise0": lambda a, seed: _noise(a, seed, 0.0),
    "music10": lambda a, seed: _music(a, seed, 10.0),
    "music0": lambda a, seed: _music(a, seed, 0.0),
    "phone": lambda a, _seed: _filtered(
        a, [("highpass", "f=300"), ("lowpass", "f=3400"), ("aresample", "8000"), ("alimiter", "limit=0.9")]
    ),
    "slow": lambda a, _seed: _filtered(a, [("atempo", "0.9")]),
    "fast": lambda a, _seed: _filtered(a, [("atempo", "1.1")]),
}


def _decoded(path: Path) -> npt.NDArray[np.float32]:
    from faster_whisper.audio import decode_audio

    return np.asarray(decode_audio(str(path), sampling_rate=RATE), dtype=np.float32)


def _write(path: Path, audio: npt.NDArray[np.float32]) -> None:
    pcm = (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(pcm.tobytes())


if __name__ == "__main__":
    if sys.argv[1:] == ["generate"]:
        generate()
    else:
        raise SystemExit("usage: python -m bench.voices generate")
