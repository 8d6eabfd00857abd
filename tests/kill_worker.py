"""A worker process whose normalize step kills its own process (SIGKILL), for the crash tests.

Run as ``python -m tests.kill_worker``; settings come from the environment.
"""

from __future__ import annotations

import os
import signal

import anyio

from sidecar.outcome import Advance, Outcome
from sidecar.service import pipeline
from sidecar.settings import Settings
from sidecar.steps.base import StepContext
from tests.fakes import StubProvider


async def die(ctx: StepContext) -> Outcome:
    os.kill(os.getpid(), signal.SIGKILL)
    return Advance()


async def advance(ctx: StepContext) -> Outcome:
    return Advance()


async def main() -> None:
    steps = {"normalize": die, "submit": advance, "poll": advance, "finalize": advance}
    async with pipeline(Settings(), steps=steps, provider=StubProvider()) as pool:
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            await tg.start(pool.run, stop)
            await anyio.sleep(5)  # nothing claimable: leave
            stop.set()


if __name__ == "__main__":
    anyio.run(main)
