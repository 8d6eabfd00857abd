"""H4: one sender cannot flood the service. Quotas at intake through the real
server, raced by real parallel uploads; every refusal is a 429 with a code, a
message and a Retry-After, and leaves nothing behind."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import pytest

from sidecar.providers.instant import InstantProvider
from sidecar.service import default_steps
from sidecar.settings import QuotaSettings
from testkit.media import wav_bytes
from testkit.pocketbase import PocketBaseServer, running_pocketbase
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow

INTAKE = "/api/transcriber/records"


def upload_at_once(http: httpx.Client, n: int, seconds: float = 0.2) -> list[httpx.Response]:
    body = wav_bytes(seconds)
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda _: http.post(INTAKE, files={"file": ("a.wav", body)}), range(n)))


def records_of(pb: PocketBaseServer, owner: str) -> int:
    found = pb.superuser().http.get(
        "/api/collections/audio_records/records", params={"filter": f"owner='{owner}'", "perPage": 1}
    )
    return int(found.json()["totalItems"])


def assert_refused(resp: httpx.Response, code: str, *, most: int) -> int:
    assert resp.status_code == 429, resp.text
    body = resp.json()
    assert body["code"] == code and len(body["message"]) > 20
    retry = int(resp.headers["Retry-After"])
    assert 1 <= retry <= most
    return retry


def test_on_the_defaults_a_burst_of_uploads_stops_at_twenty_waiting(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path, quotas=QuotaSettings()) as pb:
        sender, neighbour = pb.new_sender(), pb.new_sender()
        answers = upload_at_once(sender.http, 30)
        assert sorted(r.status_code for r in answers) == [201] * 20 + [429] * 10
        for refused in (r for r in answers if r.status_code == 429):
            assert_refused(refused, "too_many_waiting", most=60)
        assert records_of(pb, sender.id) == 20  # a refusal writes nothing
        # another sender's queue is their own
        assert neighbour.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.2))}).status_code == 201

        # a halted recording no longer waits: its place is free again
        su = pb.superuser()
        first = next(r.json()["id"] for r in answers if r.status_code == 201)
        assert (
            su.http.patch(
                f"/api/collections/audio_records/records/{first}",
                json={"halted_at": "2026-01-01 00:00:00.000Z", "halt_code": "halted_by_owner", "halt_reason": "hold"},
            ).status_code
            == 200
        )
        assert sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.2))}).status_code == 201
        assert_refused(sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.2))}), "too_many_waiting", most=60)


def test_uploads_per_hour_are_counted_exactly_under_parallel_uploads(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path, quotas=QuotaSettings(uploads_per_hour=7, waiting=0, audio_hours_per_day=0)) as pb:
        sender = pb.new_sender()
        answers = upload_at_once(sender.http, 16)
        assert sorted(r.status_code for r in answers) == [201] * 7 + [429] * 9
        for refused in (r for r in answers if r.status_code == 429):
            # the hour counts from the oldest upload in it, made just now
            assert assert_refused(refused, "too_many_uploads", most=3600) > 3500
        assert records_of(pb, sender.id) == 7


def test_audio_hours_per_day_count_what_was_measured(tmp_path: Path) -> None:
    # 10 seconds a day: one 6-second recording fits, the second takes the sender over
    quotas = QuotaSettings(uploads_per_hour=0, waiting=0, audio_hours_per_day=10 / 3600)
    with running_pocketbase(tmp_path, quotas=quotas) as pb:
        sender, su = pb.new_sender(), pb.superuser()
        for _ in range(2):
            assert sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(6.0))}).status_code == 201

        async def drain() -> None:
            async with running_sidecar(pb, default_steps(), provider=InstantProvider(), workers=2) as pool:
                async with pool_running(pool):
                    await eventually(
                        lambda: all(
                            r["state"] == "done"
                            for r in su.http.get("/api/collections/audio_records/records").json()["items"]
                        ),
                        within=60,
                    )

        anyio.run(drain)
        refused = sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.2))})
        # space returns when the first recording leaves the 24-hour window
        assert assert_refused(refused, "too_much_audio", most=86400) > 86000
        assert "sent 12 seconds of audio" in refused.json()["message"]
        assert refused.json()["message"].endswith("the limit is 10 seconds.")
        assert records_of(pb, sender.id) == 2
