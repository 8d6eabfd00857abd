"""What a step can end in, and the errors that classify a failure where it enters.

Below both the pipeline and the steps, so either can import it::

    TranscriberError
    ├── RetryableError      the step failed; the attempt counts; retried later
    ├── PermanentError      retrying cannot help; the record halts with a code
    │   └── (carries HaltCode and a reason safe to show the owner)
    └── PostponeError       not ready yet; no attempt spent (P10)

A step returns ``Advance`` (or ``Postpone`` / ``Halt``) when it reaches an
outcome; anything it raises is mapped by the runner: ``RetryableError`` and
unexpected exceptions spend an attempt, ``PermanentError`` halts,
``PostponeError`` postpones, cancellation on shutdown releases (P8).
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
    """Not ready yet; look again after ``delay`` without spending an attempt."""

    def __init__(self, message: str, *, delay: timedelta | None = None) -> None:
        super().__init__(message)
        self.delay = delay


@dataclass(frozen=True)
class Advance:
    """The step is done; the record moves to the stage table's next stage."""

    note: str = ""


@dataclass(frozen=True)
class Postpone:
    """Look again later; neither the stage nor its clock changes (P10)."""

    delay: timedelta | None = None
    note: str = "not ready yet"


@dataclass(frozen=True)
class Halt:
    code: HaltCode
    reason: str


Outcome = Advance | Postpone | Halt
