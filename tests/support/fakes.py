"""Providers for pipeline tests: a stub that is never called, and a counting one that can die."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx

from sidecar.providers.base import AudioSpec, OnProgress, Polled, Started, StartRequest
from sidecar.transcript.model import Segment, Transcript


class StubProvider:
    """A provider for pipeline tests whose steps never call it; the base of the other fakes.

    It reads 16 kHz PCM WAV and parses results written as ``Transcript`` JSON.
    """

    name = "stub"
    model = "stub-1"

    @property
    def audio_spec(self) -> AudioSpec:
        return AudioSpec("wav_pcm16")

    async def find_started(self, attempt_key: str, audio_uri: str) -> str | None:
        return None

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        raise AssertionError("not used")

    async def poll(self, operation_id: str) -> Polled:
        raise AssertionError("not used")

    def parse(self, raw: bytes) -> Transcript:
        return Transcript.model_validate_json(raw)

    async def cleanup(self, operation_id: str, audio_uri: str) -> None:
        return None

    async def aclose(self) -> None:
        return None


class PaidProvider(StubProvider):
    """Counts recognitions started (in a file, across processes); can die right after the id is stored."""

    name = "paid"
    model = "paid-1"

    def __init__(self, counter: Path, *, die_after_id: bool = False) -> None:
        self.counter = counter
        self.die_after_id = die_after_id

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        with self.counter.open("a") as fh:
            fh.write(request.attempt_key + "\n")
        op = f"op-{request.attempt_key}"
        await on_progress("operation_id", op)
        if self.die_after_id:
            os.kill(os.getpid(), signal.SIGKILL)
        return Started(op)

    async def poll(self, operation_id: str) -> Polled:
        t = Transcript(text="paid once", segments=[Segment(start=0, end=1, text="paid once")])
        return Polled(ready=True, raw=t.model_dump_json().encode())


def chat_answer(
    content: str | dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
) -> httpx.Response:
    """A chat-completions answer as OpenAI's API shapes it (an error body for any other status)."""
    if status != 200:
        body = content if isinstance(content, dict) else {"error": {"message": content, "type": "error"}}
        return httpx.Response(status, json=body, headers=headers)
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        },
    )
