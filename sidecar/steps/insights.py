"""insights (the insights queue, on a finished recording): a grounded brief and up to five topics.

Reads the transcript and its owner's dictionary (``ClaimSession.insights_source``:
the owner is the claimed row's, so no request ever carries another sender's
topics), asks the configured engine (``sidecar.insights``), and writes what
survives the checks: the sentences whose quotes are in the transcript, with
their times, and the topics of the dictionary or justified by a quote. What
was dropped and why goes to the recording's journal. A recording without
speech gets no brief and no topics. A step that ends without a brief says why
(``no_brief``: the owner reads it on the insights row, the sender's poll gets
the code and the page says there is no brief) instead of leaving it empty.
"""

from __future__ import annotations

from sidecar.insights.summarize import Source, summarize
from sidecar.outcome import Advance, HaltCode, PermanentError, StepResult
from sidecar.redaction import redact_said
from sidecar.steps.base import StepContext

__all__ = ["run"]

# Journal lines about what was dropped, at most this many (the rest counted).
NOTES_SHOWN = 12


async def run(ctx: StepContext) -> StepResult:
    engine = ctx.insights
    if engine is None:
        raise PermanentError(HaltCode.PROVIDER_REJECTED, "insights are not configured ([insights] provider)")
    data = await ctx.session.insights_source()
    text = str(data.get("text") or "")
    if not text.strip():
        reason = "no speech in the transcript: no brief and no topics"
        await ctx.session.store_insights(_no_brief(engine.name, "no_speech", reason))
        return Advance(reason)
    # A registered secret said in the recording (finalize stored the transcript without them) never
    # travels to a model, whatever wrote the transcript since.
    segments = [
        {**s, "text": redact_said(str(s.get("text", "")))} for s in data.get("segments") or [] if isinstance(s, dict)
    ]
    source = Source(
        text=redact_said(text),
        segments=segments,
        language=str(data.get("language") or ""),
        topics=[str(t) for t in data.get("topics") or []],
    )

    async def progress(value: float) -> None:
        await ctx.session.progress(value)

    async with engine.open() as chat:
        model = chat.model
        try:
            found = await summarize(chat, source, sentences=ctx.settings.insights.sentences, on_progress=progress)
        except PermanentError as exc:
            if exc.code is HaltCode.UNPARSABLE_ANSWER:  # the row halts; the sender's page still hears of it
                await ctx.session.store_insights({**_no_brief(engine.name, "nothing_usable", str(exc)), "model": model})
            raise
    await ctx.session.store_insights(
        {
            "brief": found.text,
            "quotes": [q.as_json() for q in found.brief],
            "topics": found.topics,
            "language": found.language,
            "provider": engine.name,
            "model": model,
            "proposed": found.proposed,
            "kept": len(found.brief),
            "no_brief": "" if found.brief else "nothing_usable",
            "no_brief_reason": "" if found.brief else found.missing,
        }
    )
    for line in found.notes[:NOTES_SHOWN]:
        await ctx.session.note(f"insights: {line}")
    if len(found.notes) > NOTES_SHOWN:
        await ctx.session.note(f"insights: and {len(found.notes) - NOTES_SHOWN} more like these")
    topics = ", ".join(found.topics) or "none"
    if not found.brief:
        return Advance(
            f"no brief: {found.missing}; topics: {topics}; {found.requests} requests to {engine.name} ({model})"
        )
    return Advance(
        f"brief of {len(found.brief)} sentences ({found.proposed} proposed), topics: {topics}; "
        f"{found.requests} requests to {engine.name} ({model})"
    )


def _no_brief(provider: str, code: str, reason: str) -> dict[str, object]:
    """A result without a brief, and why: ``code`` for the sender's page, ``reason`` for the owner."""
    return {
        "brief": "",
        "quotes": [],
        "topics": [],
        "provider": provider,
        "proposed": 0,
        "kept": 0,
        "no_brief": code,
        "no_brief_reason": reason,
    }
