"""The README's first commands, run as a newcomer copies them: every line of the sh blocks of
"Quick start" and "Running it", in a fresh directory, against a server started as the README says.
A line this test does not know how to run fails it, so a new line in those blocks is tried too."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from sidecar.pocketbase.process import wait_healthy
from testkit.pocketbase import free_port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()

pytestmark = pytest.mark.timeout(600)


def sh_block(section: str) -> list[str]:
    """The commands of the first ``sh`` block of a README section, comments dropped."""
    body = README.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", body, re.S)
    assert block, f"no sh block in the README's {section!r}"
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def run(line: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        shlex.split(line),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"the README's `{line}` failed ({done.returncode}):\n{done.stderr[-2000:]}"
    return done


def test_quick_start_runs_as_written() -> None:
    """``./scripts/demo`` transcribes the bundled sample; ``./scripts/test`` is this suite itself (running it
    here would run this test again), so it is only checked to be the entry point the README says."""
    commands = sh_block("Quick start")
    assert commands == ["./scripts/demo", "./scripts/test"], f"new Quick start lines to try here: {commands}"
    demo = run("./scripts/demo", ROOT, dict(os.environ), timeout=540)
    expected = (ROOT / "samples" / "sample.txt").read_text().split()[:3]
    assert " ".join(expected).lower() in demo.stdout.lower(), demo.stdout[-2000:]
    script = (ROOT / "scripts" / "test").read_text()
    assert os.access(ROOT / "scripts" / "test", os.X_OK) and "python -m pytest" in script


def test_running_it_runs_as_written(tmp_path: Path) -> None:
    """A fresh directory; ``serve`` as written (the settings move its port off 8090, which another server on
    this host may have, and pick the instant provider: what is tried is the commands, not the engine)."""
    commands = sh_block("Running it")
    port = free_port()
    env = dict(
        os.environ,
        TRANSCRIBER_POCKETBASE__HTTP=f"127.0.0.1:{port}",
        TRANSCRIBER_POCKETBASE__URL=f"http://127.0.0.1:{port}",
        TRANSCRIBER_PROVIDER__NAME="instant",
    )
    # What the reader brings: a recording called meeting.m4a.
    as_m4a(ROOT / "samples" / "sample.ogg", tmp_path / "meeting.m4a")
    venv = str(ROOT / ".venv" / "bin") + "/"
    serve_line, *others = [line.replace(".venv/bin/", venv) for line in commands]
    assert serve_line == f"{venv}transcriber serve", f"the README starts the server otherwise: {serve_line}"
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(shlex.split(serve_line), cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    passwords: dict[str, str] = {}
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server, timeout=60)
        assert (tmp_path / "pb_data" / "data.db").is_file()  # `serve`'s default: ./pb_data
        for line in others:
            words = shlex.split(line)
            command = words[1:3]
            if command in (["owner", "add"], ["user", "add"]):
                done = run(line, tmp_path, env)
                passwords[words[3]] = done.stdout.rsplit("password: ", 1)[1].split(";", 1)[0].strip()
            elif command[0] == "transcribe":
                email = words[words.index("--email") + 1]
                done = run(line.replace("--password …", f"--password {passwords[email]}"), tmp_path, env)
                assert done.stdout.strip(), "transcribe printed no transcript"
            else:
                raise AssertionError(f"the README shows `{line}`, which this test does not know how to run")
        assert {"you@example.com", "alice@example.com"} <= passwords.keys()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
        log.close()


def as_m4a(source: Path, target: Path) -> None:
    """``source`` encoded as AAC in an M4A file (PyAV's own FFmpeg)."""
    import av

    with av.open(str(source)) as src, av.open(str(target), "w", format="ipod") as out:
        stream = out.add_stream("aac", rate=16000)
        for frame in src.decode(audio=0):
            frame.pts = None
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
