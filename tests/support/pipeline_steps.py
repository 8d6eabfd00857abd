"""The pipeline's steps for tests of what follows a transcript: each recording step advances at once,
finalize stores a given transcript, and the follow-up steps are the real ones."""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.outcome import Advance, StepResult
from sidecar.steps import insights, literary
from sidecar.steps.base import Step, StepContext


async def _advance(ctx: StepContext) -> StepResult:
    return Advance("test step done")


def storing(lines: Sequence[tuple[str, str]], *, seconds: float = 5.0) -> dict[str, Step]:
    """The steps, finalize storing ``lines`` ((speaker, words), ``seconds`` apart) as an English transcript."""
    segs = [
        {"start": i * seconds, "end": i * seconds + seconds - 1, "text": t, "speaker": s}
        for i, (s, t) in enumerate(lines)
    ]

    async def finalize(ctx: StepContext) -> StepResult:
        await ctx.session.put_text("transcript", " ".join(t for _, t in lines), segs, language="en")
        return Advance("transcript stored")

    return {
        "normalize": _advance,
        "submit": _advance,
        "poll": _advance,
        "finalize": finalize,
        "insights": insights.run,
        "literary": literary.run,
    }
