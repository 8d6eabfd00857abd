"""One sender's data on request: everything of theirs as one archive, or erased for good.

Both work on the data directory of the host they run on, beside a running
server. Export reads in one database transaction (a consistent snapshot while
workers write) and copies the stored files. Erase removes the provider-side
copies first (a bucket object or a stored result outlives no row that names
it), then the rows and files in one PocketBase command, which writes an audit
row that outlives them (collection ``erasures``). Nothing else ever deletes.
"""

from __future__ import annotations

import getpass
import json
import sqlite3
import zipfile
from collections.abc import Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sidecar.pocketbase import process
from sidecar.redaction import redact
from sidecar.settings import Settings

# Provider-side copies exist only for these (the others keep nothing after answering).
_KEEPS_COPIES = {"speechkit"}


class SenderDataError(Exception):
    """The export or erase cannot go on; the message says why, in one line."""


@dataclass(frozen=True)
class Holdings:
    """What the data directory holds of one sender."""

    sender_id: str
    email: str
    records: list[dict[str, Any]]
    files: list[dict[str, Any]]
    texts: list[dict[str, Any]]
    attempts: list[dict[str, Any]]
    events: list[dict[str, Any]]
    topics: list[dict[str, Any]]
    insights: list[dict[str, Any]]
    collection_ids: dict[str, str]
    literary: list[dict[str, Any]] = field(default_factory=list)  # the literary queue's rows

    def copies(self) -> list[dict[str, Any]]:
        """Attempts whose provider-side copies have not been removed yet."""
        return [
            a
            for a in self.attempts
            if a["provider"] in _KEEPS_COPIES and not a["copies_removed_at"] and (a["operation_id"] or a["audio_uri"])
        ]


def read(data_dir: Path, email: str) -> Holdings:
    """Everything of the sender ``email``, read in one transaction."""
    return _read(data_dir, "lower(email) = lower(?)", email, f"no sender with email {email}")


def read_sender(data_dir: Path, sender_id: str) -> Holdings:
    """Everything of the sender whose account id is ``sender_id`` (in an older backup, say)."""
    return _read(data_dir, "id = ?", sender_id, f"no sender {sender_id}")


def _read(data_dir: Path, which: str, key: str, missing: str) -> Holdings:
    path = data_dir / "data.db"
    if not path.is_file():
        raise SenderDataError(f"no database in {data_dir}")
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
        db.row_factory = sqlite3.Row
        db.execute("BEGIN")
        # An older backup's schema may lack a later table: it holds nothing of anyone there.
        tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

        def rows(sql: str, *args: object, table: str = "") -> list[dict[str, Any]]:
            return [dict(r) for r in db.execute(sql, args)] if not table or table in tables else []

        users = rows(f"SELECT id, email FROM users WHERE {which}", key)  # noqa: S608 (fixed conditions)
        if not users:
            raise SenderDataError(missing)
        uid = str(users[0]["id"])
        records = rows("SELECT * FROM audio_records WHERE owner = ? ORDER BY created, id", uid)
        of = "SELECT * FROM {} WHERE record IN (SELECT id FROM audio_records WHERE owner = ?) ORDER BY created, id"
        holdings = Holdings(
            uid,
            str(users[0]["email"]),
            records,
            rows(of.format("files"), uid),
            rows(of.format("texts"), uid),
            rows(of.format("recognition_attempts"), uid),
            rows(of.format("record_events"), uid),
            rows("SELECT * FROM topics WHERE owner = ?", uid, table="topics"),
            rows(of.format("insights"), uid, table="insights"),
            collection_ids={str(r["name"]): str(r["id"]) for r in rows("SELECT id, name FROM _collections")},
            literary=rows(of.format("literary"), uid, table="literary"),
        )
        db.execute("COMMIT")
    return holdings


def export(data_dir: Path, email: str, out: Path) -> tuple[Holdings, int]:
    """Writes ``out`` (a zip): ``sender.json`` (every row, texts with their segments, the journal) and
    the stored files under ``files/<recording>/``. Returns what was read and the files written."""
    held = read(data_dir, email)
    storage = data_dir / "storage"
    written = 0
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
        manifest = {
            "sender": {"id": held.sender_id, "email": held.email},
            "recordings": held.records,
            "files": held.files,
            "texts": held.texts,
            "recognition_attempts": held.attempts,
            "journal": held.events,
            "topics": held.topics,
            "insights": held.insights,
            "literary": held.literary,
        }
        zf.writestr("sender.json", json.dumps(manifest, ensure_ascii=False, indent=1, default=str))
        blobs = [("files", f["id"], f["record"], f["blob"]) for f in held.files if f["blob"]]
        # The Word documents of the literary text and the transcript (an older backup's texts have none).
        blobs += [("texts", t["id"], t["record"], t["document"]) for t in held.texts if t.get("document")]
        blobs += [
            ("recognition_attempts", a["id"], a["record"], a["raw_response"])
            for a in held.attempts
            if a["raw_response"]
        ]
        for collection, row_id, record, name in blobs:
            src = storage / held.collection_ids[collection] / row_id / name
            if src.is_file():  # a normalized copy may have been removed after its use
                zf.write(src, f"files/{record}/{collection}/{row_id}/{name}")
                written += 1
    out.chmod(0o600)
    return held, written


async def remove_provider_copies(
    held: Holdings, cleanup: Callable[[str, str, str], Awaitable[None]]
) -> tuple[int, list[str]]:
    """Removes every provider-side copy the sender's attempts still have; returns how many, and the failures."""
    removed, failed = 0, []
    for attempt in held.copies():
        try:
            await cleanup(attempt["provider"], attempt["operation_id"], attempt["audio_uri"])
        except Exception as exc:
            failed.append(f"attempt {attempt['id']} ({attempt['provider']}): {redact(str(exc))[:300]}")
        else:
            removed += 1
    return removed, failed


def erase_rows(
    settings: Settings, email: str, *, keep_account: bool, provider_copies: int, by: str | None = None
) -> dict[str, Any]:
    """Runs PocketBase's ``sender-erase``: the rows and files, and the audit row (``by``: who, the host
    user by default). Returns its summary."""
    args = ["sender-erase", "--", email, by or getpass.getuser()]
    if keep_account:
        args.append("--keep-account")
    output = process.run_command(settings, *args, extra_env={"TRANSCRIBER_ERASE_PROVIDER_COPIES": str(provider_copies)})
    for line in reversed(output.splitlines()):
        if "{" in line:  # the console prefixes a timestamp
            return dict(json.loads(line[line.index("{") :]))
    raise SenderDataError(f"the erase did not report what it removed: {output[-300:]}")
