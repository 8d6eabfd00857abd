"""PF6: the offline engine in Russian and English, through the pipeline's provider and bare faster-whisper.

For each language the committed clips (tests/data/speech_ru, tests/data/speech
with samples/sample.ogg) are normalized as the pipeline does and joined in
seeded shuffled rounds with half-second pauses into one recording of at least
a minute (five in a full run). The same recording is then recognized twice
in this process, with the same loaded model, alternately:

* **pipeline**: ``OfflineProvider.recognize`` (voice activity detection, the
  language vote, decoding of the speech regions);
* **bare**: ``WhisperModel.transcribe`` on the whole file with the same
  decoding options (beam 5, word timestamps, no conditioning on previous
  text) and the library's own language detection on the first 30 s.

Goals (SPEC L1, issue "Every language offline"): RTF ≤ 0.10 on 2 cores, and
against bare in the same run WER ≤ 1.05× and RTF ≤ 1.1×. Then the peak RSS of
a fresh process that loads the default model and recognizes the Russian
recording, as a worker would.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
import wave
from pathlib import Path

from bench.common import ROOT, Figure, cleanup, scratch

SPEECH = ROOT / "tests" / "data" / "speech"
SPEECH_RU = ROOT / "tests" / "data" / "speech_ru"
SAMPLE = ROOT / "samples"
ROUNDS = 2  # pipeline and bare alternate this many times; the best of each counts

_RSS = """
import json, sys, threading
from pathlib import Path
from sidecar.providers.offline.provider import OfflineProvider
from sidecar.settings import OfflineSettings
p = OfflineProvider(OfflineSettings(diarize=False))  # speakers are PF10's
p.engine.recognize(Path(sys.argv[1]), threading.Event())
lines = Path("/proc/self/status").read_text().splitlines()
print(json.dumps({k: int(x.split()[1]) for x in lines for k in ("VmHWM", "VmRSS") if x.startswith(k + ":")}))
"""


def _clips(language: str) -> list[tuple[Path, str]]:
    folder = SPEECH_RU if language == "ru" else SPEECH
    texts = json.loads((folder / "clips.json").read_text(encoding="utf-8"))
    out = [(folder / name, text) for name, text in sorted(texts.items())]
    if language == "en":
        out.append((SAMPLE / "sample.ogg", (SAMPLE / "sample.txt").read_text().strip()))
    return out


def _concat(
    parts: list[tuple[Path, str]], dst: Path, min_seconds: float, seed: int, pause: float = 0.5
) -> tuple[float, str]:
    """16-bit mono WAVs joined with ``pause`` seconds between them, in seeded shuffled rounds, until ``min_seconds``."""
    rng = random.Random(seed)
    audio: list[tuple[bytes, str]] = []
    rate = 16000
    for p, text in parts:
        with wave.open(str(p), "rb") as w:
            rate = w.getframerate()
            audio.append((w.readframes(w.getnframes()), text))
    silence = b"\x00\x00" * int(rate * pause)
    seconds = 0.0
    spoken: list[str] = []
    with wave.open(str(dst), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        while seconds < min_seconds:
            for pcm, text in rng.sample(audio, len(audio)):
                out.writeframes(pcm + silence)
                seconds += (len(pcm) + len(silence)) / 2 / rate
                spoken.append(text)
    return seconds, " ".join(spoken)


def _rate(counted: tuple[int, int]) -> float:
    errors, words = counted
    return errors / max(words, 1)


def _peak_rss_mb(recording: Path) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _RSS, str(recording)], cwd=ROOT, capture_output=True, text=True, check=True, timeout=1800
    )
    return int(json.loads(out.stdout.strip().splitlines()[-1])["VmHWM"]) / 1024


def run(quick: bool) -> list[Figure]:
    from faster_whisper.audio import decode_audio

    from sidecar.media.audio import normalize
    from sidecar.providers.offline.provider import OfflineProvider
    from sidecar.settings import OfflineSettings
    from sidecar.transcript.model import Transcript
    from testkit.wer import word_errors

    provider = OfflineProvider(OfflineSettings(diarize=False))  # recognition alone: speakers are PF10
    model = provider.engine.load()
    work = scratch("pf6")
    cancel = threading.Event()
    figures: list[Figure] = []
    min_seconds = 60.0 if quick else 300.0
    try:
        recordings: dict[str, tuple[Path, float, str]] = {}
        for language in ("ru", "en"):
            normalized = []
            for i, (src, text) in enumerate(_clips(language)):
                res = normalize(src, work / f"{language}-{i}.wav", provider.audio_spec)
                normalized.append((res.path, text))
            path = work / f"{language}.wav"
            seconds, reference = _concat(normalized, path, min_seconds, seed=7)
            recordings[language] = (path, seconds, reference)

        def pipeline(path: Path) -> str:
            return Transcript.model_validate_json(provider.engine.recognize(path, cancel)).text

        def bare(path: Path) -> str:
            segments, _info = model.transcribe(
                decode_audio(str(path)), beam_size=5, word_timestamps=True, condition_on_previous_text=False
            )
            return " ".join(s.text.strip() for s in segments)

        pipeline(recordings["en"][0])  # warm up
        for language, (path, seconds, reference) in recordings.items():
            times: dict[str, list[float]] = {"pipeline": [], "bare": []}
            texts: dict[str, str] = {}
            for _ in range(ROUNDS):
                for name, fn in (("pipeline", pipeline), ("bare", bare)):
                    t0 = time.perf_counter()
                    texts[name] = fn(path)
                    times[name].append(time.perf_counter() - t0)
            rtf = {k: min(v) / seconds for k, v in times.items()}
            wer = {k: _rate(word_errors(reference, t)) for k, t in texts.items()}
            words = len(reference.split())
            took = {k: ", ".join(f"{t:.1f}" for t in v) for k, v in times.items()}
            figures.append(
                Figure(
                    f"PF6.{language}.rtf",
                    f"offline RTF, {language}, base int8, {seconds:.0f} s of joined clips, pipeline provider",
                    rtf["pipeline"],
                    "",
                    "≤ 0.10 and ≤ 1.1× bare",
                    rtf["pipeline"] <= 0.10 and rtf["pipeline"] <= 1.1 * rtf["bare"],
                    reference=rtf["bare"],
                    ref_label="bare faster-whisper, same file",
                    ratio=rtf["pipeline"] / rtf["bare"],
                    digits=3,
                    note=f"best of {ROUNDS}, alternating: pipeline {took['pipeline']} s, bare {took['bare']} s",
                )
            )
            figures.append(
                Figure(
                    f"PF6.{language}.wer",
                    f"offline WER, {language}, same recording ({words} words)",
                    wer["pipeline"],
                    "",
                    "≤ 1.05× bare",
                    wer["pipeline"] <= 1.05 * wer["bare"] + 1e-9,
                    reference=wer["bare"],
                    ref_label="bare faster-whisper",
                    ratio=wer["pipeline"] / wer["bare"] if wer["bare"] else None,
                    digits=3,
                    note=f"pipeline ends {texts['pipeline'][-90:]!r}; bare ends {texts['bare'][-90:]!r}",
                )
            )
        peak = _peak_rss_mb(recordings["ru"][0])
        figures.append(
            Figure(
                "PF6.rss",
                "peak RSS of a fresh process: default model loaded, the Russian recording recognized",
                peak,
                "MB",
                "≤ 1,000 MB",
                peak <= 1000,
                note=f"{recordings['ru'][1]:.0f} s of audio",
            )
        )
    finally:
        cleanup(work)
    return figures
