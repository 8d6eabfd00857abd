"""A worker process for kill/restart/stop tests: the real steps and a slow, counting provider.

Settings come from the environment (TRANSCRIBER_*). Test knobs:
- ``TEST_STARTS``: file that gets one line per recognition started (attempt key);
- ``TEST_DELAY_<STEP>``: seconds each run of that step waits first (widens kill windows);
- ``TEST_READY_AFTER``: seconds after its start an operation is ready (polls before it postpone).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio

from sidecar.outcome import StepResult
from sidecar.providers.base import OnProgress, Polled, Started, StartRequest
from sidecar.runtime.logs import configure
from sidecar.serving.assembly import default_steps
from sidecar.serving.supervise import run_workers
from sidecar.settings import Settings
from sidecar.steps.base import Step, StepContext
from sidecar.transcript.model import Segment, Transcript
from tests.support.fakes import StubProvider


class SlowProvider(StubProvider):
    name = "slow"
    model = "slow-1"

    def __init__(self) -> None:
        self.starts = Path(os.environ["TEST_STARTS"])
        self.ready_after = float(os.environ.get("TEST_READY_AFTER", "0.5"))

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        with self.starts.open("a") as fh:
            fh.write(request.attempt_key + "\n")
        await anyio.sleep(0.05)
        op = f"op-{request.attempt_key}-{int(time.time() * 1000)}"
        await on_progress("operation_id", op)
        return Started(op)

    async def poll(self, operation_id: str) -> Polled:
        started_ms = int(operation_id.rsplit("-", 1)[1])
        if time.time() * 1000 - started_ms < self.ready_after * 1000:
            return Polled(ready=False)
        t = Transcript(text=f"text of {operation_id}", segments=[Segment(start=0, end=1, text="text")])
        return Polled(ready=True, raw=t.model_dump_json().encode())


def delayed(name: str, step: Step) -> Step:
    delay = float(os.environ.get(f"TEST_DELAY_{name.upper()}", "0"))

    async def run(ctx: StepContext) -> StepResult:
        await anyio.sleep(delay)
        return await step(ctx)

    return run


async def amain() -> int:
    steps = {name: delayed(name, step) for name, step in default_steps().items()}
    return await run_workers(Settings(), steps=steps, provider=SlowProvider())


def main() -> None:
    configure()
    anyio.run(amain)


if __name__ == "__main__":
    main()
