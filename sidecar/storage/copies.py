"""Local copies of stored files: what this process stored or fetched, kept for its next step.

A recording's steps often run in the same process one after another:
normalize stores the pieces, submit sends them, finalize reads the results
submit stored. Each file already held here is read from here instead of
being fetched back from PocketBase. A copy is found by the row it belongs to
and the stored version of its file (PocketBase gives every upload a name of
its own) and, where the row says it, its size; anything else (another
process, another host, a file replaced since) fetches from storage as before.

Copies live in one directory of this process, removed when the process
ends. A recording's copies go when it is done or halted; past ``max_bytes``
the oldest copies go first. Hard links keep a copy cheap: the step's
scratch file and the copy share their blocks.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LocalCopies"]

# What the copies of one process may hold on disk by default (a six-hour recording's 16 kHz PCM is
# 0.7 GB); ``[pipeline] local_copies_mb`` sets it.
MAX_BYTES = 4 * 1024**3


@dataclass(frozen=True)
class _Entry:
    record: str
    path: Path
    size: int


class LocalCopies:
    def __init__(self, root: Path | None = None, *, max_bytes: int = MAX_BYTES) -> None:
        self._root = root or Path(tempfile.mkdtemp(prefix="transcriber-copies-"))
        self._root.mkdir(parents=True, exist_ok=True)
        self._max = max_bytes
        self._entries: OrderedDict[tuple[str, str, str], _Entry] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self.hits = 0  # copies read from here instead of storage (for tests and logs)

    @staticmethod
    def key(collection: str, row_id: str, name: str) -> tuple[str, str, str]:
        return (collection, row_id, name)

    def get(self, key: tuple[str, str, str], size: int | None = None) -> Path | None:
        """The local copy of that stored file, if held (and of ``size``, when given)."""
        if not key[2]:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or (size is not None and size > 0 and entry.size != size) or not entry.path.exists():
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry.path

    def put(self, record: str, key: tuple[str, str, str], src: Path) -> None:
        """Keeps ``src`` (a file just stored or fetched) as the copy of that stored file."""
        if not key[2]:
            return
        size = src.stat().st_size
        if size > self._max:
            return
        dest = self._root / f"{len(self._entries)}-{os.urandom(6).hex()}"
        try:
            os.link(src, dest)
        except OSError:
            shutil.copyfile(src, dest)
        self._add(record, key, dest, size)

    def put_bytes(self, record: str, key: tuple[str, str, str], data: bytes) -> None:
        if not key[2] or len(data) > self._max:
            return
        dest = self._root / f"{len(self._entries)}-{os.urandom(6).hex()}"
        dest.write_bytes(data)
        self._add(record, key, dest, len(data))

    def forget(self, record: str) -> None:
        """Drops every copy of ``record`` (done or halted: nothing here will read them)."""
        with self._lock:
            for key in [k for k, e in self._entries.items() if e.record == record]:
                self._drop(key)

    def close(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held = 0
        shutil.rmtree(self._root, ignore_errors=True)

    def _add(self, record: str, key: tuple[str, str, str], path: Path, size: int) -> None:
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._entries[key] = _Entry(record, path, size)
            self._held += size
            while self._held > self._max and self._entries:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: tuple[str, str, str]) -> None:
        entry = self._entries.pop(key)
        self._held -= entry.size
        entry.path.unlink(missing_ok=True)
