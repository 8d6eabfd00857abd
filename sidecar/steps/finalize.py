"""finalize (stage ``transcribed``): the raw response → ``texts`` (transcript + timed segments).

Then any provider-side copy (uploaded audio, stored results) is removed.
"""

from __future__ import annotations

import logging

from sidecar import languages
from sidecar.outcome import Advance, HaltCode, Outcome, PermanentError
from sidecar.steps.attempts import REDO_HINT, current_attempt, fail_attempt, remove_copies
from sidecar.steps.base import StepContext
from sidecar.storage.model import AttemptStatus

log = logging.getLogger("transcriber.finalize")


async def run(ctx: StepContext) -> Outcome:
    attempt = await current_attempt(ctx)
    if attempt is None or not attempt.raw_response:
        raise PermanentError(HaltCode.PROVIDER_FAILED, f"no recognition result to finalize; {REDO_HINT}")
    provider = ctx.provider_for(attempt.provider)
    raw = await ctx.session.raw_response(attempt)
    try:
        transcript = provider.parse(raw)
    except PermanentError as exc:
        raise await fail_attempt(ctx, attempt, exc) from exc
    segments = [s.model_dump(exclude_none=True) for s in transcript.segments]
    await ctx.session.put_text("transcript", transcript.text, segments, language=languages.code_of(transcript.language))
    if not transcript.text.strip():
        # L5: silence, noise or a clip too short to hold a word is not a failure.
        await ctx.session.note("no speech found: the transcript is empty")
    # A leftover copy is not worth the transcript: a failed removal is noted and left to the sweep.
    if await remove_copies(ctx, attempt):
        await ctx.session.update_attempt(attempt.id, status=AttemptStatus.CLEANED)
    else:
        log.warning("record %s: provider-side copies not removed; the sweep will try again", ctx.record.id)
    found = f", language {transcript.language}" if transcript.language else ""
    return Advance(f"transcript of {len(transcript.text)} characters, {len(transcript.segments)} segments{found}")
