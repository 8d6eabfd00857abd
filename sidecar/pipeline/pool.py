"""The worker pool: N identical workers in one task group (P12).

Each worker claims, runs the record's step through the runner, and claims
again. A worker that finds no work waits quietly (P14) until storage reports
a change (realtime), the next record becomes available, or ``idle_poll``
passes; every wait is on the injected clock.

Shutdown is two-phase: stop claiming; give running steps ``shutdown_grace``
(less the few seconds a hand-back takes) to finish; then cancel them (the
runner releases their claims, P8), so every record is back within the grace.
"""

from __future__ import annotations

import logging

import anyio
from anyio.abc import TaskStatus

from sidecar.outcome import HaltCode
from sidecar.pipeline.runner import Runner
from sidecar.pipeline.sweep import sweep_normalized, sweep_once
from sidecar.redaction import redact, short
from sidecar.runtime.clock import Clock
from sidecar.runtime.threads import STOP_WAIT
from sidecar.storage.errors import FencedOut, StorageError, StorageUnavailable, UnreadableClaim
from sidecar.storage.model import Claimed, NoWork

log = logging.getLogger("transcriber.pool")

# What a cancelled step takes to stop its work (threads.STOP_WAIT at most) and hand its record back.
HAND_BACK = STOP_WAIT + 1.0


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


