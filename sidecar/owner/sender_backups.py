"""What older backups still hold of one sender, and rewriting them without it.

An erase removes a sender's data from the data directory; every backup made
before it still holds it. This finds the local backups (``<data_dir>/backups``)
that do, by reading a temporary copy of each one's database, and can rewrite
each of them without that sender: its database is unpacked, the same erase
(PocketBase's ``sender-erase``) runs on the copy, the database is compacted
(so no freed page keeps an erased row), and the backup is zipped again
without the sender's stored files, then put in place of the old one under
the same name, in one rename. Backups PocketBase keeps in an S3 bucket (its
Settings → Backups) are read the same way, each downloaded to a temporary
directory; a rewritten one is uploaded back under its key. PocketBase's
settings (where the bucket and its keys are) are read with the key they are
encrypted with (``pocketbase.settings_key``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar.owner.backups import BACKUPS_DIR
from sidecar.owner.sender_data import SenderDataError, erase_rows, read_sender
from sidecar.pocketbase.settings_key import key_file, settings_key, stored_settings
from sidecar.settings import Settings

_DATABASE = "data.db"
# The database's companions: a backup's are those of the database before it was rewritten.
_COMPANIONS = ("data.db-wal", "data.db-shm")


@dataclass(frozen=True)
class Held:
    """What one local backup holds of a sender."""

    path: Path
    recordings: int
    account: bool
    unreadable: str = ""  # why it could not be read (then nothing is known of what it holds)

    @property
    def anything(self) -> bool:
        return self.recordings > 0 or self.account or bool(self.unreadable)


@dataclass(frozen=True)
class Pruned:
    path: Path
    recordings: int
    files: int
    before: int  # bytes
    after: int


class PruneError(SenderDataError):
    """One backup could not be rewritten; it is left as it was."""


def local_backups(data_dir: Path) -> list[Path]:
    """The backups in ``<data_dir>/backups``, oldest first."""
    folder = data_dir / BACKUPS_DIR
    if not folder.is_dir():
        return []
    found = [p for p in folder.glob("*.zip") if p.is_file() and not p.name.startswith(".")]
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name))


@dataclass(frozen=True)
class S3Backups:
    """The S3 bucket PocketBase sends its backups to, as its settings (the panel's) name it."""

    bucket: str
    endpoint: str
    region: str
    access_key: str
    secret: str
    force_path_style: bool

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        style = "path" if self.force_path_style else "auto"
        return boto3.session.Session(
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret, region_name=self.region or None
        ).client("s3", endpoint_url=self.endpoint or None, config=Config(s3={"addressing_style": style}))

    def names(self, client: Any) -> list[str]:
        """The backups in the bucket (PocketBase keeps them at its top, ``NAME.zip``)."""
        found: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            found += [str(o["Key"]) for o in page.get("Contents", [])]
        return sorted(k for k in found if k.endswith(".zip") and "/" not in k and not k.startswith("."))


def s3_backups(settings: Settings) -> S3Backups | None:
    """Where PocketBase sends its backups, if to a bucket."""
    stored = _settings_of(settings.pocketbase.data_dir / _DATABASE, settings_key(settings))
    s3: dict[str, Any] = dict((stored or {}).get("backups", {}).get("s3", {}))
    if not s3.get("enabled"):
        return None
    return S3Backups(
        bucket=str(s3.get("bucket") or ""),
        endpoint=str(s3.get("endpoint") or ""),
        region=str(s3.get("region") or ""),
        access_key=str(s3.get("accessKey") or ""),
        secret=str(s3.get("secret") or ""),
        force_path_style=bool(s3.get("forcePathStyle")),
    )


@contextmanager
def s3_holding(store: S3Backups, sender_id: str, *, account: bool) -> Iterator[list[Held]]:
    """Each backup in the bucket that holds anything of the sender, downloaded into a temporary directory
    (each file named as its key) for as long as the block runs."""
    with tempfile.TemporaryDirectory(prefix="transcriber-s3-backups-") as tmp:
        client = store.client()
        found: list[Held] = []
        for name in store.names(client):
            local = Path(tmp) / name
            try:
                client.download_file(store.bucket, name, str(local))
                made = client.head_object(Bucket=store.bucket, Key=name)["LastModified"].timestamp()
                os.utime(local, (made, made))  # when it was made, as a local backup's file says
                with _unpacked(local) as copy:
                    found.append(_held(local, copy / _DATABASE, sender_id, account=account))
            except (PruneError, sqlite3.Error) as exc:
                found.append(Held(local, 0, False, unreadable=str(exc)))
        yield [h for h in found if h.anything]


def upload(store: S3Backups, held: Held) -> None:
    """A rewritten backup put back in the bucket under its key, in place of the old one."""
    store.client().upload_file(str(held.path), store.bucket, held.path.name)


def erased_sender(data_dir: Path, email: str) -> str | None:
    """The account id of a sender erased earlier, from the audit (which keeps a hash of the address)."""
    digest = hashlib.sha256(email.lower().encode()).hexdigest()
    try:
        with closing(sqlite3.connect(f"file:{data_dir / _DATABASE}?mode=ro", uri=True, timeout=30)) as db:
            row = db.execute(
                "SELECT sender_id FROM erasures WHERE email_sha256 = ? ORDER BY created DESC LIMIT 1", (digest,)
            ).fetchone()
    except sqlite3.Error:  # no database, or one from before the audit
        return None
    return str(row[0]) if row else None


def holding(data_dir: Path, sender_id: str, *, account: bool) -> list[Held]:
    """Each local backup that holds anything of the sender: recordings, or (``account``) the account."""
    found = []
    for path in local_backups(data_dir):
        try:
            with _unpacked(path) as copy:
                found.append(_held(path, copy / _DATABASE, sender_id, account=account))
        except (PruneError, sqlite3.Error) as exc:
            found.append(Held(path, 0, False, unreadable=str(exc)))
    return [h for h in found if h.anything]


def prune_backup(settings: Settings, held: Held, sender_id: str, *, keep_account: bool, by: str) -> Pruned:
    """Rewrites one backup without the sender's data; the old file is replaced only when the new one is whole."""
    path = held.path
    before = path.stat()
    with _unpacked(path) as copy:
        if (_settings_of(copy / _DATABASE, settings_key(settings)) or {}).get("s3", {}).get("enabled"):
            raise PruneError(f"{path.name}: its files are in S3 storage, which this does not rewrite")
        try:
            sender = read_sender(copy, sender_id)
        except SenderDataError:
            raise PruneError(f"{path.name}: the sender's account is not in it") from None
        gone = _storage_of(sender.collection_ids, sender.files, sender.attempts, sender.texts)
        if not keep_account:
            gone.add(f"storage/{sender.collection_ids['users']}/{sender.sender_id}/")
        on_copy = settings.model_copy(deep=True)
        on_copy.pocketbase.data_dir = copy
        on_copy.pocketbase.settings_key_file = key_file(settings)  # the install's key reads its backups
        try:
            summary = erase_rows(on_copy, sender.email, keep_account=keep_account, provider_copies=0, by=by)
        except RuntimeError as exc:
            raise PruneError(f"{path.name}: the erase on its copy failed: {exc}") from None
        _compact(copy / _DATABASE)
        partial = path.with_name(f".{path.name}.pruning")
        try:
            files = _rezip(path, partial, copy / _DATABASE, gone)
            os.chmod(partial, before.st_mode & 0o777)
            os.utime(partial, ns=(before.st_atime_ns, before.st_mtime_ns))  # its place among the backups stays
            if not path.exists():  # PocketBase removed it meanwhile (its schedule keeps so many)
                raise PruneError(f"{path.name}: removed while it was being rewritten")
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
    _describe(path)
    return Pruned(path, int(summary["recordings"]), files, before.st_size, path.stat().st_size)


def _held(path: Path, database: Path, sender_id: str, *, account: bool) -> Held:
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)) as db:
        recordings = db.execute("SELECT COUNT(*) FROM audio_records WHERE owner = ?", (sender_id,)).fetchone()[0]
        accounts = db.execute("SELECT COUNT(*) FROM users WHERE id = ?", (sender_id,)).fetchone()[0]
    return Held(path, int(recordings), account and bool(accounts))


