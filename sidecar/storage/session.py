"""What a step may do with storage: read its record's rows, write its results, under its claim.

A ``ClaimSession`` carries the claim's token and the claimed record; it has
no way to claim, settle, or touch another record, so a step cannot advance a
record by mistake (the runner settles the outcome).

The record's rows (files and attempts) are read once per step, or not at
all when the claim brought them, and kept current from what the step's own
writes return. A file this process already holds (``LocalCopies``) is read
from here, not fetched again.

A provider's raw result and a note are stored without the registered secrets
(H1): a provider that echoes a key inside a result never gets it stored.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from sidecar.activity import Activity
from sidecar.redaction import redact, redact_result, redact_said
from sidecar.storage.copies import LocalCopies
from sidecar.storage.model import (
    AttemptChange,
    AttemptRow,
    AttemptStatus,
    AudioRecord,
    Claim,
    FileRole,
    FileRow,
    PiecePlace,
    RecordRows,
)
from sidecar.storage.protocol import Storage
from sidecar.storage.transitions import Progressed

__all__ = ["ClaimSession", "redact_insights"]


def redact_insights(result: dict[str, Any]) -> dict[str, Any]:
    """Every string of an insights answer without the registered secrets (H1): a key said in a
    recording, or echoed by a model, is never stored."""

    def clean(v: Any) -> Any:
        if isinstance(v, str):
            return redact_said(v)
        if isinstance(v, list):
            return [clean(x) for x in v]
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return v

    return {k: clean(v) for k, v in result.items()}


class ClaimSession:
    def __init__(
        self,
        storage: Storage,
        claim: Claim,
        record: AudioRecord,
        rows: RecordRows | None = None,
        copies: LocalCopies | None = None,
    ) -> None:
        self._storage = storage
        self.claim = claim
        self.record = record
        self._rows = rows
        self._copies = copies or _NO_COPIES

    # -- reads --------------------------------------------------------------------

    async def _read_rows(self) -> RecordRows:
        if self._rows is None:
            self._rows = await self._storage.rows_of(self.record.id)
        return self._rows

    async def files(self, role: str) -> list[FileRow]:
        """The record's current files of ``role`` (not superseded), oldest first."""
        rows = await self._read_rows()
        return [f.model_copy() for f in rows.files if f.role == role and not f.superseded]

    async def attempts(self) -> list[AttemptRow]:
        """The record's recognition attempts, oldest first."""
        return [a.model_copy() for a in (await self._read_rows()).attempts]

    async def download(self, file: FileRow, dest: Path) -> int:
        """The file's blob at ``dest``: this process's copy when it holds one, else fetched."""
        self._own(file.record)
        key = LocalCopies.key("files", file.id, file.blob)
        held = self._copies.get(key, file.size)
        if held is not None:
            return await anyio.to_thread.run_sync(_link, held, dest)
        size = await self._storage.download(file, dest)
        return size

    async def raw_response(self, attempt: AttemptRow) -> bytes:
        self._own(attempt.record)
        held = self._copies.get(LocalCopies.key("recognition_attempts", attempt.id, attempt.raw_response))
        if held is not None:
            return await anyio.Path(held).read_bytes()
        return await self._storage.raw_response(attempt)

    # -- fenced writes ------------------------------------------------------------

    async def attach_file(
        self, path: Path | None, *, role: str, format: str, duration_ms: int, place: PiecePlace | None = None
    ) -> FileRow:
        row = await self._storage.attach_file(
            self.claim, path, role=role, format=format, duration_ms=duration_ms, place=place
        )
        if path is not None and role == FileRole.NORMALIZED:  # the next step here sends it: no need to fetch it back
            key = LocalCopies.key("files", row.id, row.blob)
            await anyio.to_thread.run_sync(self._copies.put, self.record.id, key, path)
        if self._rows is not None:
            self._rows.files.append(row)
        return row.model_copy()

    async def charge_audio(self, duration_ms: int) -> str | None:
        """The decoded length charged to the sender's day; why not, when it breaks their quota."""
        return await self._storage.charge_audio(self.claim, duration_ms)

    async def create_attempt(self, *, provider: str, model: str, piece: int = 0, offset_ms: int = 0) -> str:
        return await self._storage.create_attempt(
            self.claim, provider=provider, model=model, piece=piece, offset_ms=offset_ms
        )

    async def progress(self, value: float, *, activity: Activity | None = None, language: str | None = None) -> None:
        """How far recognition has come (0..1; storage keeps the highest value), and, optionally, what
        the step is doing now and the language it found: the poll shows each at once."""
        await self._storage.settle(self.claim, Progressed(value, activity, language))

    async def update_attempt(
        self,
        attempt_id: str,
        *,
        operation_id: str | None = None,
        audio_uri: str | None = None,
        status: AttemptStatus | None = None,
        raw_response: bytes | None = None,
        copies_removed_at: int | None = None,
    ) -> AttemptRow:
        """The attempt changed; the row as written (the rows this session holds follow it)."""
        if raw_response is not None:
            raw_response = redact_result(raw_response)
        if operation_id is not None:  # a provider's name for its work: what it sends back is redacted, all of it
            operation_id = redact(operation_id)
        change = AttemptChange(operation_id, audio_uri, status, raw_response, copies_removed_at=copies_removed_at)
        row = await self._storage.update_attempt(self.claim, attempt_id, change)
        if raw_response is not None:  # finalize reads it here, not from storage
            key = LocalCopies.key("recognition_attempts", row.id, row.raw_response)
            await anyio.to_thread.run_sync(self._copies.put_bytes, self.record.id, key, raw_response)
        if self._rows is not None:
            attempts = self._rows.attempts
            at = next((i for i, a in enumerate(attempts) if a.id == row.id), None)
            if at is None:
                attempts.append(row)
            else:
                attempts[at] = row
        return row.model_copy()

    async def put_text(self, kind: str, content: str, segments: Any = None, *, language: str | None = None) -> None:
        await self._storage.put_text(self.claim, kind, content, segments, language=language)

    async def note(self, text: str) -> None:
        await self._storage.note(self.claim, redact(text))

    async def words(self) -> list[str]:
        """What recognition of this recording is biased towards: its sender's words and topics."""
        return await self._storage.words(self.claim)

    async def insights_source(self) -> dict[str, Any]:
        """An insights claim's recording: its transcript and its owner's dictionary of topics."""
        return await self._storage.insights_source(self.claim)

    async def store_insights(self, result: dict[str, Any]) -> None:
        """An insights claim's answer: the brief with its quotes and the topics (secrets removed first)."""
        await self._storage.store_insights(self.claim, redact_insights(result))

    async def literary_source(self) -> dict[str, Any]:
        """A literary claim's recording: its transcript's text, segments and language, and its owner's topics."""
        return await self._storage.literary_source(self.claim)

    async def store_literary(
        self, result: dict[str, Any], document: bytes | None = None, *, transcript_document: bytes | None = None
    ) -> None:
        """A literary claim's text and paragraphs (secrets removed first, as from every answer) and the same
        as a DOCX document (made from them, after the transcript's own redaction); with the transcript's
        own DOCX, made from the transcript it read."""
        await self._storage.store_literary(
            self.claim, redact_insights(result), document, transcript_document=transcript_document
        )

    async def copies_removed(self, attempt_id: str, error: str = "") -> None:
        """The attempt's provider-side copies are gone (or, with ``error``, could not be removed yet)."""
        await self._storage.copies_removed(attempt_id, error)

    def _own(self, record_id: str) -> None:
        if record_id != self.record.id:
            raise ValueError(f"record {self.record.id}'s step asked for a row of record {record_id}")


def _link(held: Path, dest: Path) -> int:
    try:
        os.link(held, dest)
    except OSError:
        shutil.copyfile(held, dest)
    return dest.stat().st_size


class _NoCopies(LocalCopies):
    """Keeps nothing (a session built without a process's copies)."""

    def __init__(self) -> None:  # no directory
        pass

    def get(self, key: tuple[str, str, str], size: int | None = None) -> Path | None:
        return None

    def put(self, record: str, key: tuple[str, str, str], src: Path) -> None:
        return None

    def put_bytes(self, record: str, key: tuple[str, str, str], data: bytes) -> None:
        return None

    def forget(self, record: str) -> None:
        return None

    def close(self) -> None:
        return None


_NO_COPIES = _NoCopies()
