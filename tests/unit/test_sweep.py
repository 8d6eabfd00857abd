"""The sweep of provider-side copies (O6) on the twin: what is due, what is kept, what fails."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from sidecar.outcome import HaltCode, RetryableError
from sidecar.pipeline.sweep import sweep_normalized, sweep_once
from sidecar.providers.base import Provider
from sidecar.runtime.clock import FakeClock
from sidecar.steps.base import Providers
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import AttemptChange, AttemptStatus, Claimed, FileRole, PiecePlace
from sidecar.storage.transitions import Advanced, Halted, Postponed
from tests.support.fakes import StubProvider

pytestmark = pytest.mark.anyio
LEASES = {s: timedelta(minutes=2) for s in ("uploaded", "normalized", "submitted", "transcribed")}
KEEP = timedelta(days=3)


class Copies(StubProvider):
    """Holds 'copies' per operation; removing them may fail."""

    name = "cloud"

    def __init__(self) -> None:
        self.held: set[str] = set()
        self.failing = False

    async def cleanup(self, operation_id: str, audio_uri: str) -> None:
        if self.failing:
            raise RetryableError("Object Storage could not delete the uploaded audio (503 SlowDown)")
        self.held.discard(operation_id)


async def attempt(
    storage: InMemoryStorage, provider: Copies, rid: str, op: str, status: AttemptStatus, *, then: str = "pause"
) -> str:
    """An attempt of ``rid`` with copies at the provider; the record then waits (paused) or is done."""
    got = await storage.claim(LEASES)
    assert isinstance(got, Claimed) and got.record.id == rid
    aid = await storage.create_attempt(got.claim, provider=provider.name, model="m")
    await storage.update_attempt(got.claim, aid, AttemptChange(op, "s3://bucket/" + op, status))
    provider.held.add(op)
    later = storage.clock.now_ms() + 86_400_000
    await storage.settle(got.claim, Advanced("done") if then == "done" else Postponed(later, "waiting"))
    storage.clock.advance(0.01)  # type: ignore[attr-defined]
    return aid


async def sweep(storage: InMemoryStorage, provider: Copies) -> tuple[int, int]:
    def provider_for(name: str) -> Provider:
        assert name == "cloud"
        return provider

    return await sweep_once(storage, Providers(provider, provider_for).remove_copies, storage.clock, KEEP)


async def test_copies_of_done_lost_and_redone_attempts_go_those_in_play_stay(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    cloud = Copies()
    done = storage.add_record()
    await attempt(storage, cloud, done, "op-done", AttemptStatus.READY, then="done")
    lost = storage.add_record()
    await attempt(storage, cloud, lost, "op-lost", AttemptStatus.LOST)
    redone = storage.add_record()
    await attempt(storage, cloud, redone, "op-old", AttemptStatus.RUNNING)
    storage.owner_set_stage(redone, "normalized")  # the old attempt is superseded...
    await attempt(storage, cloud, redone, "op-new", AttemptStatus.RUNNING)  # ... by a newer one
    playing = storage.add_record()
    await attempt(storage, cloud, playing, "op-playing", AttemptStatus.RUNNING)

    assert await sweep(storage, cloud) == (3, 0)
    assert cloud.held == {"op-new", "op-playing"}
    assert await sweep(storage, cloud) == (0, 0)  # removed once, marked: not tried again


async def test_a_halted_records_copies_are_kept_for_a_resume_then_removed(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    cloud = Copies()
    rid = storage.add_record()
    await attempt(storage, cloud, rid, "op-1", AttemptStatus.RUNNING)
    clock.advance(86_401)
    got = await storage.claim(LEASES)
    assert isinstance(got, Claimed)
    await storage.settle(got.claim, Halted(HaltCode.ATTEMPTS_EXHAUSTED, "attempts exhausted"))
    clock.advance(2 * 86400)
    assert await sweep(storage, cloud) == (0, 0) and cloud.held == {"op-1"}
    clock.advance(2 * 86400)
    assert await sweep(storage, cloud) == (1, 0) and cloud.held == set()


async def test_a_removal_that_fails_is_noted_once_and_tried_again(storage: InMemoryStorage, clock: FakeClock) -> None:
    cloud = Copies()
    rid = storage.add_record()
    aid = await attempt(storage, cloud, rid, "op-1", AttemptStatus.LOST)
    cloud.failing = True
    assert await sweep(storage, cloud) == (0, 1)
    assert await sweep(storage, cloud) == (0, 1)
    notes = [e.text for e in storage.journal_of(rid) if e.kind == "note"]
    assert len(notes) == 1 and "SlowDown" in notes[0] and aid in notes[0]
    cloud.failing = False
    assert await sweep(storage, cloud) == (1, 0)
    [row] = await storage.attempts_of(rid)
    assert row.copies_removed_at > 0 and row.copies_error == ""


async def finished_with(storage: InMemoryStorage, tmp_path: Path, *, speech: bool = True) -> str:
    """A record whose normalize stored a copy (or, without speech, a row and no copy), then done."""
    rid = storage.add_record()
    got = await storage.claim(LEASES)
    assert isinstance(got, Claimed) and got.record.id == rid
    audio = tmp_path / f"{rid}.wav"
    audio.write_bytes(b"RIFF" + bytes(50_000))
    place = PiecePlace(0, 1, 0, 1000 if speech else 0)
    await storage.attach_file(
        got.claim, audio if speech else None, role="normalized", format="wav_pcm16", duration_ms=1000, place=place
    )
    await storage.settle(got.claim, Advanced("done"))
    return rid


async def test_normalized_copies_go_keep_normalized_after_the_recording_is_done(
    storage: InMemoryStorage, clock: FakeClock, tmp_path: Path
) -> None:
    keep = timedelta(days=7)
    done = await finished_with(storage, tmp_path)
    silent = await finished_with(storage, tmp_path, speech=False)
    clock.advance(6 * 86400)
    later = await finished_with(storage, tmp_path)  # done six days after the first
    waiting = storage.add_record()
    assert await sweep_normalized(storage, clock, keep) == (0, 0)

    clock.advance(86400 + 1)
    assert await sweep_normalized(storage, clock, keep) == (1, 50_004)
    [gone] = await storage.files_of(done, FileRole.NORMALIZED)
    assert gone.blob == "" and gone.removed_at == clock.now_ms()
    assert (await storage.files_of(done, FileRole.ORIGINAL))[0].blob  # the original stays
    assert [(await storage.files_of(r, FileRole.NORMALIZED))[0].blob != "" for r in (later,)] == [True]
    assert (await storage.files_of(silent, FileRole.NORMALIZED))[0].removed_at == 0  # nothing there to remove
    assert await storage.files_of(waiting, FileRole.NORMALIZED) == []
    assert await sweep_normalized(storage, clock, keep) == (0, 0)  # once

    clock.advance(6 * 86400)
    assert await sweep_normalized(storage, clock, keep) == (1, 50_004)
    assert any(
        e.text.startswith("normalized audio removed, the recording done 7.0 days ago")
        for e in storage.journal_of(later)
    )


async def test_a_record_set_back_before_the_sweep_keeps_its_copies(
    storage: InMemoryStorage, clock: FakeClock, tmp_path: Path
) -> None:
    rid = await finished_with(storage, tmp_path)
    clock.advance(8 * 86400)
    storage.owner_set_stage(rid, "normalized")  # a redo: its copy is needed again
    assert await sweep_normalized(storage, clock, timedelta(days=7)) == (0, 0)
    assert (await storage.files_of(rid, FileRole.NORMALIZED))[0].blob
