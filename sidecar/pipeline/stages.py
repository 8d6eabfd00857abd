"""The stage table: one declaration per stage.

Dispatch (which step runs), claim eligibility (which stages the claim may
hand out, with which lease) and both watchdogs (attempts, time in stage) are
all derived from ``declare()``; nothing about stages is listed anywhere else
in the sidecar.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum

from sidecar.settings import PipelineSettings
from sidecar.steps.base import Step


class Work(Enum):
    OWN = "own"  # our own computation: bounded by own_work_limit
    FOREIGN = "foreign"  # waiting on someone else (the provider): foreign_work_limit


@dataclass(frozen=True)
class Stage:
    name: str
    step: str | None  # None: terminal, never claimed
    work: Work | None
    lease: timedelta
    next: str | None


def declare(p: PipelineSettings) -> tuple[Stage, ...]:
    """The pipeline, in order (SPEC §3)."""
    return (
        Stage("uploaded", "normalize", Work.OWN, p.leases.uploaded, "normalized"),
        Stage("normalized", "submit", Work.OWN, p.leases.normalized, "submitted"),
        Stage("submitted", "poll", Work.FOREIGN, p.leases.submitted, "transcribed"),
        Stage("transcribed", "finalize", Work.OWN, p.leases.transcribed, "done"),
        Stage("done", None, None, timedelta(0), None),
    )


class StageTable:
    """The declared stages bound to step implementations."""

    def __init__(self, settings: PipelineSettings, steps: Mapping[str, Step]) -> None:
        self.settings = settings
        self.stages = {s.name: s for s in declare(settings)}
        missing = [s.step for s in self.stages.values() if s.step is not None and s.step not in steps]
        if missing:
            raise ValueError(f"no implementation for steps: {', '.join(missing)}")
        self._steps = dict(steps)

    def __getitem__(self, name: str) -> Stage:
        return self.stages[name]

    def leases(self) -> dict[str, timedelta]:
        """What the claim may hand out: every stage with a step, and its lease."""
        return {s.name: s.lease for s in self.stages.values() if s.step is not None}

    def step_of(self, stage: Stage) -> Step:
        assert stage.step is not None
        return self._steps[stage.step]

    def time_limit(self, stage: Stage) -> timedelta:
        return self.settings.foreign_work_limit if stage.work is Work.FOREIGN else self.settings.own_work_limit
