"""PF4: the worker's peak RSS for a 3-hour file vs a 1-minute file, instant provider.

Each file gets a fresh ``python -m sidecar worker`` process (instant
provider, one worker) against a harness PocketBase; the worker's VmRSS is
sampled every 50 ms from upload until the record is done, and its VmHWM is
read before it is stopped. Inputs are MP3s (16 kHz mono, 24 kbit/s) built
from one encoded minute, so the 3-hour upload is 32 MB; the instant
provider reads 16 kHz PCM WAV, so the worker writes, uploads and downloads
back a 346 MB file for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import media
from bench.common import ROOT, Figure, RssSampler, cleanup, finished, mb, pocketbase, scratch, upload


def _worker(pb: Any, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop("TRANSCRIBER_CONFIG", None)
    env.update(
        {
            "TRANSCRIBER_PROVIDER__NAME": "instant",
            "TRANSCRIBER_POCKETBASE__URL": pb.url,
            "TRANSCRIBER_POCKETBASE__DATA_DIR": str(pb.settings.pocketbase.data_dir),
            "TRANSCRIBER_PIPELINE__WORKERS": "1",
        }
    )
    with log.open("ab") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "sidecar", "worker"], cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def one(pb: Any, sender: Any, src: Path, log: Path, timeout: float) -> tuple[float, float, float]:
    """(VmHWM MB, sampled peak MB, seconds upload → done) of a fresh worker on ``src``."""
    proc = _worker(pb, log)
    try:
        time.sleep(1.0)  # imports, login; idle RSS is part of the peak either way
        with RssSampler(proc.pid, 0.05) as rss:
            t0 = time.perf_counter()
            with src.open("rb") as fh:
                rid = upload(sender, src.name, fh, "audio/mpeg")
            while not finished(sender, rid, src.name):
                if proc.poll() is not None:
                    raise RuntimeError(f"the worker exited with {proc.returncode}: see {log}")
                if time.perf_counter() - t0 > timeout:
                    raise TimeoutError(f"{src.name} not done in {timeout:.0f} s")
                time.sleep(0.2)
            took = time.perf_counter() - t0
            hwm = rss.hwm_kb()
        return mb(hwm), mb(rss.peak_kb), took
    finally:
        _stop(proc)


def run(quick: bool) -> list[Figure]:
    short = media.long_mp3(60)
    long = media.long_mp3(3 * 3600)
    work = scratch("pf4")
    try:
        with pocketbase(work) as pb:
            sender = pb.new_sender()
            short_hwm, short_peak, short_s = one(pb, sender, short, work / "worker-short.log", 120)
            long_hwm, long_peak, long_s = one(pb, sender, long, work / "worker-long.log", 900)
    finally:
        cleanup(work)
    ratio = long_hwm / short_hwm
    return [
        Figure(
            "PF4",
            "worker peak RSS (VmHWM), 3 h MP3 upload → done, instant provider",
            long_hwm,
            "MB",
            "≤ 1.3×",
            ratio <= 1.3,
            reference=short_hwm,
            ref_label="1 min file",
            ratio=ratio,
            note=f"sampled VmRSS peaks {long_peak:.0f} vs {short_peak:.0f} MB; upload → done {long_s:.0f} s vs "
            f"{short_s:.1f} s; fresh worker process each",
        )
    ]