def _settings_of(database: Path, key: str | None) -> dict[str, Any] | None:
    """PocketBase's settings as stored (None when unreadable: no database, or encrypted with another key)."""
    return stored_settings(database, key)


def _storage_of(collections: dict[str, str], *groups: list[dict[str, object]]) -> set[str]:
    """The stored-file folders of the sender's rows: ``storage/<collection>/<row>/``."""
    names = ("files", "recognition_attempts", "texts")  # texts: the Word documents of the text and transcript
    pairs = zip(names, groups, strict=True)
    return {f"storage/{collections[name]}/{row['id']}/" for name, rows in pairs for row in rows}


@contextmanager
def _unpacked(backup: Path) -> Iterator[Path]:
    """A temporary directory with the backup's database (and its write-ahead log, if it has one)."""
    with tempfile.TemporaryDirectory(prefix="transcriber-backup-") as tmp:
        copy = Path(tmp) / "data"
        copy.mkdir(mode=0o700)
        try:
            with zipfile.ZipFile(backup) as zf:
                names = set(zf.namelist())
                if _DATABASE not in names:
                    raise PruneError(f"{backup.name} is not a backup of a data directory (no data.db in it)")
                for name in (_DATABASE, "data.db-wal"):
                    if name in names:
                        with zf.open(name) as src, (copy / name).open("wb") as dst:
                            shutil.copyfileobj(src, dst, 1 << 20)
        except zipfile.BadZipFile as exc:
            raise PruneError(f"{backup.name} is not a readable backup: {exc}") from None
        yield copy


