"""The queue transitions as the in-memory twin applies them: pb_hooks/lib/transitions.js's
``TRANSITIONS``, entry for entry, read line for line against it.

An entry says what its JS twin says, in the same names:
  args(t, body, now, table)       what the settle route reads of a claim's holder's body (a
                                  ``Transition``'s ``body()``); only the outcomes a worker settles
  fields(t, rec, now, a)          what it writes, from the stored row ``rec``, ``now`` and ``a``
  journal(t, a, table, rec, actor)  its journal row: (the stage, or None for the row's own, the text);
                                  none for the two that keep the claim
  after(t, table, rec, a, now)    what else it does
  quiet                           the sender sees nothing new
``t`` is the twin in the part of the modules transitions.js requires (``stages``, ``followups``,
``journal``, ``records``); ``table`` is ``audio_records`` or a follow-up queue's name.

tests/unit/test_twin_transitions.py reads transitions.js and holds both tables to the same
entries writing the same fields; tests/integration/test_twin_transitions_alike.py runs both on
the same rows and compares what they write and journal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, Protocol

from sidecar.storage.errors import StorageError

__all__ = ["OUTCOMES", "QUEUED", "RECORDS", "TRANSITIONS", "FollowUpWords", "QueueRow", "Transition", "Twin"]

RECORDS = "audio_records"
# A follow-up row is queued until its step is done (lib/stages.js QUEUED).
QUEUED = "queued"

# A transition's arguments, named as transitions.js names them (``a.to``, ``a.until``, …).
Args = SimpleNamespace


class FollowUpWords(Protocol):
    """What a follow-up queue's declaration (lib/followups.js) says that a transition reads."""

    @property
    def queued(self) -> str: ...
    @property
    def done(self) -> str: ...
    @property
    def again(self) -> str: ...


class QueueRow(Protocol):
    """The stored row a transition reads (any queue's: the fields every claimable row holds)."""

    id: str
    created_ms: int
    state: str
    halted_at: str
    halt_code: str
    attempts: int
    queue_rev: int
    progress: float


class Twin(Protocol):
    """The twin as the transitions see it: what transitions.js takes from the modules it requires."""

    def is_terminal(self, stage: str) -> bool: ...  # stages.isTerminal
    def allowed(self, table: str) -> Sequence[str]: ...  # stages.allowed
    def follow_up(self, table: str) -> FollowUpWords | None: ...  # followups.of
    def follow_up_names(self) -> Sequence[str]: ...  # followups.names
    def halt_codes(self) -> Sequence[str]: ...  # the schema's halt_code values
    def reported_activities(self) -> Sequence[str]: ...  # records.activities less DERIVED_ONLY
    def languages(self) -> Sequence[str]: ...  # records.languages
    def queue_follow_up(self, table: str, record_id: str, now: int) -> None: ...  # queueFollowUp
    def journal_add(self, record_id: str, stage: str, kind: str, text: str, actor: str) -> None: ...  # journal.add


@dataclass(frozen=True)
class Transition:
    fields: Callable[[Twin, Any, int, Args], dict[str, Any]]
    args: Callable[[Twin, Mapping[str, Any], int, str], Args] | None = None
    journal: Callable[[Twin, Args, str, Any, str], tuple[str | None, str]] | None = None
    after: Callable[[Twin, str, Any, Args, int], None] | None = None
    quiet: bool = False


def created_ms(rec: QueueRow) -> int:
    """The row's creation time: the claim key of a row that is claimable right away (createdMs)."""
    return rec.created_ms


