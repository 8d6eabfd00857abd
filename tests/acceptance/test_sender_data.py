"""One sender's data on request: exported as one archive, erased for good with an audit row, the
other senders untouched (real PocketBase, the real pipeline, the CLI as the owner runs it)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import zipfile
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.providers.instant import InstantProvider
from sidecar.sender_data import Holdings, remove_provider_copies
from sidecar.service import default_steps
from testkit.audio import SAMPLE, reencode, speech_wav_bytes
from testkit.pocketbase import PASSWORD, Caller, PocketBaseServer
from tests.support.operator import CLI, clean_env
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually

TABLES = ("audio_records", "files", "texts", "recognition_attempts", "record_events")


def _counts(data: Path, owner: str) -> dict[str, int]:
    with closing(sqlite3.connect(f"file:{data / 'data.db'}?mode=ro", uri=True)) as db:
        counts = {
            "audio_records": db.execute("SELECT COUNT(*) FROM audio_records WHERE owner = ?", (owner,)).fetchone()[0]
        }
        for table in TABLES[1:]:
            sql = f"SELECT COUNT(*) FROM {table} WHERE record IN (SELECT id FROM audio_records WHERE owner = ?)"  # noqa: S608
            counts[table] = db.execute(sql, (owner,)).fetchone()[0]
    return counts


def _stored(data: Path) -> set[str]:
    return {str(p.relative_to(data / "storage")) for p in (data / "storage").rglob("*") if p.is_file()}


async def _recordings(
    pb: PocketBaseServer, su: Caller, plan: list[tuple[Caller, int]], extra: list[str] | None = None
) -> None:
    ids = [who.upload(speech_wav_bytes(1.0)) for who, n in plan for _ in range(n)] + (extra or [])
    async with running_sidecar(pb, default_steps(), provider=InstantProvider(), workers=2) as pool:
        async with pool_running(pool):
            await eventually(
                lambda: all(
                    su.http.get(f"/api/collections/audio_records/records/{i}").json()["state"] == "done" for i in ids
                ),
                within=120,
            )


def _cli(pb: PocketBaseServer, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    data = pb.settings.pocketbase.data_dir
    return subprocess.run(
        [*CLI, "user", *args, "--data-dir", str(data)],
        env=clean_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.anyio
async def test_export_and_erase_one_sender_leave_the_others_untouched(
    pb: PocketBaseServer, superuser: Caller, tmp_path: Path
) -> None:
    ann, bob = pb.new_sender(), pb.new_sender()
    # One of hers is a phone's AMR note: a browser cannot play it, so it has a playable copy too.
    note = reencode(SAMPLE, tmp_path / "note.amr", codec="libopencore_amrnb", container="amr", rate=8000)
    await _recordings(pb, superuser, [(ann, 1), (bob, 1)], [ann.upload(note)])
    data = pb.settings.pocketbase.data_dir
    ann_before, bob_before = _counts(data, ann.id), _counts(data, bob.id)
    assert ann_before["audio_records"] == 2 and bob_before["audio_records"] == 1

    archive = tmp_path / "ann.zip"
    done = await anyio.to_thread.run_sync(lambda: _cli(pb, "export", ann.email, "--out", str(archive)))
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(archive) as zf:
        manifest: dict[str, Any] = json.loads(zf.read("sender.json"))
        names = zf.namelist()
    assert manifest["sender"] == {"id": ann.id, "email": ann.email}
    assert len(manifest["recordings"]) == 2 and {r["owner"] for r in manifest["recordings"]} == {ann.id}
    assert len(manifest["texts"]) == 2 and all(t["content"] for t in manifest["texts"])
    assert len(manifest["journal"]) == ann_before["record_events"]
    originals = [f for f in manifest["files"] if f["role"] == "original"]
    assert all(f"files/{f['record']}/files/{f['id']}/{f['blob']}" in names for f in originals) and len(originals) == 2
    (copy,) = [f for f in manifest["files"] if f["role"] == "playable"]
    assert copy["format"] == "ogg_opus" and f"files/{copy['record']}/files/{copy['id']}/{copy['blob']}" in names
    assert not any(bob.id in json.dumps(r) for r in manifest["recordings"])

    # Erase asks first: a wrong answer erases nothing.
    refused = await anyio.to_thread.run_sync(lambda: _cli(pb, "erase", ann.email, stdin="bob@example.com\n"))
    assert refused.returncode == 1 and "nothing erased" in refused.stderr
    assert _counts(data, ann.id) == ann_before

    # Each recording's live status row, as the hooks write it while its sender's page is open.
    recordings = superuser.http.get("/api/collections/audio_records/records").json()["items"]
    for rec in recordings:
        status = {"id": rec["id"], "owner": rec["owner"], "poll": {"id": rec["id"], "title": rec["title"]}}
        assert superuser.http.post("/api/collections/record_status/records", json=status).status_code == 200

    stored_before = _stored(data)
    erased = await anyio.to_thread.run_sync(lambda: _cli(pb, "erase", ann.email, stdin=f"{ann.email}\n"))
    assert erased.returncode == 0, erased.stderr
    assert "erased 2 recording(s)" in erased.stdout
    assert _counts(data, ann.id) == dict.fromkeys(TABLES, 0)
    assert _counts(data, bob.id) == bob_before  # the other sender untouched
    statuses = superuser.http.get("/api/collections/record_status/records").json()["items"]
    assert [row["owner"] for row in statuses] == [bob.id]  # hers went with her recordings
    gone = stored_before - _stored(data)
    assert gone and all(any(row in path for row in gone) for path in gone)
    assert any(path.endswith(f"{copy['id']}/{copy['blob']}") for path in gone)  # the playable copy too
    assert not any(ann_file in _stored(data) for ann_file in gone)
    # The audit outlives the rows, and cannot be removed.
    audit = superuser.http.get("/api/collections/erasures/records").json()["items"]
    assert len(audit) == 1 and audit[0]["sender_id"] == ann.id and audit[0]["recordings"] == 2
    assert audit[0]["account_erased"] is True and ann.email not in json.dumps(audit)
    assert superuser.http.delete(f"/api/collections/erasures/records/{audit[0]['id']}").status_code == 400
    login = pb.anonymous().post(
        "/api/collections/users/auth-with-password", json={"identity": ann.email, "password": PASSWORD}
    )
    assert login.status_code == 400  # the account is gone too
    assert bob.http.get("/api/transcriber/records").json()["totalItems"] == 1


@pytest.mark.anyio
async def test_erase_removes_provider_copies_first_and_stops_when_one_cannot_be() -> None:
    def attempt(i: int, provider: str, removed: int = 0) -> dict[str, Any]:
        return {
            "id": f"a{i}",
            "record": "r1",
            "provider": provider,
            "operation_id": f"op{i}",
            "audio_uri": f"s3://b/k{i}",
            "copies_removed_at": removed,
        }

    attempts = [attempt(1, "speechkit"), attempt(2, "speechkit", 1), attempt(3, "offline")]
    held = Holdings("u1", "ann@example.com", [], [], [], attempts, [], [], [], {})
    called: list[tuple[str, str, str]] = []

    async def cleanup(provider: str, operation_id: str, audio_uri: str) -> None:
        called.append((provider, operation_id, audio_uri))

    assert await remove_provider_copies(held, cleanup) == (1, [])
    assert called == [("speechkit", "op1", "s3://b/k1")]  # only the copies still there

    async def refusing(provider: str, operation_id: str, audio_uri: str) -> None:
        raise RuntimeError("AccessDenied")

    removed, failed = await remove_provider_copies(held, refusing)
    assert removed == 0 and len(failed) == 1 and "a1" in failed[0]
