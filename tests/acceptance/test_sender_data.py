"""One sender's data on request: exported as one archive, erased for good with an audit row, the
other senders untouched (real PocketBase, the real pipeline, the CLI as the owner runs it)."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import uuid
import zipfile
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from sidecar.owner.sender_data import Holdings, remove_provider_copies
from sidecar.pocketbase import process
from sidecar.providers.instant import InstantProvider
from sidecar.serving.assembly import default_steps
from testkit.audio import SAMPLE, reencode, speech_wav_bytes
from testkit.pocketbase import PASSWORD, Caller, PocketBaseServer, free_port, signed_in
from testkit.pocketbase import test_settings as settings_on
from testkit.s3 import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, S3Server
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


def _literary_state(su: Caller, rid: str) -> str:
    items = su.http.get("/api/collections/literary/records", params={"filter": f'record = "{rid}"'}).json()["items"]
    return str(items[0]["state"]) if items else ""


async def _recordings(
    pb: PocketBaseServer, su: Caller, plan: list[tuple[Caller, int]], extra: list[str] | None = None
) -> None:
    ids = [who.upload(speech_wav_bytes(1.0)) for who, n in plan for _ in range(n)] + (extra or [])
    async with running_sidecar(pb, default_steps(), provider=InstantProvider(), workers=2) as pool:
        async with pool_running(pool):
            # Done, and its literary text made (the step that follows a finished recording).
            await eventually(
                lambda: all(_literary_state(su, i) == "done" for i in ids),
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
    transcripts = [t for t in manifest["texts"] if t["kind"] == "transcript"]
    assert len(transcripts) == 2 and all(t["content"] for t in transcripts)
    # Each literary text with its Word document, and the queue rows that made them.
    literary = [t for t in manifest["texts"] if t["kind"] == "literary"]
    assert len(literary) == 2 and len(manifest["literary"]) == 2
    assert all(f"files/{t['record']}/texts/{t['id']}/{t['document']}" in names for t in literary)
    # The transcripts' Word documents, made by the same step.
    assert all(f"files/{t['record']}/texts/{t['id']}/{t['document']}" in names for t in transcripts)
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
    assert all(any(path.endswith(f"{t['id']}/{t['document']}") for path in gone) for t in literary)  # the DOCX too
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


def _unpacked_db(archive: Path, into: Path) -> Path:
    """A data directory holding only the backup's database, to be read."""
    into.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive) as zf:
        (into / "data.db").write_bytes(zf.read("data.db"))
    return into


