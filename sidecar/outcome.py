"""What a step can end in, the errors that classify a failure where it enters, and how a run ended.

Below both the pipeline and the steps, so either can import it::

    TranscriberError
    ├── RetryableError      the step failed; the attempt counts; retried later
    ├── PermanentError      retrying cannot help; the record halts with a code
    │   └── (carries HaltCode and a reason safe to show the owner)
    └── PostponeError       not ready yet, or not ours to fix now; no attempt spent (P10)

A step returns ``Advance`` or ``Postpone`` when it reaches an outcome (what
it asks for; the runner turns it into what is written); what it raises is
classified by the runner: ``RetryableError`` and unexpected exceptions spend
an attempt, ``PermanentError`` halts, ``PostponeError`` postpones,
cancellation on shutdown releases (P8). What is written is one ``Outcome``;
the runner reports each run as one ``Verdict``.

One vocabulary: an ``Outcome``'s value is its name everywhere — the settle
route's ``outcome`` (``POST /api/pipeline/{queue}/{id}/settle``), the JS
transition table (pb_hooks/lib/transitions.js ``TRANSITIONS``), the
journal's ``kind`` (``record_events``) and the metrics' ``outcome`` label.
tests/unit/test_vocabulary.py holds them together.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum


class HaltCode(StrEnum):
    """The closed list of halt codes (SPEC §7), mirrored by the schema's select."""

    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    STALLED = "stalled"
    UNSUPPORTED_MEDIA = "unsupported_media"
    TOO_LONG = "too_long"
    PROVIDER_REJECTED = "provider_rejected"
    PROVIDER_FAILED = "provider_failed"
    RESULTS_EXPIRED = "results_expired"
    HALTED_BY_OWNER = "halted_by_owner"
    UNCLAIMABLE = "unclaimable"  # the claim could not read the record's own fields: set aside, the queue moves on
    OVER_QUOTA = "over_quota"  # its decoded length breaks its sender's daily audio quota: halted before recognition
    UNPARSABLE_ANSWER = "unparsable_answer"  # insights: the language model answered twice with no usable JSON


class TranscriberError(Exception):
    """Root of the project's own errors."""


class RetryableError(TranscriberError):
    """A failure that may pass on another attempt (network, 5xx, timeouts)."""

    def __init__(self, message: str, *, retry_after: timedelta | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(TranscriberError):
    """A failure another attempt cannot fix; the record halts with ``code``."""

    def __init__(self, code: HaltCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class PostponeError(TranscriberError):
    """Not ready yet, or not the recording's fault; look again after ``delay`` without spending an attempt."""

    def __init__(self, message: str, *, delay: timedelta | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class CredentialsRefused(PostponeError):
    """A provider refused our own credentials (401/403): the owner must fix them; the record waits (O5)."""


@dataclass(frozen=True)
class Advance:
    """The step is done; the record moves to the stage table's next stage.

    ``nothing_next``: the step did the next stage's work too (a provider that answered at
    once leaves nothing to wait for): the record skips to the stage its table declares for
    that (``Stage.skip_to``), or, where it declares none, takes the next stage as usual.
    """

    note: str = ""
    nothing_next: bool = False


@dataclass(frozen=True)
class Postpone:
    """Look again later; neither the stage nor its clock changes (P10)."""

    delay: timedelta | None = None
    note: str = "not ready yet"


StepResult = Advance | Postpone


class Outcome(StrEnum):
    """How a claim ends, as written (each one journal row of this kind)."""

    ADVANCED = "advanced"  # the step finished: next stage
    POSTPONED = "postponed"  # look again later, no attempt spent
    HALTED = "halted"  # a flag with a code: the owner decides
    FAILED = "failed"  # the attempt is spent; retried after a delay
    RELEASED = "released"  # our own shutdown: claim and attempt handed back


class Keep(StrEnum):
    """Writes under a claim that keep it (no journal row, no verdict): settled by the same route, fenced alike."""

    EXTENDED = "extended"  # the step still runs: the lease is longer
    PROGRESSED = "progressed"  # how far the step has come (and what it is doing, the language it found)


class Verdict(StrEnum):
    """How one run of a claimed record ended (the metrics' ``outcome`` label): an ``Outcome``, or not written."""

    ADVANCED = Outcome.ADVANCED.value
    POSTPONED = Outcome.POSTPONED.value
    HALTED = Outcome.HALTED.value
    FAILED = Outcome.FAILED.value
    RELEASED = Outcome.RELEASED.value
    FENCED_OUT = "fenced_out"  # the claim went to someone else; nothing written
    UNWRITTEN = "unwritten"  # storage stayed away: the outcome was lost, the lease will expire
