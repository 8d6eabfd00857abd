"""submit (stage ``normalized``): start recognition of every piece with speech, paying at most once (P18, LA3).

Each piece has its own ``recognition_attempts`` row, created before the
provider is called (``recognition.start``). A repeated submit skips every piece
whose attempt holds an operation id, and resumes the others. A provider that
answers at once (the offline engine, an OpenAI-compatible server) recognizes
the pieces one after another here, its progress written as it goes; a crash
costs at most the piece under way. When every piece's result is in, nothing
is left to poll: the recording goes straight to ``transcribed``
(``Advance.nothing_next``). The window that remains (a hard kill between the provider's answer and
storing its id) is documented in docs/architecture.md.
"""

from __future__ import annotations

from sidecar.outcome import Advance, StepResult
from sidecar.steps import recognition
from sidecar.steps.base import StepContext
from sidecar.steps.progress import ProgressWriter


async def run(ctx: StepContext) -> StepResult:
    recording = await recognition.recording(ctx, to_start=True)
    if not recording.speech:
        return Advance("no speech found: nothing to recognize", nothing_next=True)
    provider = ctx.provider
    started = at_once = 0
    progress = ProgressWriter(ctx, recording.duration_ms)
    recognized = 0
    async with progress.running():
        for piece in recording.speech:
            if piece.attempt is not None and piece.attempt.operation_id:
                if piece.recognized:
                    recognized += 1
                    progress.reached(piece.file.offset_ms + piece.file.duration_ms)
                continue  # started by an earlier try: never paid for twice
            row = await recognition.start(ctx, piece, progress)
            started += 1
            if row.raw_response:
                at_once += 1
                recognized += 1
                progress.reached(piece.file.offset_ms + piece.file.duration_ms)
    total = len(recording.speech)
    kept = total - started
    earlier = f"; {kept} started by an earlier try, not started again" if kept else ""
    # Every result in: nothing to poll for, the recording skips 'submitted'.
    every = recognized == total
    if at_once:
        return Advance(f"{provider.name} recognized {at_once} of {total} piece(s) at once{earlier}", nothing_next=every)
    return Advance(f"{provider.name}: {started} of {total} piece(s) started{earlier}", nothing_next=every)
