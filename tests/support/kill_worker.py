"""A worker process for the crash tests; settings come from the environment.

``TEST_WORKER_MODE``:
- ``die-in-normalize``: the normalize step kills its own process (SIGKILL);
- ``paid-die``: real steps; the provider dies right after its operation id is stored;
- ``paid``: real steps; the provider counts every recognition it starts.
``TEST_PAID_COUNTER`` names the counter file; the worker leaves after ``TEST_WORKER_SECONDS``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio

from sidecar.outcome import Advance, StepResult
from sidecar.providers.base import Provider
from sidecar.serving.assembly import default_steps, pipeline
from sidecar.settings import Settings
from sidecar.steps.base import Step, StepContext
from tests.support.fakes import PaidProvider, StubProvider


async def die(ctx: StepContext) -> StepResult:
    os.kill(os.getpid(), signal.SIGKILL)
    return Advance()


async def main() -> None:
    mode = os.environ.get("TEST_WORKER_MODE", "die-in-normalize")
    steps: dict[str, Step] = default_steps()
    provider: Provider
    if mode == "die-in-normalize":
        steps["normalize"] = die
        provider = StubProvider()
    else:
        provider = PaidProvider(Path(os.environ["TEST_PAID_COUNTER"]), die_after_id=mode == "paid-die")
    async with pipeline(Settings(), steps=steps, provider=provider) as pool:
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            await tg.start(pool.run, stop)
            await anyio.sleep(float(os.environ.get("TEST_WORKER_SECONDS", "5")))
            stop.set()


if __name__ == "__main__":
    anyio.run(main)
