"""An in-memory twin of the PocketBase storage, held to the same contract (tests/contract).

It keeps records, files, attempts, texts and the journal in dictionaries and
applies the claim and the transitions exactly as pb_hooks/lib/claim.js and
pb_hooks/lib/transitions.js do (the transitions from a table that reads entry for
entry as the JS one: ``memory_transitions.TRANSITIONS``): one sort key (``available_at``), leases written
at the claim, every write fenced by the token. It also plays the parts outside
the pipeline that tests need: a sender's upload (``add_record``) and the owner's
panel edits (``owner_halt``, ``owner_resume``, ``owner_set_stage``).

Single-threaded and synchronous inside: each call is atomic with respect to
the others, as PocketBase's single write connection makes them.
"""

from __future__ import annotations

import copy
import secrets
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.lowlevel

from sidecar.activity import REPORTED
from sidecar.outcome import HaltCode
from sidecar.runtime.clock import Clock, SystemClock
from sidecar.storage.errors import FencedOut, StorageError
from sidecar.storage.memory_transitions import OUTCOMES, QUEUED, TRANSITIONS, Args, db_time
from sidecar.storage.memory_transitions import RECORDS as RECORDS_TABLE
from sidecar.storage.model import (
    INSIGHTS,
    LITERARY,
    RECORDS,
    AttemptChange,
    AttemptRow,
    AttemptStatus,
    AudioRecord,
    Claim,
    Claimed,
    FileRole,
    FileRow,
    LoginFigures,
    NoWork,
    PiecePlace,
    RecordRows,
    SweepItem,
    taught_words,
)
from sidecar.storage.transitions import Halted, Transition
from sidecar.transcript.languages import LANGUAGES

__all__ = ["Event", "FollowUpRow", "InMemoryStorage", "InsightsRow", "LiteraryRow", "Row"]

_ALPHABET = string.ascii_lowercase + string.digits
# At most this many rows are set aside by one claim (pb_hooks/lib/claim.js MAX_SET_ASIDE).
_MAX_SET_ASIDE = 5
# A whole number past 2^53 is no longer one in JavaScript (pb_hooks/lib/readable.js MAX_COUNT).
_MAX_COUNT = 2**53 - 1


def _id() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(15))


def _ended(at: object, now: int) -> bool:
    number = isinstance(at, int | float) and not isinstance(at, bool)
    return not number or at <= now or at > _MAX_COUNT  # type: ignore[operator]


@dataclass(kw_only=True)
class _Queued:
    """The fields every claimable row holds (SPEC §3): its stage, halt, claim, lease and progress."""

    id: str
    created_ms: int
    state: str
    state_entered_at: int = 0
    halted_at: str = ""
    halt_code: str = ""
    halt_reason: str = ""
    attempts: int = 0
    claim_token: str = ""
    claim_expires_at: int = 0
    paused_until: int = 0
    available_at: int = 0
    queue_rev: int = 0
    progress: float = 0.0
    progress_at: int = 0
    activity: str = ""  # what the claim's holder reported doing ("": nothing finer than the stage)
    language: str = ""
    lease_ended_at: int = 0

    def claimable(self, now: int) -> bool:
        """Due, not halted, not paused, and no live claim (the claim statement's WHERE); a pause or a
        lease end that is no time at all has ended (the claim then sets the row aside)."""
        return (
            0 < self.available_at <= now
            and self.halted_at == ""
            and _ended(self.paused_until, now)
            and _ended(self.claim_expires_at, now)
        )

    def take(self, now: int, lease: timedelta, queue: str) -> Claim:
        """Claimed now: a new token and lease, one more attempt (the claim statement's SET)."""
        self.claim_token = secrets.token_urlsafe(30)
        self.claim_expires_at = self.available_at = now + int(lease.total_seconds() * 1000)
        if self.attempts == 0 and self.paused_until == 0:  # the first try in the stage: the wait was queue time
            self.progress_at = now
        self.attempts += 1
        self.activity = ""
        return Claim(self.id, self.claim_token, queue)


@dataclass(kw_only=True)
class Row(_Queued):
    """One audio record, as the table holds it."""

    owner: str
    state: str = "uploaded"
    title: str = ""
    language_hint: str = ""
    quota_ms: int = 0  # audio charged to the sender's day (H4)
    duration_ms: int = 0  # the decoded length, stored by normalize
    brief: str = ""
    topics: list[str] = field(default_factory=list)  # names (PocketBase keeps ids of the owner's dictionary)

    def view(self) -> AudioRecord:
        return AudioRecord.model_validate(self.__dict__)


