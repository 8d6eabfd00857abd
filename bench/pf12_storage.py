"""PF12: bytes stored per hour of audio, while a recording is fresh and for good.

A real PocketBase (the test harness) and the real pipeline in this process,
with the instant provider, which reads what the offline engine reads (16 kHz
mono PCM WAV, the largest normalized form: 115 MB an hour). Two uploads of
the same length: speech (the committed clips, repeated with pauses, as
Ogg/Opus at 32 kbit/s: what a phone's voice note looks like) and silence (a
FLAC of constant frames: a few kB an hour). For each, the bytes under the
data directory's ``storage`` (every blob: the upload, the normalized copy,
the provider's raw response; the transcript itself lives in the database)
are measured once the record is done, and again after the sweep of
normalized copies has run (``keep_normalized`` elapsed): what stays for
good. Per hour of audio.

The silent upload's reference is its own normalized copy, made here with
the same normalize: what was kept for good before a recording found silent
kept none.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio

from bench.common import CACHE, Figure, cleanup, finished, pocketbase, scratch, upload


def _speech(minutes: int) -> Path:
    """``minutes`` of the committed English clips one after another (a second apart), as Ogg/Opus 32 kbit/s."""
    from sidecar.media.audio import AudioSpec, normalize
    from testkit.audio import CLIPS_JSON, SPEECH_DIR, compose_wav

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"speech-{minutes}min-32k.ogg"
    if path.is_file() and path.stat().st_size > 0:
        return path
    clips = [SPEECH_DIR / name for name in json.loads(CLIPS_JSON.read_text())]
    lengths = {c: _seconds(c) + 1.0 for c in clips}
    parts: list[Path | float] = []
    total = 0.0
    while total < minutes * 60:
        for clip in clips:
            if total + lengths[clip] > minutes * 60:
                break
            parts += [clip, 1.0]
            total += lengths[clip]
        else:
            continue
        break
    parts.append(minutes * 60 - total)
    wav = compose_wav(parts, CACHE / f"speech-{minutes}min.wav")
    try:
        normalize(wav, path, AudioSpec("ogg_opus", sample_rate=16000, channels=1, bitrate=32000))
    finally:
        wav.unlink(missing_ok=True)
    return path


def _seconds(path: Path) -> float:
    import av

    with av.open(str(path)) as c:
        return sum(f.samples / f.sample_rate for f in c.decode(audio=0))


def _stored(pb: Any) -> int:
    root = Path(pb.settings.pocketbase.data_dir) / "storage"
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


async def _through(pb: Any, src: Path, content_type: str) -> tuple[int, int, int]:
    """(bytes added once done, bytes added for good, the normalized copy's size) of one upload."""
    from sidecar.pipeline.sweep import sweep_normalized
    from sidecar.pocketbase.client import PocketBaseClient
    from sidecar.providers.instant import InstantProvider
    from sidecar.serving.assembly import default_steps, pipeline

    settings = pb.settings.model_copy(deep=True)
    settings.pipeline.workers = 1
    settings.pipeline.keep_normalized = timedelta(days=365)  # kept while the record is measured
    sender, su = pb.new_sender(), pb.superuser()
    before = _stored(pb)
    async with pipeline(settings, provider=InstantProvider(), steps=default_steps()) as pool:
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            await tg.start(pool.run, stop)
            with src.open("rb") as fh:
                rid = upload(sender, src.name, fh, content_type)
            with anyio.fail_after(1800):
                while True:
                    if finished(sender, rid, src.name):
                        break
                    await anyio.sleep(0.2)
            stop.set()
    done = _stored(pb) - before
    rows = su.http.get("/api/collections/files/records", params={"filter": f'record="{rid}" && role="normalized"'})
    normalized = sum(int(r["size"]) for r in rows.json()["items"])
    account = pb.service_account
    async with PocketBaseClient(pb.url, account.email, account.password) as client:
        await client.connect()
        await sweep_normalized(client, client.clock, timedelta(0))  # keep_normalized has passed
    return done, _stored(pb) - before, normalized


def run(quick: bool) -> list[Figure]:
    from sidecar.media.audio import AudioSpec, normalize
    from testkit.flac_bomb import write_flac_bomb

    minutes = 10 if quick else 60
    speech = _speech(minutes)
    work = scratch("pf12")
    try:
        silence = write_flac_bomb(work / "silence.flac", hours=minutes / 60)
        silence_size = silence.stat().st_size
        hours = _seconds(speech) / 3600
        silent_hours = _seconds(silence) / 3600
        kept_before = normalize(silence, work / "copy.wav", AudioSpec("wav_pcm16", bitrate=None)).size
        with pocketbase(work / "pb") as pb:
            t0 = time.perf_counter()
            s_done, s_kept, s_norm = anyio.run(_through, pb, speech, "audio/ogg")
            q_done, q_kept, _ = anyio.run(_through, pb, silence, "audio/flac")
            took = time.perf_counter() - t0
    finally:
        cleanup(work)
    mb_h = 1e6
    upload_h = speech.stat().st_size / hours / mb_h
    return [
        Figure(
            "PF12.speech",
            f"bytes stored per hour of audio for good, speech ({minutes} min Ogg/Opus 32 kbit/s), offline's input",
            s_kept / hours / mb_h,
            "MB/h",
            "≤ 1.1× the upload",
            s_kept <= 1.1 * speech.stat().st_size,
            reference=s_done / hours / mb_h,
            ref_label="once done, the normalized copy kept",
            ratio=s_kept / s_done,
            note=f"upload {upload_h:.1f} MB/h; normalized copy {s_norm / hours / mb_h:.1f} MB/h, removed by the "
            f"sweep (keep_normalized); both uploads through in {took:.0f} s",
        ),
        Figure(
            "PF12.silence",
            f"bytes stored per hour of audio, silence ({minutes} min of constant FLAC frames)",
            q_kept / silent_hours / mb_h,
            "MB/h",
            "≤ the upload + 0.1 MB/h",
            q_kept <= silence_size + 0.1 * mb_h * silent_hours and q_done == q_kept,
            reference=(kept_before + silence_size) / silent_hours / mb_h,
            ref_label="the upload and its normalized copy, as kept before",
            ratio=q_kept / (kept_before + silence_size),
            digits=3,
            note=f"upload {silence_size / silent_hours / 1e3:.1f} kB/h; no normalized copy kept (no speech found); "
            f"once done {q_done / silent_hours / 1e3:.1f} kB/h",
        ),
    ]
