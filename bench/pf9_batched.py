"""PF9: batched offline decoding, side by side with bare faster-whisper.

The same recordings of known text — the committed clips joined in shuffled
rounds, Russian and English with half-second pauses, and both again with
16 s pauses between phrases (sparse recordings: a meeting's quiet stretches,
a dictation), 10 minutes (2 in a quick run) and 1 hour (full run only) —
each recognized four ways, each in a fresh process (its peak RSS is the figure):

* **pipeline**: uploaded and run to done through PocketBase and one worker
  with the offline provider on its defaults (voice activity detection, the
  language found by itself, batched decoding);
* **bare sequential**: ``WhisperModel.transcribe`` on the whole file (beam 5,
  word timestamps, no conditioning on previous text, the language given);
* **bare batched**: ``BatchedInferencePipeline(model).transcribe`` with the
  same batch size, beam and threads as the pipeline (its own VAD, the language
  given);
* **batch 8**: the same call as the popular self-hosted OpenAI-compatible
  server makes it (PROVIDERS.md §E4): 8 windows at once, temperature 0,
  faster-whisper's own beam (5), the same weights and threads: a stand-in
  for its decoding alone, without its HTTP and file handling;
* **server**: the real server, when one is named (``bench/peer.py``): the
  recording posted to it over HTTP, its answer timed, its process's peak
  memory, after the others, on the same machine.

Against the server, the ten-minute recordings are read at eight **offsets**:
as they are and behind 4, 8, … 28 ms of silence, every 4 ms across one of
the 32 ms frames the speech search reads. An offset moves where every
window's edges fall by a part of a frame, and on the Russian ten minutes
that alone moved either system's word error rate by more than 0.01
(``bench/results.md``): one reading is a draw, so both are compared on their
means over the eight (their times too). Four offsets were not enough: the
two systems' Russian means moved by 0.009 between two sets of four.

The pipeline and bare batched are read three times each, in turn, and
compared on their medians (ten minutes and shorter): one reading of either
moves by 3–5 % here, as much as the goal's margin.

Goals: pipeline ≤ 1.05× bare batched in time and ≤ 0.6× bare sequential;
WER ≤ sequential's + 0.01; against batch 8 ≤ 0.85× its time, in no more
memory than its decoding alone; against the server ≤ 0.85× its time, ≤ 0.5×
its memory, WER ≤ its own + 0.005; the worker's peak RSS ≤ 1.0 GB and flat
from 10 minutes to an hour.

``python -m bench.pf9_batched MODE AUDIO LANGUAGE OUT.json`` is one run.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench import peer
from bench.common import CACHE, Failed, Figure, cleanup, in_fresh_process, own_peak_mb, scratch
from bench.media import behind_silence
from bench.pf6_offline import _clips, _concat

MODES = ("pipeline", "sequential", "batched", "batch8")
# How the popular self-hosted server decodes (PROVIDERS.md §E4).
SERVER_BATCH = 8


# Recordings this long or shorter are read more than once (below); an hour is read once, as each
# more reading of it would cost minutes.
READ_AGAIN_UP_TO_MINUTES = 10
# Silence put before a recording read against the server (ms): the speech search's 32 ms frames fall
# elsewhere on it at each (the module's docstring says why).
OFFSETS_MS = tuple(range(0, 32, 4))
# The pipeline against bare batched: read this many times each, in turn, and compared on the medians.
# One reading of either moves by 3–5 % on this machine, as much as the goal's margin (≤ 1.05×).
PAIRS = 3

# The recordings: (name, language, pause between clips in seconds).
RECORDINGS = (("ru", "ru", 0.5), ("en", "en", 0.5), ("en-sparse", "en", 16.0), ("ru-sparse", "ru", 16.0))


def recording(name: str, minutes: int) -> tuple[Path, str]:
    """The clips of the recording ``name`` normalized and joined into ``minutes`` of audio; its text."""
    from sidecar.media.audio import AudioSpec, normalize

    _name, language, pause = next(r for r in RECORDINGS if r[0] == name)
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"pf9-{name}-{minutes}m.wav"
    text_path = path.with_suffix(".txt")
    if path.is_file() and text_path.is_file():
        return path, text_path.read_text(encoding="utf-8")
    spec = AudioSpec(format="wav_pcm16", sample_rate=16000, channels=1, bitrate=None)
    work = scratch(f"pf9-clips-{language}")
    try:
        parts = [(normalize(src, work / f"{i}.wav", spec).path, text) for i, (src, text) in enumerate(_clips(language))]
        _seconds, text = _concat(parts, path, minutes * 60.0, seed=9, pause=pause)
    finally:
        cleanup(work)
    text_path.write_text(text, encoding="utf-8")
    return path, text


def one(mode: str, audio: Path, language: str, work: Path) -> dict[str, Any]:
    """One run in this process: seconds, peak RSS (MB), the text heard."""

    if mode == "pipeline":
        from bench.pf8_long import through_pipeline

        result = through_pipeline("offline", audio, work)
        return {"seconds": result["seconds"], "hwm_mb": result["hwm_mb"], "text": result["text"]}

    from faster_whisper import BatchedInferencePipeline
    from faster_whisper.audio import decode_audio

    from sidecar.providers.offline.provider import OfflineProvider
    from sidecar.settings import OfflineSettings

    settings = OfflineSettings(diarize=False)  # as the pipeline measured here: words only, all the threads
    provider = OfflineProvider(settings)
    model = provider.engine.load()  # the same weights and threads as the pipeline's
    t0 = time.perf_counter()
    samples = decode_audio(str(audio))
    options: dict[str, Any] = {"language": language, "word_timestamps": True}
    if mode == "sequential":
        segments, _ = model.transcribe(samples, condition_on_previous_text=False, beam_size=5, **options)
    elif mode == "batch8":
        # As the popular server decodes: 8 windows at once, temperature 0, faster-whisper's own beam.
        segments, _ = BatchedInferencePipeline(model).transcribe(
            samples, batch_size=SERVER_BATCH, temperature=0.0, **options
        )
    else:  # the pipeline's own batch and beam
        segments, _ = BatchedInferencePipeline(model).transcribe(
            samples, batch_size=settings.batch_size, beam_size=settings.beam_size, **options
        )
    text = " ".join(s.text.strip() for s in segments)
    took = time.perf_counter() - t0
    return {"seconds": took, "hwm_mb": own_peak_mb(), "text": text}


def run(quick: bool) -> list[Figure | Failed]:
    from sidecar.runtime.threads import threads_for
    from sidecar.settings import OfflineSettings
    from testkit.wer import word_errors

    settings = OfflineSettings(diarize=False)
    threads = threads_for(settings.threads)
    # BENCH_PF9_MINUTES=10 measures the ten-minute recordings alone (the hour takes about an hour more).
    lengths = [2] if quick else [int(m) for m in os.environ.get("BENCH_PF9_MINUTES", "10,60").split(",")]
    figures: list[Figure | Failed] = []
    rss: dict[int, float] = {}
    for minutes in lengths:
        for name, language, _pause in RECORDINGS:
            audio, reference = recording(name, minutes)
            got = {
                mode: in_fresh_process("bench.pf9_batched", mode, str(audio), language, timeout=7200) for mode in MODES
            }
            # The pipeline and bare batched again, in turn: their ratio is judged on the medians.
            pairs = [(got["pipeline"]["seconds"], got["batched"]["seconds"])]
            for _ in range(PAIRS - 1 if minutes <= READ_AGAIN_UP_TO_MINUTES else 0):
                again = [
                    in_fresh_process("bench.pf9_batched", mode, str(audio), language, timeout=7200)["seconds"]
                    for mode in ("pipeline", "batched")
                ]
                pairs.append((again[0], again[1]))
            wer = {m: word_errors(reference, r["text"]) for m, r in got.items()}
            rate = {m: e / max(n, 1) for m, (e, n) in wer.items()}
            t = {m: r["seconds"] for m, r in got.items()}
            t["pipeline"] = statistics.median(p for p, _ in pairs)
            t["batched"] = statistics.median(b for _, b in pairs)
            mb = {m: r["hwm_mb"] for m, r in got.items()}
            rss[minutes] = max(rss.get(minutes, 0.0), mb["pipeline"])
            vs_batched, vs_sequential = t["pipeline"] / t["batched"], t["pipeline"] / t["sequential"]
            read = f"the medians of {len(pairs)} readings each, in turn" if len(pairs) > 1 else "one reading each"
            figures.append(
                Figure(
                    f"PF9.{name}.{minutes}m",
                    f"offline upload → done, {minutes} min {name}, batch {settings.batch_size}, "
                    f"beam {settings.beam_size}, one worker, {threads} thread(s)",
                    t["pipeline"],
                    "s",
                    "≤ 1.05× bare batched, ≤ 0.6× bare sequential, WER ≤ sequential + 0.01",
                    vs_batched <= 1.05 and vs_sequential <= 0.6 and rate["pipeline"] <= rate["sequential"] + 0.01,
                    reference=t["batched"],
                    ref_label="bare batched",
                    ratio=vs_batched,
                    note=f"pipeline / bare batched: {read} ("
                    + ", ".join(f"{p:.1f}/{b:.1f} s" for p, b in pairs)
                    + f"); bare sequential {t['sequential']:.1f} s (pipeline {vs_sequential:.2f}× of it); "
                    f"WER pipeline {rate['pipeline']:.3f}, batched {rate['batched']:.3f}, "
                    f"sequential {rate['sequential']:.3f}; peak RSS pipeline {mb['pipeline']:.0f} MB, "
                    f"batched {mb['batched']:.0f} MB, sequential {mb['sequential']:.0f} MB",
                )
            )
            offsets = OFFSETS_MS if minutes <= READ_AGAIN_UP_TO_MINUTES else OFFSETS_MS[:1]
            figures.append(_against_server(name, minutes, audio, language, reference, offsets, got["pipeline"]))
            vs_time, vs_memory = t["pipeline"] / t["batch8"], mb["pipeline"] / mb["batch8"]
            figures.append(
                Figure(
                    f"PF9.batch8.{name}.{minutes}m",
                    f"offline upload → done, {minutes} min {name}, against decoding 8 windows at once "
                    "as the popular self-hosted server does (its decoding alone)",
                    t["pipeline"],
                    "s",
                    "≤ 0.85× its time, ≤ its memory",
                    vs_time <= 0.85 and vs_memory <= 1.0,
                    reference=t["batch8"],
                    ref_label="batch 8",
                    ratio=vs_time,
                    note=f"peak RSS pipeline {mb['pipeline']:.0f} MB vs {mb['batch8']:.0f} MB ({vs_memory:.2f}×; "
                    "the whole server holds 2–2.6× its decoding's, PROVIDERS.md §E4); "
                    f"WER {rate['pipeline']:.3f} vs {rate['batch8']:.3f}",
                )
            )
    longest, shortest = max(rss), min(rss)
    figures.append(
        Figure(
            "PF9.rss",
            f"worker peak RSS (VmHWM), offline pipeline, {longest} min",
            rss[longest],
            "MB",
            "≤ 1,000 MB and flat",
            rss[longest] <= 1000 and rss[longest] <= 1.1 * rss[shortest],
            reference=rss[shortest],
            ref_label=f"{shortest} min",
            ratio=rss[longest] / rss[shortest],
        )
    )
    return figures


def _against_server(
    name: str,
    minutes: int,
    audio: Path,
    language: str,
    reference: str,
    offsets: tuple[int, ...],
    pipeline_at_zero: dict[str, Any],
) -> Figure | Failed:
    """The pipeline against the real server (bench/peer.py), each reading the recording at every offset.

    Means over the offsets: time, word error rate; the pipeline's peak memory and the server's are the
    highest of their readings.
    """
    from testkit.wer import word_errors

    fid, what = f"PF9.server.{name}.{minutes}m", f"offline upload → done, {minutes} min {name}, against the server"
    ours: list[dict[str, Any]] = []
    theirs: list[peer.PeerAnswer] = []
    for ms in offsets:
        shifted = behind_silence(audio, ms)
        try:
            theirs.append(peer.transcribe(shifted, language))
        except peer.PeerMissing as e:
            return Failed(fid, what, str(e))
        ours.append(
            pipeline_at_zero
            if ms == 0
            else in_fresh_process("bench.pf9_batched", "pipeline", str(shifted), language, timeout=7200)
        )

    def rate(text: str) -> float:
        errors, words = word_errors(reference, text)
        return errors / max(words, 1)

    our_rates, their_rates = [rate(r["text"]) for r in ours], [rate(a.text) for a in theirs]
    our_rate, their_rate = statistics.fmean(our_rates), statistics.fmean(their_rates)
    our_time, their_time = statistics.fmean(r["seconds"] for r in ours), statistics.fmean(a.seconds for a in theirs)
    our_mb, their_mb = max(r["hwm_mb"] for r in ours), max(a.peak_mb for a in theirs)
    vs_time, vs_memory = our_time / their_time, our_mb / their_mb
    each = ", ".join(
        f"{ms} ms {r['seconds']:.1f}/{a.seconds:.1f} s {o:.3f}/{w:.3f}"
        for ms, r, a, o, w in zip(offsets, ours, theirs, our_rates, their_rates, strict=True)
    )
    read = f"the mean of {len(offsets)} offsets" if len(offsets) > 1 else "one reading"
    return Figure(
        fid,
        f"{what}: {peer.name()}, its HTTP answer ({read})",
        our_time,
        "s",
        "≤ 0.85× its time, ≤ 0.5× its memory, WER ≤ its own + 0.005",
        vs_time <= 0.85 and vs_memory <= 0.5 and our_rate <= their_rate + 0.005,
        reference=their_time,
        ref_label="the server",
        ratio=vs_time,
        note=f"WER pipeline {our_rate:.4f}, server {their_rate:.4f}; peak RSS pipeline {our_mb:.0f} MB "
        f"vs server {their_mb:.0f} MB ({vs_memory:.2f}×); by offset (pipeline/server): {each}",
    )


if __name__ == "__main__":
    mode, audio_path, lang, target = sys.argv[1], Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    result = one(mode, audio_path, lang, target.parent / "data")
    target.write_text(json.dumps(result, ensure_ascii=False))