@dataclass(kw_only=True)
class FollowUpRow(_Queued):
    """A finished recording's row on a follow-up queue (``queue``: its table's name)."""

    queue: ClassVar[str]
    record: str
    state: str = "queued"

    def view(self, recording: Row) -> AudioRecord:
        fields = {k: v for k, v in self.__dict__.items() if k != "record"}
        return AudioRecord.model_validate(
            {
                **fields,
                "recording": self.record,
                "owner": recording.owner,
                "title": recording.title,
                "language": recording.language,
            }
        )


@dataclass(kw_only=True)
class LiteraryRow(FollowUpRow):
    """A recording's literary text, as a queue row (the text itself is its ``texts`` row)."""

    queue: ClassVar[str] = LITERARY


@dataclass(kw_only=True)
class InsightsRow(FollowUpRow):
    """A recording's insights: the queue fields, and the answer's trace."""

    queue: ClassVar[str] = INSIGHTS
    quotes: list[dict[str, Any]] = field(default_factory=list)
    quotes_for: str = ""
    provider: str = ""
    model: str = ""
    proposed: int = 0
    kept: int = 0
    no_brief: str = ""  # why the step ended without a brief (pb_hooks/lib/insights.js)
    no_brief_reason: str = ""


@dataclass(frozen=True)
class _FollowUp:
    """A follow-up queue as pb_hooks/lib/followups.js declares it: its rows and its journal's words."""

    row: type[FollowUpRow]
    queued: str  # the recording's journal when a finished recording is queued on it
    done: str  # when its step is done
    again: str  # when it is set to run again


# Each follow-up queue, declared once, in the order the claim tries them (sidecar/pipeline/stages.py).
FOLLOW_UPS: dict[str, _FollowUp] = {
    LITERARY: _FollowUp(
        LiteraryRow,
        "literary text queued (the literary step)",
        "literary text done",
        "the literary text will be made again",
    ),
    INSIGHTS: _FollowUp(
        InsightsRow,
        "brief and topics queued (the insights step)",
        "insights done",
        "the brief and topics will be made again",
    ),
}
FOLLOW_UP_STATES = ("queued", "done")
INSIGHTS_STATES = FOLLOW_UP_STATES

# What a claimer must be able to read (pb_hooks/lib/readable.js): each claimed field's kind.
_TEXT = ("text", lambda v: isinstance(v, str))
_COUNT = (
    f"a whole number from 0 to {_MAX_COUNT}",
    lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= _MAX_COUNT and v == int(v),
)
_FRACTION = (
    "a number from 0 to 1",
    lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1,
)
_READABLE: dict[str, tuple[str, Callable[[Any], bool]]] = {
    **dict.fromkeys(
        ("id", "owner", "title", "state", "halted_at", "halt_code", "claim_token", "language_hint", "language"), _TEXT
    ),
    **dict.fromkeys(
        (
            "state_entered_at",
            "attempts",
            "claim_expires_at",
            "paused_until",
            "progress_at",
            "lease_ended_at",
            "duration_ms",
        ),
        _COUNT,
    ),
    "progress": _FRACTION,
}


def _misfits(row: object) -> list[str]:
    """What a claimer could not read of ``row``'s claimed fields, in words."""
    out = []
    for name, (wanted, fits) in _READABLE.items():
        if hasattr(row, name) and not fits(getattr(row, name)):
            out.append(f"{name} holds {getattr(row, name)!r} where {wanted} belongs")
    return out


@dataclass(frozen=True)
class Event:
    """A journal row."""

    record: str
    stage: str
    kind: str
    text: str
    actor: str


@dataclass
class _Attempt:
    row: AttemptRow
    raw: bytes | None = None


@dataclass
class _Text:
    content: str
    segments: Any


def _table(row: _Queued) -> str:
    """The table a row is of, as the hooks name it: audio_records or a follow-up queue's."""
    return row.queue if isinstance(row, FollowUpRow) else RECORDS_TABLE


@dataclass(frozen=True)
class _World:
    """The twin as its transitions see it (memory_transitions.Twin): what transitions.js requires."""

    storage: InMemoryStorage

    def is_terminal(self, stage: str) -> bool:
        return stage in self.storage.terminal

    def allowed(self, table: str) -> Sequence[str]:
        return FOLLOW_UP_STATES if table in FOLLOW_UPS else self.storage.stages

    def follow_up(self, table: str) -> _FollowUp | None:
        return FOLLOW_UPS.get(table)

    def follow_up_names(self) -> Sequence[str]:
        return list(FOLLOW_UPS)

    def halt_codes(self) -> Sequence[str]:
        return [c.value for c in HaltCode]

    def reported_activities(self) -> Sequence[str]:
        return sorted(a.value for a in REPORTED)

    def languages(self) -> Sequence[str]:
        return list(LANGUAGES)

    def queue_follow_up(self, table: str, record_id: str, now: int) -> None:
        self.storage._queue_follow_up(table, self.storage.records[record_id])

    def journal_add(self, record_id: str, stage: str, kind: str, text: str, actor: str) -> None:
        self.storage.events.append(Event(record_id, stage, kind, text[:5000], actor))