class Outage:
    """Storage going away and coming back, logged once each however many workers notice (O2).

    Each claim reads ``turn`` before it is sent and reports its outcome with it. Only an answer to a
    request sent since the last change may change the state again: while PocketBase stops, a request
    already in flight can still be answered after another worker saw the connection drop, and that late
    success says nothing about the outage (nor does a late failure about a recovery since).
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._since: int | None = None
        self._turn = 0

    @property
    def turn(self) -> int:
        return self._turn

    def failed(self, error: Exception, sent_at_turn: int) -> None:
        if self._since is None and sent_at_turn == self._turn:
            self._since = self._clock.now_ms()
            self._turn += 1
            log.warning("PocketBase is unavailable (%s); the workers keep trying", error)
        else:
            log.debug("PocketBase still unavailable: %s", error)

    def recovered(self, sent_at_turn: int) -> None:
        if self._since is not None and sent_at_turn == self._turn:
            log.warning("PocketBase is back after %.0f s", (self._clock.now_ms() - self._since) / 1000)
            self._since = None
            self._turn += 1


# Waits between claims while storage is unavailable: from the idle poll, doubling, up to this.
OUTAGE_MAX_WAIT = 30.0


class WorkerPool:
    def __init__(self, runner: Runner, *, workers: int, realtime_wake: bool = True) -> None:
        self.runner = runner
        self.workers = workers
        self.realtime_wake = realtime_wake
        self.waker = Waker(runner.clock)
        self.outage = Outage(runner.clock)
        self._stopping = False
        self._busy: set[anyio.CancelScope] = set()
        self._drained = anyio.Event()
        self._refusal = ""  # the last claim refusal logged: a repeat goes to debug

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
                    async with anyio.create_task_group() as sides:
                        if self.realtime_wake and self.workers > 0:
                            sides.start_soon(self.runner.storage.watch, self.waker.wake)
                        if self.workers > 0:
                            sides.start_soon(self._sweep_copies)
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
            # Phase 2: running steps get the grace, less what cancelling them and handing their
            # records back takes, so that every record is back within the grace.
            if self._busy:
                grace = p.shutdown_grace.total_seconds()
                await clock.wait(self._drained, grace - min(HAND_BACK, grace / 2))
            for scope in list(self._busy):
                scope.cancel()
        log.info("pool stopped")

    async def _sweep_copies(self) -> None:
        """Copies nobody will read again, removed now and then: the provider's (O6), then our normalized ones."""
        p, runner = self.runner.settings.pipeline, self.runner
        while True:
            try:
                removed, failed = await sweep_once(
                    runner.storage, runner.kit.providers.remove_copies, runner.clock, p.keep_halted_copies
                )
                runner.metrics.copies.labels(result="removed").inc(removed)
                runner.metrics.copies.labels(result="failed").inc(failed)
            except Exception as exc:  # the sweep must never take the workers down
                log.warning("sweep of provider-side copies failed: %s", redact(str(exc)))
            try:
                files, size = await sweep_normalized(runner.storage, runner.clock, p.keep_normalized)
                runner.metrics.normalized_removed.inc(files)
                runner.metrics.normalized_removed_bytes.inc(size)
            except Exception as exc:  # nor this one
                log.warning("sweep of normalized copies failed: %s", redact(str(exc)))
            await runner.clock.sleep(p.sweep_every.total_seconds())

    async def _worker(self, n: int) -> None:
        p = self.runner.settings.pipeline
        clock = self.runner.clock
        backoff = p.idle_poll.total_seconds()
        while not self._stopping:
            woken = self.waker.ticket()
            turn = self.outage.turn
            try:
                leases, follow_ups = self.runner.table.leases(), self.runner.follow_up_leases()
                # The follow-up queues only when this process may take their work (a recording's step runs: not now).
                got = await (
                    self.runner.storage.claim(leases, follow_ups=follow_ups)
                    if follow_ups
                    else self.runner.storage.claim(leases)
                )
            except StorageUnavailable as exc:
                self.outage.failed(exc, turn)
                await clock.sleep(backoff)
                backoff = min(backoff * 2, OUTAGE_MAX_WAIT)
                continue
            except UnreadableClaim as exc:
                # A row that reached us unreadable all the same: set aside under its claim; claim again.
                self.outage.recovered(turn)
                self._set_aside_by_claim(exc.set_aside)
                await self._set_aside(exc)
                continue
            except StorageError as exc:
                self.runner.metrics.claims.labels(result="refused").inc()
                self._refused(n, exc)
                await self.waker.wait(woken, p.idle_poll.total_seconds())
                continue
            self.outage.recovered(turn)
            self._refusal = ""
            backoff = p.idle_poll.total_seconds()
            self._set_aside_by_claim(got.set_aside)
            if isinstance(got, NoWork):
                self.runner.metrics.claims.labels(result="empty").inc()
                wait = p.idle_poll.total_seconds()
                if got.next_at_ms:
                    wait = min(wait, max((got.next_at_ms - clock.now_ms()) / 1000, 0.01))
                await self.waker.wait(woken, wait)
                continue
            self.runner.metrics.claims.labels(result="work").inc()
            if self._stopping:
                # O3: the stop landed while this claim was in flight: hand it back unrun.
                await self.runner.release(got)
                break
            await self._run(got)

    def _set_aside_by_claim(self, ids: tuple[str, ...]) -> None:
        for record_id in ids:
            # Once per row: the claim halted it, so no claim meets it again.
            self.runner.metrics.set_aside.inc()
            log.error(
                "row %s set aside (halted %s): the claim could not read its fields; its journal has the error",
                record_id,
                HaltCode.UNCLAIMABLE.value,
            )

    async def _set_aside(self, unreadable: UnreadableClaim) -> None:
        """Halts a claimed row this process cannot read (``unclaimable``), through the fenced settle.

        Counted and logged once, as a row the claim set aside: halted, no claim meets it again.
        Should the write not land (the claim lost, storage down), the row is claimed again later
        and set aside then.
        """
        claim = unreadable.claim
        reason = short(f"the sidecar could not read this row ({unreadable.reason}); fix the field, then clear the halt")
        try:
            await self.runner.storage.set_aside(claim, reason)
        except (StorageError, StorageUnavailable, FencedOut) as exc:
            log.warning("%s row %s could not be set aside (%s); it will be claimed again", claim.queue, claim.id, exc)
            return
        self.runner.metrics.set_aside.inc()
        log.error(
            "%s row %s set aside (halted %s): this sidecar could not read its fields: %s",
            claim.queue,
            claim.id,
            HaltCode.UNCLAIMABLE.value,
            unreadable.reason,
        )

    def _refused(self, n: int, error: StorageError) -> None:
        """A refused claim is logged once while it repeats (every idle poll would flood the log)."""
        message = str(error)
        if message != self._refusal:
            log.error("worker %d: claim refused: %s", n, message)
            self._refusal = message
        else:
            log.debug("worker %d: claim refused again: %s", n, message)

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
