"""PF6: the offline engine's real-time factor and word error rate on committed speech.

Inputs are the committed human-like clips (tests/data/speech/*.ogg with
clips.json) and samples/sample.ogg (sample.txt). Each is first normalized to
the provider's own input spec, as the pipeline does, then
``OfflineProvider.recognize`` is timed (the model is loaded and warmed up
before). Short clips are dominated by whisper's fixed 30 s window, so the RTF
that counts is the one on concatenations of all clips (each at least 60 s,
half-second pauses between, the clips in five seeded shuffled orders: how
whisper copes with long input depends on the content, so one order is not
enough). WER is reported on the single clips (the goal) and on the
concatenations.
"""

from __future__ import annotations

import json
import random
import threading
import time
import wave
from pathlib import Path

from bench.common import ROOT, Figure, cleanup, scratch

SPEECH = ROOT / "tests" / "data" / "speech"
SAMPLE = ROOT / "samples"
SEEDS = (1, 2, 3, 4, 5)


def _clips() -> list[tuple[Path, str]]:
    texts = json.loads((SPEECH / "clips.json").read_text())
    out = [(SPEECH / name, text) for name, text in sorted(texts.items())]
    out.append((SAMPLE / "sample.ogg", (SAMPLE / "sample.txt").read_text().strip()))
    return out


def _concat(
    parts: list[tuple[Path, str]], dst: Path, min_seconds: float, seed: int, pause_s: float = 0.5
) -> tuple[float, str]:
    """Concatenates 16-bit mono WAVs (same rate) with pauses, in rounds until ``min_seconds``.

    Each round is a fresh (seeded) shuffle: a strictly periodic repeat would be
    an unnatural input. Returns (seconds, reference text in spoken order).
    """
    rng = random.Random(seed)
    audio: list[tuple[bytes, str]] = []
    rate = 0
    for p, text in parts:
        with wave.open(str(p), "rb") as w:
            rate = w.getframerate()
            audio.append((w.readframes(w.getnframes()), text))
    silence = b"\x00\x00" * int(rate * pause_s)
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


def _tail(text: str, n: int = 160) -> str:
    return repr(text if len(text) <= n else "…" + text[-n:])


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

        # Several concatenations (different seeded orders): whisper's behaviour on long input
        # (conditioning on its own previous text) depends on the content, one order is not enough.
        seeds = SEEDS
        long_s = long_time = long_cpu = 0.0
        e_long = n_long = 0
        per_order: list[str] = []
        hyp_long = ""
        worst_wer = -1.0
        for seed in seeds:
            path = work / f"all-{seed}.wav"
            secs, reference = _concat([(p, t) for p, t, _ in normalized], path, 60.0, seed)
            c0 = time.process_time()
            hyp, took = recognize(path)
            cpu = time.process_time() - c0
            e, n = word_errors(reference, hyp)
            long_s += secs
            long_time += took
            long_cpu += cpu
            e_long += e
            n_long += n
            per_order.append(f"{took / secs:.3f}/{e / max(n, 1):.2f}/{len(hyp.split())}w")
            if e / max(n, 1) > worst_wer:
                worst_wer, hyp_long = e / max(n, 1), hyp
    finally:
        cleanup(work)

    rtf_long = long_time / long_s
    rtf_clips = clip_time / clip_audio
    wer_clips = errors / max(words, 1)
    wer_long = e_long / max(n_long, 1)
    return [
        Figure(
            "PF6.rtf",
            f"offline RTF, tiny.en int8, {len(seeds)} concatenations of the {len(normalized)} clips "
            f"(~{long_s / len(seeds):.0f} s each)",
            rtf_long,
            "",
            "≤ 0.10",
            rtf_long <= 0.10,
            digits=3,
            note=f"{long_time:.1f} s wall, {long_cpu:.1f} s CPU for {long_s:.0f} s; per order RTF/WER/words heard "
            f"{', '.join(per_order)}; "
            f"per-clip RTF {rtf_clips:.3f} ({clip_time:.1f} s for {clip_audio:.1f} s, a 30 s window each)",
        ),
        Figure(
            "PF6.wer",
            f"offline WER over {len(normalized)} clips ({words} words)",
            wer_clips,
            "",
            "≤ 0.10",
            wer_clips <= 0.10,
            digits=3,
            note=f"{errors} errors / {words} words{worst}",
        ),
        Figure(
            "PF6.wer-long",
            f"offline WER on the {len(seeds)} concatenations ({n_long} words)",
            wer_long,
            "",
            "≤ 0.10",
            wer_long <= 0.10,
            digits=3,
            note=f"{e_long} errors / {n_long} words ({n_long // len(seeds)} spoken per order); "
            f"the worst order ends: {_tail(hyp_long)}",
        ),
    ]
