"""``Storage``: everything the pipeline asks of where records live.

The claim protocol (SPEC P1–P11) in one place:

* ``claim`` takes the next eligible record atomically (creation order,
  leases per stage) and returns it with its queue fields, or ``NoWork``;
  a row it cannot read it sets aside (halted ``unclaimable``) on the way,
  and names in ``set_aside``; one that reaches the sidecar unreadable all
  the same is ``UnreadableClaim``, set aside by ``set_aside`` under its claim;
* ``settle`` writes one of the typed transitions (transitions.py, each named
  by its outcome) while the claim is still the caller's, else raises
  ``FencedOut``, and returns the row as written;
* the attachment writes (files, attempts, texts, notes) are fenced the same
  way; the reads are not.

Every call may raise ``StorageUnavailable`` (retry later) or
``StorageError`` (refused); the writes also ``FencedOut``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from sidecar.runtime.clock import Clock
from sidecar.storage.model import (
    AttemptChange,
    AttemptRow,
    AudioRecord,
    Claim,
    Claimed,
    FileRow,
    LoginFigures,
    NoWork,
    PiecePlace,
    RecordRows,
    SweepItem,
)
from sidecar.storage.transitions import Transition

__all__ = ["Storage"]


class Storage(Protocol):
    clock: Clock

    async def connect(self) -> None:
        """Signs in (once; storage that is not up yet raises ``StorageUnavailable``)."""
        ...

    async def aclose(self) -> None: ...

    # -- the queue ----------------------------------------------------------------

    async def claim(
        self,
        leases: Mapping[str, timedelta],
        insights_lease: timedelta | None = None,
        *,
        follow_ups: Mapping[str, timedelta] | None = None,
    ) -> Claimed | NoWork:
        """The next claimable recording (with its files and attempts); when none is, the next row of the
        follow-up queues in ``follow_ups`` (queue → lease; ``insights_lease``: the insights queue's)."""
        ...

    async def settle(self, claim: Claim, change: Transition) -> AudioRecord:
        """Writes ``change`` under the claim; the row as written (its queue fields, as the claim gives them)."""
        ...

    async def set_aside(self, claim: Claim, reason: str) -> None:
        """Halts a claimed row that cannot be read (``unclaimable``, ``reason`` in its journal), under the
        claim, reading nothing back (the row as written would not read either)."""
        ...

    # -- reads --------------------------------------------------------------------

    async def rows_of(self, record_id: str) -> RecordRows:
        """The record's files (every role) and attempts, oldest first, in one read."""
        ...

    async def files_of(self, record_id: str, role: str) -> list[FileRow]:
        """The record's current files of ``role`` (not superseded), oldest first."""
        ...

    async def attempts_of(self, record_id: str) -> list[AttemptRow]:
        """The record's recognition attempts, oldest first."""
        ...

    async def download(self, file: FileRow, dest: Path) -> int:
        """Streams a file's blob to ``dest``; its size."""
        ...

    async def raw_response(self, attempt: AttemptRow) -> bytes: ...

    async def count_records(self, stages: Sequence[str]) -> dict[tuple[str, bool], int]:
        """How many records are in each (stage, halted) pair (for the metrics)."""
        ...

    async def login_figures(self) -> LoginFigures:
        """What the login guard has seen: failed and refused logins, accounts under attack (for the metrics)."""
        ...

    async def watch(self, on_change: Callable[[], None]) -> None:
        """Calls ``on_change`` when records may have changed (best effort), until cancelled."""
        ...

    # -- fenced writes of a step's results ----------------------------------------

    async def attach_file(
        self,
        claim: Claim,
        path: Path | None,
        *,
        role: str,
        format: str,
        duration_ms: int,
        location: str = "",
        place: PiecePlace | None = None,
    ) -> FileRow:
        """A file of the record; ``path`` None: a row without a blob, for a piece with no speech (nothing to keep)."""
        ...

    async def charge_audio(self, claim: Claim, duration_ms: int) -> str | None:
        """Charges the recording's decoded length to its sender's daily audio (H4), in place of
        what intake reserved; when that breaks the quota, charges nothing and returns why."""
        ...

    async def create_attempt(
        self, claim: Claim, *, provider: str, model: str, audio_uri: str = "", piece: int = 0, offset_ms: int = 0
    ) -> str: ...

    async def update_attempt(self, claim: Claim, attempt_id: str, change: AttemptChange) -> AttemptRow:
        """The attempt changed; the row as written."""
        ...

    async def put_text(
        self, claim: Claim, kind: str, content: str, segments: Any = None, *, language: str | None = None
    ) -> None: ...

    async def note(self, claim: Claim, text: str) -> None: ...

    # -- the insights step (claims of the insights queue) ---------------------------------

    async def words(self, claim: Claim) -> list[str]:
        """The names and terms recognition of the claimed recording is biased towards: its sender's
        words and topics (the sender is the record's, never the caller's to choose)."""
        ...

    async def insights_source(self, claim: Claim) -> dict[str, Any]:
        """The claimed row's recording: ``text``, ``segments``, ``language``, ``title``, and its owner's
        dictionary ``topics`` (names): the owner is the row's, never the caller's to choose."""
        ...

    async def store_insights(self, claim: Claim, result: dict[str, Any]) -> None:
        """The brief, its ``quotes``, the ``topics`` (names; new ones join the owner's dictionary) and what
        made them, onto the recording and its insights row, under the claim."""
        ...

    async def literary_source(self, claim: Claim) -> dict[str, Any]:
        """A literary claim's recording: its transcript's ``text``, ``segments`` and ``language``, and its owner's
        dictionary (``topics``)."""
        ...

    async def store_literary(
        self,
        claim: Claim,
        result: dict[str, Any],
        document: bytes | None = None,
        *,
        transcript_document: bytes | None = None,
    ) -> None:
        """The literary text (``content``, its paragraphs as ``segments``) as the recording's ``texts`` row
        of kind ``literary``, with ``document`` (the same as DOCX) attached, and ``transcript_document``
        (the transcript as DOCX) attached to its transcript's row, under the claim."""
        ...

    # -- provider-side copies (O6) --------------------------------------------------

    async def attempts_to_sweep(self, limit: int = 100) -> list[SweepItem]:
        """Attempts whose provider-side copies are not known to be removed, oldest first."""
        ...

    async def copies_removed(self, attempt_id: str, error: str = "") -> None:
        """Records that an attempt's copies are gone, or (``error``) why they could not be removed yet."""
        ...

    # -- normalized copies of finished recordings ---------------------------------------

    async def records_with_normalized_copies(self, done_before_ms: int, limit: int = 100) -> list[str]:
        """Records done (not halted) since before ``done_before_ms`` that still hold normalized blobs, oldest first."""
        ...

    async def remove_normalized(self, record_id: str, done_before_ms: int) -> tuple[int, int]:
        """Removes the record's normalized blobs if it is still done since before then: (files, bytes).

        The rows stay, ``removed_at`` set; the record's journal says so once.
        A record that is no longer done (the owner set its stage back) loses nothing.
        """
        ...
