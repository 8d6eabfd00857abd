"""literary (the literary queue, on a finished recording): the transcript as a text to be read.

Reads the stored transcript's segments, edits them by rule (``sidecar.literary.edition``:
paragraphs by turn and pause, fillers and stutters out, sentence case, the language's
typography) and stores the result as the recording's ``texts`` row of kind ``literary``,
each paragraph with its time span and speaker, and the same as a DOCX document; the transcript's
DOCX too, so a corrected transcript (which queues this step again) gets a new one. Offline and
quick: a six-hour transcript takes a few seconds. A transcript without speech gives an empty text, and the step is done.

With a language model configured (``[insights] provider``, and ``[insights] proofread`` not false), the
paragraphs are then proofread by it (``sidecar.literary.model_edition``): misheard words mended, each
paragraph checked in code against its source; one that fails keeps the rules' words, and its paragraph
says why (``proofread``, ``reason``), as do the journal and the step's outcome.
"""

from __future__ import annotations

from typing import Any

from sidecar.literary.document import docx_bytes, transcript_docx_bytes
from sidecar.literary.edition import edit, render
from sidecar.literary.model_edition import Edition, edition
from sidecar.outcome import Advance, StepResult
from sidecar.steps.base import StepContext
from sidecar.transcript.plain import turns

__all__ = ["run"]

# Journal lines about paragraphs that kept the rules' words, at most this many (the rest counted).
NOTES_SHOWN = 12


async def run(ctx: StepContext) -> StepResult:
    data = await ctx.session.literary_source()
    segments = [s for s in data.get("segments") or [] if isinstance(s, dict)]
    language = str(data.get("language") or "")
    paragraphs = edit(segments, language)
    transcript = transcript_docx_bytes(turns(str(data.get("text") or ""), segments), ctx.record.title, language)

    async def store(segments_json: list[dict[str, Any]]) -> None:
        result = {"content": render(paragraphs), "segments": segments_json, "language": language}
        document = docx_bytes(paragraphs, ctx.record.title, language)
        await ctx.session.store_literary(result, document, transcript_document=transcript)

    # The rules' text is stored at once: a model's proofread of an hour takes many minutes on a small server,
    # and the text (and the transcript's document) can be read meanwhile; the proofread one replaces it.
    await store([p.as_json() for p in paragraphs])
    proofread = await _proofread(ctx, paragraphs, language, data) if paragraphs else None
    if proofread is not None:
        paragraphs = proofread.paragraphs
        await store(proofread.segments)
    if not paragraphs:
        return Advance("no speech in the transcript: the literary text is empty")
    if proofread is None:
        return Advance(f"literary text of {len(paragraphs)} paragraphs (rule-based edition)")
    for line in proofread.notes[:NOTES_SHOWN]:
        await ctx.session.note(f"literary: {line}")
    if len(proofread.notes) > NOTES_SHOWN:
        await ctx.session.note(f"literary: and {len(proofread.notes) - NOTES_SHOWN} more paragraphs like these")
    return Advance(f"literary text of {len(paragraphs)} paragraphs ({proofread.summary})")


async def _proofread(ctx: StepContext, paragraphs: Any, language: str, data: dict[str, Any]) -> Edition | None:
    """The model edition, when a model is configured to proofread; None: the rule-based edition stands."""
    engine, settings = ctx.insights, ctx.settings.insights
    if engine is None or not settings.proofread:
        return None

    async def progress(value: float) -> None:
        await ctx.session.progress(value)

    # An answer from a chat server takes at most its request's timeout; the offline engine's may wait while
    # recognition holds the CPUs (it is stopped meanwhile), so only its own bound holds.
    within = settings.timeout.total_seconds() if settings.provider == "openai" else None
    topics = [str(t) for t in data.get("topics") or []]
    return await edition(engine, paragraphs, language, topics, answer_within=within, on_progress=progress)
