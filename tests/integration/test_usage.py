"""Usage per sender and per day (the owner's views in the panel) and the audio seconds counter,
against a known set of recordings run through the real pipeline."""

from __future__ import annotations

import pytest

from sidecar.providers.instant import InstantProvider
from sidecar.serving.assembly import default_steps
from testkit.audio import speech_wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually

pytestmark = pytest.mark.anyio


async def test_usage_per_sender_and_day_matches_the_recordings(pb: PocketBaseServer, superuser: Caller) -> None:
    ann, bob, cy = pb.new_sender(), pb.new_sender(), pb.new_sender()
    lengths = {ann.id: [2.0, 3.0], bob.id: [1.5], cy.id: []}
    uploads = []
    for sender in (ann, bob):
        for seconds in lengths[sender.id]:
            uploads.append(sender.upload(speech_wav_bytes(seconds)))
    async with running_sidecar(pb, default_steps(), provider=InstantProvider(), workers=2) as pool:
        async with pool_running(pool):

            def all_done() -> bool:
                rows = [superuser.record(r) for r in uploads]
                return all(row["state"] == "done" for row in rows)

            await eventually(all_done, within=120)
        sent = pool.runner.metrics.audio_seconds.labels(provider="instant")._value.get()
    assert sent == pytest.approx(6.5, abs=0.05)

    daily = superuser.http.get("/api/collections/usage_daily/records", params={"perPage": 100}).json()["items"]
    by_sender = {row["sender"]: row for row in daily}
    assert set(by_sender) == {ann.id, bob.id}  # no row for a sender who sent nothing
    for who in (ann, bob):
        row = by_sender[who.id]
        assert row["recordings"] == len(lengths[who.id])
        assert row["audio_hours"] == pytest.approx(sum(lengths[who.id]) / 3600, abs=0.0001)
        assert len(row["day"]) == 10 and row["id"] == f"{who.id}/{row['day']}"
    providers = superuser.http.get("/api/collections/usage_providers/records").json()["items"]
    assert {(r["sender"], r["provider"], r["calls"]) for r in providers} == {
        (ann.id, "instant", 2),
        (bob.id, "instant", 1),
    }
    carried = {r["sender"]: r["provider_seconds"] for r in providers}
    assert carried[ann.id] == pytest.approx(5.0, abs=0.05) and carried[bob.id] == pytest.approx(1.5, abs=0.05)
    # Senders see none of it.
    for view in ("usage_daily", "usage_providers"):
        assert ann.http.get(f"/api/collections/{view}/records").status_code == 403
