"""An attempt's status ``failed`` became ``lost`` (pb_migrations/1766620800_attempt_status_lost.js): a row
written before the migration reads the new word after it, back again after the migration is reverted, and
the select takes the new word only."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path
from typing import Any

from sidecar.pocketbase import process, settings_key
from sidecar.settings import Settings
from testkit.media import wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer, free_port
from testkit.pocketbase import test_settings as settings_on
from tests.support.operator import ROOT

MIGRATION = "1766620800_attempt_status_lost.js"
# Rows as the release before the migration wrote them: one of each status it knew.
BEFORE = {
    "attemptstarted1": "started",
    "attemptrunning1": "running",
    "attemptready001": "ready",
    "attemptcleaned1": "cleaned",
    "attemptfailed01": "failed",
    "attemptfailed02": "failed",
    "attemptsupersd1": "superseded",
}


def _pocketbase(settings: Settings, *args: str, answer: str = "") -> None:
    """One of PocketBase's commands on the data directory (``answer``: what it asks to be confirmed)."""
    done = subprocess.run(
        [
            str(process.binary()),
            f"--dir={settings.pocketbase.data_dir}",
            f"--migrationsDir={process.migrations_dir(settings)}",
            f"--hooksDir={process.hooks_dir(settings)}",
            f"--encryptionEnv={settings_key.ENV}",  # the settings' key, as every start passes it
            *args,
        ],
        input=answer,
        capture_output=True,
        text=True,
        env=process.environment(settings),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _statuses(data: Path) -> dict[str, str]:
    with closing(sqlite3.connect(data / "data.db")) as db:
        return dict(db.execute("SELECT id, status FROM recognition_attempts"))


def _field(data: Path) -> dict[str, Any]:
    with closing(sqlite3.connect(data / "data.db")) as db:
        (fields,) = db.execute("SELECT fields FROM _collections WHERE name = 'recognition_attempts'").fetchone()
    [status] = [f for f in json.loads(fields) if f["name"] == "status"]
    return dict(status)


def test_failed_attempts_written_before_the_migration_read_lost_after_it(tmp_path: Path) -> None:
    # The schema as it stood before the migration: every earlier one applied.
    earlier = tmp_path / "pb_migrations"
    earlier.mkdir()
    for path in sorted((ROOT / "pb_migrations").glob("*.js")):
        if path.name < MIGRATION:
            shutil.copy(path, earlier)
    settings = settings_on(tmp_path / "pb_data", free_port())
    settings.pocketbase.migrations_dir = earlier
    _pocketbase(settings, "migrate", "up")
    data = settings.pocketbase.data_dir
    assert "failed" in _field(data)["values"]
    with closing(sqlite3.connect(data / "data.db")) as db, db:
        db.executemany("INSERT INTO recognition_attempts (id, status) VALUES (?, ?)", BEFORE.items())

    settings.pocketbase.migrations_dir = None  # the project's own, this one included
    _pocketbase(settings, "migrate", "up")
    assert _statuses(data) == {aid: "lost" if s == "failed" else s for aid, s in BEFORE.items()}
    field = _field(data)
    assert field["values"] == ["started", "running", "ready", "cleaned", "lost", "superseded"]
    assert "lost (" in field["help"] and "failed (" not in field["help"]

    # Down: the reverse, the rows included (the migrations since it reverted first).
    since = [p for p in (ROOT / "pb_migrations").glob("*.js") if p.name >= MIGRATION]
    _pocketbase(settings, "migrate", "down", str(len(since)), answer="y\n")
    assert _statuses(data) == BEFORE
    assert _field(data)["values"] == ["started", "running", "ready", "cleaned", "failed", "superseded"]


def test_the_select_takes_lost_and_no_longer_failed(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    rid = sender.upload(wav_bytes(1.0))
    token = service.claim(rid)["token"]
    pipe = f"/api/pipeline/records/{rid}"
    made = service.http.post(f"{pipe}/attempts", json={"token": token, "provider": "speechkit"})
    assert made.status_code == 200, made.text
    aid = made.json()["id"]

    refused = service.http.post(f"{pipe}/attempts/{aid}", json={"token": token, "status": "failed"})
    assert refused.status_code == 400, refused.text
    assert pb.sql_one("SELECT status FROM recognition_attempts WHERE id = ?", aid) == ("started",)
    taken = service.http.post(f"{pipe}/attempts/{aid}", json={"token": token, "status": "lost"})
    assert taken.status_code == 200, taken.text
    assert pb.sql_one("SELECT status FROM recognition_attempts WHERE id = ?", aid) == ("lost",)
