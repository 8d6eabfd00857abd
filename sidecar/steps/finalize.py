"""finalize (stage ``transcribed``): every piece's raw response → one transcript in ``texts`` (LA2).

Each piece's result is parsed by the provider that made it, shifted by the
piece's place in the recording and joined (``sidecar.transcript.join``: every word
once where pieces overlap), and stored without the registered secrets
(``redaction.redact_transcript``). A recording without speech gets an empty
transcript. Then the provider-side copies (uploaded audio, stored results)
are removed.
"""

from __future__ import annotations

import logging

from sidecar.outcome import Advance, HaltCode, PermanentError, StepResult
from sidecar.redaction import redact_transcript
from sidecar.steps import recognition
from sidecar.steps.base import StepContext
from sidecar.storage.model import AttemptStatus
from sidecar.transcript import languages
from sidecar.transcript.join import PieceResult, join
from sidecar.transcript.model import Transcript
from sidecar.transcript.speakers import numbered

log = logging.getLogger("transcriber.finalize")

REPOLL_HINT = "set the stage to 'submitted' in the panel to recognize that piece again (the other pieces are kept)"


async def run(ctx: StepContext) -> StepResult:
    recording = await recognition.recording(ctx)
    results: list[PieceResult] = []
    for piece in recording.speech:
        attempt = piece.attempt
        if attempt is None or not piece.recognized:
            raise PermanentError(HaltCode.PROVIDER_FAILED, f"{piece.label} has no recognition result; {REPOLL_HINT}")
        raw = await ctx.session.raw_response(attempt)
        try:
            transcript = ctx.provider_for(attempt.provider).parse(raw)
        except PermanentError as exc:
            unreadable = PermanentError(exc.code, f"{piece.label}: {exc}")
            raise await recognition.lose_attempt(ctx, attempt, unreadable, REPOLL_HINT) from exc
        start = piece.file.offset_ms / 1000
        results.append(PieceResult(start, start + piece.file.duration_ms / 1000, transcript))
    joined = numbered(join(results)).model_copy(update={"duration": recording.duration_ms / 1000})
    await _store(ctx, joined)
    # A leftover copy is not worth the transcript: a failed removal is noted and left to the sweep.
    for piece in recording.speech:
        assert piece.attempt is not None
        if not await recognition.remove_copies(ctx, piece.attempt, then=AttemptStatus.CLEANED):
            log.warning("record %s: provider-side copies not removed; the sweep will try again", ctx.record.id)
    found = f", language {joined.language}" if joined.language else ""
    pieces = f" from {len(results)} pieces" if len(results) > 1 else ""
    speakers = len({s.speaker for s in joined.segments if s.speaker})
    voices = f", {speakers} speakers" if speakers else ""
    return Advance(
        f"transcript of {len(joined.text)} characters, {len(joined.segments)} segments{pieces}{found}{voices}"
    )


async def _store(ctx: StepContext, transcript: Transcript) -> None:
    # H1: a key a provider put in what it recognized is never stored, so no export carries it.
    transcript = redact_transcript(transcript)
    segments = [s.model_dump(exclude_none=True) for s in transcript.segments]
    await ctx.session.put_text("transcript", transcript.text, segments, language=languages.code_of(transcript.language))
    if not transcript.text.strip():
        # L5: silence, noise or a clip too short to hold a word is not a failure.
        await ctx.session.note("no speech found: the transcript is empty")
