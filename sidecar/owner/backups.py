"""Backups of the whole data directory with PocketBase's own backups, and restoring one.

A backup is made by the running server (``POST /api/backups`` as the owner):
PocketBase zips its data directory — both databases and every stored file —
inside a write transaction, so the copy is consistent while workers keep
writing. The service account's password is left out (``pb_hooks/backups.pb.js``):
the first start on a restored copy makes a new one. Scheduled backups are
PocketBase's cron (set in the panel, or seeded from ``[backups]``:
``pocketbase.seeds``). Restoring unpacks a backup into a fresh data directory,
which a server is then started on; records there carry on where they stood (an
in-flight one is claimed again when its lease has run out, and an operation
already paid for is polled, not started again).
"""

from __future__ import annotations

import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import httpx

from sidecar.pocketbase.lock import LOCK_FILE
from sidecar.pocketbase.process import SERVICE_FILE

BACKUPS_DIR = "backups"  # inside the data directory, where PocketBase keeps local backups


class BackupError(Exception):
    """A backup could not be made, listed or restored; the message says why, in one line."""


@dataclass(frozen=True)
class Backup:
    key: str
    size: int
    modified: str


class OwnerClient:
    """The running server's backup API, signed in as the owner (a superuser)."""

    def __init__(self, url: str, email: str, password: str, *, timeout: float = 3600) -> None:
        self._http = httpx.Client(base_url=url.rstrip("/"), timeout=httpx.Timeout(30, read=timeout))
        try:
            resp = self._http.post(
                "/api/collections/_superusers/auth-with-password", json={"identity": email, "password": password}
            )
        except httpx.TransportError as exc:
            self._http.close()
            raise BackupError(f"cannot reach PocketBase at {url}: {type(exc).__name__}") from None
        if resp.status_code != 200:
            self._http.close()
            raise BackupError(f"the owner's sign-in as {email} was refused ({resp.status_code})")
        self._http.headers["Authorization"] = resp.json()["token"]

    def __enter__(self) -> OwnerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def create(self, name: str | None = None) -> Backup:
        """Makes a backup now (it takes as long as zipping the data directory) and returns it."""
        before = {b.key for b in self.list()}
        resp = self._http.post("/api/backups", json={"name": name} if name else {})
        if resp.status_code >= 400:
            raise BackupError(f"PocketBase refused the backup ({resp.status_code}): {_message(resp)}")
        made = [b for b in self.list() if b.key not in before or b.key == name]
        if not made:
            raise BackupError("PocketBase answered, but no new backup is listed")
        return max(made, key=lambda b: b.modified)

    def list(self) -> list[Backup]:
        resp = self._http.get("/api/backups")
        if resp.status_code >= 400:
            raise BackupError(f"PocketBase refused to list the backups ({resp.status_code}): {_message(resp)}")
        rows = [Backup(str(b["key"]), int(b["size"]), str(b["modified"])) for b in resp.json()]
        return sorted(rows, key=lambda b: b.modified)


def _message(resp: httpx.Response) -> str:
    try:
        return str(resp.json().get("message", ""))[:300]
    except ValueError:
        return resp.text[:300]


def find_archive(name: str, data_dir: Path) -> Path:
    """A backup by path, or by name among ``data_dir``'s local backups."""
    direct = Path(name).expanduser()
    if direct.is_file():
        return direct
    local = data_dir / BACKUPS_DIR / name
    if local.is_file():
        return local
    raise BackupError(f"no backup {name!r}: neither a file nor in {data_dir / BACKUPS_DIR}")


def restore(archive: Path, target: Path) -> int:
    """Unpacks ``archive`` into ``target``, a data directory that must not exist yet or be empty.

    Returns the number of files written. Refuses an archive that is not a
    PocketBase backup, or that names a path outside the directory.
    """
    target = target.expanduser().resolve()
    if target.exists() and any(target.iterdir()):
        raise BackupError(f"{target} is not empty: restore into a new data directory")
    try:
        with zipfile.ZipFile(archive) as zf:
            names = zf.namelist()
            if "data.db" not in names:
                raise BackupError(f"{archive} is not a backup of a data directory (no data.db in it)")
            for name in names:
                path = PurePosixPath(name)
                if path.is_absolute() or ".." in path.parts:
                    raise BackupError(f"{archive} names a path outside the data directory: {name}")
            target.mkdir(parents=True, exist_ok=True, mode=0o700)
            target.chmod(0o700)
            written = 0
            for member in zf.infolist():
                # A backup made before the service password was left out holds it: the restored copy makes a new one.
                if member.is_dir() or member.filename in (LOCK_FILE, SERVICE_FILE):
                    continue
                out = target / member.filename
                out.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                with zf.open(member) as src, out.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                out.chmod(0o600)
                written += 1
    except zipfile.BadZipFile as exc:
        raise BackupError(f"{archive} is not a readable backup: {exc}") from None
    return written
