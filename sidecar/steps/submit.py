"""submit (stage ``normalized``): start recognition, paying at most once (P18).

The ``recognition_attempts`` row is created before the provider is called,
and the audio location and operation id are stored the moment the provider
reports them. A repeated submit finds the attempt row: if it holds an
operation id, nothing is started again; if not, the provider is asked whether
an operation for this attempt already began. The window that remains (a hard
kill between the provider's answer and storing its id) is documented in
docs/architecture.md.
"""

from __future__ import annotations

from sidecar.outcome import Advance, HaltCode, Outcome, PermanentError
from sidecar.providers.base import StartRequest
from sidecar.steps.attempts import current_attempt
from sidecar.steps.base import StepContext
from sidecar.storage.model import AttemptStatus, FileRole


async def run(ctx: StepContext) -> Outcome:
    provider = ctx.provider
    attempt = await current_attempt(ctx, to_start=True)
    if attempt is not None and attempt.operation_id:
        return Advance(f"{attempt.provider} operation {attempt.operation_id} already started; not started again")

    if attempt is None or attempt.provider != provider.name:
        attempt_id = await ctx.session.create_attempt(provider=provider.name, model=provider.model)
        audio_uri = ""
    else:
        attempt_id = attempt.id
        audio_uri = attempt.audio_uri
        found = await provider.find_started(attempt_id, audio_uri)
        if found:
            await ctx.session.update_attempt(attempt_id, operation_id=found, status=AttemptStatus.RUNNING)
            return Advance(f"found operation {found} started by an earlier try; not started again")

    normalized = await ctx.session.files(FileRole.NORMALIZED)
    if not normalized:
        raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, "no normalized audio to submit")
    row = normalized[-1]
    path = ctx.workdir / f"audio.{row.blob.rsplit('.', 1)[-1] if '.' in row.blob else 'bin'}"
    await ctx.session.download(row, path)

    async def remember(field: str, value: str) -> None:
        if field == "operation_id":
            await ctx.session.update_attempt(attempt_id, operation_id=value, status=AttemptStatus.RUNNING)
        elif field == "audio_uri":
            await ctx.session.update_attempt(attempt_id, audio_uri=value)

    request = StartRequest(
        audio=path,
        format=row.format,
        duration_ms=row.duration_ms,
        attempt_key=attempt_id,
        language=ctx.record.language_hint or None,
    )
    started = await provider.start(request, remember)
    await ctx.session.update_attempt(
        attempt_id,
        operation_id=started.operation_id,
        audio_uri=started.audio_uri or None,
        status=AttemptStatus.READY if started.raw is not None else AttemptStatus.RUNNING,
        raw_response=started.raw,
    )
    if started.raw is not None:
        return Advance(f"{provider.name} recognized the audio at once")
    return Advance(f"{provider.name} operation {started.operation_id} started")
