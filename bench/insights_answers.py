"""The small model's own answers to a few committed transcripts, kept as a test fixture.

The grounding check (``sidecar.insights.grounding``) is tested on what a small
model really answers, not on answers written by hand: this runs the insights
step's summarizer (``sidecar.insights.summarize``) with the offline engine on
six short transcripts — four voice notes said by the bench voices' clips
(``bench/data/voices/*/clips.json``) and the first minute or so of each
committed meeting (``tests/data/meetings``) — and saves every raw answer the
model gave, with the transcript it was given, to ``OUT`` (by default
``tests/data/insights/answers.json``). Whether each proposed sentence should be
kept is labelled by hand in that file afterwards (``expected`` and ``why``
beside each sentence); running this again writes the answers afresh and keeps
no labels.

    python -m bench.insights_answers [OUT]

The model: ``BENCH_PF11_MODEL`` (``1.5b``, the default, or ``0.5b``), from the
benchmark's cache (``python -m bench.llm_weights 1.5b``). CPU heavy: about a
minute per transcript on two cores.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from bench.llm_weights import MODELS, cache_dir
from sidecar.insights.offline import OfflineEngine
from sidecar.insights.summarize import Chat, Source, summarize
from sidecar.runtime.clock import SystemClock
from sidecar.runtime.cpus import CpuGate

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "insights" / "answers.json"
VOICES = ROOT / "bench" / "data" / "voices"
MEETINGS = ROOT / "tests" / "data" / "meetings"
# Clips chosen for what a brief can get wrong: names, numbers, a negation, a reason.
NOTES = {
    "ru-note-a": ("ru-high", ["00.ogg", "02.ogg", "06.ogg", "09.ogg", "12.ogg"]),
    "ru-note-b": ("ru-low", ["01.ogg", "05.ogg", "07.ogg", "08.ogg", "10.ogg"]),
    "en-note-a": ("en-awb", ["00.ogg", "02.ogg", "06.ogg", "09.ogg", "12.ogg"]),
    "en-note-b": ("en-rms", ["01.ogg", "05.ogg", "07.ogg", "08.ogg", "10.ogg"]),
}
MEETING_SEGMENTS = 14  # the first minute or two of the first sitting: a short transcript, one request
DICTIONARY = {"ru": ["Работа", "Семья", "Транспорт", "Встречи"], "en": ["Work", "Family", "Transport", "Money"]}


class Recording:
    """A chat that passes every request on and keeps each raw answer."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat
        self.name, self.who, self.model = chat.name, chat.who, chat.model
        self.context_tokens, self.parallel = chat.context_tokens, chat.parallel
        self.answers: list[str] = []

    async def complete(self, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int) -> str:
        content = await self.chat.complete(messages, schema, max_tokens)
        self.answers.append(content)
        return content

    async def count_tokens(self, text: str) -> int:
        return await self.chat.count_tokens(text)


def note_segments(lines: list[str]) -> list[dict[str, Any]]:
    """The clips said one after another, each a segment (its length from its letters, as a voice says them)."""
    t, out = 0.0, []
    for line in lines:
        out.append({"start": round(t, 2), "end": round(t + len(line) / 14, 2), "text": line})
        t += len(line) / 14 + 0.4
    return out


def inputs() -> list[dict[str, Any]]:
    out = []
    for name, (voice, clips) in NOTES.items():
        said = json.loads((VOICES / voice / "clips.json").read_text(encoding="utf-8"))
        language = voice[:2]
        segments = note_segments([said[c] for c in clips])
        out.append({"name": name, "language": language, "source": f"bench/data/voices/{voice}", "segments": segments})
    for language in ("en", "ru"):
        meeting = json.loads((MEETINGS / f"{language}.json").read_text(encoding="utf-8"))
        segments = meeting["sittings"][0]["segments"][:MEETING_SEGMENTS]
        out.append(
            {
                "name": f"{language}-meeting-start",
                "language": language,
                "source": f"tests/data/meetings/{language}.json",
                "segments": segments,
            }
        )
    return out


async def answer_all(model: Path) -> list[dict[str, Any]]:
    engine = OfflineEngine(model, context_tokens=8192, threads=0, gate=CpuGate(), clock=SystemClock())
    done = []
    async with engine.open() as chat:
        for item in inputs():
            segments = item["segments"]
            text = " ".join(s["text"] for s in segments)
            recording = Recording(chat)
            source = Source(text, segments, item["language"], DICTIONARY[item["language"]])
            await summarize(recording, source)
            done.append({**item, "answers": recording.answers})
            print(item["name"], len(recording.answers), "answers", file=sys.stderr)
    return done


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else OUT
    weights = MODELS[os.environ.get("BENCH_PF11_MODEL", "1.5b")]
    model = cache_dir() / weights.file
    captured = anyio.run(answer_all, model)
    out.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "model": weights.name,
        "file": weights.file,
        "produced_by": "python -m bench.insights_answers",
        "transcripts": captured,
    }
    out.write_text(json.dumps(body, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
