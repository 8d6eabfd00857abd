"""The stage table: one declaration per stage.

Dispatch (which step runs), claim eligibility (which stages the claim may
hand out, with which lease), what a step needs of the CPUs, where it goes
next and both watchdogs (attempts, time in stage) are all derived from
``STAGES``; nothing about stages is listed anywhere else in the sidecar, and
the runner names none. The schema's ``state`` select mirrors the names (a test
holds them together).

After a recording's last stage, work follows on queues of their own
(``FOLLOW_UPS``: the brief and topics, the literary text), each a table with a
row per finished recording: the table takes a follow-up only when the assembly
gives it someone to do it. The runner, the pool and the claim name none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import Enum

from sidecar.runtime.cpus import Cpus
from sidecar.settings import PipelineSettings
from sidecar.steps.base import Step
from sidecar.storage.model import RECORDS, Claimed


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

# The steps after the transcript, each on its own queue (a row per finished recording in the table
# of its name, claimed only when no recording waits), in the order the claim tries them. Own work,
# with the same watchdogs. The schema's queue tables and pb_hooks/lib/followups.js name the same.
FOLLOW_UPS: tuple[Stage, ...] = (
    # The proofread text: pure Python, quick, needs no CPUs of its own.
    Stage("literary", "literary", Work.OWN, LEASE, "done"),
    # The brief and topics: only while nothing else holds the CPUs (an offline model).
    Stage("insights", "insights", Work.OWN, LEASE, "done", cpus=Cpus.INSIGHTS),
)
FOLLOW_UP = FOLLOW_UPS[1]  # the insights step's, as older callers name it


def declare(p: PipelineSettings) -> tuple[Stage, ...]:
    """The stage table with the configured leases; a lease for a stage without a step is refused."""
    claimable = {s.name for s in STAGES if s.step is not None} | {f.name for f in FOLLOW_UPS}
    unknown = sorted(set(p.leases) - claimable)
    if unknown:
        raise ValueError(
            f"[pipeline.leases] names no claimable stage: {', '.join(unknown)} (stages: {', '.join(sorted(claimable))})"
        )
    return tuple(replace(s, lease=p.leases.get(s.name, s.lease)) for s in STAGES)


class StageTable:
    """The declared stages bound to step implementations.

    ``follow_ups``: who does the work of each follow-up queue (by its name); a queue not named is
    never claimed. ``follow_up_by``: the insights engine's name, as older callers give it.
    ``follow_up_cpus``: what a queue's step needs of the CPUs when the assembly gives it more to do than its
    declaration says (the literary text proofread by the insights engine runs that engine).
    """

    def __init__(
        self,
        settings: PipelineSettings,
        steps: Mapping[str, Step],
        follow_up_by: str | None = None,
        *,
        follow_ups: Mapping[str, str] | None = None,
        follow_up_cpus: Mapping[str, Cpus] | None = None,
    ) -> None:
        self.settings = settings
        self.stages = {s.name: s for s in declare(settings)}
        doers = dict(follow_ups or {})
        if follow_up_by is not None:
            doers[FOLLOW_UP.name] = follow_up_by
        unknown = sorted(set(doers) - {f.name for f in FOLLOW_UPS})
        if unknown:
            raise ValueError(f"no follow-up queue named {', '.join(unknown)}")
        cpus = dict(follow_up_cpus or {})
        self.follow_ups = {
            f.name: replace(
                f, lease=settings.leases.get(f.name, f.lease), doer=doers[f.name], cpus=cpus.get(f.name, f.cpus)
            )
            for f in FOLLOW_UPS
            if f.name in doers
        }
        missing = [
            s.step
            for s in (*self.stages.values(), *self.follow_ups.values())
            if s.step is not None and s.step not in steps
        ]
        if missing:
            raise ValueError(f"no implementation for steps: {', '.join(missing)}")
        self._steps = dict(steps)

    def __getitem__(self, name: str) -> Stage:
        return self.stages[name]

    @property
    def follow_up(self) -> Stage | None:
        """The insights queue's stage, when this table takes it."""
        return self.follow_ups.get(FOLLOW_UP.name)

    def stage_for(self, claimed: Claimed) -> Stage:
        """The stage a claim is in: the record's, or the follow-up of the queue it came from."""
        if claimed.claim.queue != RECORDS:
            if claimed.claim.queue not in self.follow_ups:
                raise ValueError(f"a claim of the {claimed.claim.queue} queue, which this table does not take")
            return self.follow_ups[claimed.claim.queue]
        return self.stages[claimed.record.state]

    def leases(self) -> dict[str, timedelta]:
        """What the claim may hand out: every stage with a step, and its lease."""
        return {s.name: s.lease for s in self.stages.values() if s.step is not None}

    def follow_up_leases(self, free_for: Callable[[Cpus], bool]) -> dict[str, timedelta]:
        """The follow-up queues that may be claimed now (their CPUs free), each with its lease."""
        return {name: f.lease for name, f in self.follow_ups.items() if free_for(f.cpus)}

    def follows(self, stage: Stage, to: str) -> tuple[str, ...]:
        """The follow-up queues a record moving from ``stage`` to ``to`` gets queued on (it finished)."""
        if stage in self.follow_ups.values() or not self.is_terminal(to):
            return ()
        return tuple(self.follow_ups)

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
