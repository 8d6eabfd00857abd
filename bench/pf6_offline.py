"""PF6: the offline engine's real-time factor and word error rate on committed speech.

Inputs are the committed human-like clips (tests/data/speech/*.ogg with
clips.json) and samples/sample.ogg (sample.txt). Each is first normalized to
the provider's own input spec, as the pipeline does, then
``OfflineProvider.recognize`` is timed (the model is loaded and warmed up
before). Short clips are dominated by whisper's fixed 30 s window, so the RTF
that counts is the one on a concatenation of all clips (repeated to at least
60 s, half-second pauses between).
"""

from __future__ import annotations

import json
import threading
import time
import wave
from pathlib import Path

from bench.common import ROOT, Figure, cleanup, scratch

SPEECH = ROOT / "tests" / "data" / "speech"
SAMPLE = ROOT / "samples"


def _clips() -> list[tuple[Path, str]]:
    texts = json.loads((SPEECH / "clips.json").read_text())
    out = [(SPEECH / name, text) for name, text in sorted(texts.items())]
    out.append((SAMPLE / "sample.ogg", (SAMPLE / "sample.txt").read_text().strip()))
    return out


def _concat(parts: list[Path], dst: Path, min_seconds: float, pause_s: float = 0.5) -> tuple[float, int]:
    """Concatenates 16-bit mono WAVs (same rate), repeating the list until ``min_seconds``; (seconds, rounds)."""
    frames: list[bytes] = []
    rate = 0
    for p in parts:
        with wave.open(str(p), "rb") as w:
            rate = w.getframerate()
            frames.append(w.readframes(w.getnframes()))
    silence = b"\x00\x00" * int(rate * pause_s)
    one_round = sum(len(f) + len(silence) for f in frames) / 2 / rate
    rounds = max(1, int(-(-min_seconds // one_round)))
    with wave.open(str(dst), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        for _ in range(rounds):
            for f in frames:
                out.writeframes(f)
                out.writeframes(silence)
    return rounds * one_round, rounds


def run(quick: bool) -> list[Figure]:
    from sidecar.audio import normalize
    from sidecar.providers.offline import OfflineProvider
    from sidecar.settings import OfflineSettings
    from sidecar.transcript import Transcript
    from tests.wer import word_errors

    provider = OfflineProvider(OfflineSettings())
    spec = provider.audio_spec
    work = scratch("pf6")
    cancel = threading.Event()

    def recognize(path: Path) -> tuple[str, float]:
        t0 = time.perf_counter()
        raw = provider.recognize(path, cancel)
        return Transcript.model_validate_json(raw).text, time.perf_counter() - t0

    try:
        clips = _clips()
        normalized: list[tuple[Path, str, float]] = []
        for i, (src, text) in enumerate(clips):
            res = normalize(src, work / f"{i}.wav", spec)
            normalized.append((res.path, text, res.duration_ms / 1000))

        recognize(normalized[0][0])  # loads (and verifies) the model, warms up

        errors = words = 0
        clip_time = clip_audio = 0.0
        worst = ""
        for path, text, secs in normalized:
            hyp, took = recognize(path)
            e, n = word_errors(text, hyp)
            errors += e
            words += n
            clip_time += took
            clip_audio += secs
            if e:
                worst += f"; {path.name}: {e}/{n} ({hyp!r})"

        long_path = work / "all.wav"
        long_s, rounds = _concat([p for p, _, _ in normalized], long_path, 60.0)
        reference_long = " ".join([t for _, t, _ in normalized] * rounds)
        repeats = 1 if quick else 2
        best = float("inf")
        hyp_long = ""
        for _ in range(repeats):
            hyp_long, took = recognize(long_path)
            best = min(best, took)
        e_long, n_long = word_errors(reference_long, hyp_long)
    finally:
        cleanup(work)

    rtf_long = best / long_s
    rtf_clips = clip_time / clip_audio
    wer_clips = errors / max(words, 1)
    wer_long = e_long / max(n_long, 1)
    return [
        Figure(
            "PF6.rtf",
            f"offline RTF, tiny.en int8, {long_s:.0f} s concatenation of the {len(normalized)} clips",
            rtf_long,
            "",
            "≤ 0.10",
            rtf_long <= 0.10,
            digits=3,
            note=f"{best:.1f} s for {long_s:.0f} s ({rounds}× the clips); per-clip RTF {rtf_clips:.3f} "
            f"({clip_time:.1f} s for {clip_audio:.1f} s, 30 s window each)",
        ),
        Figure(
            "PF6.wer",
            f"offline WER over {len(normalized)} clips ({words} words)",
            wer_clips,
            "",
            "≤ 0.10",
            wer_clips <= 0.10,
            digits=3,
            note=f"{errors} errors / {words} words; on the concatenation {e_long}/{n_long} = {wer_long:.3f}{worst}",
        ),
    ]
