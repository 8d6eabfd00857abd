"""The key PocketBase encrypts its settings with (SMTP password, S3 secrets), kept outside its data
directory so that neither the database nor a backup of it holds those secrets readable.

Where it comes from, first found: the environment (``PB_ENCRYPTION_KEY``, 32 characters), or the
file ``[pocketbase] settings_key_file`` (by default beside the data directory: ``pb_data.key`` next
to ``pb_data``). Absent both, a key is made in that file on the first start and the owner is told
once, at WARNING: where it is, and that it must be kept, apart from the backups, to read them.

A data directory whose settings are encrypted and no key: refused (``SettingsKeyError``), never
a new key (which could read nothing).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sidecar.settings import Settings

__all__ = ["ENV", "LENGTH", "SettingsKeyError", "key_file", "settings_encrypted", "settings_key", "stored_settings"]

log = logging.getLogger("transcriber")

# The variable PocketBase reads the key from (its --encryptionEnv).
ENV = "PB_ENCRYPTION_KEY"
# PocketBase's AES-256 key: 32 bytes, as characters.
LENGTH = 32


class SettingsKeyError(RuntimeError):
    """No usable key for the settings: the message says where it was looked for."""


def key_file(settings: Settings) -> Path:
    pb = settings.pocketbase
    return pb.settings_key_file or pb.data_dir.with_name(pb.data_dir.name + ".key")


def settings_encrypted(data_dir: Path) -> bool:
    """Whether PocketBase's stored settings are encrypted (False: none yet, or plain JSON)."""
    db = data_dir / "data.db"
    if not db.is_file():
        return False
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as conn:
            row = conn.execute("SELECT value FROM _params WHERE id = 'settings'").fetchone()
    except sqlite3.Error:
        return False
    if row is None:
        return False
    value = row[0].decode("utf-8", "replace") if isinstance(row[0], bytes) else str(row[0] or "")
    return not value.lstrip().startswith("{")


def _valid(key: str, where: str) -> str:
    key = key.strip()
    if len(key.encode()) != LENGTH:
        raise SettingsKeyError(f"the settings key in {where} must be {LENGTH} characters (ASCII), not {len(key)}")
    return key


def settings_key(settings: Settings) -> str:
    """The key: from the environment, the key file, or made in the key file (told once)."""
    given = os.environ.get(ENV, "")
    if given:
        return _valid(given, ENV)
    path = key_file(settings)
    try:
        return _valid(path.read_text(), str(path))
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise SettingsKeyError(f"the settings key file {path} cannot be read: {exc.strerror}") from None
    if settings_encrypted(settings.pocketbase.data_dir):
        raise SettingsKeyError(
            f"PocketBase's settings in {settings.pocketbase.data_dir} are encrypted and their key is neither in "
            f"{ENV} nor in {path}: put the key kept with your backups there"
        )
    key = secrets.token_hex(LENGTH // 2)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key + "\n")
    log.warning(
        "made the key PocketBase encrypts its settings with (SMTP password, S3 secrets): %s. Keep a copy "
        "apart from the backups: a backup's settings cannot be read without it. Told once.",
        path,
    )
    return key


def stored_settings(database: Path, key: str | None) -> dict[str, Any] | None:
    """PocketBase's settings as stored in ``database`` (a data directory's or a backup's): plain JSON, or
    opened with ``key`` (AES-256-GCM: the nonce, then the sealed JSON, in base64). None when there is
    no database, or it cannot be read or opened."""
    if not database.is_file():
        return None
    try:
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)) as db:
            row = db.execute("SELECT value FROM _params WHERE id = 'settings'").fetchone()
    except sqlite3.Error:
        return None
    if row is None:
        return {}
    value = row[0].decode("utf-8", "replace") if isinstance(row[0], bytes) else str(row[0] or "")
    try:
        if value.lstrip().startswith("{"):
            found: dict[str, Any] = json.loads(value)
            return found
        if not key:
            return None
        sealed = base64.b64decode(value)
        opened: dict[str, Any] = json.loads(AESGCM(key.encode()).decrypt(sealed[:12], sealed[12:], None))
        return opened
    except (ValueError, InvalidTag):
        return None
