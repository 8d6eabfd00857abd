"""The changes a claim holder may write: one typed "set if still mine" call (``Storage.settle``).

Each is applied by storage in one transaction, only while the claim's token
is still the record's (P5); otherwise ``FencedOut``. Each class is named by
its ``outcome`` (sidecar/outcome.py: ``Outcome`` ends the claim, ``Keep``
keeps it), the one name the settle route, the JS transition table, the
journal and the metrics use too. Their exact effect on the queue fields is
defined once, in pb_hooks/lib/transitions.js (the panel's owner edits use the
same definitions), and mirrored by the in-memory twin. ``settle`` returns the row
as written, so nothing needs reading again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from sidecar.activity import Activity
from sidecar.outcome import HaltCode, Keep, Outcome

__all__ = ["Advanced", "Extended", "Failed", "Halted", "Postponed", "Progressed", "Released", "Transition"]


@dataclass(frozen=True)
class Advanced:
    """The step is done: the record enters ``stage`` (its clock restarts, attempts return to 0)."""

    outcome: ClassVar[Outcome | Keep] = Outcome.ADVANCED
    stage: str
    note: str = ""
    # Entering the terminal stage: the follow-up queues the finished recording is queued on.
    follow_ups: tuple[str, ...] = ()

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"to": self.stage, "text": self.note}
        if self.follow_ups:
            body["follow_ups"] = list(self.follow_ups)
        return body


@dataclass(frozen=True)
class Postponed:
    """Look again at ``until_ms``; not a transition of the stage (P10): its clock keeps running."""

    outcome: ClassVar[Outcome | Keep] = Outcome.POSTPONED
    until_ms: int
    note: str = ""

    def body(self) -> dict[str, Any]:
        return {"until": self.until_ms, "text": self.note}


@dataclass(frozen=True)
class Halted:
    """A flag with a code and a reason, never a stage (P11)."""

    outcome: ClassVar[Outcome | Keep] = Outcome.HALTED
    code: HaltCode
    reason: str

    def body(self) -> dict[str, Any]:
        return {"code": self.code.value, "reason": self.reason}


@dataclass(frozen=True)
class Failed:
    """A failed try: the attempt stays spent; the record may be claimed again from ``retry_at_ms``."""

    outcome: ClassVar[Outcome | Keep] = Outcome.FAILED
    retry_at_ms: int
    note: str

    def body(self) -> dict[str, Any]:
        return {"retry_at": self.retry_at_ms, "text": self.note}


@dataclass(frozen=True)
class Released:
    """Our own shutdown (P8): the claim is handed back and its attempt given back."""

    outcome: ClassVar[Outcome | Keep] = Outcome.RELEASED

    def body(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class Extended:
    """The step still runs: its lease now ends at ``until_ms``."""

    outcome: ClassVar[Outcome | Keep] = Keep.EXTENDED
    until_ms: int

    def body(self) -> dict[str, Any]:
        return {"until": self.until_ms}


@dataclass(frozen=True)
class Progressed:
    """How far recognition has come, 0..1 (LA4); storage keeps the highest value reported.

    With it, optionally: what the step is doing now (``activity``, one of
    ``activity.REPORTED``; kept while the claim lasts) and the language it
    found (a code of ``languages.LANGUAGES``; another is not kept), shown by
    the poll at once.
    """

    outcome: ClassVar[Outcome | Keep] = Keep.PROGRESSED
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


Transition = Advanced | Postponed | Halted | Failed | Released | Extended | Progressed
