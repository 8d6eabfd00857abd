"""What a step may do with storage: read its record's rows, write its results, under its claim.

A ``ClaimSession`` carries the claim's token and the claimed record; it has
no way to claim, settle, or touch another record, so a step cannot advance a
record by mistake (the runner settles the outcome).

A provider's raw result and a note are stored without the registered secrets
(H1): a provider that echoes a key inside a result never gets it stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sidecar.activity import Activity
from sidecar.redaction import redact, redact_result
from sidecar.storage.model import AttemptChange, AttemptRow, AttemptStatus, AudioRecord, Claim, FileRow, PiecePlace
from sidecar.storage.protocol import Storage
from sidecar.storage.transitions import Progressed

__all__ = ["ClaimSession", "redact_insights"]


def redact_insights(result: dict[str, Any]) -> dict[str, Any]:
    """Every string of an insights answer without the registered secrets (H1): a key said in a
    recording, or echoed by a model, is never stored."""

    def clean(v: Any) -> Any:
        if isinstance(v, str):
            return redact(v)
        if isinstance(v, list):
            return [clean(x) for x in v]
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return v

    return {k: clean(v) for k, v in result.items()}


class ClaimSession:
    def __init__(self, storage: Storage, claim: Claim, record: AudioRecord) -> None:
        self._storage = storage
        self.claim = claim
        self.record = record

    # -- reads --------------------------------------------------------------------

    async def files(self, role: str) -> list[FileRow]:
        return await self._storage.files_of(self.record.id, role)

    async def attempts(self) -> list[AttemptRow]:
        return await self._storage.attempts_of(self.record.id)

    async def download(self, file: FileRow, dest: Path) -> int:
        self._own(file.record)
        return await self._storage.download(file, dest)

    async def raw_response(self, attempt: AttemptRow) -> bytes:
        self._own(attempt.record)
        return await self._storage.raw_response(attempt)

    # -- fenced writes ------------------------------------------------------------

    async def attach_file(
        self, path: Path | None, *, role: str, format: str, duration_ms: int, place: PiecePlace | None = None
    ) -> FileRow:
        return await self._storage.attach_file(
            self.claim, path, role=role, format=format, duration_ms=duration_ms, place=place
        )

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
    ) -> None:
        if raw_response is not None:
            raw_response = redact_result(raw_response)
        change = AttemptChange(operation_id, audio_uri, status, raw_response)
        await self._storage.update_attempt(self.claim, attempt_id, change)

    async def put_text(self, kind: str, content: str, segments: Any = None, *, language: str | None = None) -> None:
        await self._storage.put_text(self.claim, kind, content, segments, language=language)

    async def note(self, text: str) -> None:
        await self._storage.note(self.claim, redact(text))

    async def insights_source(self) -> dict[str, Any]:
        """An insights claim's recording: its transcript and its owner's dictionary of topics."""
        return await self._storage.insights_source(self.claim)

    async def store_insights(self, result: dict[str, Any]) -> None:
        """An insights claim's answer: the brief with its quotes and the topics (secrets removed first)."""
        await self._storage.store_insights(self.claim, redact_insights(result))

    async def copies_removed(self, attempt_id: str, error: str = "") -> None:
        """The attempt's provider-side copies are gone (or, with ``error``, could not be removed yet)."""
        await self._storage.copies_removed(attempt_id, error)

    def _own(self, record_id: str) -> None:
        if record_id != self.record.id:
            raise ValueError(f"record {self.record.id}'s step asked for a row of record {record_id}")
