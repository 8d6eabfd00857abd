"""poll (stage ``submitted``): ask the provider about every piece not yet in; when all are, move on.

Each piece's result is stored the moment it is ready, so nothing asked for
is asked for again. The provider that started an attempt is the one asked,
whatever the configuration says now. A piece whose operation is lost for good
(an error at the provider, results expired) is marked ``lost`` and the record
halts; clearing the halt starts that piece alone again (LA3), the others kept.
A poll that cannot reach its outcome (the provider or the network failing)
spends an attempt like any failed step (O10); our own credentials being
refused postpones instead (``CredentialsRefused``, O5).

Progress (LA4) is pieces in / pieces to recognize.
"""

from __future__ import annotations

from sidecar.outcome import Advance, PermanentError, Postpone, StepResult
from sidecar.providers.base import Polled
from sidecar.steps import recognition
from sidecar.steps.base import StepContext
from sidecar.steps.progress import ProgressWriter
from sidecar.steps.recognition import RETRY_PIECE_HINT, PieceWork
from sidecar.storage.model import AttemptStatus


async def run(ctx: StepContext) -> StepResult:
    recording = await recognition.recording(ctx)
    if not recording.speech:
        return Advance("no speech found: nothing to poll")
    progress = ProgressWriter(ctx, recording.duration_ms)
    waiting: list[Polled] = []
    ready = 0
    try:
        for piece in recording.speech:
            polled = await _ask(ctx, piece)
            if polled.ready:
                ready += 1
            else:
                waiting.append(polled)
    finally:
        await progress.write(ready / len(recording.speech))
    total = len(recording.speech)
    if not waiting:
        return Advance(f"all {total} piece result(s) stored")
    asked = [p.retry_in for p in waiting if p.retry_in is not None]
    return Postpone(min(asked) if asked else None, f"{ready} of {total} piece(s) recognized; waiting on the provider")


async def _ask(ctx: StepContext, piece: PieceWork) -> Polled:
    """Whether the piece's result is stored now (the raw bytes are not carried), else when to ask again."""
    if piece.recognized:
        return _STORED
    attempt = piece.attempt
    if attempt is None or not attempt.operation_id:
        # Its earlier attempt was lost and the owner cleared the halt, or a try died
        # before the provider answered: start it (resuming, never paying twice).
        attempt = await recognition.start(ctx, piece)
        if attempt.raw_response:
            return _STORED
    provider = ctx.provider_for(attempt.provider)
    try:
        polled = await provider.poll(attempt.operation_id)
    except PermanentError as exc:
        raise await recognition.lose_attempt(
            ctx, attempt, PermanentError(exc.code, f"{piece.label}: {exc}"), RETRY_PIECE_HINT
        ) from exc
    if not polled.ready or polled.raw is None:
        return Polled(ready=False, retry_in=polled.retry_in)
    await ctx.session.update_attempt(attempt.id, raw_response=polled.raw, status=AttemptStatus.READY)
    return _STORED


_STORED = Polled(ready=True)
