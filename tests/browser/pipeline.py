"""The real pipeline in a background thread, so a synchronous browser test can run beside it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio
from anyio.from_thread import start_blocking_portal

from sidecar.pipeline.pool import WorkerPool
from sidecar.providers.base import Provider
from sidecar.serving.assembly import default_steps
from testkit.pocketbase import PocketBaseServer
from tests.support.sidecar import running_sidecar


@contextmanager
def pipeline_in_background(pb: PocketBaseServer, provider: Provider, *, workers: int = 2) -> Iterator[WorkerPool]:
    """The real steps and worker pool, running on their own event loop until the block ends."""
    with (
        start_blocking_portal(backend="asyncio") as portal,
        portal.wrap_async_context_manager(
            running_sidecar(pb, default_steps(), provider=provider, workers=workers)
        ) as pool,
    ):
        stop = portal.call(anyio.Event)
        running, _ = portal.start_task(pool.run, stop)
        try:
            yield pool
        finally:
            portal.call(stop.set)
            running.result(timeout=60)
