"""What the owner sets in the panel survives a restart: the settings seed PocketBase's backup settings and the
superuser's password, and a start applies a key only when the settings changed it since it was last applied
(or PocketBase still has its default). Real PocketBase, started as ``transcriber pocketbase`` starts it, with a
settings file; the panel's changes made as the panel makes them (the superuser's PATCH)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from sidecar.pocketbase.process import wait_healthy
from testkit.pocketbase import free_port
from testkit.s3 import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, S3Server
from tests.support.operator import CLI, clean_env

OWNER = "owner@example.com"
FIRST = "first-owner-password-1"


@dataclass
class Started:
    """One ``transcriber pocketbase`` on a data directory, started again with the settings file as it is."""

    tmp: Path
    port: int
    config: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, text: str) -> list[str]:
        """Writes the settings file and starts on it; the lines this start logged about seeded settings."""
        self.stop()
        self.config.write_text(text)
        self.starts += 1
        log = self.tmp / f"start-{self.starts}.log"
        where = ["--data-dir", str(self.tmp / "pb_data"), "--http", f"127.0.0.1:{self.port}"]
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*CLI, "pocketbase", "--config", str(self.config), *where],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=clean_env(),
            )
        wait_healthy(self.url, self.proc, timeout=120)
        lines = log.read_text().splitlines()
        return [line for line in lines if "[backups]" in line or "superuser " in line]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)

    @contextmanager
    def owner(self, password: str) -> Iterator[httpx.Client]:
        """The owner signed in, as the panel is."""
        with httpx.Client(base_url=self.url, timeout=30) as http:
            resp = http.post(
                "/api/collections/_superusers/auth-with-password", json={"identity": OWNER, "password": password}
            )
            assert resp.status_code == 200, resp.text
            http.headers["Authorization"] = resp.json()["token"]
            yield http

    def signs_in(self, password: str) -> bool:
        resp = httpx.post(
            f"{self.url}/api/collections/_superusers/auth-with-password",
            json={"identity": OWNER, "password": password},
            timeout=30,
        )
        return resp.status_code == 200

    def backups(self, password: str = FIRST) -> dict[str, Any]:
        with self.owner(password) as http:
            resp = http.get("/api/settings")
            assert resp.status_code == 200, resp.text
            found: dict[str, Any] = resp.json()["backups"]
            return found

    def panel_sets(self, backups: dict[str, Any], password: str = FIRST) -> None:
        """The owner's save of Settings → Backups (the panel sends PATCH /api/settings)."""
        with self.owner(password) as http:
            resp = http.patch("/api/settings", json={"backups": backups})
            assert resp.status_code == 200, resp.text


@contextmanager
def pocketbase(tmp: Path) -> Iterator[Started]:
    started = Started(tmp, free_port(), tmp / "transcriber.toml")
    try:
        yield started
    finally:
        started.stop()


def settings_file(backups: str = "", password: str = FIRST) -> str:
    owner = f'[pocketbase]\nsuperuser_email = "{OWNER}"\nsuperuser_password = "{password}"\n'
    return owner + (f"[backups]\n{backups}\n" if backups else "")


def s3_keys(s3: S3Server, bucket: str) -> str:
    return (
        f's3_bucket = "{bucket}"\ns3_endpoint = "{s3.endpoint_url}"\ns3_region = "{REGION}"\n'
        f's3_access_key = "{ACCESS_KEY_ID}"\ns3_secret = "{SECRET_ACCESS_KEY}"\ns3_force_path_style = true\n'
    )


def panel_s3(s3: S3Server, bucket: str) -> dict[str, Any]:
    return {
        "enabled": True,
        "bucket": bucket,
        "endpoint": s3.endpoint_url,
        "region": REGION,
        "accessKey": ACCESS_KEY_ID,
        "secret": SECRET_ACCESS_KEY,
        "forcePathStyle": True,
    }


