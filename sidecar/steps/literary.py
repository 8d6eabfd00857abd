"""literary (the literary queue, on a finished recording): the transcript as a text to be read.

Reads the stored transcript's segments, edits them by rule (``sidecar.literary.edition``:
paragraphs by turn and pause, fillers and stutters out, sentence case, the language's
typography) and stores the result as the recording's ``texts`` row of kind ``literary``,
each paragraph with its time span and speaker, and the same as a DOCX document; the transcript's
DOCX too, so a corrected transcript (which queues this step again) gets a new one. Offline and
quick: a six-hour transcript takes a few seconds. A transcript without speech gives an empty text, and the step is done.
"""

from __future__ import annotations

from typing import Any

from sidecar.literary.document import docx_bytes, transcript_docx_bytes
from sidecar.literary.edition import edit, render
from sidecar.outcome import Advance, StepResult
from sidecar.steps.base import StepContext
from sidecar.transcript.plain import turns

__all__ = ["run"]


async def run(ctx: StepContext) -> StepResult:
    data = await ctx.session.literary_source()
    segments = [s for s in data.get("segments") or [] if isinstance(s, dict)]
    language = str(data.get("language") or "")
    paragraphs = edit(segments, language)
    result: dict[str, Any] = {
        "content": render(paragraphs),
        "segments": [p.as_json() for p in paragraphs],
        "language": language,
    }
    document = docx_bytes(paragraphs, ctx.record.title, language)
    transcript = transcript_docx_bytes(turns(str(data.get("text") or ""), segments), ctx.record.title, language)
    await ctx.session.store_literary(result, document, transcript_document=transcript)
    if not paragraphs:
        return Advance("no speech in the transcript: the literary text is empty")
    return Advance(f"literary text of {len(paragraphs)} paragraphs (rule-based edition)")
