"""Running the service: ``transcriber worker`` and ``transcriber serve``, started and stopped in order.

Start: every check first (``sidecar.serving.startup``), then what can fail on the
host (the data directory's lock, the ports, the model, the metrics port),
then PocketBase, then the workers. A mistake stops the start before anything
runs, as one line.

Stop (SIGINT, SIGTERM, at any moment, any number of times): the pool stops
claiming, gives running steps ``shutdown_grace`` and hands their records back
without spending an attempt (P8); PocketBase is stopped only then, so those
hand-backs land. PocketBase runs in a session of its own, so a Ctrl-C in the
terminal (SIGINT to the whole foreground group) does not stop it under the
workers, and it dies with ``serve`` if ``serve`` is killed outright.
"""

from __future__ import annotations

import logging
import signal
import subprocess
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

import anyio
import httpx

from sidecar.pipeline.metrics import Metrics
from sidecar.pipeline.pool import WorkerPool
from sidecar.pocketbase import process
from sidecar.pocketbase.lock import DataDirInUse, DataDirLock
from sidecar.pocketbase.output import OWNER_HINT, relay_in_background
from sidecar.providers.base import Provider
from sidecar.serving.assembly import pipeline, ready_provider
from sidecar.serving.startup import StartupError, check_settings, ensure_port_free, resolved
from sidecar.settings import Settings
from sidecar.steps.base import Step

log = logging.getLogger("transcriber")

# The exit status of `serve` when its PocketBase exits under it (O2): a supervisor restarts both.
CHILD_DIED = 3
# How long PocketBase is given to stop after the workers, before it is killed.
CHILD_STOP_TIMEOUT = 15.0


@dataclass
class Health:
    """The worker's health check (``/health`` on the metrics port): ready once signed in and while
    PocketBase answers; not while starting or stopping."""

    pocketbase_url: str
    signed_in: bool = False
    stopping: bool = False

    def __call__(self) -> tuple[bool, str]:
        if self.stopping:
            return False, "stopping"
        if not self.signed_in:
            return False, "starting: not signed in to PocketBase yet"
        try:
            status = httpx.get(f"{self.pocketbase_url.rstrip('/')}/api/health", timeout=2).status_code
        except httpx.HTTPError as exc:
            return False, f"PocketBase does not answer ({type(exc).__name__})"
        return (True, "ready") if status == 200 else (False, f"PocketBase answered {status}")


@dataclass
class Prepared:
    """What the workers need that can fail on the host: made before anything starts."""

    provider: Provider | None
    metrics: Metrics
    health: Health
    stop_metrics: Callable[[], None] | None = None

    def close(self) -> None:
        if self.stop_metrics is not None:
            self.stop_metrics()
            self.stop_metrics = None


async def prepare_workers(
    settings: Settings, provider: Provider | None = None, *, account_made_later: bool = False
) -> Prepared:
    """Checks the settings and the service account, binds the metrics port and loads the model,
    or raises ``StartupError``. (``serve`` makes the service account itself, later.)"""
    check_settings(settings)
    if not account_made_later:
        try:
            process.service_account(settings, create=False)
        except (FileNotFoundError, ValueError, KeyError) as exc:
            raise StartupError(str(exc)) from None
    metrics = Metrics()
    prepared = Prepared(provider, metrics, Health(settings.pocketbase.url))
    m = settings.metrics
    if m.port:
        ensure_port_free(f"{m.host}:{m.port}", "[metrics] port")
        try:
            prepared.stop_metrics = metrics.serve(m.host, m.port, health=prepared.health)
        except OSError as exc:
            raise StartupError(f"[metrics] port {m.host}:{m.port} cannot be used: {exc.strerror}") from None
    try:
        if prepared.provider is None:
            prepared.provider = await ready_provider(settings)
    except BaseException:
        prepared.close()
        raise
    return prepared