@dataclass
class InMemoryStorage:
    """The twin. ``stages`` are the schema's stage names in order, ``terminal`` those never claimed
    (the caller passes the stage table's: storage itself does not know the pipeline)."""

    stages: Sequence[str]
    terminal: frozenset[str]
    clock: Clock = field(default_factory=SystemClock)
    records: dict[str, Row] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    texts: dict[tuple[str, str], _Text] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)  # every call by name, for tests that count round trips
    audio_ms_per_day: int = 0  # the senders' daily audio quota (H4), 0: none
    # Each follow-up queue's rows by id (FOLLOW_UPS), as its table holds them.
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    documents: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (record, kind) → its DOCX
    dictionaries: dict[str, list[str]] = field(default_factory=dict)  # owner → topic names
    taught: dict[str, list[str]] = field(default_factory=dict)  # owner → the words they taught (users.words)
    sources_read: list[str] = field(default_factory=list)  # owners whose dictionary an insights step read
    logins: LoginFigures = field(default_factory=LoginFigures)  # what a test says the login guard saw
    _files: dict[str, tuple[FileRow, bytes]] = field(default_factory=dict)
    _attempts: dict[str, _Attempt] = field(default_factory=dict)
    _order: int = 0
    _changed: anyio.Event = field(default_factory=anyio.Event)

    # -- outside the pipeline: the sender and the owner --------------------------------

    def add_record(
        self,
        owner: str = "sender",
        *,
        title: str = "",
        audio: bytes = b"RIFF",
        hint: str = "",
        browser_plays: str = "yes",
    ) -> str:
        """A sender's upload: the record in ``uploaded`` and its original file (as intake makes them;
        ``browser_plays``: intake's verdict on it, a WAV's by default)."""
        now = self.clock.now_ms()
        row = Row(id=_id(), owner=owner, created_ms=now, title=title, state_entered_at=now, language_hint=hint)
        row.available_at = row.created_ms
        self.records[row.id] = row
        original = self._store_file(row.id, FileRole.ORIGINAL, "upload", audio, format="riff", duration_ms=0)
        original.browser_plays = browser_plays
        self._journal(row, "accepted", f"accepted {len(audio)} bytes", "intake")
        return row.id

    def owner_halt(self, record_id: str, reason: str = "halted by the owner") -> None:
        row = self.records[record_id]
        a = Args(code=HaltCode.HALTED_BY_OWNER.value, reason=reason)
        self._transition(row, "halted", self.clock.now_ms(), a, actor="owner")
        self._changed_now()

    def owner_resume(self, record_id: str) -> None:
        self._transition(self.records[record_id], "resumed", self.clock.now_ms(), Args(), actor="owner")
        self._changed_now()

    def owner_set_stage(self, record_id: str, stage: str) -> None:
        row = self.records[record_id]
        if stage not in self.stages:
            raise StorageError(f"unknown stage {stage!r}", status=400)
        self._transition(row, "stage_set", self.clock.now_ms(), Args(to=stage, why=None), actor="owner")
        for attempt in self._attempts.values():
            if attempt.row.record == record_id and attempt.row.status not in (
                AttemptStatus.LOST,
                AttemptStatus.SUPERSEDED,
            ):
                attempt.row.status = AttemptStatus.SUPERSEDED
        if stage == "uploaded":  # normalize again; the earlier copies stay as history
            for file, _ in self._files.values():
                if file.record == record_id and file.role == FileRole.NORMALIZED:
                    file.superseded = True
        self._changed_now()

    def row(self, record_id: str) -> Row:
        return self.records[record_id]

    def put_transcript(self, record_id: str, text: str, segments: Any = None, *, language: str = "") -> None:
        """A finished transcript, as finalize stores it (for tests that start from a done recording)."""
        self.texts[(record_id, "transcript")] = _Text(text, segments or [])
        if language:
            self.records[record_id].language = language

    def insights_of(self, record_id: str) -> InsightsRow | None:
        return next((i for i in self.insights.values() if i.record == record_id), None)

    def literary_of(self, record_id: str) -> LiteraryRow | None:
        return next((i for i in self.literary.values() if i.record == record_id), None)

    @property
    def insights(self) -> dict[str, InsightsRow]:
        return self._queue_rows(INSIGHTS)

    @property
    def literary(self) -> dict[str, LiteraryRow]:
        return self._queue_rows(LITERARY)

    def _queue_rows(self, queue: str) -> dict[str, Any]:
        """The rows of follow-up queue ``queue``, by id (its table: declared in FOLLOW_UPS)."""
        if queue not in FOLLOW_UPS:
            raise StorageError(f"unknown follow-up queue '{queue}'", status=400)
        return self.queues.setdefault(queue, {})

    def owner_correct_transcript(self, record_id: str, content: str) -> None:
        """The owner corrects the transcript's text (lib/corrections.js): the literary text made from the
        old one is stale, so its queue row is queued again (the brief is the owner's to rerun)."""
        old = self.texts.get((record_id, "transcript"))
        self.texts[(record_id, "transcript")] = _Text(content, old.segments if old else [])
        self.documents.pop((record_id, "transcript"), None)  # the literary step makes it again
        row = self.records[record_id]
        self._journal(row, "note", "transcript corrected by the owner", "owner")
        if row.state in self.terminal and self.literary_of(record_id) is not None:
            self._queue_follow_up(LITERARY, row, actor="owner", why="the transcript was corrected")
        self._changed_now()

    def owner_edit_brief(self, record_id: str, brief: str, topics: list[str] | None = None) -> None:
        """The owner edits the brief (or topics) in the panel: a queued insights row ends, its claim gone."""
        row = self.records[record_id]
        row.brief = brief
        if topics is not None:
            row.topics = list(topics)
        ins = self.insights_of(record_id)
        if ins is not None and ins.state == "queued":
            ins.state, ins.state_entered_at, ins.available_at = "done", self.clock.now_ms(), 0
            self._release(ins)
            ins.queue_rev += 1
            self._journal(ins, "note", "the brief or the topics were edited by the owner", "owner")
        self._changed_now()

    def owner_queue_insights(self, record_id: str) -> None:
        """The owner runs the step again (or for a recording done before it was on)."""
        self._queue_insights(self.records[record_id])
        self._changed_now()

    def _queue_insights(self, row: Row) -> InsightsRow:
        ins = self._queue_follow_up(INSIGHTS, row)
        assert isinstance(ins, InsightsRow)
        return ins

    def _queue_follow_up(self, queue: str, row: Row, *, actor: str = "", why: str = "") -> FollowUpRow:
        """Queues (or queues again) ``row``'s row of follow-up ``queue`` (lib/transitions.js queueFollowUp):
        through the ``stage_set`` transition (and ``resumed``'s clearing of a halt); ``actor`` (optional):
        who asked, journalled with ``why``."""
        now = self.clock.now_ms()
        rows = self._queue_rows(queue)
        ins: FollowUpRow | None = next((i for i in rows.values() if i.record == row.id), None)
        if ins is None:
            ins = FOLLOW_UPS[queue].row(id=_id(), record=row.id, created_ms=now, state_entered_at=now)
            ins.available_at = ins.created_ms
            rows[ins.id] = ins
            return ins
        a = Args(to=QUEUED, why=why)
        if ins.halted_at != "":
            self._set(ins, TRANSITIONS["resumed"].fields(self._world, ins, now, Args()))
        self._set(ins, TRANSITIONS["stage_set"].fields(self._world, ins, now, a))
        ins.halted_at = ins.halt_code = ins.halt_reason = ""
        ins.available_at = ins.created_ms
        if actor:
            self._journalled(ins, "stage_set", a, actor)
        return ins

    def journal_of(self, record_id: str) -> list[Event]:
        return [e for e in self.events if e.record == record_id]

    # -- Storage ------------------------------------------------------------------------

    async def connect(self) -> None:
        self.calls.append("connect")

    async def aclose(self) -> None:
        return None

    async def claim(
        self,
        leases: Mapping[str, timedelta],
        insights_lease: timedelta | None = None,
        *,
        follow_ups: Mapping[str, timedelta] | None = None,
    ) -> Claimed | NoWork:
        await anyio.lowlevel.checkpoint()
        queues = dict(follow_ups or {})
        if insights_lease is not None:
            queues[INSIGHTS] = insights_lease
        unknown = sorted(set(queues) - set(FOLLOW_UPS))
        if unknown:
            raise StorageError(f"unknown follow-up queue '{unknown[0]}'", status=400)
        self.calls.append("claim")
        now = self.clock.now_ms()
        for stage, lease in leases.items():
            if stage not in self.stages or stage in self.terminal:
                raise StorageError(f"unknown or terminal stage '{stage}'", status=400)
            if lease <= timedelta(0):
                raise StorageError(f"lease of '{stage}' must be positive", status=400)
        set_aside: list[str] = []
        while True:
            eligible = [r for r in self.records.values() if r.state in leases and r.claimable(now)]
            if not eligible:
                # The follow-up queues in their declared order, only when no recording waits.
                for queue in (q for q in FOLLOW_UPS if q in queues):
                    got = self._claim_follow_up(queue, now, queues[queue], set_aside)
                    if got is not None:
                        return got
                if len(set_aside) >= _MAX_SET_ASIDE:
                    return NoWork(now, tuple(set_aside))
                later = [r.available_at for r in self.records.values() if r.available_at > now]
                for queue in queues:
                    later += [i.available_at for i in self._queue_rows(queue).values() if i.available_at > now]
                return NoWork(min(later) if later else 0, tuple(set_aside))
            row = min(eligible, key=lambda r: (r.available_at, r.id))
            wrong = _misfits(row)
            if wrong:
                # As the claim does: a row no claimer could read is set aside, and the next one taken.
                self._set_aside(row, "; ".join(wrong))
                set_aside.append(row.id)
                if len(set_aside) >= _MAX_SET_ASIDE:
                    return NoWork(now, tuple(set_aside))
                continue
            row.lease_ended_at = row.claim_expires_at  # the dead claim's time ends with its lease
            claim = row.take(now, leases[row.state], RECORDS)
            return Claimed(claim, row.view(), tuple(set_aside), rows=self._rows(row.id))

    def _claim_follow_up(self, queue: str, now: int, lease: timedelta, set_aside: list[str]) -> Claimed | None:
        while len(set_aside) < _MAX_SET_ASIDE:
            rows = self._queue_rows(queue).values()
            eligible = [i for i in rows if i.state == "queued" and i.claimable(now)]
            if not eligible:
                return None
            ins = min(eligible, key=lambda i: (i.available_at, i.id))
            wrong = _misfits(ins) + ([] if ins.record in self.records else ["its recording is gone"])
            if wrong:
                self._set_aside(ins, "; ".join(wrong))
                set_aside.append(ins.id)
                continue
            ins.lease_ended_at = ins.claim_expires_at  # as for a recording: the dead claim ends with its lease
            return Claimed(ins.take(now, lease, queue), ins.view(self.records[ins.record]), tuple(set_aside))
        return None

    def _set_aside(self, row: _Queued, error: str) -> None:
        what = f"{row.queue} row" if isinstance(row, FollowUpRow) else "record"
        reason = (
            f"the claim could not read this {what} ({error[:1500]}); fix the field in the panel, then clear the halt"
        )
        row.halted_at, row.halt_code, row.halt_reason = db_time(self.clock.now_ms()), "unclaimable", reason
        self._release(row)
        row.queue_rev += 1
        row.available_at = 0
        if not isinstance(row, FollowUpRow) or row.record in self.records:
            self._journal(row, "halted", f"unclaimable: {reason}", "worker")
        self._changed_now()

    async def set_aside(self, claim: Claim, reason: str) -> None:
        await self.settle(claim, Halted(HaltCode.UNCLAIMABLE, reason))

    async def settle(self, claim: Claim, change: Transition) -> AudioRecord:
        await anyio.lowlevel.checkpoint()
        self.calls.append(f"settle:{change.outcome.value}")
        # As lib/settle.js: the request is read before the fence (a bad one is refused whoever holds the claim).
        name, now = change.outcome.value, self.clock.now_ms()
        a = self._args(name, change.body(), now, claim.queue if claim.queue in FOLLOW_UPS else RECORDS_TABLE)
        row = self._fenced(claim)
        self._transition(row, name, now, a, actor="worker")
        self._changed_now()
        return row.view(self.records[row.record]) if isinstance(row, FollowUpRow) else row.view()

    async def rows_of(self, record_id: str) -> RecordRows:
        await anyio.lowlevel.checkpoint()
        self.calls.append("rows_of")
        return self._rows(record_id)

    def _rows(self, record_id: str) -> RecordRows:
        files = [f.model_copy() for f, _ in self._files.values() if f.record == record_id]
        attempts = [a.row.model_copy() for a in self._attempts.values() if a.row.record == record_id]
        return RecordRows(files, attempts)

    async def files_of(self, record_id: str, role: str) -> list[FileRow]:
        await anyio.lowlevel.checkpoint()
        self.calls.append("files_of")
        return [
            f.model_copy()
            for f, _ in self._files.values()
            if f.record == record_id and f.role == role and not f.superseded
        ]

    async def attempts_of(self, record_id: str) -> list[AttemptRow]:
        await anyio.lowlevel.checkpoint()
        self.calls.append("attempts_of")
        return [a.row.model_copy() for a in self._attempts.values() if a.row.record == record_id]

    async def download(self, file: FileRow, dest: Path) -> int:
        await anyio.lowlevel.checkpoint()
        data = self._files[file.id][1]
        await anyio.Path(dest).write_bytes(data)
        return len(data)

    async def raw_response(self, attempt: AttemptRow) -> bytes:
        await anyio.lowlevel.checkpoint()
        raw = self._attempts[attempt.id].raw
        if raw is None:
            raise StorageError(f"attempt {attempt.id} has no raw response", status=404)
        return raw

    async def count_records(self, stages: Sequence[str]) -> dict[tuple[str, bool], int]:
        await anyio.lowlevel.checkpoint()
        counts = {(s, h): 0 for s in stages for h in (False, True)}
        for r in self.records.values():
            key = (r.state, r.halted_at != "")
            if key in counts:
                counts[key] += 1
        return counts

    async def login_figures(self) -> LoginFigures:
        await anyio.lowlevel.checkpoint()
        return self.logins.model_copy()

    async def watch(self, on_change: Callable[[], None]) -> None:
        on_change()  # as a (re)connect does: whatever happened before is news
        while True:
            changed = self._changed
            await changed.wait()
            on_change()

    async def attach_file(
        self,
        claim: Claim,
        path: Path | None,
        *,
        role: str,
        format: str,
        duration_ms: int,
        location: str = "",
        place: PiecePlace | None = None,
    ) -> FileRow:
        await anyio.lowlevel.checkpoint()
        place = place or PiecePlace.whole(duration_ms)
        if role not in (FileRole.NORMALIZED, FileRole.PLAYABLE):  # an original is intake's alone
            raise StorageError("'role' must be normalized or playable", status=400)
        if path is None and place.speech_ms > 0:
            raise StorageError("a file with speech needs its blob", status=400)
        data = await anyio.Path(path).read_bytes() if path is not None else None
        self._fenced(claim)
        row = self._store_file(
            claim.id, role, path.name if path else "", data, format=format, duration_ms=duration_ms, location=location
        )
        for name in ("piece", "pieces", "offset_ms", "speech_ms", "speech"):
            setattr(row, name, getattr(place, name))
        return row.model_copy()

    async def charge_audio(self, claim: Claim, duration_ms: int) -> str | None:
        await anyio.lowlevel.checkpoint()
        row = self._fenced(claim)
        row.duration_ms = duration_ms
        since = self.clock.now_ms() - 24 * 3600 * 1000
        others = sum(
            r.quota_ms
            for r in self.records.values()
            if r.owner == row.owner
            and r.id != row.id
            and r.created_ms >= since
            and not (r.halted_at and r.state == "uploaded")
        )
        if self.audio_ms_per_day and others + duration_ms > self.audio_ms_per_day:
            row.quota_ms = 0
            return f"the recording is {duration_ms} ms long and its sender's others hold {others} ms"
        row.quota_ms = duration_ms
        return None

    async def create_attempt(
        self, claim: Claim, *, provider: str, model: str, audio_uri: str = "", piece: int = 0, offset_ms: int = 0
    ) -> str:
        await anyio.lowlevel.checkpoint()
        self._fenced(claim)
        row = AttemptRow(
            id=_id(),
            record=claim.id,
            provider=provider,
            model=model,
            audio_uri=audio_uri,
            piece=piece,
            offset_ms=offset_ms,
            status=AttemptStatus.STARTED,
            created=self._stamp(),
        )
        self._attempts[row.id] = _Attempt(row)
        return row.id

    async def update_attempt(self, claim: Claim, attempt_id: str, change: AttemptChange) -> AttemptRow:
        await anyio.lowlevel.checkpoint()
        self._fenced(claim)
        attempt = self._attempts.get(attempt_id)
        if attempt is None or attempt.row.record != claim.id:
            raise StorageError("no such attempt of this record", status=400)
        if change.status is not None and change.status not in set(AttemptStatus):
            raise StorageError(f"unknown attempt status '{change.status}'", status=400)
        for name in ("operation_id", "audio_uri", "status"):
            value = getattr(change, name)
            if value is not None:
                setattr(attempt.row, name, str(value))
        if change.copies_removed_at is not None:
            attempt.row.copies_removed_at, attempt.row.copies_error = change.copies_removed_at, ""
        if change.raw_response is not None:
            attempt.raw = change.raw_response
            # Every stored version has a name of its own, as PocketBase names uploads.
            stem, dot, ext = change.raw_name.rpartition(".")
            attempt.row.raw_response = f"{stem}_{_id()[:10]}{dot}{ext}" if dot else f"{change.raw_name}_{_id()[:10]}"
        return attempt.row.model_copy()

    async def put_text(
        self, claim: Claim, kind: str, content: str, segments: Any = None, *, language: str | None = None
    ) -> None:
        await anyio.lowlevel.checkpoint()
        row = self._fenced(claim)
        if language is not None and language in LANGUAGES:
            row.language = language
        self.texts[(claim.id, kind)] = _Text(content, segments)
        # A document made from the text it replaces would no longer be this one (lib/attachments.js).
        self.documents.pop((claim.id, kind), None)

    async def note(self, claim: Claim, text: str) -> None:
        await anyio.lowlevel.checkpoint()
        row = self._fenced(claim)
        self._journal(row, "note", text[:5000], "worker")

    async def words(self, claim: Claim) -> list[str]:
        await anyio.lowlevel.checkpoint()
        rec = self._fenced(claim)
        if isinstance(rec, FollowUpRow):
            raise StorageError("not a recording's claim", status=400)
        return taught_words(self.taught.get(rec.owner, []) + sorted(self.dictionaries.get(rec.owner, [])))

    async def insights_source(self, claim: Claim) -> dict[str, Any]:
        await anyio.lowlevel.checkpoint()
        ins = self._fenced(claim)
        if not isinstance(ins, InsightsRow):
            raise StorageError("not an insights claim", status=400)
        rec = self.records[ins.record]
        text = self.texts.get((rec.id, "transcript"))
        self.sources_read.append(rec.owner)
        return {
            "text": text.content if text else "",
            "segments": list(text.segments or []) if text else [],
            "language": rec.language,
            "title": rec.title,
            "topics": sorted(self.dictionaries.get(rec.owner, [])),
        }

    async def literary_source(self, claim: Claim) -> dict[str, Any]:
        await anyio.lowlevel.checkpoint()
        row = self._fenced(claim)
        if not isinstance(row, LiteraryRow):
            raise StorageError("not a literary claim", status=400)
        rec = self.records[row.record]
        text = self.texts.get((rec.id, "transcript"))
        return {
            "text": text.content if text else "",
            "segments": list(text.segments or []) if text else [],
            "language": rec.language,
            "topics": sorted(self.dictionaries.get(rec.owner, [])),
        }

    async def store_literary(
        self,
        claim: Claim,
        result: dict[str, Any],
        document: bytes | None = None,
        *,
        transcript_document: bytes | None = None,
    ) -> None:
        await anyio.lowlevel.checkpoint()
        row = self._fenced(claim)
        if not isinstance(row, LiteraryRow):
            raise StorageError("not a literary claim", status=400)
        segments = result.get("segments")
        if not isinstance(segments, list):
            raise StorageError("'segments' must be a list", status=400)
        self.texts[(row.record, "literary")] = _Text(str(result.get("content", "")), segments)
        self.documents[(row.record, "literary")] = document or b""
        if transcript_document is not None and (row.record, "transcript") in self.texts:
            self.documents[(row.record, "transcript")] = transcript_document

    async def store_insights(self, claim: Claim, result: dict[str, Any]) -> None:
        await anyio.lowlevel.checkpoint()
        ins = self._fenced(claim)
        if not isinstance(ins, InsightsRow):
            raise StorageError("not an insights claim", status=400)
        rec = self.records[ins.record]
        names: list[str] = []
        for n in result.get("topics", []):
            name = str(n).strip()[:200]
            if name and name not in names and len(names) < 5:
                names.append(name)
        known = self.dictionaries.setdefault(rec.owner, [])
        known += [n for n in names if n not in known]
        brief = str(result.get("brief", ""))[:5000]
        rec.brief, rec.topics = brief, names
        rec.queue_rev += 1
        ins.quotes = list(result.get("quotes", []))[:20]
        ins.quotes_for = brief
        for name in ("language", "provider", "model"):
            setattr(ins, name, str(result.get(name, "")))
        ins.proposed, ins.kept = int(result.get("proposed", 0)), int(result.get("kept", 0))
        missing = str(result.get("no_brief", "")) if not brief else ""
        ins.no_brief = missing if missing in ("no_speech", "nothing_usable") else ""
        ins.no_brief_reason = str(result.get("no_brief_reason", ""))[:2000] if ins.no_brief else ""

    async def attempts_to_sweep(self, limit: int = 100) -> list[SweepItem]:
        await anyio.lowlevel.checkpoint()
        items = []
        for a in self._attempts.values():
            if a.row.copies_removed_at == 0 and (a.row.operation_id or a.row.audio_uri):
                record = self.records[a.row.record]
                items.append(SweepItem(a.row.model_copy(), record.state, record.halted_at))
        return items[:limit]

    async def copies_removed(self, attempt_id: str, error: str = "") -> None:
        await anyio.lowlevel.checkpoint()
        attempt = self._attempts[attempt_id]
        if error:
            if not attempt.row.copies_error:
                record = self.records[attempt.row.record]
                text = f"could not remove the provider-side copies of attempt {attempt_id} (a sweep will try again)"
                self._journal(record, "note", f"{text}: {error}", "worker")
            attempt.row.copies_error = error
        else:
            attempt.row.copies_removed_at, attempt.row.copies_error = self.clock.now_ms(), ""

    # -- normalized copies of finished recordings -------------------------------------------

    async def records_with_normalized_copies(self, done_before_ms: int, limit: int = 100) -> list[str]:
        await anyio.lowlevel.checkpoint()
        found: dict[str, None] = {}
        for f, _ in self._files.values():
            kept = f.role == FileRole.NORMALIZED and f.blob and not f.removed_at
            if kept and self._done_before(f.record, done_before_ms):
                found[f.record] = None
        return list(found)[:limit]

    async def remove_normalized(self, record_id: str, done_before_ms: int) -> tuple[int, int]:
        await anyio.lowlevel.checkpoint()
        if not self._done_before(record_id, done_before_ms):
            return 0, 0
        removed = size = 0
        for fid, (f, _) in list(self._files.items()):
            if f.record == record_id and f.role == FileRole.NORMALIZED and f.blob and not f.removed_at:
                removed, size = removed + 1, size + f.size
                f.blob, f.removed_at = "", self.clock.now_ms()
                self._files[fid] = (f, b"")
        if removed:
            row = self.records[record_id]
            days = max(0, self.clock.now_ms() - row.state_entered_at) / 86_400_000
            self._journal(
                row,
                "note",
                f"normalized audio removed, the recording done {days:.1f} days ago: {removed} file(s), "
                f"{size / 1e6:.1f} MB; the original and the transcript stay "
                "(set the stage to 'uploaded' to normalize again)",
                "worker",
            )
        return removed, size

    def _done_before(self, record_id: str, done_before_ms: int) -> bool:
        row = self.records[record_id]
        return row.state == "done" and not row.halted_at and row.state_entered_at <= done_before_ms

    # -- internals ------------------------------------------------------------------------

    def _fenced(self, claim: Claim) -> Any:
        row: _Queued | None = (
            self._queue_rows(claim.queue).get(claim.id) if claim.queue in FOLLOW_UPS else self.records.get(claim.id)
        )
        if row is None or claim.token == "" or row.claim_token != claim.token:
            raise FencedOut("claim token no longer matches")
        return row

    @staticmethod
    def _release(row: _Queued) -> None:
        row.claim_token, row.claim_expires_at, row.activity = "", 0, ""

    # -- the transitions: memory_transitions.TRANSITIONS, applied as lib/settle.js and lib/panel.js do --

    @property
    def _world(self) -> _World:
        return _World(self)

    def _args(self, name: str, body: dict[str, Any], now: int, table: str) -> Args:
        """What the settle route reads of a claim's holder's request for transition ``name``."""
        read = TRANSITIONS[name].args
        if read is None:
            raise StorageError(f"'outcome' must be one of {', '.join(OUTCOMES)}", status=400)
        return read(self._world, body, now, table)

    def _transition(self, row: _Queued, name: str, now: int, a: Args, *, actor: str) -> None:
        """Transition ``name`` applied to the stored ``row``: its fields, its journal row, what else it does."""
        spec = TRANSITIONS[name]
        rec = copy.copy(row)  # the row as stored before the write, which the entry reads
        self._set(row, spec.fields(self._world, rec, now, a))
        self._journalled(rec, name, a, actor)
        if spec.after is not None:
            spec.after(self._world, _table(rec), rec, a, now)

    @staticmethod
    def _set(row: _Queued, fields: dict[str, Any]) -> None:
        for name, value in fields.items():
            setattr(row, name, value)

    def _journalled(self, rec: _Queued, name: str, a: Args, actor: str) -> None:
        """The journal row of transition ``name`` of ``rec`` (lib/transitions.js journalled); none for a
        transition that keeps the claim."""
        said = TRANSITIONS[name].journal
        if said is None:
            return
        stage, text = said(self._world, a, _table(rec), rec, actor)
        if isinstance(rec, FollowUpRow):
            # A follow-up row's events go on its recording's journal, under the queue's name.
            self.events.append(Event(rec.record, stage or rec.queue, name, text[:5000], actor))
        else:
            self.events.append(Event(rec.id, stage or rec.state, name, text[:5000], actor))

    def _store_file(
        self,
        record_id: str,
        role: str,
        name: str,
        data: bytes | None,
        *,
        format: str,
        duration_ms: int,
        location: str = "",
    ) -> FileRow:
        row = FileRow(
            id=_id(),
            record=record_id,
            role=role,
            format=format,
            blob=f"{_id()}_{name}" if data is not None else "",
            name=name,
            location=location,
            size=len(data) if data is not None else 0,
            duration_ms=duration_ms,
        )
        self._files[row.id] = (row, data if data is not None else b"")
        self._changed_now()
        return row

    def _journal(self, row: _Queued, kind: str, text: str, actor: str) -> None:
        if isinstance(row, FollowUpRow):
            # A follow-up row's events go on its recording's journal, under the queue's name.
            self.events.append(Event(row.record, row.queue, kind, text, actor))
        else:
            self.events.append(Event(row.id, row.state, kind, text, actor))

    def _stamp(self) -> str:
        # Rows of one millisecond keep their order: created, then insertion.
        self._order += 1
        return f"{db_time(self.clock.now_ms())}#{self._order:09d}"

    def _changed_now(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
