"""Reads shared by the steps."""

from __future__ import annotations

from sidecar.pocketbase.client import AttemptRow
from sidecar.steps.base import StepContext

FINISHED = ("failed",)


async def current_attempt(ctx: StepContext) -> AttemptRow | None:
    """The record's latest recognition attempt that is still in play."""
    rows = [a for a in await ctx.storage.attempts_of(ctx.record.id) if a.status not in FINISHED]
    return rows[-1] if rows else None