async def watch_signals(stop: anyio.Event) -> None:
    """Sets ``stop`` at the first SIGINT or SIGTERM, and keeps the signals caught until the process ends:
    a second Ctrl-C while the workers hand their records back must not kill it halfway."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for sig in signals:
            name = signal.Signals(sig).name
            if stop.is_set():
                log.info("received %s: already stopping (handing running records back)", name)
            else:
                log.info("received %s: stopping", name)
                stop.set()


async def run_workers(
    settings: Settings,
    *,
    ready: Callable[[], None] | None = None,
    steps: dict[str, Step] | None = None,
    provider: Provider | None = None,
    stop: anyio.Event | None = None,
    prepared: Prepared | None = None,
) -> int:
    """``transcriber worker``: the pool until SIGINT/SIGTERM (or ``stop``, when the caller watches signals).

    Signals count from the first moment: a stop while the sidecar still waits for
    PocketBase ends cleanly (exit 0) instead of killing the process mid-login.
    """
    return await _watching_signals(lambda stop: _run_pool(settings, ready, steps, provider, stop, prepared), stop)


async def _watching_signals(body: Callable[[anyio.Event], Awaitable[int]], stop: anyio.Event | None) -> int:
    """Runs ``body(stop)`` with SIGINT/SIGTERM setting ``stop`` (unless the caller passes its own)."""
    try:
        async with anyio.create_task_group() as side:
            if stop is None:
                stop = anyio.Event()
                side.start_soon(watch_signals, stop)
            code = await body(stop)
            side.cancel_scope.cancel()
        return code
    except BaseExceptionGroup as group:
        # The signal watcher runs beside the start-up, so a start-up failure (a refused
        # login, a busy port) arrives wrapped in a group: raise it as itself for the CLI.
        error: BaseException = group
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        raise error from None


async def _run_pool(
    settings: Settings,
    ready: Callable[[], None] | None,
    steps: dict[str, Step] | None,
    provider: Provider | None,
    stop: anyio.Event,
    prepared: Prepared | None,
) -> int:
    if prepared is None:
        prepared = await prepare_workers(settings, provider)
    async with AsyncExitStack() as stack:
        stack.callback(prepared.close)
        side = await stack.enter_async_context(anyio.create_task_group())
        starting = anyio.CancelScope()
        side.start_soon(_cancel_on, stop, starting)
        pool: WorkerPool | None = None
        with starting:
            pool = await stack.enter_async_context(
                pipeline(settings, steps=steps, provider=prepared.provider, metrics=prepared.metrics)
            )
        if pool is None:
            log.info("stopped before the pool started")
            side.cancel_scope.cancel()
            return 0
        if settings.metrics.port:
            side.start_soon(
                prepared.metrics.keep_fresh, pool.runner.storage, pool.runner.table.stages, pool.runner.clock
            )
        async with anyio.create_task_group() as workers:
            await workers.start(pool.run, stop)
            prepared.health.signed_in = True
            if ready:
                ready()
            await stop.wait()
            prepared.health.stopping = True
        # The pool has drained (two-phase stop); the side tasks end with it.
        side.cancel_scope.cancel()
    return 0


async def _cancel_on(stop: anyio.Event, starting: anyio.CancelScope) -> None:
    # Before the pool runs (still waiting for PocketBase) there is nothing to drain.
    await stop.wait()
    starting.cancel()


async def serve_all(settings: Settings) -> int:
    """``transcriber serve``: PocketBase and the pool; the pool stops first, PocketBase after it."""
    return await _watching_signals(lambda stop: _serve(settings, stop), None)


async def _serve(settings: Settings, stop: anyio.Event) -> int:
    pb = settings.pocketbase
    pb.data_dir = resolved(pb.data_dir)
    log.info("data directory: %s", pb.data_dir)
    check_settings(settings)
    lock = DataDirLock(pb.data_dir)
    try:
        lock.acquire("transcriber serve", pb.http)
    except DataDirInUse as exc:
        raise StartupError(f"{exc}: stop it first, or give this one another --data-dir") from None
    try:
        ensure_port_free(pb.http, "[pocketbase] http")
        prepared = await prepare_workers(settings, account_made_later=True)
        try:
            return await _with_pocketbase(settings, stop, lock, prepared)
        finally:
            prepared.close()
    finally:
        lock.release()


async def _with_pocketbase(settings: Settings, stop: anyio.Event, lock: DataDirLock, prepared: Prepared) -> int:
    pb = settings.pocketbase
    if stop.is_set():
        return 0
    try:
        await anyio.to_thread.run_sync(process.prepare, settings)
    except RuntimeError as exc:
        raise StartupError(str(exc)) from None
    if not process.has_owner(settings):
        log.info("no owner account yet: open the installer link PocketBase prints below, or run `%s`", OWNER_HINT)
    # Started from this (the main) thread: the child is signalled when the starting thread ends.
    # Its lines come through this process's logging: one format on the stream (text or JSON).
    proc = process.start(
        settings, supervised=True, pass_fds=(lock.fd,), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    relaying = relay_in_background(proc.stdout)
    try:
        with anyio.CancelScope() as waiting:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_on, stop, waiting)
                try:
                    await anyio.to_thread.run_sync(process.wait_healthy, pb.url, proc, abandon_on_cancel=True)
                except (RuntimeError, TimeoutError) as exc:
                    raise StartupError(f"{exc} (its output is above)") from None
                tg.cancel_scope.cancel()
        if stop.is_set():
            return 0
        log.info("PocketBase ready at %s (admin panel: %s/_/)", pb.url, pb.url)
        died: list[int] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_child, proc, stop, died)
            code = await run_workers(
                settings,
                ready=lambda: log.info("workers running: %d", settings.pipeline.workers),
                stop=stop,
                prepared=prepared,
            )
            tg.cancel_scope.cancel()
        # O2: with PocketBase gone, this process is of no use: a non-zero exit lets a supervisor restart both.
        return CHILD_DIED if died else code
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_stop_child, proc)
            if relaying is not None:  # PocketBase's last lines (its stop) are passed on before serve exits
                await anyio.to_thread.run_sync(relaying.join, 5)


async def _watch_child(proc: subprocess.Popen[bytes], stop: anyio.Event, died: list[int]) -> None:
    # The waiting thread is abandoned when serve stops first; it ends with the child.
    await anyio.to_thread.run_sync(proc.wait, abandon_on_cancel=True)
    died.append(proc.returncode)
    log.error("PocketBase exited with code %d: stopping the workers", proc.returncode)
    stop.set()


def _stop_child(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        log.info("stopping PocketBase")
        proc.terminate()
        try:
            proc.wait(CHILD_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
