"""The stage table: one declaration per stage.

Dispatch (which step runs), claim eligibility (which stages the claim may
hand out, with which lease), what a step needs of the CPUs, where it goes
next and both watchdogs (attempts, time in stage) are all derived from
``STAGES``; nothing about stages is listed anywhere else in the sidecar, and
the runner names none. The schema's ``state`` select mirrors the names (a test
holds them together).

After a recording's last stage, optional work may follow on a queue of its
own (the brief and topics: ``FOLLOW_UP``): the table has it only when the
assembly gives it someone to do it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import Enum

from sidecar.runtime.cpus import Cpus
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
    cpus: Cpus = Cpus.NONE  # what its step needs of this process's CPUs while it runs
    # Who does its work, for the logs (None: the configured speech provider).
    doer: str | None = None


# Short leases, kept alive by the running step (the runner extends a lease a
# third of the way through, as long as the step runs): a worker that dies
# leaves its record to be claimed again within about two leases (O1).
LEASE = timedelta(minutes=2)

# The pipeline, in order (SPEC §3), with each stage's default lease.
STAGES: tuple[Stage, ...] = (
    Stage("uploaded", "normalize", Work.OWN, LEASE, "normalized", cpus=Cpus.RECOGNITION),
    # A provider that answers at once (the offline engine, an OpenAI-compatible server)
    # leaves nothing to poll: its recording goes straight to ``transcribed``.
    Stage("normalized", "submit", Work.OWN, LEASE, "submitted", skip_to="transcribed", cpus=Cpus.RECOGNITION),
    Stage("submitted", "poll", Work.FOREIGN, LEASE, "transcribed"),
    Stage("transcribed", "finalize", Work.OWN, LEASE, "done", cpus=Cpus.RECOGNITION),
    Stage("done", None, None, timedelta(0), None),
)

# The optional step after the transcript (its own queue: an `insights` row per finished recording,
# claimed only when no recording waits and nothing holds the CPUs). Own work, with the same watchdogs.
FOLLOW_UP = Stage("insights", "insights", Work.OWN, LEASE, "done", cpus=Cpus.INSIGHTS)


def declare(p: PipelineSettings) -> tuple[Stage, ...]:
    """The stage table with the configured leases; a lease for a stage without a step is refused."""
    claimable = {s.name for s in STAGES if s.step is not None} | {FOLLOW_UP.name}
    unknown = sorted(set(p.leases) - claimable)
    if unknown:
        raise ValueError(
            f"[pipeline.leases] names no claimable stage: {', '.join(unknown)} (stages: {', '.join(sorted(claimable))})"
        )
    return tuple(replace(s, lease=p.leases.get(s.name, s.lease)) for s in STAGES)


class StageTable:
    """The declared stages bound to step implementations.

    ``follow_up_by``: who does the work that follows a finished recording (the insights engine's
    name); None: nothing follows, and the follow-up queue is never claimed.
    """

    def __init__(self, settings: PipelineSettings, steps: Mapping[str, Step], follow_up_by: str | None = None) -> None:
        self.settings = settings
        self.stages = {s.name: s for s in declare(settings)}
        lease = settings.leases.get(FOLLOW_UP.name, FOLLOW_UP.lease)
        self.follow_up = replace(FOLLOW_UP, lease=lease, doer=follow_up_by) if follow_up_by is not None else None
        missing = [s.step for s in self.stages.values() if s.step is not None and s.step not in steps]
        if missing:
            raise ValueError(f"no implementation for steps: {', '.join(missing)}")
        self._steps = dict(steps)

    def __getitem__(self, name: str) -> Stage:
        return self.stages[name]

    def stage_for(self, claimed: Claimed) -> Stage:
        """The stage a claim is in: the record's, or the follow-up for a claim of that queue."""
        if claimed.claim.queue == INSIGHTS_QUEUE:
            if self.follow_up is None:
                raise ValueError("a claim of the follow-up queue, which this table does not take")
            return self.follow_up
        return self.stages[claimed.record.state]

    def leases(self) -> dict[str, timedelta]:
        """What the claim may hand out: every stage with a step, and its lease."""
        return {s.name: s.lease for s in self.stages.values() if s.step is not None}

    def follow_up_lease(self, free_for: Callable[[Cpus], bool]) -> timedelta | None:
        """The follow-up's lease when it may be claimed now (its CPUs free), else None."""
        if self.follow_up is None or not free_for(self.follow_up.cpus):
            return None
        return self.follow_up.lease

    def follows(self, stage: Stage, to: str) -> bool:
        """Whether a record moving from ``stage`` to ``to`` gets the follow-up queued (it finished)."""
        return self.follow_up is not None and stage is not self.follow_up and self.is_terminal(to)

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