def one(lines: list[str], *words: str) -> str:
    """The one line that has every one of ``words``; no other line names the same setting."""
    found = [line for line in lines if all(w in line for w in words)]
    assert len(found) == 1, lines
    return found[0]


def test_backup_settings_the_settings_do_not_name_are_the_panels(tmp_path: Path, s3: S3Server) -> None:
    bucket = s3.new_bucket()
    with pocketbase(tmp_path) as pb:
        pb.start(settings_file())
        assert pb.backups()["cron"] == "" and pb.backups()["cronMaxKeep"] == 3  # PocketBase's own defaults
        pb.panel_sets({"cron": "0 4 * * *", "cronMaxKeep": 5, "s3": panel_s3(s3, bucket)})

        lines = pb.start(settings_file())
        assert not [line for line in lines if "[backups]" in line], lines
        after = pb.backups()
        assert (after["cron"], after["cronMaxKeep"], after["s3"]["enabled"], after["s3"]["bucket"]) == (
            "0 4 * * *",
            5,
            True,
            bucket,
        )

        # Named for the first time, over a value the owner set: the owner's stands, and one line says so.
        lines = pb.start(settings_file('cron = "30 3 * * *"'))
        kept = one(lines, "[backups] cron")
        assert "'0 4 * * *' is kept" in kept and "edit it in the settings" in kept
        assert pb.backups()["cron"] == "0 4 * * *"

        # The file's value changed: it is applied over the owner's, and said once, at WARNING with the key's name.
        lines = pb.start(settings_file('cron = "15 2 * * *"'))
        replaced = one(lines, "[backups] cron")
        assert "WARNING" in replaced and "'15 2 * * *' replaces the panel's '0 4 * * *'" in replaced
        after = pb.backups()
        assert after["cron"] == "15 2 * * *"
        assert (after["cronMaxKeep"], after["s3"]["bucket"]) == (5, bucket)  # keys the file does not name: untouched
        assert pb.start(settings_file('cron = "15 2 * * *"')) == []


def test_backup_settings_changed_in_the_panel_survive_a_restart(tmp_path: Path, s3: S3Server) -> None:
    first, panels, edited = s3.new_bucket(), s3.new_bucket(), s3.new_bucket()
    named = 'cron = "30 3 * * *"\nkeep = 7\n'
    with pocketbase(tmp_path) as pb:
        lines = pb.start(settings_file(named + s3_keys(s3, first)))
        assert "applied from the settings" in one(lines, "[backups] cron")
        assert "applied from the settings" in one(lines, "[backups] s3_bucket")
        assert not [line for line in lines if "WARNING" in line], lines  # PocketBase's defaults replaced
        applied = pb.backups()
        assert (applied["cron"], applied["cronMaxKeep"], applied["s3"]["bucket"]) == ("30 3 * * *", 7, first)
        assert applied["s3"]["enabled"] is True

        pb.panel_sets({"cron": "0 4 * * *", "cronMaxKeep": 4, "s3": panel_s3(s3, panels)})
        lines = pb.start(settings_file(named + s3_keys(s3, first)))
        after = pb.backups()
        assert (after["cron"], after["cronMaxKeep"], after["s3"]["bucket"]) == ("0 4 * * *", 4, panels)
        for key, panel in (("cron", "'0 4 * * *'"), ("keep", "4"), ("s3_bucket", f"s3://{panels}")):
            kept = one(lines, f"[backups] {key}")
            assert f"the panel's {panel}" in kept and "is kept" in kept and "remove it from the settings" in kept
        assert SECRET_ACCESS_KEY not in "\n".join(lines)

        # The file's bucket changed: it replaces the panel's, said at WARNING; the rest stays the panel's.
        lines = pb.start(settings_file(named + s3_keys(s3, edited)))
        replaced = one(lines, "[backups] s3_bucket")
        assert "WARNING" in replaced and f"s3://{edited} replaces the panel's s3://{panels}" in replaced
        after = pb.backups()
        assert (after["cron"], after["cronMaxKeep"], after["s3"]["bucket"]) == ("0 4 * * *", 4, edited)
        assert after["s3"]["endpoint"] == s3.endpoint_url and after["s3"]["enabled"] is True
        again = pb.start(settings_file(named + s3_keys(s3, edited)))  # said once: the S3 keys are in step now
        assert not [line for line in again if "s3_" in line or "applied from" in line], again


