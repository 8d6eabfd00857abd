"""O4: every write of a step rides out a lost answer, and a repeat never makes a second row.

A transport between the client and a real PocketBase delivers each request
but loses the answer to the first write of each kind, as a PocketBase
restart or a dropped connection would: the client must try again, and
PocketBase must recognize the repeat.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from sidecar.pocketbase.client import PocketBaseClient
from sidecar.storage.model import AttemptChange, AttemptStatus, Claimed, FileRole
from testkit.media import wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer

pytestmark = pytest.mark.anyio


class LosesTheFirstAnswer(httpx.AsyncBaseTransport):
    """Forwards every request; drops the answer the first time each write path is called."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.lost: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        kind = request.url.path.rsplit("/", 2)[-1] if "/attempts/" not in request.url.path else "attempt-update"
        if request.method in ("POST", "PUT") and "/pipeline/records/" in request.url.path and kind not in self.lost:
            await response.aread()  # PocketBase did the write ...
            self.lost.append(kind)
            raise httpx.ReadError("connection reset by peer")  # ... and its answer never arrived
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def rows(su: Caller, collection: str, rid: str) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"filter": f'record="{rid}"', "perPage": 200}
    return list(su.http.get(f"/api/collections/{collection}/records", params=params).json()["items"])


async def test_writes_whose_answers_were_lost_land_once(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, tmp_path: Path
) -> None:
    from datetime import timedelta

    rid = sender.upload(wav_bytes(0.2))
    transport = LosesTheFirstAnswer()
    account = pb.service_account
    async with PocketBaseClient(pb.url, account.email, account.password, transport=transport) as client:
        got = await client.claim({"uploaded": timedelta(minutes=2)})
        assert isinstance(got, Claimed)
        audio = tmp_path / "n.wav"
        audio.write_bytes(wav_bytes(0.3))
        made = await client.attach_file(got.claim, audio, role="normalized", format="wav_pcm16", duration_ms=300)
        aid = await client.create_attempt(got.claim, provider="p", model="m")
        await client.update_attempt(got.claim, aid, AttemptChange("op-1", status=AttemptStatus.RUNNING))
        await client.note(got.claim, "provider operation op-1 started")
        await client.put_text(got.claim, "transcript", "hello", [{"start": 0, "end": 1, "text": "hello"}])
        assert sorted(transport.lost) == ["attempt-update", "attempts", "events", "files", "transcript"]

        [normalized] = await client.files_of(rid, FileRole.NORMALIZED)
        assert normalized.id == made.id  # the repeat found the row the first try made
        [attempt] = await client.attempts_of(rid)
        assert (attempt.id, attempt.operation_id, attempt.status) == (aid, "op-1", "running")  # the id was not lost
    notes = [e for e in rows(superuser, "record_events", rid) if e["kind"] == "note"]
    assert [n["outcome_text"] for n in notes] == ["provider operation op-1 started"]
    assert len(rows(superuser, "texts", rid)) == 1
    assert len(rows(superuser, "files", rid)) == 2  # the original and one normalized copy
