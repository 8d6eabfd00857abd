"""Test doubles for what cannot run here, and helpers to run the real pipeline in tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from sidecar.clock import Clock
from sidecar.pipeline.pool import WorkerPool
from sidecar.providers.base import AudioSpec, OnProgress, Polled, Started, StartRequest
from sidecar.service import pipeline
from sidecar.steps.base import Step
from sidecar.transcript import Transcript
from tests.harness import PocketBaseServer


class StubProvider:
    """A provider for pipeline tests whose steps never call it."""

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
        raise AssertionError("not used")

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
