"""`transcriber transcribe` and `transcriber wait` as a sender runs them: real processes (the
command, a worker with the real offline engine and speakers), a real PocketBase that restarts."""

from __future__ import annotations

import itertools
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from testkit.media import wav_bytes
from testkit.pocketbase import PASSWORD, Caller, PocketBaseServer, free_port, running_pocketbase
from tests.support.waiting import eventually_sync

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "sidecar"]
DIALOGUE = Path(__file__).resolve().parents[1] / "data" / "dialogues" / "en_2speakers.ogg"
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.ogg"


def auth(pb: PocketBaseServer, sender: Caller) -> list[str]:
    return ["--server", pb.url, "--email", sender.email, "--password", PASSWORD]


@contextmanager
def command(args: list[str], tmp: Path, name: str) -> Iterator[tuple[subprocess.Popen[bytes], Path, Path]]:
    """The command running, its stdout and stderr in files (a pipe would not be a terminal either)."""
    out, err = tmp / f"{name}.out", tmp / f"{name}.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen([*CLI, *args], stdout=o, stderr=e)
    try:
        yield proc, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextmanager
def worker(pb: PocketBaseServer, tmp: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`transcriber worker` against the server: the offline engine, speakers on (the dev extra)."""
    with (tmp / "worker.log").open("ab") as log:
        proc = subprocess.Popen(
            [*CLI, "worker"],
            env=pb.worker_env(TRANSCRIBER_PIPELINE__WORKERS="1", TRANSCRIBER_PIPELINE__IDLE_POLL="0.5"),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def record_id(err: Path) -> str:
    def said() -> str:
        found = re.search(r"^record: (\w+)$", err.read_text(), flags=re.MULTILINE)
        return found.group(1) if found else ""

    return eventually_sync(said, within=60, what="record: <id>")


def test_the_cli_through_a_pocketbase_restart_while_it_waits(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path) as pb:
        sender = pb.new_sender()
        args = ["transcribe", str(DIALOGUE), *auth(pb, sender), "--language", "en"]
        with command(args, tmp_path, "cli") as (cli, out, err):
            rid = record_id(err)
            eventually_sync(lambda: f"{DIALOGUE.name}: queued" in err.read_text(), what="waiting in the queue")
            # The server goes away while the command waits (no worker yet: nothing can finish
            # before), longer than the command's longest pause between polls, and comes back
            # no longer accepting the token it had (its key changed, as a restored backup does).
            pb.proc.terminate()
            pb.proc.wait(10)
            pb.sql("UPDATE users SET tokenKey = 'changed-while-down' WHERE email = ?", sender.email)
            pb.restart(down_for=8)
            eventually_sync(lambda: "server back after" in err.read_text(), within=30, what="the outage's end")
            with worker(pb, tmp_path):
                assert cli.wait(300) == 0, err.read_text()
        said = err.read_text()
        again = pb.caller("sender", "users", sender.email)
        export = again.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "txt"})
        assert export.status_code == 200
        # stdout is the transcript alone, exactly the HTTP txt export: speaker labels and all.
        assert out.read_bytes() == export.content
        assert export.text.startswith("Speaker 1: ") and "\n\nSpeaker 2: " in export.text
        # The record's id came first; the outage was noted once, then its end.
        assert said.index("record: ") < said.index("server unreachable")
        assert said.count("server unreachable, retrying…") == 1 and said.count("server back after") == 1
        # Without a terminal: plain lines, one per change; the upload showed its own progress.
        assert "\r" not in said and "\x1b" not in said
        lines = said.splitlines()
        # A line repeats only after a change: between stages a recording is truly queued again.
        assert all(a != b for a, b in itertools.pairwise(lines)), said
        uploads = [line for line in lines if ": uploading " in line]
        assert uploads[0].startswith(f"{DIALOGUE.name}: uploading 0% (0 B of ")
        assert uploads[-1].startswith(f"{DIALOGUE.name}: uploading 100% (") and len(uploads) >= 3
        assert lines[-1] == f"{DIALOGUE.name}: done (en) 100%"
        record = pb.superuser().http.get(f"/api/collections/audio_records/records/{rid}").json()
        assert record["language_hint"] == "en"  # --language reached the intake


def test_a_wrong_format_or_language_is_refused_before_anything_is_uploaded(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path) as pb:
        sender = pb.new_sender()
        for wrong in (["--format", "docx"], ["--language", "english"]):
            done = subprocess.run(
                [*CLI, "transcribe", str(SAMPLE), *auth(pb, sender), *wrong], capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 2 and done.stderr.startswith("error: unknown "), done.stderr
            assert done.stdout == ""
        assert sender.http.get("/api/transcriber/records").json()["totalItems"] == 0
        resumed = subprocess.run(
            [*CLI, "wait", "abc", *auth(pb, sender), "--format", "pdf"], capture_output=True, text=True, timeout=60
        )
        assert resumed.returncode == 2 and "error: unknown format 'pdf'" in resumed.stderr
    # Checked before the server is even asked: a server that is not there makes no difference.
    nowhere = ["--server", f"http://127.0.0.1:{free_port()}", "--email", "a@example.com", "--password", "x"]
    done = subprocess.run(
        [*CLI, "transcribe", str(SAMPLE), *nowhere, "--format", "docx"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "unknown format 'docx'" in done.stderr


def test_waiting_stopped_with_ctrl_c_is_resumed_by_the_record_id(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path) as pb:
        sender = pb.new_sender()
        with command(["transcribe", str(SAMPLE), *auth(pb, sender)], tmp_path, "first") as (cli, out, err):
            rid = record_id(err)
            cli.send_signal(signal.SIGINT)
            try:
                assert cli.wait(90) == 130
            except subprocess.TimeoutExpired:
                status = Path(f"/proc/{cli.pid}/status").read_text()
                signals = [line for line in status.splitlines() if line.startswith(("State", "Sig"))]
                raise AssertionError(f"Ctrl-C did not stop the command: {signals}; {err.read_text()!r}") from None
        assert f"Resume with: transcriber wait {rid}" in err.read_text() and out.read_bytes() == b""
        with worker(pb, tmp_path):
            resumed = subprocess.run(
                [*CLI, "wait", rid, *auth(pb, sender), "--format", "srt"], capture_output=True, timeout=300
            )
        assert resumed.returncode == 0, resumed.stderr
        export = sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": "srt"})
        assert resumed.stdout == export.content and resumed.stdout.startswith(b"1\n00:00:0")
        assert resumed.stderr.decode().startswith(f"record: {rid}\n")
        unknown = subprocess.run([*CLI, "wait", "nosuchrecord123", *auth(pb, sender)], capture_output=True, timeout=60)
        assert unknown.returncode == 1 and b"no recording nosuchrecord123" in unknown.stderr


def test_a_large_upload_keeps_the_commands_memory_flat(tmp_path: Path) -> None:
    """The file is streamed from disk a chunk at a time while its progress is counted (1 GB is allowed)."""
    big = tmp_path / "big.wav"
    with big.open("wb") as fh:
        fh.write(wav_bytes(1.0))
        for _ in range(300):
            fh.write(b"\0" * (1 << 20))
    with running_pocketbase(tmp_path) as pb:
        sender = pb.new_sender()
        args = ["transcribe", str(big), *auth(pb, sender), "--timeout", "5"]  # no worker: give up once uploaded
        with command(args, tmp_path, "big") as (cli, _out, err):
            eventually_sync(lambda: "uploading 100%" in err.read_text(), within=120, what="the upload sent")
            # The peak of the command's own memory (after exec: not the test's, as rusage would count).
            status = Path(f"/proc/{cli.pid}/status").read_text()
            peak = re.search(r"^VmHWM:\s+(\d+) kB", status, flags=re.MULTILINE)
            assert peak is not None
            assert cli.wait(60) == 4, err.read_text()
        assert f"{big.name}: uploading 100% (314.6 MB of 314.6 MB)" in err.read_text()
        assert int(peak.group(1)) < 150 * 1024  # KiB: a fraction of the 315 MB sent
