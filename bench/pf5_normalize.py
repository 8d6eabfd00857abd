"""PF5: ``sidecar.media.audio.normalize`` throughput on a 1-hour file vs a bare PyAV loop.

Both turn the same 1-hour MP3 (44.1 kHz stereo, 128 kbit/s, the common
upload) into the offline provider's input (16 kHz mono PCM WAV) with the same
library; runs alternate (bare, normalize, bare, …) and each side keeps its
best, so a noisy neighbour costs both alike.
"""

from __future__ import annotations

import time
from pathlib import Path

import av
from av.audio.resampler import AudioResampler

from bench import media
from bench.common import Figure, cleanup, scratch


def bare_transcode(src: Path, dst: Path, rate: int, layout: str) -> float:
    """The plain PyAV decode → resample → encode loop; returns audio seconds written."""
    written = 0
    with av.open(str(src)) as inp, av.open(str(dst), mode="w", format="wav") as out:
        stream = out.add_stream("pcm_s16le", rate=rate)
        stream.layout = layout
        stream.format = "s16"
        resampler = AudioResampler(format="s16", layout=layout, rate=rate)
        for frame in inp.decode(audio=0):
            for f in resampler.resample(frame):
                written += f.samples
                out.mux(stream.encode(f))
        for f in resampler.resample(None):
            written += f.samples
            out.mux(stream.encode(f))
        out.mux(stream.encode(None))
    return written / rate


def run(quick: bool) -> list[Figure]:
    from sidecar.media.audio import normalize
    from sidecar.providers.offline.provider import OfflineProvider
    from sidecar.settings import OfflineSettings

    spec = OfflineProvider(OfflineSettings()).audio_spec
    src = media.long_mp3(3600, 44100, 2, 128000)
    work = scratch("pf5")
    rounds = 3 if quick else 5
    bare_best = norm_best = float("inf")
    audio_s = 0.0
    try:
        for _ in range(rounds):
            t0 = time.perf_counter()
            audio_s = bare_transcode(src, work / "bare.wav", spec.sample_rate, "mono")
            bare_best = min(bare_best, time.perf_counter() - t0)
            (work / "bare.wav").unlink()

            t0 = time.perf_counter()
            result = normalize(src, work / "norm.wav", spec)
            norm_best = min(norm_best, time.perf_counter() - t0)
            (work / "norm.wav").unlink()
    finally:
        cleanup(work)
    norm_x = result.duration_ms / 1000 / norm_best
    bare_x = audio_s / bare_best
    ratio = norm_x / bare_x
    return [
        Figure(
            "PF5",
            "normalize throughput, 1 h MP3 44.1 kHz stereo → 16 kHz mono WAV",
            norm_x,
            "× realtime",
            "≥ 0.9×",
            ratio >= 0.9,
            reference=bare_x,
            ref_label="bare PyAV loop",
            ratio=ratio,
            digits=0,
            note=f"best of {rounds}, interleaved: normalize {norm_best:.2f} s, bare {bare_best:.2f} s",
        )
    ]
