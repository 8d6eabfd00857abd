"""A real OpenAI-compatible speech-to-text server as the bench's reference (PF9, PF15).

The popular self-hosted server is another project: the bench neither ships
nor builds it. Start it yourself, serving the same weights (Whisper base,
CTranslate2, int8) on the same number of threads, and name it:

    BENCH_PEER_URL=http://127.0.0.1:8000 BENCH_PEER_MODEL=Systran/faster-whisper-base bench/run --only PF9,PF15

Each recording is posted to ``/v1/audio/transcriptions`` as a sender would
post it (the file, the model, the language), and timed from the first byte
sent to the answer read. Its memory is the peak resident size of the process
that listens on the address's port (and its children), counted from just
before the request: the kernel's high-water mark is reset through
``/proc/PID/clear_refs`` (needs the right to write it, as root or the
server's own user).

Without ``BENCH_PEER_URL`` the figures that need the server say so and count
as not met: a figure is never claimed against a server that was not there.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil

from bench.common import proc_status_kb

URL = os.environ.get("BENCH_PEER_URL", "").rstrip("/")
MODEL = os.environ.get("BENCH_PEER_MODEL", "Systran/faster-whisper-base")


class PeerMissing(RuntimeError):
    """No peer server was named, or it does not answer."""


@dataclass(frozen=True)
class PeerAnswer:
    seconds: float
    peak_mb: float
    text: str


def configured() -> bool:
    return bool(URL)


def name() -> str:
    """What the results call the server: its address and model."""
    return f"the server at {URL} ({MODEL})"


def transcribe(audio: Path, language: str) -> PeerAnswer:
    """``audio`` transcribed by the peer: its time, its processes' peak memory from just before, its text."""
    if not URL:
        raise PeerMissing("no peer server named: set BENCH_PEER_URL (see bench/peer.py)")
    processes = _listening(URL)
    for p in processes:
        Path(f"/proc/{p.pid}/clear_refs").write_text("5")  # resets VmHWM to the current size
    started = time.perf_counter()
    try:
        with audio.open("rb") as f:
            answer = httpx.post(
                f"{URL}/v1/audio/transcriptions",
                files={"file": (audio.name, f)},
                data={"model": MODEL, "language": language, "response_format": "json"},
                timeout=httpx.Timeout(7200.0, connect=10.0),
            )
    except httpx.TransportError as e:
        raise PeerMissing(f"{name()} did not answer: {e}") from e
    seconds = time.perf_counter() - started
    answer.raise_for_status()
    peak_kb = sum(proc_status_kb(p.pid, "VmHWM") for p in processes)
    body: dict[str, Any] = answer.json()
    return PeerAnswer(seconds, peak_kb / 1024, str(body.get("text", "")))


def _listening(url: str) -> list[psutil.Process]:
    """The process listening on the URL's port and its children."""
    port = urlsplit(url).port or 80
    for c in psutil.net_connections("tcp"):
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            top = psutil.Process(c.pid)
            return [top, *top.children(recursive=True)]
    raise PeerMissing(f"nothing listens on port {port} ({name()})")
