"""H5: what another user of the host can see — no password on a command line, no readable data."""

from __future__ import annotations

import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from sidecar.pocketbase import process
from testkit import pocketbase as pbkit
from testkit.media import wav_bytes
from testkit.pocketbase import PASSWORD, running_pocketbase

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
    """H2: PocketBase's rate limiter is on for logins (by migration), the owner's login included:
    one address trying many accounts."""
    with running_pocketbase(tmp_path) as pb, httpx.Client(timeout=60) as http:
        url = f"{pb.url}/api/collections/{collection}/auth-with-password"
        # At once (a burst): one after another, the owner's failed logins answer slowly enough on a busy
        # machine that 40 of them outlast the rule's 10-second window.
        with ThreadPoolExecutor(8) as pool:
            guesses = [{"identity": f"guess{i}@example.com", "password": "x"} for i in range(40)]
            answers = list(pool.map(lambda body: http.post(url, json=body), guesses))
    codes = [a.status_code for a in answers]
    assert 400 in codes  # a wrong password, answered as such
    assert 429 in codes and codes.count(400) <= 21, codes  # at most the rule's 20 per 10 s get through
    limited = answers[codes.index(429)]
    assert limited.json()["code"] == "too_many_requests" and limited.headers["Retry-After"] == "10"


def login_from(address: str, url: str, collection: str, identity: str, password: str) -> httpx.Response:
    with httpx.Client(base_url=url, transport=httpx.HTTPTransport(local_address=address), timeout=30) as http:
        body = {"identity": identity, "password": password}
        return http.post(f"/api/collections/{collection}/auth-with-password", json=body)


def five_addresses(group: int) -> list[str]:
    """Five loopback addresses of their own: PocketBase's limiter allows each 20 logins in 10 s."""
    return [f"127.0.{group}.{i}" for i in range(1, 6)]


def test_wrong_passwords_for_one_account_are_limited_whatever_the_address(tmp_path: Path) -> None:
    """H2, second pass: 100 wrong passwords for one account from five addresses drew no 429 (PocketBase counts
    per address). Now 20 from addresses the account never signed in from make an attack: until the window ends
    such addresses wait, the right password included, while the holder's own address does not (third pass: a
    stranger could lock the holder out; tests/survival/test_logins.py has the rest)."""
    with running_pocketbase(tmp_path) as pb:
        alice, bob = pb.new_sender(), pb.new_sender()  # each signed in from 127.0.0.1: their own address
        five = five_addresses(1)
        answers = [login_from(five[i % 5], pb.url, "users", alice.email, f"guess-{i}") for i in range(100)]
        codes = [a.status_code for a in answers]
        assert codes == [400] * 20 + [429] * 80, codes
        locked = answers[-1]
        assert locked.json()["code"] == "too_many_failed_logins" and "15 minutes" in locked.json()["message"]
        assert 800 < int(locked.headers["Retry-After"]) <= 900
        # the right password waits too from an address with wrong passwords of its own: a lock that let it
        # through would tell a guesser when they hit it ...
        right = login_from(five[0], pb.url, "users", alice.email, PASSWORD)
        assert right.status_code == 429
        # ... while an address with none (her phone on a new network) takes the new devices' lane
        # (tests/survival/test_logins.py: 3 tries a minute, once an address)
        assert login_from("127.0.9.9", pb.url, "users", alice.email, PASSWORD).status_code == 200
        # ... but not from her own address
        assert login_from("127.0.0.1", pb.url, "users", alice.email, PASSWORD).status_code == 200
        # another account is not touched
        five = five_addresses(2)
        assert login_from(five[0], pb.url, "users", bob.email, PASSWORD).status_code == 200
        # an identity no account has is answered alike (the limit tells nobody which accounts exist)
        five = five_addresses(3)
        nobody = [login_from(five[i % 5], pb.url, "users", "nobody@example.com", "x") for i in range(21)]
        assert [a.status_code for a in nobody] == [400] * 20 + [429]
        # the owner's login is counted the same way
        five = five_addresses(4)
        su = [login_from(five[i % 5], pb.url, "_superusers", pb.superuser_email, "x") for i in range(21)]
        assert [a.status_code for a in su] == [400] * 20 + [429]


def test_the_service_account_cannot_be_locked_out_by_a_stranger(tmp_path: Path) -> None:
    """Its e-mail is known (sidecar@transcriber.local) and its password generated: wrong passwords from
    strangers meet the per-address limit only, so the workers can always sign in again."""
    with running_pocketbase(tmp_path) as pb:
        account, five = pb.service_account, five_addresses(1)
        for i in range(15):
            assert login_from(five[i % 5], pb.url, "services", account.email, "x").status_code == 400
        assert login_from("127.0.9.9", pb.url, "services", account.email, account.password).status_code == 200


# Each door that mails something or takes a mailed token, with a body it accepts as well formed.
DOORS = {
    "request-password-reset": {"email": "alice@example.com"},
    "request-verification": {"email": "alice@example.com"},
    "request-otp": {"email": "alice@example.com"},
    "confirm-password-reset": {"token": "x", "password": "long-enough-1", "passwordConfirm": "long-enough-1"},
    "confirm-verification": {"token": "x"},
    "confirm-email-change": {"token": "x", "password": "x"},
}


@pytest.mark.parametrize("door", sorted(DOORS))
def test_every_auth_door_is_rate_limited(door: str, tmp_path: Path) -> None:
    """H2, second pass: 30 anonymous password-reset requests drew 30 x 204, each an e-mail attempt."""
    with running_pocketbase(tmp_path) as pb:
        url = f"{pb.url}/api/collections/users/{door}"
        answers = [httpx.post(url, json=DOORS[door]) for _ in range(30)]
    codes = [a.status_code for a in answers]
    assert 429 in codes, codes
    first = codes.index(429)
    allowed = 3 if door.startswith("request-") else 10
    assert first == allowed and set(codes[first:]) == {429}, codes
    limited = answers[first]
    assert limited.json()["code"] == "too_many_requests"
    assert limited.headers["Retry-After"] == "60" and "60 seconds" in limited.json()["message"]


def test_an_e_mail_change_request_is_rate_limited(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path) as pb:
        sender = pb.new_sender()
        path = "/api/collections/users/request-email-change"
        codes = [sender.http.post(path, json={"newEmail": f"new{i}@example.com"}).status_code for i in range(10)]
    assert 429 not in codes[:3] and set(codes[3:]) == {429}, codes