def _members(archive: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(archive) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _zip_members(archive: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _stored_by(data: Path, owner: str, members: dict[str, bytes]) -> dict[str, bytes]:
    """The backup's stored files (and their .attrs) of the sender's rows, as the live database names them."""
    with closing(sqlite3.connect(f"file:{data / 'data.db'}?mode=ro", uri=True)) as db:
        rows = set()
        for table in ("files", "recognition_attempts", "texts"):  # texts: the literary text's Word document
            sql = f"SELECT id FROM {table} WHERE record IN (SELECT id FROM audio_records WHERE owner = ?)"  # noqa: S608
            rows |= {str(r[0]) for r in db.execute(sql, (owner,))}
    return {n: b for n, b in members.items() if n.startswith("storage/") and n.split("/")[2] in rows}


def _restored_serves(data: Path, backup: str, into: Path, sender: Caller, erased: Caller) -> dict[str, Any]:
    """Restores ``backup`` as the README says and starts PocketBase on it; ``sender``'s list of recordings there."""
    done = subprocess.run(
        [*CLI, "backup", "restore", backup, "--into", str(into), "--data-dir", str(data)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    settings = settings_on(into, free_port())
    process.prepare(settings)
    server = process.start(settings, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        process.wait_healthy(settings.pocketbase.url, server)
        refused = httpx.post(
            f"{settings.pocketbase.url}/api/collections/users/auth-with-password",
            json={"identity": erased.email, "password": PASSWORD},
            timeout=30,
        )
        assert refused.status_code == 400
        again = signed_in(settings.pocketbase.url, "sender", "users", sender.email)
        with again.http:
            listed: dict[str, Any] = again.http.get("/api/transcriber/records").json()
        return listed
    finally:
        server.terminate()
        server.wait(30)


@pytest.mark.anyio
async def test_erase_names_the_backups_holding_the_sender_and_rewrites_them_without_her(
    pb: PocketBaseServer, superuser: Caller, tmp_path: Path, s3: S3Server
) -> None:
    ann, bob, cat = pb.new_sender(), pb.new_sender(), pb.new_sender()
    marks = {who.id: f"title-of-{who.id}-{uuid.uuid4().hex}" for who in (ann, bob, cat)}
    plan = [ann, ann, bob, cat]
    ids = [who.upload(speech_wav_bytes(1.0), title=marks[who.id]) for who in plan]
    async with running_sidecar(pb, default_steps(), provider=InstantProvider(), workers=2) as pool:
        async with pool_running(pool):
            await eventually(lambda: all(superuser.record(i)["state"] == "done" for i in ids), within=120)
    ann.upload(speech_wav_bytes(1.0), title=marks[ann.id])  # and one still waiting
    data = pb.settings.pocketbase.data_dir
    assert superuser.http.post("/api/backups", json={"name": "before.zip"}).status_code == 204
    archive = data / "backups" / "before.zip"
    bob_rows = _counts(data, bob.id)
    bob_files = _stored_by(data, bob.id, _members(archive))
    assert bob_files and _stored_by(data, ann.id, _members(archive)) and _stored_by(data, cat.id, _members(archive))
    untouched = archive.read_bytes()

    def erase(who: Caller, *flags: str) -> str:
        done = _cli(pb, "erase", who.email, "--yes", *flags)
        assert done.returncode == 0, done.stderr
        return done.stdout

    # Erased without --prune-backups: the backup is named with what it holds of her, and left as it was.
    said = await anyio.to_thread.run_sync(erase, ann)
    assert "backup before.zip (" in said and f"still holds 3 recording(s) and the account of {ann.email}" in said
    assert "--prune-backups" in said and "S3" not in said
    assert archive.read_bytes() == untouched
    # Nothing of her is left in the database's file either: its freed pages were zeroed (secure_delete).
    with closing(sqlite3.connect(data / "data.db", timeout=30)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert not any(marks[ann.id].encode() in p.read_bytes() for p in data.glob("data.db*"))
    # A backup made after the erase holds nothing of her.
    assert superuser.http.post("/api/backups", json={"name": "after.zip"}).status_code == 204
    assert marks[ann.id].encode() not in _members(data / "backups" / "after.zip")["data.db"]

    # Erased with --prune-backups: each backup holding her is rewritten at once, under its name.
    said = await anyio.to_thread.run_sync(erase, cat, "--prune-backups")
    for name in ("before.zip", "after.zip"):
        assert f"backup {name} (" in said
    assert said.count(f"rewritten without 1 recording(s) and the account of {cat.email}") == 2
    # Erased earlier: found by the audit, and the backup that still held her rewritten now.
    said = await anyio.to_thread.run_sync(erase, ann, "--prune-backups")
    assert "erased earlier" in said and "backup before.zip (" in said and "after.zip" not in said
    assert "rewritten without 3 recording(s) and the account" in said and " → " in said

    members = _members(archive)
    copy = _unpacked_db(archive, tmp_path / "copy")
    for gone in (ann, cat):
        assert _counts(copy, gone.id) == dict.fromkeys(TABLES, 0)
        for name, body in members.items():  # the request log (auxiliary.db) names no title and no address
            assert marks[gone.id].encode() not in body and gone.email.encode() not in body, name
    with closing(sqlite3.connect(copy / "data.db")) as db:
        users = {r[0] for r in db.execute("SELECT id FROM users")}
        audits = db.execute("SELECT COUNT(*) FROM erasures").fetchone()[0]
    assert bob.id in users and not {ann.id, cat.id} & users
    assert audits == 2  # each rewrite leaves its audit row in the backup
    assert _counts(copy, bob.id) == bob_rows and marks[bob.id].encode() in members["data.db"]
    assert {n: b for n, b in members.items() if n.startswith("storage/")} == bob_files  # hers gone, his intact

    listed = await anyio.to_thread.run_sync(_restored_serves, data, "before.zip", tmp_path / "restored", bob, ann)
    assert listed["totalItems"] == 1 and listed["items"][0]["title"] == marks[bob.id]

    # Backups sent to S3 (set in the panel) are read and rewritten the same way, each put back under its key.
    bucket = s3.new_bucket()
    to_s3 = {"enabled": True, "bucket": bucket, "endpoint": s3.endpoint_url, "region": REGION}
    to_s3 |= {"accessKey": ACCESS_KEY_ID, "secret": SECRET_ACCESS_KEY, "forcePathStyle": True}
    assert superuser.http.patch("/api/settings", json={"backups": {"s3": to_s3}}).status_code == 200
    assert superuser.http.post("/api/backups", json={"name": "in_bucket.zip"}).status_code == 204
    assert marks[bob.id].encode() in _zip_members(s3.read(bucket, "in_bucket.zip"))["data.db"]
    said = await anyio.to_thread.run_sync(erase, bob)
    assert f"backup s3://{bucket}/in_bucket.zip (" in said and "still holds 1 recording(s) and the account" in said
    said = await anyio.to_thread.run_sync(erase, bob, "--prune-backups")
    assert f"backup s3://{bucket}/in_bucket.zip (" in said and "rewritten without 1 recording(s)" in said, said
    in_bucket = _zip_members(s3.read(bucket, "in_bucket.zip"))
    assert marks[bob.id].encode() not in in_bucket["data.db"] and bob.email.encode() not in in_bucket["data.db"]
    assert not _stored_by(data, bob.id, in_bucket)
