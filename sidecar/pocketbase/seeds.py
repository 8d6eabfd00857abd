"""The settings seed PocketBase's own settings; what the owner changes in the panel stays.

PocketBase keeps settings of its own that the owner also changes in the
panel: the backup schedule and S3 (Settings → Backups), their superuser's
password. A start passes PocketBase only the keys the settings name (the file
or the environment: pydantic's fields-set), each with a fingerprint of its
value, and the hooks apply one only when it changed since it was last applied,
or when it was never applied and PocketBase still has its default
(``pb_hooks/lib/seeds.js``, the rule). Otherwise the owner's value stands and
one line says so, and how to make the settings win. A key the settings do not
name is never touched; each S3 key is one of its own (naming the region
changes the region only). A changed value that replaces one the owner set in
the panel is said at WARNING, with the key's name.

A fingerprint is the value itself where nothing in it is secret; where a
password or the S3 secret is part of it, an scrypt hash (data.db keeps it,
and backups with it: as slow to guess from as the password hashes beside it).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from pydantic import SecretStr

from sidecar.settings import BackupSettings

log = logging.getLogger("transcriber")

# The variable the hooks read the named keys' fingerprints from (lib/settings.js PROCESS.seedFingerprints).
SEEDS_ENV = "TRANSCRIBER_SEED_FINGERPRINTS"

# The [backups] keys, each seeded on its own; those whose value holds a credential are fingerprinted by a hash.
_BACKUP_KEYS = (
    "cron",
    "keep",
    "s3_bucket",
    "s3_endpoint",
    "s3_region",
    "s3_access_key",
    "s3_secret",
    "s3_force_path_style",
)
_HASHED = {"s3_access_key", "s3_secret"}

# scrypt's cost: 16 MiB and about 60 ms a fingerprint (two at most a start).
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}


def _plain(value: object) -> str:
    return "=" + json.dumps(value)


def _hashed(purpose: str, value: object) -> str:
    digest = hashlib.scrypt(json.dumps(value).encode(), salt=f"transcriber seed {purpose}".encode(), **_SCRYPT)
    return "scrypt:" + digest.hex()


def backup_fingerprints(backups: BackupSettings) -> dict[str, str]:
    """The [backups] keys the settings name ({cron, keep, s3} at most), each with its fingerprint."""
    found: dict[str, str] = {}
    for key in _BACKUP_KEYS:
        if key not in backups.model_fields_set:
            continue
        value = getattr(backups, key)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        value = "" if value is None else value
        found[key] = _hashed(f"backups.{key}", value) if key in _HASHED else _plain(value)
    return found


def superuser_fingerprint(email: str, password: str) -> dict[str, str]:
    """The owner's superuser account as the settings name it: its key and fingerprint."""
    key = "superuser:" + email.lower()
    return {key: _hashed(key, password)}


def report(output: str) -> list[dict[str, Any]]:
    """What a seeding command did, one entry a named key (its last line ``{"seeds": [...]}``)."""
    for line in reversed(output.splitlines()):
        if '{"seeds"' in line:  # the console prefixes a timestamp
            entries: list[dict[str, Any]] = json.loads(line[line.index('{"seeds"') :])["seeds"]
            return entries
    raise RuntimeError(f"PocketBase did not say what it did with the settings: {output.strip()[-300:]}")


def log_report(output: str) -> None:
    """One line for each key applied, and for each the owner's value kept over the settings'."""
    for entry in report(output):
        if entry["key"] == "superuser":
            _log_superuser(entry)
        else:
            _log_backups(entry)


def _log_backups(entry: dict[str, Any]) -> None:
    name, panel, file = f"[backups] {entry['key']}", entry["panel"], entry["file"]
    if entry["outcome"] == "apply" and entry.get("overrides"):
        log.warning(
            "%s: the settings' %s replaces the panel's %s (the settings' value changed since it was last "
            "applied): to keep a value set in the panel, remove %s from the settings",
            name,
            file,
            panel,
            name,
        )
    elif entry["outcome"] == "apply":
        why = "PocketBase had its default" if entry["first"] else f"changed since last applied; PocketBase had {panel}"
        log.info("%s: %s applied from the settings (%s)", name, file, why)
    elif entry["outcome"] == "keep":
        why = "set before the settings named it" if entry["first"] else "changed in the panel since it was applied"
        log.warning(
            "%s: the panel's %s is kept over the settings' %s (%s): to have the settings' value, set it in the panel "
            "or edit it in the settings (an edited value is applied at the next start); to leave it to the panel, "
            "remove it from the settings",
            name,
            panel,
            file,
            why,
        )


def _log_superuser(entry: dict[str, Any]) -> None:
    email = entry["email"]
    if entry["outcome"] == "apply":
        if entry["exists"] and entry.get("overrides"):
            log.warning(
                "superuser %s: [pocketbase] superuser_password changed since it was last applied and replaces "
                "the one set in the panel; to keep a panel's change, remove superuser_password from the settings",
                email,
            )
        elif entry["exists"]:
            log.info("superuser %s: password set from [pocketbase] superuser_password (it changed)", email)
        else:
            log.info("superuser %s created from [pocketbase] superuser_email and superuser_password", email)
    elif entry["outcome"] == "keep":
        if not entry["exists"]:
            log.warning(
                "superuser %s is gone (removed or renamed in the panel) and is not made again: to make it, "
                "change [pocketbase] superuser_password in the settings, or leave superuser_email unset",
                email,
            )
        else:
            why = "set in the panel" if entry["first"] else "changed in the panel since the settings' was applied"
            # Worded so that no "password" is followed by ":" or "=": the log's redaction would take the next word.
            log.warning(
                "superuser %s: its password is kept (%s) over [pocketbase] superuser_password, which has not "
                "changed since: edit superuser_password in the settings to apply it at the next start (till then "
                "`transcriber backup` needs --password)",
                email,
                why,
            )
