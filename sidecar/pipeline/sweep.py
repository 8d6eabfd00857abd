"""Removing provider-side copies no step will need again (O6): the uploaded audio, the stored results.

Finalize removes an attempt's copies as soon as the transcript is stored, and
a step that gives up on an attempt (``lost``) removes them at once. What
escapes those (a removal that failed, an attempt superseded by a redo, a
record halted and left alone) is found by this sweep, which the pool runs
every ``[pipeline] sweep_every``. An attempt's copies are due when:

* its record is done, or the attempt was lost or cleaned: nothing reads them again;
* it was superseded and a newer attempt of its record exists: the redo went on without it;
* its record has been halted longer than ``[pipeline] keep_halted_copies`` (a resume
  within that time finds its recognition where it was).

A removal that fails is noted once on the record's journal and tried again
at the next sweep.

The same pass removes our own copies that outgrew their use
(``sweep_normalized``): the normalized audio of a recording done longer
than ``[pipeline] keep_normalized`` is read by nobody (the transcript is
stored), so its blobs go; the ``files`` rows stay as history, marked
removed, and the original and the transcript are kept (ST5).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from sidecar.outcome import TranscriberError
from sidecar.redaction import redact
from sidecar.runtime.clock import Clock
from sidecar.storage.model import AttemptRow, AttemptStatus, SweepItem
from sidecar.storage.protocol import Storage

__all__ = ["sweep_normalized", "sweep_once"]

log = logging.getLogger("transcriber.sweep")


async def sweep_once(
    storage: Storage, remove_copies: Callable[[AttemptRow], Awaitable[None]], clock: Clock, keep_halted: timedelta
) -> tuple[int, int]:
    """One pass: (copies removed, removals that failed).

    ``remove_copies`` removes one attempt's provider-side copies (its provider's cleanup; the
    sweep, like the rest of the pipeline, never names a provider).
    """
    removed = failed = 0
    for item in await storage.attempts_to_sweep():
        if not await _due(storage, item, clock, keep_halted):
            continue
        attempt = item.attempt
        try:
            await remove_copies(attempt)
        except (TranscriberError, ValueError) as exc:
            failed += 1
            reason = redact(str(exc))[:2000]
            log.warning("attempt %s: provider-side copies not removed: %s", attempt.id, reason)
            await storage.copies_removed(attempt.id, error=reason or type(exc).__name__)
            continue
        removed += 1
        await storage.copies_removed(attempt.id)
    if removed or failed:
        log.info("sweep: provider-side copies of %d attempt(s) removed, %d left for later", removed, failed)
    return removed, failed


async def sweep_normalized(storage: Storage, clock: Clock, keep: timedelta) -> tuple[int, int]:
    """The normalized copies of recordings done longer than ``keep``, removed: (files, bytes)."""
    done_before = clock.now_ms() - int(keep.total_seconds() * 1000)
    files = size = 0
    while True:
        batch = 0
        for record_id in await storage.records_with_normalized_copies(done_before):
            removed, freed = await storage.remove_normalized(record_id, done_before)
            batch, files, size = batch + removed, files + removed, size + freed
        if batch == 0:  # nothing left, or only records that moved on meanwhile
            break
    if files:
        log.info("sweep: %d normalized copy(ies) of finished recordings removed, %.1f MB", files, size / 1e6)
    return files, size


async def _due(storage: Storage, item: SweepItem, clock: Clock, keep_halted: timedelta) -> bool:
    status = item.attempt.status
    if item.record_state == "done" or status in (AttemptStatus.LOST, AttemptStatus.CLEANED):
        return True
    if item.record_halted_at:
        halted = _parse(item.record_halted_at)
        now = datetime.fromtimestamp(clock.now_ms() / 1000, UTC)
        if halted is not None and now - halted > keep_halted:
            return True
    if status == AttemptStatus.SUPERSEDED:
        newer = [a for a in await storage.attempts_of(item.attempt.record) if a.created > item.attempt.created]
        return bool(newer)
    return False


def _parse(value: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(value.replace(" ", "T").replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