def db_time(ms: int) -> str:
    """PocketBase's form of a time (lib/datetimes.js dbTime)."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def freed(**fields: Any) -> dict[str, Any]:
    """A claim ends: what its holder reported doing (``activity``) ends with it."""
    return {"claim_token": "", "claim_expires_at": 0, "activity": "", **fields}


# -- lib/args.js: what the settle route reads, refused as a 400 --------------------------------------


def _invalid(message: str) -> StorageError:
    return StorageError(message, status=400)


def _text(body: Mapping[str, Any], name: str, most: int) -> str:
    v = body.get(name)
    if not isinstance(v, str) or v == "":
        raise _invalid(f"'{name}' is required")
    return v[:most]


def _opt_text(body: Mapping[str, Any], name: str, most: int = 5000) -> str | None:
    v = body.get(name)
    return None if v is None else str(v)[:most]


def _number(body: Mapping[str, Any], name: str) -> int:
    v = body.get(name)
    if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v) or v < 0:
        raise _invalid(f"'{name}' must be a whole number")
    return int(v)


def _later(body: Mapping[str, Any], name: str, now: int) -> int:
    v = _number(body, name)
    if v <= now:
        raise _invalid(f"'{name}' must be later than 'now'")
    return v


def _fraction(body: Mapping[str, Any], name: str) -> float:
    v = body.get(name)
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
        raise _invalid(f"'{name}' must be a number from 0 to 1")
    return float(v)


# -- the entries' arguments and after-effects ------------------------------------------------------


def _advanced_args(t: Twin, body: Mapping[str, Any], now: int, table: str) -> Args:
    to = _text(body, "to", 50)
    if to not in t.allowed(table):
        raise _invalid(f"unknown stage '{to}'")
    # The follow-up queues a recording entering its terminal stage is queued on (followups.asked).
    listed = body.get("follow_ups") if isinstance(body.get("follow_ups"), list) else []
    unknown = [q for q in listed or [] if q not in t.follow_up_names()]
    if unknown:
        raise _invalid(f"unknown follow-up queue '{unknown[0]}'")
    follow_ups = [q for q in t.follow_up_names() if q in (listed or [])]
    return Args(to=to, text=_opt_text(body, "text"), follow_ups=follow_ups)


def _advanced_after(t: Twin, table: str, rec: QueueRow, a: Args, now: int) -> None:
    """A recording entering its terminal stage is queued on the follow-ups the caller has on."""
    if table != RECORDS or not t.is_terminal(a.to):
        return
    for q in a.follow_ups or []:
        t.queue_follow_up(q, rec.id, now)
        words = t.follow_up(q)
        assert words is not None
        t.journal_add(rec.id, a.to, "note", words.queued, "worker")


def _halted_args(t: Twin, body: Mapping[str, Any], now: int, table: str) -> Args:
    code = _text(body, "code", 50)
    if code not in t.halt_codes():
        raise _invalid(f"unknown halt code '{code}'")
    return Args(code=code, reason=_text(body, "reason", 2000))


def _progressed_args(t: Twin, body: Mapping[str, Any], now: int, table: str) -> Args:
    value = _fraction(body, "progress")
    if t.follow_up(table):
        return Args(progress=value, activity=None, language=None)
    activity = _opt_text(body, "activity", 50)
    reported = t.reported_activities()
    if activity is not None and activity not in reported:
        raise _invalid(f"'activity' must be one of {', '.join(reported)}")
    language = _opt_text(body, "language", 10)
    return Args(progress=value, activity=activity, language=language if language in t.languages() else None)


def _progressed_fields(t: Twin, rec: QueueRow, now: int, a: Args) -> dict[str, Any]:
    return {
        **({"progress": a.progress, "progress_at": now} if a.progress > rec.progress else {"progress": rec.progress}),
        **({"activity": a.activity} if a.activity else {}),
        **({"language": a.language} if a.language else {}),
    }


def _done(t: Twin, table: str) -> str:
    words = t.follow_up(table)
    assert words is not None
    return words.done


def _again(t: Twin, table: str) -> str:
    words = t.follow_up(table)
    assert words is not None
    return words.again


TRANSITIONS: dict[str, Transition] = {
    # A step finished: the next stage, its clock restarted, attempts afresh.
    "advanced": Transition(
        args=_advanced_args,
        fields=lambda t, rec, now, a: freed(
            state=a.to,
            state_entered_at=now,
            attempts=0,
            paused_until=0,
            queue_rev=rec.queue_rev + 1,
            available_at=0 if t.is_terminal(a.to) else created_ms(rec),
            progress=1 if t.is_terminal(a.to) else rec.progress,
        ),
        journal=lambda t, a, table, rec, actor: (
            (None, a.text or _done(t, table)) if t.follow_up(table) else (a.to, a.text or "entered " + a.to)
        ),
        after=_advanced_after,
    ),
    # P10: not a transition of the stage; its clock keeps running.
    "postponed": Transition(
        args=lambda t, body, now, table: Args(until=_later(body, "until", now), text=_opt_text(body, "text")),
        fields=lambda t, rec, now, a: freed(paused_until=a.until, attempts=0, available_at=a.until),
        journal=lambda t, a, table, rec, actor: (None, a.text or "postponed"),
    ),
    # P11: a flag, never a stage.
    "halted": Transition(
        args=_halted_args,
        fields=lambda t, rec, now, a: freed(
            halted_at=db_time(now),
            halt_code=a.code,
            halt_reason=str(a.reason)[:2000],
            queue_rev=rec.queue_rev + 1,
            available_at=0,
        ),
        journal=lambda t, a, table, rec, actor: (None, a.code + ": " + a.reason),
    ),
    # A failed try: the attempt stays spent; claimable again from `retry_at`.
    "failed": Transition(
        args=lambda t, body, now, table: Args(
            retry_at=_number(body, "retry_at"), text=_opt_text(body, "text") or "step failed"
        ),
        fields=lambda t, rec, now, a: freed(available_at=max(a.retry_at, now)),
        journal=lambda t, a, table, rec, actor: (None, a.text),
    ),
    # P8: our own shutdown is no verdict; the claim's attempt is given back.
    "released": Transition(
        args=lambda t, body, now, table: Args(),
        fields=lambda t, rec, now, a: freed(attempts=max(rec.attempts - 1, 0), available_at=created_ms(rec)),
        journal=lambda t, a, table, rec, actor: (None, "released on shutdown; attempt not counted"),
    ),
    # The claim goes on: a long step still runs. A longer lease shows the sender nothing new.
    "extended": Transition(
        args=lambda t, body, now, table: Args(until=_later(body, "until", now)),
        fields=lambda t, rec, now, a: {"claim_expires_at": a.until, "available_at": a.until},
        quiet=True,
    ),
    # The claim goes on. LA4: how far recognition has come; it never goes back. With it,
    # optionally, the activity and the language found. A follow-up row keeps its progress alone.
    "progressed": Transition(
        args=_progressed_args,
        fields=_progressed_fields,
    ),
    # The owner clears the halt (or the sender): the stage resumes with a fresh count and clock (ST6).
    "resumed": Transition(
        fields=lambda t, rec, now, a: freed(
            halted_at="",
            halt_code="",
            halt_reason="",
            state_entered_at=now,
            paused_until=0,
            attempts=0,
            queue_rev=rec.queue_rev + 1,
            available_at=0 if t.is_terminal(rec.state) else created_ms(rec),
        ),
        journal=lambda t, a, table, rec, actor: (
            None,
            (table + " halt cleared" if t.follow_up(table) else "halt cleared")
            + " by the "
            + actor
            + (" (" + rec.halt_code + ")" if actor == "sender" else ""),
        ),
    ),
    # The owner sets the stage: it restarts from there (unless the row is halted).
    "stage_set": Transition(
        fields=lambda t, rec, now, a: freed(
            state=a.to,
            state_entered_at=now,
            paused_until=0,
            attempts=0,
            queue_rev=rec.queue_rev + 1,
            available_at=0 if rec.halted_at != "" or t.is_terminal(a.to) else created_ms(rec),
            progress=1 if t.is_terminal(a.to) else 0,  # the work starts over
        ),
        journal=lambda t, a, table, rec, actor: (
            (
                None,
                table
                + " set to "
                + a.to
                + " by the "
                + actor
                + (": " + _again(t, table) if a.to == QUEUED else "")
                + (" (" + a.why + ")" if a.why else ""),
            )
            if t.follow_up(table)
            else (a.to, "stage changed by the " + actor + " from " + rec.state + " to " + a.to)
        ),
    ),
}

# The names the settle route takes (those a claim's holder sends), in the table's order.
OUTCOMES = [name for name, spec in TRANSITIONS.items() if spec.args]
