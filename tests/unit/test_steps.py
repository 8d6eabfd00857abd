"""The steps on the in-memory twin: what each reads and writes under its claim."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sidecar.clock import FakeClock
from sidecar.outcome import RetryableError, Verdict
from sidecar.providers.base import Polled
from sidecar.service import default_steps
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import AttemptChange, AttemptStatus, Claimed
from sidecar.storage.transitions import Enter
from tests.support.fakes import StubProvider
from tests.support.sidecar import twin_sidecar

pytestmark = pytest.mark.anyio


async def submitted(storage: InMemoryStorage, provider: str = "stub") -> str:
    """A record whose recognition was started (operation op-1), waiting in ``submitted``."""
    rid = storage.add_record()
    for to in ("normalized", "submitted"):
        got = await storage.claim({"uploaded": timedelta(minutes=5), "normalized": timedelta(minutes=5)})
        assert isinstance(got, Claimed)
        if to == "submitted":
            aid = await storage.create_attempt(got.claim, provider=provider, model="m")
            await storage.update_attempt(got.claim, aid, AttemptChange("op-1", status=AttemptStatus.RUNNING))
        await storage.settle(got.claim, Enter(to))
    return rid


async def test_a_provider_outage_while_polling_postpones_instead_of_spending_attempts(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    class Down(StubProvider):
        async def poll(self, operation_id: str) -> Polled:
            raise RetryableError("503 from the provider", retry_after=timedelta(seconds=42))

    rid = await submitted(storage)
    async with twin_sidecar(storage, default_steps(), provider=Down()) as pool:
        got = await storage.claim(pool.runner.table.leases())
        assert isinstance(got, Claimed)
        assert await pool.runner.run(got) is Verdict.POSTPONED
    row = storage.row(rid)
    assert row.attempts == 0 and row.halted_at == "" and row.state == "submitted"
    assert row.paused_until >= clock.now_ms() + 42_000
    assert "503 from the provider" in storage.journal_of(rid)[-1].text
