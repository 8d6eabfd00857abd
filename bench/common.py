"""Shared pieces of the benchmarks: the figure record, timing, RSS sampling, PocketBase."""

from __future__ import annotations

import os
import platform
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from testkit.pocketbase import Caller, PocketBaseServer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"  # git-ignored: generated media, scratch PocketBase data dirs
CACHE = OUT / "cache"


@dataclass
class Figure:
    """One measured figure against its same-run reference and its goal."""

    id: str
    measure: str
    value: float
    unit: str
    goal: str
    ok: bool
    reference: float | None = None
    ref_label: str = ""
    ratio: float | None = None
    note: str = ""
    digits: int = 1

    def fmt(self, v: float | None) -> str:
        if v is None:
            return "—"
        return f"{v:,.{self.digits}f} {self.unit}".strip()

    def cells(self) -> list[str]:
        ref = "—" if self.reference is None else f"{self.fmt(self.reference)} ({self.ref_label})"
        ratio = "—" if self.ratio is None else f"{self.ratio:.2f}×"
        return [
            self.id,
            self.measure,
            self.fmt(self.value),
            ref,
            ratio,
            self.goal,
            "OK" if self.ok else "MISS",
            self.note,
        ]

    def line(self) -> str:
        c = self.cells()
        text = f"{c[0]} {c[1]}: {c[2]} | ref {c[3]} | ratio {c[4]} | goal {c[5]} | {c[6]}"
        return text + (f" | {c[7]}" if c[7] else "")


@dataclass
class Failed:
    """A figure whose measurement raised: reported as a MISS with the error."""

    id: str
    measure: str
    error: str

    def cells(self) -> list[str]:
        return [self.id, self.measure, "—", "—", "—", "—", "MISS", f"error: {self.error}"]

    def line(self) -> str:
        return f"{self.id} {self.measure}: ERROR {self.error} | MISS"


def scratch(name: str) -> Path:
    """A fresh scratch directory under bench/out/run/."""
    import shutil

    d = OUT / "run" / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def in_fresh_process(module: str, *args: str, timeout: float) -> dict[str, Any]:
    """``python -m module *args OUT.json`` in a fresh process (its peak RSS is its own); the JSON it wrote.

    The module's ``__main__`` takes the output path last and may use its folder's ``data`` for scratch.
    """
    import json
    import subprocess
    import sys

    work = scratch(f"{module.rsplit('.', 1)[-1]}-{'-'.join(a.rsplit('/', 1)[-1] for a in args)}")
    out = work / "result.json"
    (work / "data").mkdir()
    try:
        subprocess.run(
            [sys.executable, "-m", module, *args, str(out)],
            cwd=ROOT,
            check=True,
            timeout=timeout,
            stdout=subprocess.DEVNULL,
        )
        return dict(json.loads(out.read_text()))
    finally:
        cleanup(work)


def cleanup(d: Path) -> None:
    import shutil

    shutil.rmtree(d, ignore_errors=True)


def percentile(xs: list[float], q: float) -> float:
    """q in [0, 100], nearest-rank on sorted data with linear interpolation."""
    s = sorted(xs)
    if not s:
        return float("nan")
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def own_peak_mb() -> float:
    """This process's peak RSS (VmHWM, MB). Not ``ru_maxrss``: after fork and exec that keeps the
    parent's resident size at the fork (a bench that had loaded a model made every fresh process
    report its 1.4 GB)."""
    return proc_status_kb(os.getpid(), "VmHWM") / 1024


def proc_status_kb(pid: int, key: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM), 0 if the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return 0


