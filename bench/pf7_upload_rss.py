"""PF7: PocketBase's peak RSS while a 1 GiB recording is uploaded through intake.

The file is an Ogg page header followed by zeros (intake only sniffs the
first bytes), kept sparse on disk; httpx streams it from the file as a
multipart upload. PocketBase's VmRSS is sampled every 50 ms during the
upload and its VmHWM read at the end; its RSS when idle is shown beside.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from bench.common import Figure, RssSampler, cleanup, mb, pocketbase, proc_status_kb, scratch

SIZE = 1 << 30


def sparse_upload_file(path: Path, size: int = SIZE) -> Path:
    with path.open("wb") as fh:
        fh.write(b"OggS\x00\x02" + b"\x00" * 58)
        fh.truncate(size)
    return path


def run(quick: bool) -> list[Figure]:
    work = scratch("pf7")
    try:
        src = sparse_upload_file(work / "big.ogg")
        with pocketbase(work / "pb", max_upload_mb=1100) as pb:
            sender = pb.new_sender()
            pid = pb.proc.pid
            idle_kb = proc_status_kb(pid, "VmRSS")
            with RssSampler(pid, 0.05) as rss:
                t0 = time.perf_counter()
                with (
                    src.open("rb") as fh,
                    httpx.Client(base_url=pb.url, headers={"Authorization": sender.token}, timeout=600) as http,
                ):
                    resp = http.post("/api/transcriber/records", files={"file": ("big.ogg", fh, "audio/ogg")})
                took = time.perf_counter() - t0
                hwm_kb = rss.hwm_kb()
            if resp.status_code != 201:
                raise RuntimeError(f"upload answered {resp.status_code}: {resp.text[:200]}")
    finally:
        cleanup(work)
    peak = mb(hwm_kb)
    return [
        Figure(
            "PF7",
            "PocketBase peak RSS (VmHWM) during a 1 GiB upload through intake",
            peak,
            "MB",
            "≤ 200 MB",
            peak <= 200,
            note=f"idle before {mb(idle_kb):.0f} MB; sampled VmRSS peak {mb(rss.peak_kb):.0f} MB "
            f"({rss.samples} samples); upload took {took:.1f} s ({SIZE / took / 1e6:.0f} MB/s)",
        )
    ]
