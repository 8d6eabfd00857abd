"""The worker pool: N identical workers in one task group (P12).

Each worker claims, runs the record's step through the runner, and claims
again. A worker that finds no work waits quietly (P14) until storage reports
a change (realtime), the next record becomes available, or ``idle_poll``
passes; every wait is on the injected clock.

Shutdown is two-phase: stop claiming; give running steps ``shutdown_grace``
to finish; then cancel them (the runner releases their claims, P8).
"""

from __future__ import annotations

import logging

import anyio
from anyio.abc import TaskStatus

from sidecar.clock import Clock
from sidecar.pipeline.runner import Runner
from sidecar.storage.errors import StorageError, StorageUnavailable
from sidecar.storage.model import Claimed, NoWork

log = logging.getLogger("transcriber.pool")


class Waker:
    """A broadcast "there may be work" signal for idle workers.

    A worker takes a ``ticket()`` *before* it looks for work and then waits on
    that ticket: a wake that lands while its claim is in flight (an upload
    committed just after the claim's query ran) has already set the ticket, so
    the worker looks again at once instead of sleeping through the news.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._event = anyio.Event()

    def ticket(self) -> anyio.Event:
        return self._event

    def wake(self) -> None:
        self._event.set()
        self._event = anyio.Event()

    async def wait(self, ticket: anyio.Event, at_most: float) -> None:
        await self._clock.wait(ticket, at_most)


class WorkerPool:
    def __init__(self, runner: Runner, *, workers: int, realtime_wake: bool = True) -> None:
        self.runner = runner
        self.workers = workers
        self.realtime_wake = realtime_wake
        self.waker = Waker(runner.clock)
        self._stopping = False
        self._busy: set[anyio.CancelScope] = set()
        self._drained = anyio.Event()

    @property
    def busy(self) -> int:
        return len(self._busy)

    async def run(self, stop: anyio.Event, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        p = self.runner.settings.pipeline
        clock = self.runner.clock
        async with anyio.create_task_group() as tg:
            side = anyio.CancelScope()

            async def side_tasks() -> None:
                with side:
                    if self.realtime_wake and self.workers > 0:
                        await self.runner.storage.watch(self.waker.wake)
                    else:
                        await anyio.sleep_forever()

            tg.start_soon(side_tasks)
            for i in range(self.workers):
                tg.start_soon(self._worker, i)
            task_status.started()
            log.info("pool running with %d worker(s)", self.workers)
            await stop.wait()

            # Phase 1: stop claiming; idle workers leave at once.
            self._stopping = True
            self.waker.wake()
            side.cancel()
            # Phase 2: running steps get a grace period, then are cancelled.
            if self._busy:
                await clock.wait(self._drained, p.shutdown_grace.total_seconds())
            for scope in list(self._busy):
                scope.cancel()
        log.info("pool stopped")

    async def _worker(self, n: int) -> None:
        p = self.runner.settings.pipeline
        clock = self.runner.clock
        while not self._stopping:
            woken = self.waker.ticket()
            try:
                got = await self.runner.storage.claim(self.runner.table.leases())
            except StorageUnavailable as exc:
                log.warning("worker %d: claim failed, storage unavailable: %s", n, exc)
                await self.waker.wait(woken, p.idle_poll.total_seconds())
                continue
            except StorageError as exc:
                log.error("worker %d: claim refused: %s", n, exc)
                await self.waker.wait(woken, p.idle_poll.total_seconds())
                continue
            if isinstance(got, NoWork):
                self.runner.metrics.claims.labels(result="empty").inc()
                wait = p.idle_poll.total_seconds()
                if got.next_at_ms:
                    wait = min(wait, max((got.next_at_ms - clock.now_ms()) / 1000, 0.01))
                await self.waker.wait(woken, wait)
                continue
            self.runner.metrics.claims.labels(result="work").inc()
            await self._run(got)

    async def _run(self, claimed: Claimed) -> None:
        scope = anyio.CancelScope()
        self._busy.add(scope)
        try:
            with scope:
                await self.runner.run(claimed)
        except Exception:
            log.exception("worker: unexpected error on record %s", claimed.claim.id)
        finally:
            self._busy.discard(scope)
            if self._stopping and not self._busy:
                self._drained.set()
