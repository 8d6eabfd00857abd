"""A backup of a live instance, restored into a fresh data directory, with real processes and the
real offline engine: every record, file and transcript kept; the in-flight recording finishes;
nothing finished is recognized again."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
import zipfile
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.audio import speech_wav_bytes
from testkit.pocketbase import PASSWORD, signed_in
from tests.support.operator import CLI, LONG_ROUNDS, OWNER, db_row, meeting, served
from tests.support.waiting import eventually_sync

# Two servers, a recognition and a backup one after another: minutes on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

# A valid Ogg page header, then garbage: intake accepts it, normalize halts it.
UNDECODABLE = b"OggS\x00\x02" + bytes(range(256)) * 40


def _snapshot(data: Path) -> dict[str, Any]:
    with closing(sqlite3.connect(f"file:{data / 'data.db'}?mode=ro", uri=True)) as db:
        return {
            table: sorted(tuple(row) for row in db.execute(f"SELECT * FROM {table}"))  # noqa: S608 (fixed names)
            for table in ("audio_records", "files", "texts", "recognition_attempts", "record_events", "users")
        }


def _stored_files(data: Path) -> set[str]:
    storage = data / "storage"
    return {str(p.relative_to(storage)) for p in storage.rglob("*") if p.is_file() and "thumbs" not in p.parts}


def test_a_live_backup_restores_into_a_fresh_directory(tmp_path: Path, figures: dict[str, str]) -> None:
    first = tmp_path / "first"
    first.mkdir()
    with served(first, TRANSCRIBER_PIPELINE__WORKERS="1") as s:
        s.start()
        s.wait_ready()
        finished = s.upload(meeting(tmp_path, rounds=1))
        s.wait_done(finished, within=300)
        broken_audio = tmp_path / "broken.ogg"
        broken_audio.write_bytes(UNDECODABLE)
        broken = s.upload(broken_audio)
        eventually_sync(lambda: db_row(s.data, broken)["halted_at"] != "", within=120)
        in_flight = s.upload(meeting(tmp_path, rounds=LONG_ROUNDS))
        s.wait_mid_recognition(in_flight)
        queued = s.upload(meeting(tmp_path, rounds=1))  # behind the in-flight one (one worker)
        files_at_backup = _stored_files(s.data)
        made = subprocess.run(
            [*CLI, "backup", "create", "--name", "live.zip"],
            env={**s.env, "TRANSCRIBER_POCKETBASE__URL": s.url},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert made.returncode == 0, made.stderr
        assert made.stdout.startswith("backup live.zip (")
        listed = subprocess.run(
            [*CLI, "backup", "list", "--email", OWNER],
            env={**s.env, "TRANSCRIBER_POCKETBASE__URL": s.url},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert "live.zip" in listed.stdout
        s.close()  # the first server goes away for good
        before = _snapshot(s.data)
        # The files there all along, from before the backup to the close: the backup must hold them
        # (a file written after it began, or replaced meanwhile, may or may not be in it).
        files_before = files_at_backup & _stored_files(s.data)
        attempts_of_finished = [a for a in before["recognition_attempts"] if finished in a]

    second = tmp_path / "second"
    second.mkdir()
    restored = subprocess.run(
        [*CLI, "backup", "restore", "live.zip", "--into", str(second / "pb_data"), "--data-dir", str(s.data)],
        env=s.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert restored.returncode == 0, restored.stderr
    assert _stored_files(second / "pb_data") >= files_before - {f for f in files_before if f.startswith("backups")}
    with served(second, TRANSCRIBER_PIPELINE__WORKERS="1") as r:
        snapshot = _snapshot(r.data)
        # Taken while the worker wrote on, the backup holds at least what the first server had
        # when it was made: every record, and the finished one exactly.
        assert {row[0] for row in snapshot["audio_records"]} == {row[0] for row in before["audio_records"]}
        assert [row for row in snapshot["texts"] if finished in row] == [
            row for row in before["texts"] if finished in row
        ]
        started = time.monotonic()
        r.start()
        r.wait_ready()
        r.wait_done(in_flight, within=600)
        r.wait_done(queued, within=300)
        took = time.monotonic() - started
        assert db_row(r.data, broken)["halt_code"] == "unsupported_media"
        after = _snapshot(r.data)
        # Nothing finished was recognized again: its attempts and its transcript are as they were.
        assert [a for a in after["recognition_attempts"] if finished in a] == attempts_of_finished
        assert [t for t in after["texts"] if finished in t] == [t for t in before["texts"] if finished in t]
    figures["backup and restore"] = (
        f"a live backup (records done, halted, in flight, queued) restored into a fresh directory: the in-flight"
        f" and the queued recordings done {took:.0f} s after the restored server started"
    )


def _service_password(data: Path) -> str:
    return str(json.loads((data / "service-account.json").read_text())["password"])


def test_a_backup_holds_no_service_password_and_its_restored_copy_makes_a_new_one(tmp_path: Path) -> None:
    quick = {"TRANSCRIBER_PIPELINE__WORKERS": "1", "TRANSCRIBER_PROVIDER__NAME": "instant"}
    first = tmp_path / "first"
    first.mkdir()
    with served(first, **quick) as s:
        s.start()
        s.wait_ready()
        s.wait_done(s.upload(meeting(tmp_path, rounds=1)), within=120)
        old = _service_password(s.data)
        made = subprocess.run(
            [*CLI, "backup", "create", "--name", "nightly.zip"],
            env={**s.env, "TRANSCRIBER_POCKETBASE__URL": s.url},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert made.returncode == 0, made.stderr
        s.close()

    archive = s.data / "backups" / "nightly.zip"
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
        assert "data.db" in names and "service-account.json" not in names
        for name in names:  # neither the service's password nor the owner's, in any form that holds its bytes
            body = zf.read(name)
            assert old.encode() not in body and PASSWORD.encode() not in body, name

    second = tmp_path / "second"
    second.mkdir()
    restored = subprocess.run(
        [*CLI, "backup", "restore", "nightly.zip", "--into", str(second / "pb_data"), "--data-dir", str(s.data)],
        env=s.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert restored.returncode == 0, restored.stderr
    assert not (second / "pb_data" / "service-account.json").exists()
    with served(second, **quick) as r:
        r.start()
        r.wait_ready()  # the workers signed in
        new = _service_password(r.data)
        assert new != old
        assert "service account: new credentials made" in r.log.read_text()
        ann = signed_in(r.url, "sender", "users", "ann@example.com")  # the sender, from the backup
        try:
            rid = ann.upload(speech_wav_bytes(1.0))
            r.wait_done(rid, within=120)
        finally:
            ann.http.close()
        refused = httpx.post(
            f"{r.url}/api/collections/services/auth-with-password",
            json={"identity": "sidecar@transcriber.local", "password": old},
            timeout=30,
        )
        assert refused.status_code == 400  # the old host's password opens nothing here
