"""The queue transitions a claim holder may make: one typed "set if still mine" call (``Storage.settle``).

Each is applied by storage in one transaction, only while the claim's token
is still the record's (P5); otherwise ``FencedOut``. Their exact effect on
the queue fields is defined once, in pb_hooks/lib/queue.js (the panel's
owner edits use the same definitions), and mirrored by the in-memory twin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from sidecar.activity import Activity
from sidecar.outcome import HaltCode

__all__ = ["Enter", "Extend", "Halt", "Pause", "Progress", "Release", "Retry", "Transition"]


@dataclass(frozen=True)
class Enter:
    """The step is done: the record enters ``stage`` (its clock restarts, attempts return to 0)."""

    op: ClassVar[str] = "advance"
    stage: str
    note: str = ""
    # Entering the terminal stage: queue the recording's insights (the step is on).
    insights: bool = False

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"to": self.stage, "text": self.note}
        if self.insights:
            body["insights"] = True
        return body


@dataclass(frozen=True)
class Pause:
    """Look again at ``until_ms``; not a transition of the stage (P10): its clock keeps running."""

    op: ClassVar[str] = "postpone"
    until_ms: int
    note: str = ""

    def body(self) -> dict[str, Any]:
        return {"until": self.until_ms, "text": self.note}


@dataclass(frozen=True)
class Halt:
    """A flag with a code and a reason, never a stage (P11)."""

    op: ClassVar[str] = "halt"
    code: HaltCode
    reason: str

    def body(self) -> dict[str, Any]:
        return {"code": self.code.value, "reason": self.reason}


@dataclass(frozen=True)
class Retry:
    """A failed try: the attempt stays spent; the record may be claimed again from ``at_ms``."""

    op: ClassVar[str] = "fail"
    at_ms: int
    note: str

    def body(self) -> dict[str, Any]:
        return {"retry_at": self.at_ms, "text": self.note}


@dataclass(frozen=True)
class Release:
    """Our own shutdown (P8): the claim is handed back and its attempt given back."""

    op: ClassVar[str] = "release"

    def body(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class Extend:
    """The step still runs: its lease now ends at ``until_ms``."""

    op: ClassVar[str] = "extend"
    until_ms: int

    def body(self) -> dict[str, Any]:
        return {"until": self.until_ms}


@dataclass(frozen=True)
class Progress:
    """How far recognition has come, 0..1 (LA4); storage keeps the highest value reported.

    With it, optionally: what the step is doing now (``activity``, one of
    ``activity.REPORTED``; kept while the claim lasts) and the language it
    found (a code of ``languages.LANGUAGES``; another is not kept), shown by
    the poll at once.
    """

    op: ClassVar[str] = "progress"
    value: float
    activity: Activity | None = None
    language: str | None = None

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"progress": max(0.0, min(1.0, round(self.value, 4)))}
        if self.activity is not None:
            body["activity"] = self.activity.value
        if self.language is not None:
            body["language"] = self.language
        return body


Transition = Enter | Pause | Halt | Retry | Release | Extend | Progress
