"""What storage hands the pipeline: a claim, a record's queue fields, its files and attempts.

Content never rides with these (ST7): texts and raw responses are read only
when a step asks for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

__all__ = [
    "INSIGHTS",
    "LITERARY",
    "MAX_WORDS",
    "RECORDS",
    "AttemptChange",
    "AttemptRow",
    "AttemptStatus",
    "AudioRecord",
    "Claim",
    "Claimed",
    "FileRole",
    "FileRow",
    "LoginFigures",
    "NoWork",
    "PiecePlace",
    "RecordRows",
    "Speech",
    "SweepItem",
    "taught_words",
]

# Where the speech is in a piece: (start, end) pairs in ms from the piece's start, found once at normalize.
Speech = tuple[tuple[int, int], ...]


class AttemptStatus(StrEnum):
    """Where a recognition attempt stands; mirrored by the schema's select on ``recognition_attempts.status``."""

    STARTED = "started"  # the row exists; the provider may not have been called yet
    RUNNING = "running"  # the provider accepted it: operation_id is set
    READY = "ready"  # the raw response is stored
    CLEANED = "cleaned"  # the transcript is stored and the provider-side copy removed
    LOST = "lost"  # lost for good at the provider: never polled or finalized again
    SUPERSEDED = "superseded"  # the owner set the stage back: submit starts a new one


class FileRole(StrEnum):
    """Mirrored by the schema's select on ``files.role``."""

    ORIGINAL = "original"  # as the sender uploaded it, never replaced
    NORMALIZED = "normalized"  # the provider's input, made by normalize
    PLAYABLE = "playable"  # a copy a browser plays of an original it cannot, made by normalize; kept for good


# The queues a claim may come from: a recording's stages, and the follow-up queues of a finished
# one (each named as its table: sidecar/pipeline/stages.py FOLLOW_UPS).
RECORDS = "records"
INSIGHTS = "insights"
LITERARY = "literary"


# The words a sender teaches recognition (pb_hooks/lib/words.js, which this mirrors): at most
# this many, each at most this many characters (the decoder's prompt holds about 220 tokens).
MAX_WORDS = 60
MAX_WORD_CHARS = 60


def taught_words(items: Iterable[str]) -> list[str]:
    """Words as recognition takes them: split at new lines, commas and semicolons, trimmed, empty,
    overlong and repeated ones (any case) left out, in order, at most ``MAX_WORDS``."""
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        for raw in re.split(r"[\n,;]+", item):
            word = " ".join(raw.split())
            if not word or len(word) > MAX_WORD_CHARS or word.lower() in seen:
                continue
            seen.add(word.lower())
            out.append(word)
    return out[:MAX_WORDS]


@dataclass(frozen=True)
class Claim:
    """The credential of one claim: every write of its results must carry the token.

    ``queue``: ``records`` (``id`` is a recording's) or a follow-up queue's table (``id`` is its row's).
    """

    id: str
    token: str
    queue: str = RECORDS


class AudioRecord(BaseModel):
    """The queue fields of a record, as the runner and the steps read them.

    An insights claim reads the same way: its row's queue fields, and from its
    recording (``recording``) the owner, the title and the language.
    """

    model_config = ConfigDict(extra="ignore")

    id: str
    recording: str = ""  # an insights row: the recording it is about
    owner: str = ""
    title: str = ""
    state: str
    state_entered_at: int = 0
    halted_at: str = ""
    halt_code: str = ""
    attempts: int = 0
    claim_token: str = ""
    claim_expires_at: int = 0
    paused_until: int = 0
    language_hint: str = ""  # the sender's hint at intake ("": none)
    language: str = ""  # found by recognition
    progress: float = 0.0  # 0..1, how far recognition has come
    progress_at: int = 0  # when it last moved (ms): its first try in the stage, or a step's progress since
    lease_ended_at: int = 0  # when the previous claim's lease ran out (0: handed back): waiting since, not work
    duration_ms: int = 0  # the recording's decoded length, stored once by normalize (0: not normalized yet)


@dataclass(frozen=True)
class Claimed:
    """A claim and the record as it stood the moment it was claimed."""

    claim: Claim
    record: AudioRecord
    # Records the claim found unreadable on its way and set aside (halted ``unclaimable``).
    set_aside: tuple[str, ...] = ()
    # A recording's files and attempts, when the claim brought them (its step reads them first).
    rows: RecordRows | None = None


@dataclass(frozen=True)
class NoWork:
    """The claim found nothing; ``next_at_ms`` is when something becomes claimable (0: unknown)."""

    next_at_ms: int = 0
    set_aside: tuple[str, ...] = ()


class FileRow(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    record: str
    role: str
    format: str = ""
    blob: str = ""
    name: str = ""
    location: str = ""
    size: int = 0
    duration_ms: int = 0
    superseded: bool = False  # an older normalized copy kept as history (the owner set the stage back)
    piece: int = 0  # a normalized file is one piece of the recording ...
    pieces: int = 1  # ... of this many
    offset_ms: int = 0  # where it starts in the recording
    speech_ms: int = 0  # how much speech it holds; 0: never sent to be recognized
    removed_at: int = 0  # when its blob was removed, its recording long done (ms); 0: kept
    speech: Speech | None = None  # where the speech is (normalize's detection); None: not stored (older pieces)
    browser_plays: str = ""  # an original: "yes" a browser plays it as uploaded, "no" not (copy made), "": unknown


@dataclass(frozen=True)
class PiecePlace:
    """Where a normalized piece lies in its recording."""

    piece: int = 0
    pieces: int = 1
    offset_ms: int = 0
    speech_ms: int = 0
    speech: Speech | None = None  # the regions of speech in it (ms from its start), when detection ran

    @classmethod
    def whole(cls, duration_ms: int) -> PiecePlace:
        """The whole recording as one piece, all of it to be recognized (a file stored without a plan)."""
        return cls(speech_ms=duration_ms)


@dataclass(frozen=True)
class AttemptChange:
    """What a step learned about its attempt; None leaves a field as it is."""

    operation_id: str | None = None
    audio_uri: str | None = None
    status: AttemptStatus | None = None
    raw_response: bytes | None = None  # stored as an attachment, never a column (ST7)
    raw_name: str = "response.json"
    copies_removed_at: int | None = None  # the provider-side copies are gone since then (ms)


class AttemptRow(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    record: str
    provider: str
    model: str = ""
    operation_id: str = ""
    audio_uri: str = ""
    status: str = ""
    raw_response: str = ""
    created: str = ""
    piece: int = 0  # the piece of the recording this attempt recognizes
    offset_ms: int = 0
    copies_removed_at: int = 0  # when the provider-side copies were removed; 0: not yet
    copies_error: str = ""  # why they could not be removed yet


@dataclass
class RecordRows:
    """A recording's files (every role, superseded ones included) and its attempts, oldest first."""

    files: list[FileRow]
    attempts: list[AttemptRow]


@dataclass(frozen=True)
class SweepItem:
    """An attempt that still has provider-side copies, and where its record stands."""

    attempt: AttemptRow
    record_state: str
    record_halted_at: str  # "" when not halted


class LoginFigures(BaseModel):
    """What PocketBase's login guard has seen (pb_hooks/lib/logins.js), for the metrics: wrong passwords
    and tries turned away since PocketBase started, and the accounts under attack now."""

    model_config = ConfigDict(extra="ignore")

    failed_logins: int = 0
    refused_logins: int = 0
    accounts_under_attack: int = 0
