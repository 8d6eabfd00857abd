"""The provider interface: what the steps need from a speech recognizer.

A provider is asked, in order, by the steps:

* ``audio_spec`` (normalize): the audio it reads (container, rate, channels,
  size and duration caps);
* ``find_started`` then ``start`` (submit): start recognition of a file,
  unless an operation for this attempt already exists (P18: no second paid
  call). A synchronous provider returns the raw result from ``start``;
* ``poll`` (poll): ask whether the result is ready; ready → raw bytes;
* ``parse`` (finalize): the raw response → ``Transcript``;
* ``cleanup`` (finalize): remove any provider-side copy.

Errors are raised as the classified errors of ``sidecar.outcome``
(``RetryableError``, ``PermanentError``, ``PostponeError``) where they enter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import ClassVar, Protocol

from pydantic import ValidationError

from sidecar.activity import Activity
from sidecar.media.audio import AudioSpec
from sidecar.outcome import HaltCode, PermanentError
from sidecar.transcript.model import Transcript

__all__ = ["AudioSpec", "OnProgress", "Polled", "Provider", "StartRequest", "Started"]


@dataclass(frozen=True)
class StartRequest:
    """One recognition to start: the normalized audio and a key unique to the attempt."""

    audio: Path
    format: str
    duration_ms: int
    attempt_key: str  # unique, stable across retries of the same attempt
    # Where the speech is in the audio, as normalize found it: (start, end) in ms from its start.
    # None: not known (a piece stored before it was kept); a provider that needs it finds it itself.
    speech: Sequence[tuple[int, int]] | None = None
    language: str | None = None  # the sender's hint (a language code); None: the provider's setting
    # Names and terms the sender taught (their words and topics): recognition is biased towards them.
    words: Sequence[str] = ()
    # A provider that recognizes as it goes reports how many seconds of the audio
    # it has recognized (from any thread); the step turns that into progress (LA4).
    report: Callable[[float], None] | None = None
    # ... and, as soon as it knows them, the language it recognizes in (a code of
    # sidecar.transcript.languages) and what it is doing now (one of activity.REPORTED).
    found_language: Callable[[str], None] | None = None
    doing: Callable[[Activity], None] | None = None


@dataclass(frozen=True)
class Started:
    """The provider accepted the work. ``raw`` is set when the result came back at once."""

    operation_id: str
    audio_uri: str = ""
    raw: bytes | None = None


@dataclass(frozen=True)
class Polled:
    ready: bool
    raw: bytes | None = None
    retry_in: timedelta | None = None


# Called by the provider as soon as it knows where the audio lives and, again,
# as soon as the operation id exists, so the step can store each durably
# before anything else can go wrong (P18).
OnProgress = Callable[[str, str], Awaitable[None]]  # (field, value): "audio_uri" | "operation_id"


class Provider(Protocol):
    name: str
    model: str

    @property
    def audio_spec(self) -> AudioSpec: ...

    async def find_started(self, attempt_key: str, audio_uri: str) -> str | None:
        """An operation already started for this attempt (its id), or None."""
        ...

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started: ...

    async def poll(self, operation_id: str) -> Polled: ...

    def parse(self, raw: bytes) -> Transcript: ...

    async def cleanup(self, operation_id: str, audio_uri: str) -> None: ...

    async def aclose(self) -> None: ...


class AnswersAtStart:
    """For a provider that recognizes inside ``start`` and keeps nothing on its side: there is no operation
    to poll and nothing to clean up. ``answers_as`` names the provider in the halt reason."""

    answers_as: ClassVar[str]

    async def poll(self, operation_id: str) -> Polled:
        raise PermanentError(
            HaltCode.PROVIDER_FAILED,
            f"the {self.answers_as} provider answers at start; there is no operation to poll",
        )

    async def cleanup(self, operation_id: str, audio_uri: str) -> None:
        return None


def stored_transcript(raw: bytes, provider: str) -> Transcript:
    """A transcript stored as our own JSON, read back; one that cannot be read halts provider_failed."""
    try:
        return Transcript.model_validate_json(raw)
    except ValidationError as e:
        raise PermanentError(HaltCode.PROVIDER_FAILED, f"the {provider} result could not be read") from e
