"""poll (stage ``submitted``): ask the provider; not ready → postpone; ready → keep the raw response.

The provider that started the attempt is the one asked, whatever the
configuration says now. A poll that cannot reach its outcome (the provider
or the network failing) spends an attempt like any failed step (O10); the
operation id stays, so a record halted for it is resumed by polling again,
paying nothing. Our own credentials being refused postpones instead
(``CredentialsRefused``, O5): that is not the recording's fault.
"""

from __future__ import annotations

from sidecar.outcome import Advance, HaltCode, Outcome, PermanentError, Postpone
from sidecar.steps.attempts import REDO_HINT, current_attempt, fail_attempt
from sidecar.steps.base import StepContext
from sidecar.storage.model import AttemptStatus


async def run(ctx: StepContext) -> Outcome:
    attempt = await current_attempt(ctx)
    if attempt is None or not attempt.operation_id:
        raise PermanentError(HaltCode.PROVIDER_FAILED, f"no started recognition to poll; {REDO_HINT}")
    if attempt.raw_response:
        return Advance("result already stored")
    provider = ctx.provider_for(attempt.provider)
    try:
        polled = await provider.poll(attempt.operation_id)
    except PermanentError as exc:
        # The operation is lost for good (failed, results expired): resuming must not poll it again.
        raise await fail_attempt(ctx, attempt, exc) from exc
    if not polled.ready or polled.raw is None:
        return Postpone(polled.retry_in, f"{attempt.provider} operation {attempt.operation_id} not ready")
    await ctx.session.update_attempt(attempt.id, raw_response=polled.raw, status=AttemptStatus.READY)
    return Advance(f"{attempt.provider} result stored ({len(polled.raw)} bytes)")
