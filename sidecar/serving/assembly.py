"""Assembles the sidecar: settings → storage client → providers → stage table → pool.

Running it (signals, the PocketBase child, the order things stop in) is
``sidecar.serving.supervise``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from sidecar import RELEASE_UNKNOWN, __version__
from sidecar.insights.engines import make_engine
from sidecar.insights.summarize import Engine
from sidecar.pipeline.metrics import Metrics
from sidecar.pipeline.pool import WorkerPool
from sidecar.pipeline.runner import Runner
from sidecar.pipeline.stages import StageTable
from sidecar.pocketbase import process
from sidecar.pocketbase.client import PocketBaseClient
from sidecar.providers.base import Provider
from sidecar.providers.offline.diarizer import DiarizerUnavailable
from sidecar.providers.offline.models import ModelLoadError
from sidecar.redaction import register_passwords, register_secrets
from sidecar.runtime.clock import Clock, SystemClock
from sidecar.runtime.cpus import CpuGate, Cpus
from sidecar.serving.startup import StartupError
from sidecar.settings import Secret, Settings, secret_values
from sidecar.steps.base import Providers, Step, StepKit
from sidecar.storage.copies import LocalCopies
from sidecar.storage.errors import LoginRateLimited, StorageUnavailable
from sidecar.storage.protocol import Storage

log = logging.getLogger("transcriber")


def default_steps() -> dict[str, Step]:
    from sidecar.steps import finalize, insights, literary, normalize, poll, submit

    return {
        "normalize": normalize.run,
        "submit": submit.run,
        "poll": poll.run,
        "finalize": finalize.run,
        "insights": insights.run,
        "literary": literary.run,
    }


async def ready_provider(settings: Settings) -> Provider:
    """The configured provider, its model loaded when there are workers to use it.

    Done before anything else starts, so that a missing, unreadable or damaged
    model, an unwritable model cache or a missing extra is a start-up error
    naming the setting, not a failure of the first recording.
    """
    try:
        provider = make_provider(settings)
        warm = getattr(provider, "warm", None)
        if warm is not None and settings.pipeline.workers > 0:
            await warm()
    except (ModelLoadError, DiarizerUnavailable) as exc:
        raise StartupError(f"[offline] model {settings.offline.model!r}: {exc}") from None
    if settings.insights.provider == "offline":
        from sidecar.insights.offline import xllamacpp_missing

        missing = xllamacpp_missing()
        if missing:
            raise StartupError(f"[insights] provider = 'offline': {missing}")
    return provider


def make_provider(settings: Settings, name: str | None = None) -> Provider:
    name = name or settings.provider.name
    if name == "offline":
        from sidecar.providers.offline.provider import OfflineProvider

        return OfflineProvider(settings.offline, workers=settings.pipeline.workers)
    if name == "instant":
        from sidecar.providers.instant import InstantProvider

        return InstantProvider()
    if name == "speechkit":
        from sidecar.providers.speechkit.provider import SpeechKitProvider

        return SpeechKitProvider(settings.speechkit, settings.object_storage)
    if name == "openai":
        from sidecar.providers.openai.provider import OpenAIProvider

        return OpenAIProvider(settings.openai)
    raise ValueError(f"unknown provider {name!r}")


def register_settings_secrets(settings: Settings) -> None:
    """Every secret setting, as the settings model marks it: keys everywhere, passwords in messages and logs."""
    found = list(secret_values(settings))
    register_secrets(value for kind, value in found if kind is Secret.KEY)
    register_passwords(value for kind, value in found if kind is Secret.PASSWORD)


def pocketbase_storage(settings: Settings, clock: Clock) -> PocketBaseClient:
    """The storage client for the configured PocketBase, signed in as the service user."""
    account = process.service_account(settings, create=False)
    register_passwords([account.password])
    return PocketBaseClient(
        settings.pocketbase.url,
        account.email,
        account.password,
        clock=clock,
        timeout=settings.pocketbase.timeout,
        upload_timeout=settings.pocketbase.upload_timeout,
        # A checkout run without being installed knows no release of its own: nothing to compare.
        release=None if __version__ == RELEASE_UNKNOWN else __version__,
    )


@asynccontextmanager
async def pipeline(
    settings: Settings,
    *,
    clock: Clock | None = None,
    steps: dict[str, Step] | None = None,
    provider: Provider | None = None,
    metrics: Metrics | None = None,
    storage: Storage | None = None,
    insights: Engine | None = None,
) -> AsyncIterator[WorkerPool]:
    """A ready pool (not yet running) and everything it needs; closes them on exit.

    ``storage`` defaults to the configured PocketBase; tests pass the in-memory twin.
    """
    register_settings_secrets(settings)
    if storage is not None:
        clock = storage.clock
    clock = clock or SystemClock()
    storage = storage or pocketbase_storage(settings, clock)
    cache: dict[str, Provider] = {}
    current = provider or make_provider(settings)
    cache[current.name] = current

    def provider_for(name: str) -> Provider:
        if name not in cache:
            cache[name] = make_provider(settings, name)
        return cache[name]

    gate = CpuGate()
    metrics = metrics or Metrics()
    engine = insights if insights is not None else make_engine(settings.insights, gate, clock)
    chosen = steps or default_steps()
    # The literary text is made whenever its step is there (rule-based, offline); the brief only with an engine.
    follow_ups = {"literary": "rules"} if "literary" in chosen else {}
    follow_up_cpus: dict[str, Cpus] = {}
    if engine is not None:
        follow_ups["insights"] = engine.name
        if "literary" in follow_ups and settings.insights.proofread:
            # The text proofread by the model: its step runs the engine as the brief's does, one at a time.
            follow_ups["literary"] = f"rules and {engine.name}"
            follow_up_cpus["literary"] = Cpus.INSIGHTS
    runner = Runner(
        storage=storage,
        table=StageTable(settings.pipeline, chosen, follow_ups=follow_ups, follow_up_cpus=follow_up_cpus),
        settings=settings,
        clock=clock,
        kit=StepKit(Providers(current, provider_for), settings, clock, metrics.audio_sent, engine),
        metrics=metrics,
        gate=gate,
        copies=LocalCopies(max_bytes=settings.pipeline.local_copies_mb * 1024 * 1024),
    )
    try:
        warm = getattr(current, "warm", None)
        if warm is not None and settings.pipeline.workers > 0:
            # A model loads before the first claim, not during the first recording's lease
            # (once per process: a provider from ready_provider has it already).
            await warm()
        await _connect_patiently(storage, clock)
        yield WorkerPool(runner, workers=settings.pipeline.workers)
    finally:
        with anyio.CancelScope(shield=True):
            for p in cache.values():
                await p.aclose()
            await storage.aclose()
            if runner.copies is not None:
                runner.copies.close()


async def _connect_patiently(storage: Storage, clock: Clock) -> None:
    """Waits for storage to come up (a container started first, a restart); bad credentials fail at once.

    Tries with a growing pause (0.5 s doubling to 10 s) and says so once, not at every try.
    """
    delay = 0.5
    waited = False
    while True:
        try:
            await storage.connect()
            if waited:
                log.warning("PocketBase answered: starting")
            return
        except LoginRateLimited as exc:
            # PocketBase's login limiter (H2) counts our own sign-ins too: wait it out, never exit.
            pause = max(delay, exc.retry_after.total_seconds() if exc.retry_after else 0.0)
            log.warning("the service login was rate limited by PocketBase: trying again in %.0f s", pause)
            waited = True
            await clock.sleep(pause)
            delay = min(delay * 2, 10.0)
        except StorageUnavailable as exc:
            if not waited:
                log.warning("waiting for PocketBase: %s", exc)
            else:
                log.debug("still waiting for PocketBase: %s", exc)
            waited = True
            await clock.sleep(delay)
            delay = min(delay * 2, 10.0)
