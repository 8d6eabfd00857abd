"""The `transcriber` command as an operator runs it (subprocesses, real PocketBase)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from sidecar.pocketbase.process import wait_healthy
from testkit.pocketbase import free_port, login
from tests.support.tools import require
from tests.support.waiting import eventually_sync

CLI = [sys.executable, "-m", "sidecar"]


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command, its standard input closed (no terminal: what it would ask is refused instead)."""
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@contextmanager
def serving(
    data: Path, log_path: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``transcriber serve`` (the instant provider) on ``data``, its output in ``log_path``: the process and
    its URL once its workers run; killed after the block if it is still running."""
    port = free_port()
    env = dict(os.environ, TRANSCRIBER_PROVIDER__NAME="instant", **(env or {}))
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [*CLI, "serve", "--data-dir", str(data), "--http", f"127.0.0.1:{port}"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, timeout=60)
        eventually_sync(lambda: "workers running" in log_path.read_text(), within=30)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_serve_answers_health_runs_workers_and_stops_cleanly(tmp_path: Path) -> None:
    with serving(tmp_path / "data", tmp_path / "serve.log") as (proc, url):
        assert "workers running: 2" in (tmp_path / "serve.log").read_text()
        assert (tmp_path / "data" / "service-account.json").stat().st_mode & 0o077 == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    try:
        httpx.get(f"{url}/api/health", timeout=2)
        raise AssertionError("PocketBase still answers after serve stopped")
    except httpx.TransportError:
        pass
    text = (tmp_path / "serve.log").read_text()
    assert "pool stopped" in text
    secret = (tmp_path / "data" / "service-account.json").read_text()
    import json

    assert json.loads(secret)["password"] not in text  # never printed


def children_of(pid: int) -> list[tuple[int, str]]:
    """(pid, name) of the processes whose parent is ``pid``, read from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        ppid = int(text[text.rindex(")") + 2 :].split()[1])
        if ppid == pid:
            found.append((int(stat.parent.name), name))
    return found


def test_serve_exits_non_zero_when_its_pocketbase_dies(tmp_path: Path) -> None:
    """O2: with PocketBase gone the process is of no use; a supervisor restarts it on a non-zero exit."""
    log_path = tmp_path / "serve.log"
    with serving(tmp_path / "data", log_path) as (proc, _):
        [(child, name)] = children_of(proc.pid)
        assert name == "pocketbase"
        os.kill(child, signal.SIGKILL)
        assert proc.wait(60) == 3
    assert "PocketBase exited with code -9: stopping the workers" in log_path.read_text()


@contextmanager
def pocketbase_on(data: Path) -> Iterator[str]:
    """``transcriber pocketbase`` on ``data`` for the block: its URL, once it answers."""
    port = free_port()
    proc = subprocess.Popen(
        [*CLI, "pocketbase", "--data-dir", str(data), "--http", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, timeout=60)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def test_user_add_creates_a_sender_who_can_sign_in(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = run_cli("user", "add", "carol@example.com", "--password", "-starts-with-dash", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert "carol@example.com created" in done.stdout
    again = run_cli("user", "add", "carol@example.com", "--password", "whatever12", "--data-dir", str(data))
    assert again.returncode == 1 and "already exists" in again.stderr
    generated = run_cli("user", "add", "dave@example.com", "--data-dir", str(data))
    assert generated.returncode == 0 and "password:" in generated.stdout
    password = generated.stdout.rsplit("password:", 1)[1].strip()

    with pocketbase_on(data) as url:
        assert login(url, "users", "carol@example.com", "-starts-with-dash")
        assert login(url, "users", "dave@example.com", password)


def test_user_password_sets_a_senders_password_and_ends_their_sessions(tmp_path: Path) -> None:
    """Where no mail is set up for the reset, the owner sets a forgetful sender's password on the host."""
    data = tmp_path / "data"
    added = run_cli("user", "add", "frank@example.com", "--password", "frank-old-pw", "--data-dir", str(data))
    assert added.returncode == 0, added.stderr
    with pocketbase_on(data) as url:
        session = {"Authorization": login(url, "users", "frank@example.com", "frank-old-pw")}
        assert httpx.get(f"{url}/api/transcriber/records", headers=session).status_code == 200
        done = run_cli("user", "password", "frank@example.com", "--password", "frank-new-pw", "--data-dir", str(data))
        assert done.returncode == 0, done.stderr
        assert "password of frank@example.com set; their other sessions are signed out" in done.stdout
        assert httpx.get(f"{url}/api/transcriber/records", headers=session).status_code == 401
        assert login(url, "users", "frank@example.com", "frank-new-pw")
        generated = run_cli("user", "password", "frank@example.com", "--data-dir", str(data))
        assert generated.returncode == 0, generated.stderr
        password = generated.stdout.split("set: ", 1)[1].split(";", 1)[0]
        assert login(url, "users", "frank@example.com", password)
        missing = run_cli("user", "password", "nobody@example.com", "--password", "whatever12", "--data-dir", str(data))
        assert missing.returncode == 1 and "no sender with email nobody@example.com" in missing.stderr


def test_a_bad_config_file_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "t.toml"
    cfg.write_text("[pipeline]\nworkers = -1\n")
    done = run_cli("worker", "--config", str(cfg))
    assert done.returncode == 2
    assert "workers" in done.stderr
    missing = run_cli("worker", "--config", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "not found" in missing.stderr


def test_transcribe_prints_the_transcript_and_a_halt_code(tmp_path: Path) -> None:
    from testkit.wer import wer

    root = Path(__file__).resolve().parents[2]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    data = tmp_path / "data"
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [*CLI, "serve", "--data-dir", str(data), "--http", f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        wait_healthy(url, timeout=60)
        assert (
            run_cli(
                "user", "add", "erin@example.com", "--password", "erin-password", "--data-dir", str(data)
            ).returncode
            == 0
        )
        auth = ["--server", url, "--email", "erin@example.com", "--password", "erin-password"]
        done = run_cli("transcribe", str(root / "samples" / "sample.ogg"), *auth)
        assert done.returncode == 0, done.stderr
        assert wer((root / "samples" / "sample.txt").read_text(), done.stdout) <= 0.1
        srt = run_cli("transcribe", str(root / "samples" / "sample.ogg"), *auth, "--format", "srt")
        assert srt.returncode == 0 and srt.stdout.startswith("1\n00:00:0") and " --> " in srt.stdout
        bad = tmp_path / "broken.ogg"
        bad.write_bytes(b"OggS\x00\x02" + bytes(range(256)) * 40)
        halted = run_cli("transcribe", str(bad), *auth)
        assert halted.returncode == 3 and "unsupported_media" in halted.stderr
        refused = run_cli("transcribe", str(root / "README.md"), *auth)
        assert refused.returncode == 1 and "not a known audio" in refused.stderr
        wrong = run_cli("transcribe", str(bad), "--server", url, "--email", "erin@example.com", "--password", "nope")
        assert wrong.returncode == 1 and "sign-in failed" in wrong.stderr
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(30)
        log.close()


def test_worker_without_credentials_is_a_clear_error(tmp_path: Path) -> None:
    env = dict(os.environ, TRANSCRIBER_POCKETBASE__DATA_DIR=str(tmp_path / "empty"))
    done = run_cli("worker", env=env)
    assert done.returncode == 2 and "service credentials" in done.stderr


def test_serve_on_a_busy_port_says_so_and_exits(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [*CLI, "serve", "--data-dir", str(tmp_path / "d"), "--http", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    # Refused before anything starts, naming the port and what holds it (this test's own process).
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].startswith(f"error: [pocketbase] http 127.0.0.1:{port} is in use by PID {os.getpid()} (")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "d" / "data.db").exists()  # no migration ran


def test_owner_and_sender_commands_use_the_server_serve_runs(tmp_path: Path) -> None:
    """One way to name the server: after ``serve --data-dir D --http HOST:PORT`` every command run
    beside it (no flag) acts on D and that address; a server named wrongly is an error naming it and
    the flag; a data directory no server has used is never made behind the owner's back."""
    root = Path(__file__).resolve().parents[2]
    data = tmp_path / "D"
    with serving(data, tmp_path / "serve.log", cwd=tmp_path) as (_, url):
        added = run_cli("user", "add", "alice@example.com", "--password", "alice-pass-123", cwd=tmp_path)
        assert added.returncode == 0, added.stderr
        assert login(url, "users", "alice@example.com", "alice-pass-123")  # written into D, the server's
        assert not (tmp_path / "pb_data").exists()

        owner = run_cli("owner", "add", "owner@example.com", "--password", "owner-pass-123", cwd=tmp_path)
        assert owner.returncode == 0, owner.stderr
        assert f"{url}/_/" in owner.stdout
        assert login(url, "_superusers", "owner@example.com", "owner-pass-123")
        as_owner = ["--email", "owner@example.com", "--password", "owner-pass-123"]
        made = run_cli("backup", "create", "--name", "found.zip", *as_owner, cwd=tmp_path)  # not on 8090
        assert made.returncode == 0, made.stderr
        named = run_cli("backup", "create", "--name", "named.zip", "--server", url.removeprefix("http://"), *as_owner)
        assert named.returncode == 0, named.stderr
        assert {"found.zip", "named.zip"} <= {p.name for p in (data / "backups").iterdir()}
        by_dir = run_cli("backup", "list", "--data-dir", str(data), *as_owner)
        assert by_dir.returncode == 0 and "found.zip" in by_dir.stdout, by_dir.stderr

        sender = ["--email", "alice@example.com", "--password", "alice-pass-123"]
        done = run_cli("transcribe", str(root / "samples" / "sample.ogg"), *sender, cwd=tmp_path)
        assert done.returncode == 0 and done.stdout.strip(), done.stderr

        # Nothing answers at the address named: asked for no password, told which server and which flag.
        nowhere = f"127.0.0.1:{free_port()}"
        wrong = run_cli("backup", "list", "--server", nowhere, "--email", "owner@example.com")
        assert wrong.returncode == 1
        assert f"cannot reach the server at http://{nowhere}" in wrong.stderr
        assert "--server HOST:PORT" in wrong.stderr and "password" not in wrong.stderr
        lost = run_cli("transcribe", str(root / "samples" / "sample.ogg"), "--server", nowhere, *sender)
        assert lost.returncode == 1 and f"http://{nowhere}" in lost.stderr and "--server" in lost.stderr
        # A command on the data directory, pointed at an address no server here listens at: not guessed.
        unknown = run_cli("user", "add", "carl@example.com", "--password", "carl-pass-1234", "--server", nowhere)
        assert unknown.returncode == 2
        assert f"no server on this host listens at http://{nowhere}" in unknown.stderr
        assert "--data-dir DIR" in unknown.stderr

    # The settings name a directory no server has used: without a terminal the command refuses, in one
    # line that says what to pass, and makes nothing.
    fresh = tmp_path / "fresh"
    cfg = tmp_path / "t.toml"
    cfg.write_text(f'[pocketbase]\ndata_dir = "{fresh}"\n')
    refused = run_cli("user", "add", "bob@example.com", "--password", "bob-pass-1234", "--config", str(cfg))
    assert refused.returncode == 2
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith(f"error: no server has used {fresh}") and "--data-dir DIR" in line
    assert not fresh.exists()


def test_the_owner_line_and_pocketbase_lines_at_start(tmp_path: Path) -> None:
    """The owner's first minute: one line on how to get the account, only while there is none; none of
    PocketBase's hints that do not apply here; with ``[logs] format = "json"`` every line on the stream
    is JSON (PocketBase's own included) and the README's ``jq`` recipe reads it."""
    import json
    import shutil

    data = tmp_path / "D"
    log_path = tmp_path / "serve.log"
    as_json = {"TRANSCRIBER_LOGS__FORMAT": "json"}
    root = Path(__file__).resolve().parents[2]
    with serving(data, log_path, cwd=tmp_path, env=as_json) as (proc, url):
        eventually_sync(lambda: "pbinstall" in log_path.read_text(), within=30)
        # A recording, for the README's recipe to find its story.
        assert run_cli("user", "add", "eve@example.com", "--password", "eve-pass-1234", cwd=tmp_path).returncode == 0
        sender = ["--email", "eve@example.com", "--password", "eve-pass-1234"]
        done = run_cli("transcribe", str(root / "samples" / "sample.ogg"), *sender, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        rid = re.search(r"record: (\w+)", done.stderr)
        assert rid, done.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    stream = log_path.read_text()
    lines = stream.splitlines()
    parsed = [json.loads(line) for line in lines]  # every line, or this raises naming it
    messages = [p["message"] for p in parsed]
    assert {"pocketbase", "transcriber"} <= {p["logger"] for p in parsed}
    assert sum("no owner account yet" in m and "transcriber owner add EMAIL" in m for m in messages) == 1
    assert any(m.startswith("Server started at") for m in messages)
    assert not [m for m in messages if "superuser upsert" in m or "go run" in m]

    # With the server stopped, the directory is named (the default would be a new ./pb_data).
    owner = run_cli("owner", "add", "owner@example.com", "--password", "owner-pass-123", "--data-dir", str(data))
    assert owner.returncode == 0, owner.stderr
    with serving(data, log_path, cwd=tmp_path) as (proc, url):
        assert login(url, "_superusers", "owner@example.com", "owner-pass-123")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    again = log_path.read_text()
    assert "no owner account yet" not in again and "pbinstall" not in again

    # The README's recipe, as written there, on the whole stream.
    readme = " ".join((root / "README.md").read_text().split())
    recipe = re.search(r"Find a recording's story with `jq '([^']+)'`", readme)
    assert recipe, "the README's jq recipe moved"
    require(None if shutil.which("jq") else "jq is not installed (apt-get install -y jq): the recipe is not tried")
    story = subprocess.run(
        ["jq", "-c", recipe.group(1).replace("ID", rid.group(1))],
        input=stream,
        capture_output=True,
        text=True,
        check=False,
    )
    assert story.returncode == 0, story.stderr
    found = [json.loads(line) for line in story.stdout.splitlines()]
    assert found and all(line["record"] == rid.group(1) for line in found)


def test_with_several_servers_a_command_takes_the_one_started_here_or_asks_to_name_one(tmp_path: Path) -> None:
    """Two servers on this host: a command run where one was started takes that one; run elsewhere,
    it names them and the flags, and changes nothing."""
    servers = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        port = free_port()
        proc = subprocess.Popen(
            [*CLI, "pocketbase", "--data-dir", "data", "--http", f"127.0.0.1:{port}"],
            cwd=tmp_path / name,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        servers.append((proc, f"http://127.0.0.1:{port}"))
    try:
        for _, url in servers:
            wait_healthy(url, timeout=60)
        (_, url_a), (_, url_b) = servers
        here = run_cli("user", "add", "ann@example.com", "--password", "ann-pass-1234", cwd=tmp_path / "b")
        assert here.returncode == 0, here.stderr
        assert login(url_b, "users", "ann@example.com", "ann-pass-1234")
        elsewhere = run_cli("user", "add", "bo@example.com", "--password", "bo-pass-12345", cwd=tmp_path)
        assert elsewhere.returncode == 2
        assert "several servers run on this host" in elsewhere.stderr
        for name in ("a", "b"):
            assert str(tmp_path / name / "data") in elsewhere.stderr
        assert "--data-dir DIR or --server HOST:PORT" in elsewhere.stderr
        for url in (url_a, url_b):
            refused = httpx.post(
                f"{url}/api/collections/users/auth-with-password",
                json={"identity": "bo@example.com", "password": "bo-pass-12345"},
                timeout=10,
            )
            assert refused.status_code == 400
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(15)
