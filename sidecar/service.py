"""Assembles the sidecar: settings → storage client → providers → stage table → pool.

``run_workers`` is ``transcriber worker``; ``serve_all`` is ``transcriber
serve`` (PocketBase as a child process, the pool beside it).
"""

from __future__ import annotations

import logging
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import anyio

from sidecar.clock import Clock, SystemClock
from sidecar.metrics import Metrics
from sidecar.pipeline.pool import WorkerPool
from sidecar.pipeline.runner import Runner
from sidecar.pipeline.stages import StageTable
from sidecar.pocketbase import process
from sidecar.pocketbase.client import PocketBaseClient
from sidecar.providers.base import Provider
from sidecar.redaction import register_secrets
from sidecar.settings import Settings
from sidecar.steps.base import Step
from sidecar.storage.errors import StorageUnavailable
from sidecar.storage.protocol import Storage

log = logging.getLogger("transcriber")


def default_steps() -> dict[str, Step]:
    from sidecar.steps import finalize, normalize, poll, submit

    return {"normalize": normalize.run, "submit": submit.run, "poll": poll.run, "finalize": finalize.run}


def make_provider(settings: Settings, name: str | None = None) -> Provider:
    name = name or settings.provider.name
    if name == "offline":
        from sidecar.providers.offline import OfflineProvider

        return OfflineProvider(settings.offline, workers=settings.pipeline.workers)
    if name == "instant":
        from sidecar.providers.instant import InstantProvider

        return InstantProvider()
    if name == "speechkit":
        from sidecar.providers.speechkit import SpeechKitProvider

        return SpeechKitProvider(settings.speechkit, settings.object_storage)
    if name == "openai":
        from sidecar.providers.openai import OpenAIProvider

        return OpenAIProvider(settings.openai)
    raise ValueError(f"unknown provider {name!r}")


def register_settings_secrets(settings: Settings) -> None:
    pb, sk, os_, oa = settings.pocketbase, settings.speechkit, settings.object_storage, settings.openai
    register_secrets(
        s.get_secret_value() if s else None
        for s in (
            pb.service_password,
            pb.superuser_password,
            sk.api_key,
            sk.iam_token,
            os_.secret_access_key,
            oa.api_key,
        )
    )
    register_secrets([os_.access_key_id])


def pocketbase_storage(settings: Settings, clock: Clock) -> PocketBaseClient:
    """The storage client for the configured PocketBase, signed in as the service user."""
    account = process.service_account(settings, create=False)
    register_secrets([account.password])
    return PocketBaseClient(
        settings.pocketbase.url,
        account.email,
        account.password,
        clock=clock,
        timeout=settings.pocketbase.timeout,
        upload_timeout=settings.pocketbase.upload_timeout,
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

    runner = Runner(
        storage=storage,
        table=StageTable(settings.pipeline, steps or default_steps()),
        settings=settings,
        clock=clock,
        provider=current,
        provider_for=provider_for,
        metrics=metrics or Metrics(),
    )
    try:
        await _connect_patiently(storage, clock)
        warm = getattr(current, "warm", None)
        if warm is not None and settings.pipeline.workers > 0:
            # A model loads before the first claim, not during the first recording's lease.
            await warm()
        yield WorkerPool(runner, workers=settings.pipeline.workers)
    finally:
        with anyio.CancelScope(shield=True):
            for p in cache.values():
                await p.aclose()
            await storage.aclose()


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
        except StorageUnavailable as exc:
            if not waited:
                log.warning("waiting for PocketBase: %s", exc)
            else:
                log.debug("still waiting for PocketBase: %s", exc)
            waited = True
            await clock.sleep(delay)
            delay = min(delay * 2, 10.0)


async def _until_signal(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for sig in signals:
            log.info("received %s: stopping", signal.Signals(sig).name)
            stop.set()
            return


async def _cancel_on(stop: anyio.Event, starting: anyio.CancelScope) -> None:
    # Before the pool runs (still waiting for PocketBase) there is nothing to drain.
    await stop.wait()
    starting.cancel()


async def run_workers(
    settings: Settings,
    *,
    ready: Callable[[], None] | None = None,
    steps: dict[str, Step] | None = None,
    provider: Provider | None = None,
    stop: anyio.Event | None = None,
) -> int:
    """``transcriber worker``: the pool until SIGINT/SIGTERM (or ``stop``).

    Signals count from the first moment: a stop while the sidecar still waits for
    PocketBase ends cleanly (exit 0) instead of killing the process mid-login.
    """
    try:
        return await _run_workers(settings, ready, steps, provider, stop or anyio.Event())
    except BaseExceptionGroup as group:
        # The signal watcher runs beside the start-up, so a start-up failure (no credentials,
        # refused login) arrives wrapped in a group: raise it as itself for the CLI to report.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def _run_workers(
    settings: Settings,
    ready: Callable[[], None] | None,
    steps: dict[str, Step] | None,
    provider: Provider | None,
    stop: anyio.Event,
) -> int:
    starting = anyio.CancelScope()
    async with AsyncExitStack() as stack:
        side = await stack.enter_async_context(anyio.create_task_group())
        side.start_soon(_until_signal, stop)
        side.start_soon(_cancel_on, stop, starting)
        pool: WorkerPool | None = None
        with starting:
            pool = await stack.enter_async_context(pipeline(settings, steps=steps, provider=provider))
        if pool is None:
            log.info("stopped before the pool started")
            side.cancel_scope.cancel()
            return 0
        if settings.metrics.port:
            metrics = pool.runner.metrics
            metrics.serve(settings.metrics.host, settings.metrics.port)
            side.start_soon(
                metrics.keep_records_fresh, pool.runner.storage, pool.runner.table.stages, pool.runner.clock
            )
        async with anyio.create_task_group() as workers:
            await workers.start(pool.run, stop)
            if ready:
                ready()
        # The pool has drained (two-phase stop); the side tasks end with it.
        side.cancel_scope.cancel()
    return 0


async def serve_all(settings: Settings) -> int:
    """``transcriber serve``: PocketBase and the pool, stopped together."""
    await anyio.to_thread.run_sync(process.prepare, settings)
    pb = settings.pocketbase
    if not (pb.superuser_email and pb.superuser_password):
        log.info("no superuser configured: open the installer link PocketBase prints below to create one")
    proc = process.start(settings)
    try:
        await anyio.to_thread.run_sync(process.wait_healthy, pb.url, proc)
        log.info("PocketBase ready at %s (admin panel: %s/_/)", pb.url, pb.url)
        stop = anyio.Event()
        died: list[int] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_child, proc, stop, died)
            code = await run_workers(
                settings, ready=lambda: log.info("workers running: %d", settings.pipeline.workers), stop=stop
            )
            tg.cancel_scope.cancel()
        # O2: with PocketBase gone, this process is of no use: a non-zero exit lets a supervisor restart both.
        return CHILD_DIED if died else code
    finally:
        _stop_child(proc)


# The exit status of `serve` when its PocketBase exits under it.
CHILD_DIED = 3


async def _watch_child(proc: subprocess.Popen[bytes], stop: anyio.Event, died: list[int]) -> None:
    # The waiting thread is abandoned when serve stops first; it ends with the child.
    await anyio.to_thread.run_sync(proc.wait, abandon_on_cancel=True)
    died.append(proc.returncode)
    log.error("PocketBase exited with code %d: stopping the workers", proc.returncode)
    stop.set()


def _stop_child(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
