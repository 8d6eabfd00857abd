"""The steps on the in-memory twin: what each reads and writes under its claim."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

import pytest

from sidecar.clock import FakeClock
from sidecar.outcome import CredentialsRefused, RetryableError, Verdict
from sidecar.providers.base import Polled
from sidecar.service import default_steps
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import AttemptChange, AttemptStatus, Claimed
from sidecar.storage.transitions import Enter
from sidecar.transcript import Segment, Transcript
from tests.support.fakes import StubProvider
from tests.support.sidecar import twin_sidecar

pytestmark = pytest.mark.anyio


async def submitted(storage: InMemoryStorage, provider: str = "stub") -> str:
    """A record whose recognition was started (operation op-1), waiting in ``submitted``."""
    rid = storage.add_record()
    for to in ("normalized", "submitted"):
        got = await storage.claim({"uploaded": timedelta(minutes=5), "normalized": timedelta(minutes=5)})
        assert isinstance(got, Claimed)
        if to == "normalized":
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "audio.wav").write_bytes(b"RIFF")
                await storage.attach_file(
                    got.claim, Path(tmp) / "audio.wav", role="normalized", format="wav_pcm16", duration_ms=1000
                )
        if to == "submitted":
            aid = await storage.create_attempt(got.claim, provider=provider, model="m")
            await storage.update_attempt(got.claim, aid, AttemptChange("op-1", status=AttemptStatus.RUNNING))
        await storage.settle(got.claim, Enter(to))
    return rid


async def test_a_poll_that_fails_spends_an_attempt_and_keeps_the_operation(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    """O10: a poll that cannot reach its outcome counts; exhausting them halts; a resume polls again."""
    polls: list[str] = []
    down = True

    class Flaky(StubProvider):
        name = "stub"

        async def poll(self, operation_id: str) -> Polled:
            polls.append(operation_id)
            if down:
                raise RetryableError("503 from the provider", retry_after=timedelta(seconds=42))
            raw = Transcript(text="hello", segments=[Segment(start=0, end=1, text="hello")]).model_dump_json()
            return Polled(ready=True, raw=raw.encode())

    rid = await submitted(storage)
    async with twin_sidecar(storage, default_steps(), provider=Flaky(), max_attempts=2, retry_delay=1) as pool:
        verdicts = []
        for _ in range(3):
            got = await storage.claim(pool.runner.table.leases())
            assert isinstance(got, Claimed)
            verdicts.append(await pool.runner.run(got))
            clock.advance(60)
        assert verdicts == [Verdict.FAILED, Verdict.FAILED, Verdict.HALTED]
        row = storage.row(rid)
        assert row.halt_code == "attempts_exhausted" and row.state == "submitted"
        assert row.available_at == 0
        [attempt] = await storage.attempts_of(rid)
        assert (attempt.operation_id, attempt.status) == ("op-1", AttemptStatus.RUNNING)  # kept, not failed

        down = False
        storage.owner_resume(rid)
        got = await storage.claim(pool.runner.table.leases())
        assert isinstance(got, Claimed)
        assert await pool.runner.run(got) is Verdict.ADVANCED
    assert polls == ["op-1"] * 3  # the same operation asked again: nothing started, nothing paid twice
    assert len(await storage.attempts_of(rid)) == 1


async def test_credentials_refused_while_polling_postpone_and_tell_the_owner(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    """O5: our key failing is not the recording's fault: no attempt spent, the paid operation kept."""

    class Refusing(StubProvider):
        async def poll(self, operation_id: str) -> Polled:
            raise CredentialsRefused("SpeechKit refused our credentials (401)", delay=timedelta(minutes=5))

    rid = await submitted(storage)
    async with twin_sidecar(storage, default_steps(), provider=Refusing(), max_attempts=1) as pool:
        for _ in range(3):
            got = await storage.claim(pool.runner.table.leases())
            assert isinstance(got, Claimed)
            assert await pool.runner.run(got) is Verdict.POSTPONED
            clock.advance(301)
        refused = pool.runner.metrics.credentials_refused.labels(stage="submitted")._value.get()
    row = storage.row(rid)
    assert (row.attempts, row.halted_at, row.state) == (0, "", "submitted")
    assert storage.journal_of(rid)[-1].kind == "postponed"
    assert "refused our credentials" in storage.journal_of(rid)[-1].text
    [attempt] = await storage.attempts_of(rid)
    assert attempt.status == AttemptStatus.RUNNING and attempt.operation_id == "op-1"
    assert refused == 3
