"""The stage table: one declaration per stage.

Dispatch (which step runs), claim eligibility (which stages the claim may
hand out, with which lease) and both watchdogs (attempts, time in stage) are
all derived from ``STAGES``; nothing about stages is listed anywhere else in
the sidecar. The schema's ``state`` select mirrors the names (a test holds
them together).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import Enum

from sidecar.settings import PipelineSettings
from sidecar.steps.base import Step
from sidecar.storage.model import INSIGHTS as INSIGHTS_QUEUE
from sidecar.storage.model import Claimed


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
    # Where a step that did the next stage's work too goes instead (``Advance.nothing_next``).
    skip_to: str | None = None


# Short leases, kept alive by the running step (the runner extends a lease a
# third of the way through, as long as the step runs): a worker that dies
# leaves its record to be claimed again within about two leases (O1).
LEASE = timedelta(minutes=2)

# The pipeline, in order (SPEC §3), with each stage's default lease.
STAGES: tuple[Stage, ...] = (
    Stage("uploaded", "normalize", Work.OWN, LEASE, "normalized"),
    # A provider that answers at once (the offline engine, an OpenAI-compatible server)
    # leaves nothing to poll: its recording goes straight to ``transcribed``.
    Stage("normalized", "submit", Work.OWN, LEASE, "submitted", skip_to="transcribed"),
    Stage("submitted", "poll", Work.FOREIGN, LEASE, "transcribed"),
    Stage("transcribed", "finalize", Work.OWN, LEASE, "done"),
    Stage("done", None, None, timedelta(0), None),
)

# The optional step after the transcript (its own queue: an `insights` row per finished recording,
# claimed only when no recording waits). Own work, with the same watchdogs.
INSIGHTS = Stage("insights", "insights", Work.OWN, LEASE, "done")


def declare(p: PipelineSettings) -> tuple[Stage, ...]:
    """The stage table with the configured leases; a lease for a stage without a step is refused."""
    claimable = {s.name for s in STAGES if s.step is not None} | {INSIGHTS.name}
    unknown = sorted(set(p.leases) - claimable)
    if unknown:
        raise ValueError(
            f"[pipeline.leases] names no claimable stage: {', '.join(unknown)} (stages: {', '.join(sorted(claimable))})"
        )
    return tuple(replace(s, lease=p.leases.get(s.name, s.lease)) for s in STAGES)


class StageTable:
    """The declared stages bound to step implementations."""

    def __init__(self, settings: PipelineSettings, steps: Mapping[str, Step]) -> None:
        self.settings = settings
        self.stages = {s.name: s for s in declare(settings)}
        self.insights = replace(INSIGHTS, lease=settings.leases.get(INSIGHTS.name, INSIGHTS.lease))
        missing = [s.step for s in self.stages.values() if s.step is not None and s.step not in steps]
        if missing:
            raise ValueError(f"no implementation for steps: {', '.join(missing)}")
        self._steps = dict(steps)

    def __getitem__(self, name: str) -> Stage:
        return self.stages[name]

    def stage_for(self, claimed: Claimed) -> Stage:
        """The stage a claim is in: the record's, or the insights step for a claim of that queue."""
        if claimed.claim.queue == INSIGHTS_QUEUE:
            return self.insights
        return self.stages[claimed.record.state]

    def leases(self) -> dict[str, timedelta]:
        """What the claim may hand out: every stage with a step, and its lease."""
        return {s.name: s.lease for s in self.stages.values() if s.step is not None}

    def is_terminal(self, name: str) -> bool:
        """Whether ``name`` is a stage without a step (a recording there is finished)."""
        stage = self.stages.get(name)
        return stage is not None and stage.step is None

    def step_of(self, stage: Stage) -> Step:
        assert stage.step is not None
        if stage.step not in self._steps:
            raise ValueError(f"no implementation for step {stage.step}")
        return self._steps[stage.step]

    def time_limit(self, stage: Stage) -> timedelta:
        return self.settings.foreign_work_limit if stage.work is Work.FOREIGN else self.settings.own_work_limit
