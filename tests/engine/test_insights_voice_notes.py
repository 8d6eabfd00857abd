"""Voice notes with the model the benchmark measures (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, PROVIDERS.md §F),
through the insights step as a worker runs it: every short recording with speech comes back with a brief
of at least one sentence grounded in the transcript and with topics. Slow (about a minute a note on two
cores) and only where the model is: ``python -m bench.llm_weights 1.5b`` assembles it into the benchmark's
cache (1.1 GB), or ``TRANSCRIBER_TEST_LLM`` names a GGUF file of it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from sidecar.insights.grounding import in_language
from sidecar.insights.offline import OfflineEngine
from sidecar.outcome import Verdict
from sidecar.runtime.clock import SystemClock
from sidecar.runtime.cpus import CpuGate
from sidecar.serving.assembly import default_steps, pipeline
from sidecar.settings import InsightsSettings
from sidecar.storage.model import Claimed
from tests.support.fakes import StubProvider
from tests.support.sidecar import twin, twin_settings

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(900)]

# The issue's recording: six plain sentences, about 25 seconds (the bench voices' clips say them).
RUSSIAN = [
    "Маяк на северном берегу светил всю ночь, а рыбаки вернулись к обеду.",
    "Ольга Петровна просила не закрывать отчёт до пятницы.",
    "Дети построили во дворе снежную крепость с высокими башнями.",
    "Встречаемся у фонтана в семь часов вечера, не опаздывай.",
    "Мост через реку закрыт на ремонт до весны.",
]
ENGLISH = [
    "Hi, it's Tom, just a quick note about the weekend.",
    "The car stays at the garage until Monday, so I'll take the bus.",
    "Could you pick up the kids from school on Friday?",
]
DICTIONARY = {"ru": ["Работа", "Семья", "Транспорт", "Встречи"], "en": ["Work", "Family", "Transport", "Money"]}


def model() -> Path:
    from bench.llm_weights import MODELS, cache_dir

    path = Path(os.environ.get("TRANSCRIBER_TEST_LLM") or cache_dir() / MODELS["1.5b"].file)
    if not path.is_file():
        pytest.skip(f"{path} missing: python -m bench.llm_weights 1.5b assembles it (1.1 GB)")
    return path


def _norm(text: str) -> str:
    return " " + " ".join(re.sub(r"\W+", " ", text.casefold().replace("ё", "е")).split()) + " "


async def brief_of(lines: list[str], language: str) -> tuple[Any, Any, list[str]]:
    storage = twin()
    rid = storage.add_record("ann")
    row = storage.row(rid)
    row.state, row.available_at, row.progress = "done", 0, 1.0
    t, segs = 0.0, []
    for line in lines:
        segs.append({"start": t, "end": t + len(line) / 14, "text": line})
        t += len(line) / 14 + 0.4
    storage.put_transcript(rid, " ".join(lines), segs, language=language)
    storage.dictionaries["ann"] = list(DICTIONARY[language])
    storage.owner_queue_insights(rid)
    settings = twin_settings()
    settings.insights = InsightsSettings(provider="offline", model=str(model()))
    engine = OfflineEngine(model(), context_tokens=8192, threads=0, gate=CpuGate(), clock=SystemClock())
    steps = default_steps()
    async with pipeline(settings, steps=steps, provider=StubProvider(), storage=storage, insights=engine) as pool:
        assert pool.runner.table.follow_up is not None
        got = await storage.claim(pool.runner.table.leases(), pool.runner.table.follow_up.lease)
        assert isinstance(got, Claimed) and got.claim.queue == "insights"
        assert await pool.runner.run(got) is Verdict.ADVANCED
    journal = [e.text for e in storage.journal_of(rid)]
    return storage.row(rid), storage.insights_of(rid), journal


@pytest.mark.parametrize(("lines", "language"), [(RUSSIAN, "ru"), (ENGLISH, "en")], ids=["ru", "en"])
async def test_a_short_recording_gets_a_grounded_brief_and_topics(lines: list[str], language: str) -> None:
    rec, ins, journal = await brief_of(lines, language)
    said = _norm(" ".join(lines))
    assert ins is not None and ins.kept >= 1 and ins.quotes, journal
    for q in ins.quotes:  # every sentence shown rests on words the recording says (a matcher of this test's own)
        assert len(q["quote"].split()) >= 3 and _norm(q["quote"]) in said, q
    assert rec.brief and in_language(rec.brief, language), rec.brief
    assert 1 <= len(rec.topics) <= 5, journal
    for topic in rec.topics:  # the owner's names, or a new one the recording says
        assert topic in DICTIONARY[language] or any(w[:5] in said for w in _norm(topic).split()), topic
    assert ins.no_brief == ""
