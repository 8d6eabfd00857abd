"""Test doubles for what cannot run here, and helpers to run the real pipeline in tests."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio

from sidecar.clock import Clock
from sidecar.pipeline.pool import WorkerPool
from sidecar.providers.base import AudioSpec, OnProgress, Polled, Started, StartRequest
from sidecar.service import pipeline
from sidecar.steps.base import Step
from sidecar.transcript import Segment, Transcript
from tests.harness import PocketBaseServer


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


def settings_for(pb: PocketBaseServer, **pipeline: Any) -> Any:
    s = pb.settings.model_copy(deep=True)
    for k, v in pipeline.items():
        if isinstance(v, (int, float)) and k not in ("workers", "max_attempts"):
            v = timedelta(seconds=v)
        setattr(s.pipeline, k, v)
    return s


@asynccontextmanager
async def running_sidecar(
    pb: PocketBaseServer,
    steps: dict[str, Step],
    *,
    clock: Clock | None = None,
    provider: Any = None,
    **pipeline_settings: Any,
) -> AsyncIterator[WorkerPool]:
    settings = settings_for(pb, **pipeline_settings)
    async with pipeline(settings, clock=clock, steps=steps, provider=provider or StubProvider()) as pool:
        yield pool


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


@asynccontextmanager
async def pool_running(pool: WorkerPool) -> AsyncIterator[None]:
    """The pool runs inside the block and is stopped (two-phase) when it ends."""
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        await tg.start(pool.run, stop)
        try:
            yield
        finally:
            stop.set()
