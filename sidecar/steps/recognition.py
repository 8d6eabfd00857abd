"""A record's pieces and their recognition attempts, as the submit, poll and finalize steps see them.

A recording is recognized in pieces (``files`` rows of role ``normalized``,
made by normalize); each piece with speech has its own attempts, one row
per paid call (LA3). A piece without speech is never sent anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.outcome import HaltCode, PermanentError, TranscriberError
from sidecar.providers.base import StartRequest
from sidecar.redaction import redact
from sidecar.steps.base import StepContext
from sidecar.steps.progress import ProgressWriter
from sidecar.storage.model import AttemptRow, AttemptStatus, FileRole, FileRow

REDO_HINT = "to recognize again, set the stage to 'normalized' in the panel"
REDO_FROM_UPLOAD = "set the stage to 'uploaded' in the panel to normalize again"
RETRY_PIECE_HINT = "clear the halt in the panel to recognize that piece again (the other pieces are kept)"


@dataclass(frozen=True)
class PieceWork:
    """One piece with speech and its latest attempt still in play (None: it has none)."""

    file: FileRow
    attempt: AttemptRow | None

    @property
    def label(self) -> str:
        return f"piece {self.file.piece + 1} of {self.file.pieces}"

    @property
    def recognized(self) -> bool:
        return self.attempt is not None and bool(self.attempt.raw_response)


@dataclass(frozen=True)
class Recording:
    """The recording as normalize cut it: every piece, and the pieces to recognize with their attempts."""

    pieces: list[FileRow]  # in order
    speech: list[PieceWork]  # the pieces with speech
    duration_ms: int  # its length, as normalize stored it on the record


async def recording(ctx: StepContext, *, to_start: bool = False) -> Recording:
    """The record's pieces, each piece with speech with its latest attempt still in play.

    A ``lost`` attempt is never polled or finalized again; a ``superseded``
    one (the owner set the stage back) stays readable for a re-poll or
    re-finalize, but submit (``to_start``) starts a new recognition instead
    of resuming it. A missing piece is an error.
    """
    rows = sorted(await ctx.session.files(FileRole.NORMALIZED), key=lambda f: f.piece)
    if not rows:
        raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, f"no normalized audio; {REDO_FROM_UPLOAD}")
    if [f.piece for f in rows] != list(range(rows[0].pieces)):
        raise PermanentError(
            HaltCode.UNSUPPORTED_MEDIA, f"normalized pieces are missing (have {len(rows)}); {REDO_FROM_UPLOAD}"
        )
    over = (AttemptStatus.LOST, AttemptStatus.SUPERSEDED) if to_start else (AttemptStatus.LOST,)
    latest: dict[int, AttemptRow] = {}
    for a in await ctx.session.attempts():  # oldest first
        if a.status not in over:
            latest[a.piece] = a
    # The length normalize stored; a record normalized by an older release and never migrated has only its pieces.
    duration_ms = ctx.record.duration_ms or max(f.offset_ms + f.duration_ms for f in rows)
    return Recording(rows, [PieceWork(f, latest.get(f.piece)) for f in rows if f.speech_ms > 0], duration_ms)


async def start(ctx: StepContext, piece: PieceWork, progress: ProgressWriter | None = None) -> AttemptRow:
    """Starts recognition of a piece, paying at most once (P18, LA3); its attempt as stored after.

    The attempt row is created before the provider is called, and the audio
    location and operation id are stored the moment the provider reports
    them. An attempt without an operation id (an earlier try died before the
    provider answered) is resumed: the provider is first asked whether an
    operation for it already began.
    """
    provider = ctx.provider
    attempt = piece.attempt
    if attempt is not None and attempt.operation_id:
        return attempt
    if attempt is None or attempt.provider != provider.name or attempt.status == AttemptStatus.SUPERSEDED:
        offset = piece.file.offset_ms
        attempt_id = await ctx.session.create_attempt(
            provider=provider.name, model=provider.model, piece=piece.file.piece, offset_ms=offset
        )
        audio_uri = ""
    else:
        attempt_id, audio_uri = attempt.id, attempt.audio_uri
        found = await provider.find_started(attempt_id, audio_uri)
        if found:
            return await ctx.session.update_attempt(attempt_id, operation_id=found, status=AttemptStatus.RUNNING)

    row = piece.file
    if row.removed_at or not row.blob:
        # Removed some time after the recording was done ([pipeline] keep_normalized); the panel
        # refuses a redo from 'normalized' then, and this is the guard behind it.
        raise PermanentError(
            HaltCode.UNSUPPORTED_MEDIA, f"the normalized audio of {piece.label} was removed; {REDO_FROM_UPLOAD}"
        )
    path = ctx.workdir / f"piece-{row.piece}.{row.blob.rsplit('.', 1)[-1] if '.' in row.blob else 'bin'}"
    await ctx.session.download(row, path)

    async def remember(field: str, value: str) -> None:
        if field == "operation_id":
            await ctx.session.update_attempt(attempt_id, operation_id=value, status=AttemptStatus.RUNNING)
        elif field == "audio_uri":
            await ctx.session.update_attempt(attempt_id, audio_uri=value)

    request = StartRequest(
        audio=path,
        words=await ctx.session.words(),
        format=row.format,
        duration_ms=row.duration_ms,
        attempt_key=attempt_id,
        speech=row.speech,
        language=ctx.record.language_hint or None,
        report=progress.reporter(piece.file.offset_ms) if progress else None,
        found_language=progress.found_language if progress else None,
        doing=progress.doing if progress else None,
    )
    try:
        started = await provider.start(request, remember)
    finally:
        path.unlink(missing_ok=True)  # a six-hour recording's pieces are not all kept in scratch space
    ctx.audio_sent(provider.name, row.duration_ms / 1000)
    return await ctx.session.update_attempt(
        attempt_id,
        operation_id=started.operation_id,
        audio_uri=started.audio_uri or None,
        status=AttemptStatus.READY if started.raw is not None else AttemptStatus.RUNNING,
        raw_response=started.raw,
    )


async def lose_attempt(
    ctx: StepContext, attempt: AttemptRow, error: PermanentError, hint: str = REDO_HINT
) -> PermanentError:
    """Marks the attempt lost, so that it is never polled again; the error to raise, with the way out.

    Its provider-side copies serve nothing now: they are removed at once (O6).
    """
    await ctx.session.update_attempt(attempt.id, status=AttemptStatus.LOST)
    await remove_copies(ctx, attempt)
    return PermanentError(error.code, f"{error}; {hint}")


async def remove_copies(ctx: StepContext, attempt: AttemptRow, then: AttemptStatus | None = None) -> bool:
    """Removes the attempt's provider-side copies; a failure is left to the sweep (and noted once).

    ``then``: the attempt's status once they are gone, written with their removal (one write).
    """
    try:
        await ctx.provider_for(attempt.provider).cleanup(attempt.operation_id, attempt.audio_uri)
    except TranscriberError as exc:
        await ctx.session.copies_removed(attempt.id, error=redact(str(exc))[:2000] or type(exc).__name__)
        return False
    if then is None:
        await ctx.session.copies_removed(attempt.id)
    else:
        await ctx.session.update_attempt(attempt.id, status=then, copies_removed_at=ctx.clock.now_ms())
    return True