def test_a_file_naming_one_s3_key_changes_only_it(tmp_path: Path, s3: S3Server) -> None:
    """Naming one S3 key (no bucket) turned off the S3 the owner set up in the panel."""
    bucket = s3.new_bucket()
    with pocketbase(tmp_path) as pb:
        pb.start(settings_file())
        pb.panel_sets({"s3": panel_s3(s3, bucket)})
        lines = pb.start(settings_file('s3_region = "eu-north-1"'))
        kept = one(lines, "[backups] s3_region")
        assert "is kept" in kept and f"'{REGION}'" in kept
        after = pb.backups()["s3"]
        assert (after["enabled"], after["bucket"], after["region"]) == (True, bucket, REGION)
        # Edited in the file: the region alone changes (over the owner's: said at WARNING); S3 stays on.
        lines = pb.start(settings_file('s3_region = "eu-west-3"'))
        replaced = one(lines, "[backups] s3_region")
        assert "WARNING" in replaced and f"'eu-west-3' replaces the panel's '{REGION}'" in replaced
        after = pb.backups()["s3"]
        assert (after["enabled"], after["bucket"], after["region"]) == (True, bucket, "eu-west-3")
        assert (after["endpoint"], after["accessKey"]) == (s3.endpoint_url, ACCESS_KEY_ID)
        # Applied by the file and left alone in the panel: the next edit is no override (INFO).
        lines = pb.start(settings_file('s3_region = "eu-south-1"'))
        applied = one(lines, "[backups] s3_region")
        assert "WARNING" not in applied and "'eu-south-1' applied" in applied
        assert pb.backups()["s3"]["enabled"] is True


def test_a_superuser_password_changed_in_the_panel_survives_a_restart(tmp_path: Path) -> None:
    panels, edited = "changed-in-the-panel-2", "edited-in-the-file-3"
    with pocketbase(tmp_path) as pb:
        assert "created" in one(pb.start(settings_file()), f"superuser {OWNER}")
        with pb.owner(FIRST) as http:
            me = http.get("/api/collections/_superusers/records", params={"filter": f"email='{OWNER}'"})
            rid = me.json()["items"][0]["id"]
            changed = http.patch(
                f"/api/collections/_superusers/records/{rid}",
                json={"password": panels, "passwordConfirm": panels},
            )
            assert changed.status_code == 200, changed.text

        kept = one(pb.start(settings_file()), f"superuser {OWNER}")
        assert "password is kept" in kept and "edit superuser_password in the settings" in kept and FIRST not in kept
        assert "[redacted]" not in kept
        assert pb.signs_in(panels) and not pb.signs_in(FIRST)

        # Edited in the file: it replaces the panel's, and the start says so at WARNING.
        lines = pb.start(settings_file(password=edited))
        replaced = one(lines, f"superuser {OWNER}")
        assert "WARNING" in replaced and "replaces the one set in the panel" in replaced and edited not in replaced
        assert pb.signs_in(edited) and not pb.signs_in(panels)
        assert pb.start(settings_file(password=edited)) == []
        # Edited again, the panel's left alone: no override, said at INFO.
        lines = pb.start(settings_file(password=edited + "x"))
        again = one(lines, f"superuser {OWNER}")
        assert "password set" in again and "WARNING" not in again
        assert pb.signs_in(edited + "x")
        edited += "x"

    # The settings never store the password: what data.db keeps is a slow hash.
    data = b"".join(p.read_bytes() for p in (tmp_path / "pb_data").glob("data.db*"))
    assert all(p.encode() not in data for p in (FIRST, panels, edited))
