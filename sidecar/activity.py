"""What is happening to a recording right now: the poll's ``activity``, a closed vocabulary.

Beside its stage, the poll says what the service is doing with a recording,
as one stable machine word. Most of it follows from the stage and whether a
worker holds the record at the moment (PocketBase derives it in
pb_hooks/lib/records.js); a step may report a finer word through its fenced
progress write (the offline engine's ``finding_speakers``), kept only while
that claim lasts.

The schema declares the same words as the values of ``audio_records.activity``
(a select field), and a test holds the two, and the README's table, together.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

__all__ = ["REPORTED", "WORDS", "Activity", "words_for"]


class Activity(StrEnum):
    QUEUED = "queued"  # waiting for a worker (uploaded, between stages, or after a failed try)
    NORMALIZING = "normalizing"  # a worker decodes the audio and cuts it into pieces
    RECOGNIZING = "recognizing"  # the words are being recognized (or sent to the provider to be)
    FINDING_SPEAKERS = "finding_speakers"  # the offline engine tells the voices apart
    WAITING_FOR_PROVIDER = "waiting_for_provider"  # a cloud provider has the audio; its result is awaited
    FINALIZING = "finalizing"  # the transcript is being put together and stored
    DONE = "done"  # the transcript is ready
    HALTED = "halted"  # stopped; halt_code says why (the owner can resume it)


# The words a step may report through its progress write; the others follow
# from the record alone (queued, done, halted), and storage refuses them.
REPORTED: frozenset[Activity] = frozenset(
    {
        Activity.NORMALIZING,
        Activity.RECOGNIZING,
        Activity.FINDING_SPEAKERS,
        Activity.WAITING_FOR_PROVIDER,
        Activity.FINALIZING,
    }
)

# How the command line and the README say each one.
WORDS: Mapping[Activity, str] = MappingProxyType(
    {
        Activity.QUEUED: "queued",
        Activity.NORMALIZING: "normalizing",
        Activity.RECOGNIZING: "recognizing",
        Activity.FINDING_SPEAKERS: "finding speakers",
        Activity.WAITING_FOR_PROVIDER: "waiting for the provider",
        Activity.FINALIZING: "finalizing",
        Activity.DONE: "done",
        Activity.HALTED: "halted",
    }
)


def words_for(activity: object, status: object = None) -> str:
    """The words for a poll's ``activity``; an unknown or missing one (an older server) falls back to the stage."""
    try:
        return WORDS[Activity(str(activity))]
    except ValueError:
        return str(status or activity or "waiting")
