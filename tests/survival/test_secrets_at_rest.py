"""Secrets at rest: PocketBase's settings (the SMTP password, the S3 secret) are encrypted with a key
kept outside its data directory, so neither the database nor a backup of it holds them readable.

An install from the previous release (tests/data/upgrade) had them in plain JSON: the start that
upgrades it saves them again encrypted, and nothing of the plain copy is left in the database file.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import secrets
import sqlite3
import tarfile
import zipfile
from contextlib import closing
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sidecar.pocketbase import process
from sidecar.pocketbase.settings_key import ENV, key_file, settings_encrypted
from testkit.pocketbase import running_pocketbase
from testkit.pocketbase import test_settings as settings_for
from testkit.s3 import REGION, S3Server
from tests.support.operator import ROOT
from tests.support.waiting import eventually_sync

pytestmark = pytest.mark.slow

FIXTURE = ROOT / "tests" / "data" / "upgrade" / "v0.1.0.tar.gz"


def shapes(secret: str) -> dict[str, bytes]:
    """The secret as bytes in every shape a file could hold it: as it is, base64 at each of the 3
    alignments (standard and URL-safe, padding dropped), hexadecimal in either case."""
    raw = secret.encode()
    found = {"raw": raw, "hex": binascii.hexlify(raw), "HEX": binascii.hexlify(raw).upper()}
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw)[4 if shift else 0 :].rstrip(b"=")
        core = encoded[1:-2] if shift else encoded[:-2]  # the characters that depend on the secret alone
        found[f"base64+{shift}"] = core
        found[f"base64url+{shift}"] = core.replace(b"+", b"-").replace(b"/", b"_")
    return found


def holds(data: bytes, secret: str) -> list[str]:
    return [name for name, shape in shapes(secret).items() if shape in data]


def test_shapes_find_a_secret_in_every_shape() -> None:
    secret = "smtp-" + secrets.token_urlsafe(16)
    for prefix in (b"", b"x", b"xy"):
        assert holds(base64.b64encode(prefix + secret.encode()), secret)
        assert holds(base64.urlsafe_b64encode(prefix + secret.encode()), secret)
    assert holds(binascii.hexlify(secret.encode()), secret) == ["hex"]
    assert holds(b"..." + secret.encode() + b"...", secret) == ["raw"]


def test_a_backup_made_with_s3_and_smtp_set_holds_neither_secret(tmp_path: Path, s3: S3Server) -> None:
    bucket = s3.new_bucket()
    smtp_password = "smtp-PLANTED-" + secrets.token_urlsafe(12)
    s3_secret = "s3-PLANTED-" + secrets.token_urlsafe(12)
    with running_pocketbase(tmp_path) as pb:
        owner = pb.superuser()
        resp = owner.http.patch(
            "/api/settings",
            json={
                "smtp": {
                    "enabled": True,
                    "host": "127.0.0.1",
                    "port": 2525,
                    "username": "mailer",
                    "password": smtp_password,
                },
                "backups": {
                    "s3": {
                        "enabled": True,
                        "bucket": bucket,
                        "region": REGION,
                        "endpoint": s3.endpoint_url,
                        "accessKey": "AKIDPLANTEDBACKUPS",
                        "secret": s3_secret,
                        "forcePathStyle": True,
                    }
                },
            },
        )
        assert resp.status_code == 200, resp.text
        assert owner.http.post("/api/backups", json={"name": "with_secrets.zip"}).status_code == 204
        keys = eventually_sync(lambda: [k for k in s3.keys(bucket) if k.endswith("with_secrets.zip")], within=30)
        archive = zipfile.ZipFile(io.BytesIO(s3.read(bucket, keys[0])))
        members = {name: archive.read(name) for name in archive.namelist()}
        assert "data.db" in members
        data_dir = pb.settings.pocketbase.data_dir
        on_disk = {str(p): p.read_bytes() for p in data_dir.rglob("*") if p.is_file()}
        key = key_file(pb.settings)
        assert not key.is_relative_to(data_dir) and key.is_file()
    for where, data in (members | on_disk).items():
        for secret in (smtp_password, s3_secret):
            assert not holds(data, secret), (where, secret, holds(data, secret))
    # Nor the key that would read them.
    the_key = key.read_text().strip()
    for where, data in members.items():
        assert not holds(data, the_key), where


def test_an_install_of_the_previous_release_moves_to_encrypted_settings(tmp_path: Path) -> None:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    data = tmp_path / "pb_data"
    # As an owner of 0.1.0 had it: SMTP set in the panel, its password in the settings' plain JSON.
    planted = "smtp-PLANTED-" + secrets.token_urlsafe(12)
    with closing(sqlite3.connect(data / "data.db")) as db:
        (value,) = db.execute("SELECT value FROM _params WHERE id = 'settings'").fetchone()
        plain = json.loads(value)
        plain["smtp"] |= {"enabled": True, "host": "127.0.0.1", "port": 2525, "password": planted}
        db.execute("UPDATE _params SET value = ? WHERE id = 'settings'", (json.dumps(plain),))
        db.commit()
    assert not settings_encrypted(data)
    settings = settings_for(data, 8090)
    key = key_file(settings)
    assert not key.exists()

    process.prepare(settings)  # what every start does first

    assert key.is_file() and (key.stat().st_mode & 0o777) == 0o600
    assert settings_encrypted(data)
    for path in data.glob("data.db*"):
        assert not holds(path.read_bytes(), planted), path
    # Read back with the key (PocketBase's AES-256-GCM: the nonce, then the sealed JSON, in base64), the
    # owner's SMTP is as it was.
    with closing(sqlite3.connect(data / "data.db")) as db:
        (value,) = db.execute("SELECT value FROM _params WHERE id = 'settings'").fetchone()
    sealed = base64.b64decode(value)
    opened = json.loads(AESGCM(key.read_text().strip().encode()).decrypt(sealed[:12], sealed[12:], None))
    assert opened["smtp"]["password"] == planted and opened["smtp"]["host"] == "127.0.0.1"
    process.prepare(settings)  # and the next start reads them
    # Without the key it is refused with a sentence, never a new key that could read nothing.
    key.rename(tmp_path / "kept-apart.key")
    with pytest.raises(RuntimeError, match="encrypted and their key is neither in " + ENV):
        process.prepare(settings)
