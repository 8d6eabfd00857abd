"""H5: what another user of the host can see — no password on a command line, no readable data."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from sidecar.pocketbase import process
from testkit import pocketbase as pbkit
from testkit.media import wav_bytes

OWNER_PASSWORD = "owner-Pw-7x9q2LmN4"
SENDER_PASSWORD = "sender-Pw-3k8w1ZrT6"


def test_passwords_never_ride_on_a_command_line_and_the_data_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = pbkit.test_settings(tmp_path / "pb_data", pbkit.free_port())
    settings.pocketbase.superuser_email = "owner@example.com"
    settings.pocketbase.superuser_password = SecretStr(OWNER_PASSWORD)
    command_lines: list[list[str]] = []
    real_run, real_popen = subprocess.run, subprocess.Popen

    def run(args: list[str], **kw: Any) -> Any:
        command_lines.append(list(args))
        return real_run(args, **kw)

    def popen(args: list[str], **kw: Any) -> Any:
        command_lines.append(list(args))
        return real_popen(args, **kw)

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(subprocess, "Popen", popen)

    account = process.prepare(settings)  # migrations, the service account, the owner
    process.add_user(settings, "alice@example.com", SENDER_PASSWORD)
    proc = process.start(settings, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        process.wait_healthy(settings.pocketbase.url, proc)
        # The accounts work: the passwords reached PocketBase another way.
        url = settings.pocketbase.url
        pbkit.login(url, "_superusers", "owner@example.com", OWNER_PASSWORD)
        pbkit.login(url, "services", account.email, account.password)
        token = pbkit.login(url, "users", "alice@example.com", SENDER_PASSWORD)
        resp = httpx.post(
            f"{url}/api/transcriber/records", headers={"Authorization": token}, files={"file": ("a.wav", wav_bytes())}
        )
        assert resp.status_code == 201, resp.text
    finally:
        proc.terminate()
        proc.wait(10)

    assert len(command_lines) >= 5
    for line in command_lines:
        for secret in (OWNER_PASSWORD, SENDER_PASSWORD, account.password):
            assert not any(secret in arg for arg in line), line

    data = settings.pocketbase.data_dir
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    files = [p for p in data.rglob("*") if p.is_file()]
    assert any(p.name == "data.db" for p in files) and any(p.parent.name != data.name for p in files)
    for path in data.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path.relative_to(data)} is {oct(mode)}"


@pytest.mark.parametrize("collection", ["users", "_superusers"])
def test_a_burst_of_wrong_passwords_is_refused_with_429(collection: str, tmp_path: Path) -> None:
    """H2: PocketBase's rate limiter is on for logins (by migration), the owner's login included."""
    from testkit.pocketbase import running_pocketbase

    with running_pocketbase(tmp_path) as pb:
        email = pb.new_sender().email if collection == "users" else pb.superuser_email
        url = f"{pb.url}/api/collections/{collection}/auth-with-password"
        codes = [httpx.post(url, json={"identity": email, "password": f"guess-{i}"}).status_code for i in range(40)]
    assert codes[0] == 400  # a wrong password, answered as such
    assert 429 in codes and codes.count(400) <= 21, codes  # at most the rule's 20 per 10 s get through