def _compact(database: Path) -> None:
    """The write-ahead log folded in and the file rebuilt: no freed page keeps an erased row."""
    with closing(sqlite3.connect(database, timeout=30)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _rezip(old: Path, new: Path, database: Path, gone: set[str]) -> int:
    """Writes ``new``: ``old``'s members in order, the database replaced, the sender's files left out.
    Returns how many stored files were left out."""
    left_out = 0
    with zipfile.ZipFile(old) as zin, zipfile.ZipFile(new, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zout:
        for info in zin.infolist():
            if info.filename in _COMPANIONS:
                continue
            if any(info.filename.startswith(prefix) for prefix in gone):
                left_out += not info.filename.endswith(".attrs")
                continue
            copied = zipfile.ZipInfo(info.filename, info.date_time)
            copied.external_attr = info.external_attr
            copied.compress_type = zipfile.ZIP_DEFLATED
            if info.filename == _DATABASE:
                with database.open("rb") as src, zout.open(copied, "w", force_zip64=True) as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                continue
            with zin.open(info) as src, zout.open(copied, "w", force_zip64=info.file_size > 1 << 30) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    with new.open("rb") as fh:
        os.fsync(fh.fileno())
    return left_out


def _describe(backup: Path) -> None:
    """The checksum PocketBase's file store keeps beside a backup (``<name>.attrs``), made true again."""
    attrs = backup.with_name(backup.name + ".attrs")
    if not attrs.is_file():
        return
    try:
        described = json.loads(attrs.read_text())
    except ValueError:
        return
    digest = hashlib.md5()  # noqa: S324 (the store's own checksum, not a security measure)
    with backup.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    described["md5"] = base64.b64encode(digest.digest()).decode()
    partial = attrs.with_name(f".{attrs.name}.new")
    partial.write_text(json.dumps(described))
    os.replace(partial, attrs)


def holds(held: Held) -> str:
    """What one backup holds, in words."""
    what = [f"{held.recordings} recording(s)"] if held.recordings else []
    if held.account:
        what.append("the account")
    return " and ".join(what)
