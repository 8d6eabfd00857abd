"""Running the real pipeline in a test: against a real PocketBase, or against the in-memory twin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import anyio

from sidecar.pipeline.pool import WorkerPool
from sidecar.pipeline.stages import STAGES
from sidecar.runtime.clock import Clock, FakeClock
from sidecar.serving.assembly import pipeline
from sidecar.settings import Settings
from sidecar.steps.base import Step
from sidecar.storage.memory import InMemoryStorage
from testkit.pocketbase import PocketBaseServer
from tests.support.fakes import StubProvider


def settings_for(pb: PocketBaseServer, **pipeline: Any) -> Settings:
    """The server's settings with pipeline settings changed (plain numbers are seconds)."""
    s = pb.settings.model_copy(deep=True)
    _set_pipeline(s, pipeline)
    return s


def _set_pipeline(s: Settings, values: dict[str, Any]) -> None:
    for k, v in values.items():
        if isinstance(v, (int, float)) and isinstance(getattr(s.pipeline, k), timedelta):
            v = timedelta(seconds=v)  # a duration given in seconds
        setattr(s.pipeline, k, v)


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


def twin(clock: Clock | None = None) -> InMemoryStorage:
    """The in-memory twin of storage, knowing the stage table's stages, on ``clock`` (a FakeClock by default)."""
    return InMemoryStorage(
        stages=[s.name for s in STAGES],
        terminal=frozenset(s.name for s in STAGES if s.step is None),
        clock=clock or FakeClock(),
    )


def twin_settings(**pipeline_settings: Any) -> Settings:
    s = Settings()
    _set_pipeline(s, pipeline_settings)
    return s


@asynccontextmanager
async def twin_sidecar(
    storage: InMemoryStorage, steps: dict[str, Step], *, provider: Any = None, **pipeline_settings: Any
) -> AsyncIterator[WorkerPool]:
    """The real runner and pool on the twin (and its clock)."""
    settings = twin_settings(**pipeline_settings)
    async with pipeline(settings, steps=steps, provider=provider or StubProvider(), storage=storage) as pool:
        yield pool
