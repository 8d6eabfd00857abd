"""The recognition attempts of a record, as the submit, poll and finalize steps see them."""

from __future__ import annotations

from sidecar.outcome import PermanentError, TranscriberError
from sidecar.redaction import redact
from sidecar.steps.base import StepContext
from sidecar.storage.model import AttemptRow, AttemptStatus

REDO_HINT = "to recognize again, set the stage to 'normalized' in the panel"


async def current_attempt(ctx: StepContext, *, to_start: bool = False) -> AttemptRow | None:
    """The record's latest recognition attempt still in play (for submit: still worth resuming).

    A ``failed`` attempt is never polled or finalized again; a ``superseded``
    one (the owner set the stage back) stays readable for a re-poll or
    re-finalize, but submit starts a new recognition instead of resuming it.
    """
    over = (AttemptStatus.FAILED, AttemptStatus.SUPERSEDED) if to_start else (AttemptStatus.FAILED,)
    rows = [a for a in await ctx.session.attempts() if a.status not in over]
    return rows[-1] if rows else None


async def fail_attempt(ctx: StepContext, attempt: AttemptRow, error: PermanentError) -> PermanentError:
    """Marks the attempt failed, so that a later submit starts afresh; the error to raise, with the way out.

    Its provider-side copies serve nothing now: they are removed at once (O6).
    """
    await ctx.session.update_attempt(attempt.id, status=AttemptStatus.FAILED)
    await remove_copies(ctx, attempt)
    return PermanentError(error.code, f"{error}; {REDO_HINT}")


async def remove_copies(ctx: StepContext, attempt: AttemptRow) -> bool:
    """Removes the attempt's provider-side copies; a failure is left to the sweep (and noted once)."""
    try:
        await ctx.provider_for(attempt.provider).cleanup(attempt.operation_id, attempt.audio_uri)
    except TranscriberError as exc:
        await ctx.session.copies_removed(attempt.id, error=redact(str(exc))[:2000] or type(exc).__name__)
        return False
    await ctx.session.copies_removed(attempt.id)
    return True
