"""normalize (stage ``uploaded``): the original → the provider's input format.

The original is never replaced: the result is a new ``files`` row with role
``normalized``. Decoding runs in a thread, in constant memory, and stops
promptly when the step is cancelled.
"""

from __future__ import annotations

from sidecar import audio
from sidecar.outcome import Advance, HaltCode, Outcome, PermanentError
from sidecar.steps.base import StepContext
from sidecar.storage.model import FileRole
from sidecar.threads import run_in_thread


async def run(ctx: StepContext) -> Outcome:
    done = await ctx.session.files(FileRole.NORMALIZED)
    if done:
        # A previous attempt stored the result and died before advancing.
        return Advance(f"normalized audio already stored ({done[-1].format})")

    originals = await ctx.session.files(FileRole.ORIGINAL)
    if not originals or not originals[0].blob:
        raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, "the record has no original file")
    original = originals[0]
    src = ctx.workdir / "original"
    await ctx.session.download(original, src)

    spec = ctx.provider.audio_spec
    dst = ctx.workdir / f"normalized.{audio.FORMATS[spec.format].extension}"
    # In a thread, stopped promptly (and waited for) if the step is cancelled.
    result = await run_in_thread(lambda cancel: audio.normalize(src, dst, spec, cancel=cancel))
    row = await ctx.session.attach_file(
        result.path, role=FileRole.NORMALIZED, format=result.format, duration_ms=result.duration_ms
    )
    return Advance(f"normalized to {row.format}, {result.duration_ms / 1000:.1f} s, {result.size} bytes")
