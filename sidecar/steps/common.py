"""Reads and writes shared by the steps."""

from __future__ import annotations

from sidecar.outcome import PermanentError
from sidecar.pocketbase.client import AttemptRow
from sidecar.steps.base import StepContext

# An attempt whose operation failed for good is never polled or finalized again.
FAILED = "failed"
# The owner set the stage back in the panel: the attempt's result stays readable
# (a re-poll or re-finalize uses it), but submit starts a new recognition.
SUPERSEDED = "superseded"

REDO_HINT = "to recognize again, set the stage to 'normalized' in the panel"


async def current_attempt(ctx: StepContext, *, to_start: bool = False) -> AttemptRow | None:
    """The record's latest recognition attempt still in play (for submit: still worth resuming)."""
    over = (FAILED, SUPERSEDED) if to_start else (FAILED,)
    rows = [a for a in await ctx.storage.attempts_of(ctx.record.id) if a.status not in over]
    return rows[-1] if rows else None


async def fail_attempt(ctx: StepContext, attempt: AttemptRow, error: PermanentError) -> PermanentError:
    """Marks the attempt failed, so that a later submit starts afresh; the error to raise, with the way out."""
    await ctx.storage.update_attempt(ctx.claim, attempt.id, status=FAILED)
    return PermanentError(error.code, f"{error}; {REDO_HINT}")
