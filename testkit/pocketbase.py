"""A real PocketBase for tests: the project's migrations and hooks, a temporary
data dir, a free port, and signed-in clients for each kind of caller."""

from __future__ import annotations

import atexit
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from sidecar.pocketbase import process
from sidecar.pocketbase.process import ServiceAccount
from sidecar.settings import QuotaSettings, Settings
from testkit.media import wav_bytes

PASSWORD = "correct-horse-battery"
# Every collection of the schema, for tests that sweep them all.
COLLECTIONS = [
    "audio_records",
    "files",
    "texts",
    "recognition_attempts",
    "record_events",
    "topics",
    "services",
    "users",
    "usage_daily",
    "usage_providers",
    "erasures",
    "record_status",
    "login_addresses",
    "login_alerts",
    *(f"{c}_times" for c in ("audio_records", "insights", "literary", "files", "recognition_attempts")),
]
# The owner's alone among them (usage views, the audit of erasures, the login guard's rows, the follow-up
# queues' times), empty in a fresh server but for the addresses the test's own sign-ins leave.
OWNER_ONLY = [
    "usage_daily",
    "usage_providers",
    "erasures",
    "login_addresses",
    "login_alerts",
    "insights_times",
    "literary_times",
]


_ports = random.SystemRandom()  # not the seeded module random: two test workers must not draw alike


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range (32768 up): between this check and the
    server's own bind, an outgoing connection of a client could otherwise be given the same port."""
    for _ in range(1000):
        port = _ports.randrange(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32000")


def created_ms(row: dict[str, object]) -> int:
    """A row's ``created`` ("2026-11-29 10:00:00.123Z") in unix ms, as the claim key stores it."""
    from datetime import datetime

    created = datetime.fromisoformat(str(row["created"]).replace(" ", "T").replace("Z", "+00:00"))
    return round(created.timestamp() * 1000)


def login(url: str, collection: str, email: str, password: str) -> str:
    resp = httpx.post(
        f"{url}/api/collections/{collection}/auth-with-password",
        json={"identity": email, "password": password},
        timeout=10,
    )
    resp.raise_for_status()
    return str(resp.json()["token"])


def now_ms() -> int:
    """Unix time in ms, the ``now`` a test's own pipeline request sends."""
    return time.time_ns() // 1_000_000


# The stages a recording is claimed in, and a lease long enough for any test that claims by hand (ms).
CLAIMABLE = ("uploaded", "normalized", "submitted", "transcribed")
LEASE_MS = 60_000


def signed_in(url: str, kind: str, collection: str, email: str, password: str = PASSWORD) -> Caller:
    """A ``Caller`` for an account of the server at ``url`` (its client is the caller's to close)."""
    resp = httpx.post(
        f"{url}/api/collections/{collection}/auth-with-password",
        json={"identity": email, "password": password},
        timeout=10,
    )
    resp.raise_for_status()
    body = resp.json()
    http = httpx.Client(base_url=url, headers={"Authorization": body["token"]}, timeout=120)
    return Caller(kind, email, body["token"], body["record"]["id"], http)


@dataclass
class Caller:
    """An httpx client signed in as one account, with the requests tests make again and again:
    a sender's upload and poll, the owner's read of a record, the service's claim."""

    kind: str
    email: str
    token: str
    id: str
    http: httpx.Client

    def try_upload(
        self, audio: bytes | Path | None = None, *, name: str | None = None, mime: str | None = None, **form: str
    ) -> httpx.Response:
        """POST /api/transcriber/records whatever it answers: one file (``audio``'s bytes or a file's;
        a tenth of a second of WAV by default) and the form's text fields (``title``, ``language``, …)."""
        if isinstance(audio, Path):
            body, name = audio.read_bytes(), name or audio.name
        else:
            body = wav_bytes(0.1) if audio is None else audio
        part = (name or "a.wav", body) if mime is None else (name or "a.wav", body, mime)
        return self.http.post("/api/transcriber/records", files={"file": part}, data=form)

    def upload(
        self, audio: bytes | Path | None = None, *, name: str | None = None, mime: str | None = None, **form: str
    ) -> str:
        """The id of a recording uploaded as ``try_upload`` sends it (the upload must be taken)."""
        resp = self.try_upload(audio, name=name, mime=mime, **form)
        assert resp.status_code == 201, resp.text
        return str(resp.json()["id"])

    def poll(self, rid: str) -> dict[str, Any]:
        """A sender's poll of one recording (GET /api/transcriber/records/{id})."""
        resp = self.http.get(f"/api/transcriber/records/{rid}")
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    def record(self, rid: str) -> dict[str, Any]:
        """The ``audio_records`` row as the records API gives it (the owner's view)."""
        resp = self.http.get(f"/api/collections/audio_records/records/{rid}")
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    def try_claim(self, *, now: int | None = None, leases: dict[str, int] | None = None) -> httpx.Response:
        """POST /api/pipeline/claim whatever it answers; ``leases`` in ms (every recording stage by default)."""
        body = {
            "now": now_ms() if now is None else now,
            "leases": dict.fromkeys(CLAIMABLE, LEASE_MS) if leases is None else leases,
        }
        return self.http.post("/api/pipeline/claim", json=body)

    def claim(
        self, rid: str | None = None, *, now: int | None = None, leases: dict[str, int] | None = None
    ) -> dict[str, Any]:
        """The claim's answer (``id``, ``token``, the queue fields), which must be ``rid``'s when one is named."""
        resp = self.try_claim(now=now, leases=leases)
        assert resp.status_code == 200, resp.text
        claimed = dict(resp.json())
        assert rid is None or claimed["id"] == rid, claimed
        return claimed


@dataclass
class PocketBaseServer:
    url: str
    settings: Settings
    service_account: ServiceAccount
    proc: subprocess.Popen[bytes]
    log_path: Path
    superuser_email: str = "owner@example.com"
    _clients: list[httpx.Client] = field(default_factory=list)
    _su_token: str = ""

    def caller(self, kind: str, collection: str, email: str, password: str = PASSWORD) -> Caller:
        who = signed_in(self.url, kind, collection, email, password)
        self._clients.append(who.http)
        return who

    def new_sender(self, email: str | None = None) -> Caller:
        """A sender account, made through the running server (as ``transcriber user add`` makes it)."""
        email = email or f"sender-{uuid.uuid4().hex[:8]}@example.com"
        resp = httpx.post(
            f"{self.url}/api/collections/users/records",
            headers={"Authorization": self._superuser_token()},
            json={"email": email, "password": PASSWORD, "passwordConfirm": PASSWORD, "verified": True},
            timeout=10,
        )
        resp.raise_for_status()
        return self.caller("sender", "users", email)

    def _superuser_token(self) -> str:
        if not self._su_token:
            self._su_token = login(self.url, "_superusers", self.superuser_email, PASSWORD)
        return self._su_token

    def service(self) -> Caller:
        return self.caller("service", "services", self.service_account.email, self.service_account.password)

    def superuser(self) -> Caller:
        return self.caller("superuser", "_superusers", self.superuser_email)

    def anonymous(self) -> httpx.Client:
        http = httpx.Client(base_url=self.url, timeout=60)
        self._clients.append(http)
        return http

    def worker_env(self, **extra: str) -> dict[str, str]:
        """The environment of a worker process that uses this server (its service account, its URL)."""
        return dict(
            os.environ,
            TRANSCRIBER_POCKETBASE__URL=self.url,
            TRANSCRIBER_POCKETBASE__DATA_DIR=str(self.settings.pocketbase.data_dir),
            **extra,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def sql(self, statement: str, *params: object) -> None:
        """Writes to the server's database directly, beside the running server (as a state a
        running system reaches would be written, without a route that would refuse it)."""
        import sqlite3

        with closing(sqlite3.connect(self.settings.pocketbase.data_dir / "data.db", timeout=30)) as db, db:
            db.execute(statement, params)

    def sql_one(self, statement: str, *params: object) -> tuple[Any, ...]:
        """The first row a query of the server's database finds, read directly (as ``sql`` writes):
        whatever a column holds, even what PocketBase's own read would refuse."""
        import sqlite3

        with closing(sqlite3.connect(self.settings.pocketbase.data_dir / "data.db", timeout=30)) as db:
            row = db.execute(statement, params).fetchone()
        assert row is not None, statement
        return tuple(row)

    def stop(self) -> None:
        for c in self._clients:
            c.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self, *, down_for: float = 0.0) -> None:
        """Stops and starts the server on the same port and data dir, ``down_for`` seconds apart."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        time.sleep(down_for)
        self.proc = _spawn(self.settings, self.url, self.log_path)
        process.wait_healthy(self.url, self.proc)


def test_settings(data_dir: Path, port: int, **env: str) -> Settings:
    os.environ.pop("TRANSCRIBER_CONFIG", None)
    s = Settings()
    s.pocketbase.data_dir = data_dir
    s.pocketbase.http = f"127.0.0.1:{port}"
    s.pocketbase.url = f"http://127.0.0.1:{port}"
    # Tests of other behaviour upload as much as they need; the quota tests
    # (tests/survival/test_quotas.py) pass the shipping defaults explicitly.
    s.quotas = QuotaSettings(uploads_per_hour=0, waiting=0, audio_hours_per_day=0)
    return s


def _spawn(settings: Settings, url: str, log_path: Path) -> subprocess.Popen[bytes]:
    log = log_path.open("ab")
    try:
        return process.start(settings, stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()


# A migrated data directory (schema, service account, superuser), made once per
# process and copied for each server: preparing one costs half a second, a copy
# a few milliseconds.
_template: Path | None = None


def _prepared_template() -> Path:
    global _template
    if _template is None or not (_template / "data.db").is_file():
        from pydantic import SecretStr

        root = Path(tempfile.mkdtemp(prefix="transcriber-pb-template-"))
        atexit.register(shutil.rmtree, root, True)
        settings = test_settings(root / "pb_data", free_port())
        settings.pocketbase.superuser_email = "owner@example.com"
        settings.pocketbase.superuser_password = SecretStr(PASSWORD)
        process.prepare(settings)
        _template = root / "pb_data"
    return _template


@contextmanager
def running_pocketbase(
    tmp: Path,
    *,
    max_upload_mb: int = 1024,
    read_timeout: timedelta | None = None,
    body_timeout: timedelta | None = None,
    quotas: QuotaSettings | None = None,
    hooks_dir: Path | None = None,
) -> Iterator[PocketBaseServer]:
    """A fresh PocketBase with the project's migrations and hooks (or ``hooks_dir``'s) on a free port,
    data under ``tmp``."""
    port = free_port()
    data_dir = tmp / "pb_data"
    template = _prepared_template()
    shutil.copytree(template, data_dir)
    # Its settings are encrypted with the key beside it (sidecar.pocketbase.settings_key): the copy's too.
    shutil.copy2(template.with_name(template.name + ".key"), data_dir.with_name(data_dir.name + ".key"))
    settings = test_settings(data_dir, port)
    settings.intake.max_upload_mb = max_upload_mb
    if read_timeout is not None:
        settings.intake.read_timeout = read_timeout
    if body_timeout is not None:  # every other route's
        settings.pocketbase.read_timeout = body_timeout
    if quotas is not None:
        settings.quotas = quotas
    if hooks_dir is not None:
        settings.pocketbase.hooks_dir = hooks_dir
    account = process.service_account(settings, create=False)
    log_path = tmp / "pocketbase.log"
    proc = _spawn(settings, settings.pocketbase.url, log_path)
    server = PocketBaseServer(settings.pocketbase.url, settings, account, proc, log_path)
    try:
        process.wait_healthy(server.url, proc)
        yield server
    finally:
        server.stop()
