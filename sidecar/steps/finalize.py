"""finalize (stage ``transcribed``): the raw response → ``texts`` (transcript + timed segments).

Then any provider-side copy (uploaded audio, stored results) is removed.
"""

from __future__ import annotations

import logging

from sidecar import languages
from sidecar.logs import redact
from sidecar.outcome import Advance, HaltCode, Outcome, PermanentError
from sidecar.steps.base import StepContext
from sidecar.steps.common import REDO_HINT, current_attempt, fail_attempt

log = logging.getLogger("transcriber.finalize")


async def run(ctx: StepContext) -> Outcome:
    attempt = await current_attempt(ctx)
    if attempt is None or not attempt.raw_response:
        raise PermanentError(HaltCode.PROVIDER_FAILED, f"no recognition result to finalize; {REDO_HINT}")
    provider = ctx.provider_for(attempt.provider)
    raw = await ctx.storage.read_file("recognition_attempts", attempt.id, attempt.raw_response)
    try:
        transcript = provider.parse(raw)
    except PermanentError as exc:
        raise await fail_attempt(ctx, attempt, exc) from exc
    segments = [s.model_dump(exclude_none=True) for s in transcript.segments]
    await ctx.storage.put_text(
        ctx.claim, "transcript", transcript.text, segments, language=languages.code_of(transcript.language)
    )
    if not transcript.text.strip():
        # L5: silence, noise or a clip too short to hold a word is not a failure.
        await ctx.storage.note(ctx.claim, "no speech found: the transcript is empty")
    try:
        await provider.cleanup(attempt.operation_id, attempt.audio_uri)
    except Exception as exc:  # a leftover copy is not worth the transcript
        await ctx.storage.note(ctx.claim, redact(f"could not remove the provider-side copy: {exc}"))
        log.warning("record %s: cleanup failed: %s", ctx.record.id, redact(str(exc)))
    else:
        await ctx.storage.update_attempt(ctx.claim, attempt.id, status="cleaned")
    found = f", language {transcript.language}" if transcript.language else ""
    return Advance(f"transcript of {len(transcript.text)} characters, {len(transcript.segments)} segments{found}")