class Sampler:
    """``sample`` runs in a daemon thread for the ``with`` block, until ``stopping`` is set as the block ends."""

    _stopping: threading.Event
    _thread: threading.Thread

    def sample(self, stopping: threading.Event) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._stopping = threading.Event()
        name = type(self).__name__
        self._thread = threading.Thread(target=self.sample, args=(self._stopping,), name=name, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._thread.join()


@dataclass
class RssSampler(Sampler):
    """Samples a process's VmRSS every ``interval`` seconds in a thread; keeps the peak."""

    pid: int
    interval: float = 0.05
    peak_kb: int = 0
    samples: int = 0

    def sample(self, stopping: threading.Event) -> None:
        while not stopping.is_set():
            rss = proc_status_kb(self.pid, "VmRSS")
            self.peak_kb = max(self.peak_kb, rss)
            self.samples += 1
            stopping.wait(self.interval)

    def hwm_kb(self) -> int:
        """The kernel's own peak (VmHWM) of the process, read now."""
        return proc_status_kb(self.pid, "VmHWM")


def upload(sender: Caller, name: str, data: bytes | IO[bytes], content_type: str | None = None) -> str:
    """Uploads ``data`` as ``sender``, as the sender's page does: the new record's id."""
    file = (name, data) if content_type is None else (name, data, content_type)
    resp = sender.http.post("/api/transcriber/records", files={"file": file})
    resp.raise_for_status()
    return str(resp.json()["id"])


def finished(sender: Caller, rid: str, name: str) -> bool:
    """Whether the record ``rid`` (of the recording ``name``) is done, as the sender polls it; halted, it raises."""
    poll = sender.http.get(f"/api/transcriber/records/{rid}").json()
    if poll["status"] == "done":
        return True
    if poll["halted"]:
        raise RuntimeError(f"{name} halted: {poll['halt_code']}")
    return False


def mb(kb: float) -> float:
    return kb / 1024


@contextmanager
def timed() -> Iterator[list[float]]:
    """``with timed() as t: ...`` then ``t[0]`` is the wall time in seconds."""
    box: list[float] = []
    t0 = time.perf_counter()
    try:
        yield box
    finally:
        box.append(time.perf_counter() - t0)


# The vector extensions the engines' kernels choose between (CTranslate2, ggml, onnxruntime): the same
# run on a processor with AMX decoded ten minutes in 0.8 of the time of one without, so figures of two
# machines are compared only when this line is the same.
_EXTENSIONS = ("avx2", "avx512f", "avx512_vnni", "amx_int8")


def cpu() -> str:
    """The processor's model and which of ``_EXTENSIONS`` it has (Linux; elsewhere what Python knows)."""
    model, flags = platform.processor() or "unknown processor", set[str]()
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        info = ""
    for line in info.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            model = value.strip()
        elif key.strip() == "flags":
            flags = set(value.split())
            break
    have = [x for x in _EXTENSIONS if x in flags]
    said = f"{model} ({', '.join(have) if have else 'none of ' + ', '.join(_EXTENSIONS)})"
    if "amx_int8" in have and not amx_used():
        said += f"; AMX turned off for this run ({AMX_OFF_SAID})"
    return said


# How a run turns AMX off on a processor that has it, as one without it would decode: MKL (the
# decoder's int8 matrix products; its MKL_VERBOSE=1 header then names AVX-512 only) and oneDNN
# (torch, under the speakers). llama.cpp's wheel is built for AVX2 and never uses it.
AMX_OFF = {"MKL_ENABLE_INSTRUCTIONS": "AVX512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"}
AMX_OFF_SAID = " ".join(f"{k}={v}" for k, v in AMX_OFF.items())


def amx_used() -> bool:
    """False when this run's environment turns AMX off (``AMX_OFF``, or any MKL or oneDNN cap below it)."""
    mkl = os.environ.get("MKL_ENABLE_INSTRUCTIONS", "").upper()
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    return not (mkl and "AMX" not in mkl) and not (onednn and "AMX" not in onednn)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


@contextmanager
def pocketbase(tmp: Path, *, max_upload_mb: int = 1024) -> Iterator[PocketBaseServer]:
    """The test harness's real PocketBase (project migrations and hooks, free port)."""
    from testkit.pocketbase import running_pocketbase

    with running_pocketbase(tmp, max_upload_mb=max_upload_mb) as pb:
        yield pb
