"""Restoring a backup into a new data directory: what is written, what is left behind."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from sidecar.owner.backups import BackupError, restore
from sidecar.pocketbase.lock import LOCK_FILE
from sidecar.pocketbase.process import SERVICE_FILE


def test_a_backup_that_holds_the_service_password_is_restored_without_it(tmp_path: Path) -> None:
    """Backups made before the password was left out hold it; the restored copy makes a new one at its start."""
    archive = tmp_path / "old.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("data.db", b"SQLite format 3\x00")
        zf.writestr("storage/c/r/a.wav", b"RIFF")
        zf.writestr(SERVICE_FILE, json.dumps({"email": "sidecar@transcriber.local", "password": "from-the-backup"}))
        zf.writestr(LOCK_FILE, "{}")
    target = tmp_path / "restored"
    assert restore(archive, target) == 2
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()) == [
        "data.db",
        "storage/c/r/a.wav",
    ]


def test_a_member_outside_the_directory_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("data.db", b"")
        zf.writestr("../outside", b"x")
    with pytest.raises(BackupError, match="outside the data directory"):
        restore(archive, tmp_path / "restored")
    assert not (tmp_path / "outside").exists()
