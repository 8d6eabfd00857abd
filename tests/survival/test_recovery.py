"""O1: crash recovery in minutes, on the default settings.

``transcriber serve`` (PocketBase and the workers, the offline engine) is
killed with SIGKILL, the whole process group as a crash of its container
would, while it recognizes a recording; it is started again at once, and the
recording must end ``done`` within three minutes, with no one touching it.
With the old leases (15 minutes for a recognition) it waited a quarter of an
hour; the short leases kept alive by the running step bring it back within
about two of them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sidecar.pocketbase.process import wait_healthy
from testkit.audio import compose_wav
from testkit.pocketbase import free_port, signed_in
from tests.support.waiting import eventually_sync

ROOT = Path(__file__).resolve().parents[2]
SPEECH = ROOT / "tests" / "data" / "speech"
RECOVERED_WITHIN = 180.0


def start_serve(data: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRANSCRIBER_")}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "sidecar", "serve", "--data-dir", str(data), "--http", f"127.0.0.1:{port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: PocketBase dies with it, as in a container
        )


@pytest.mark.slow
def test_a_recording_killed_mid_recognition_is_done_within_minutes_of_a_restart(
    tmp_path: Path, figures: dict[str, str]
) -> None:
    data, port, log = tmp_path / "data", free_port(), tmp_path / "serve.log"
    url = f"http://127.0.0.1:{port}"
    clips = sorted(SPEECH.glob("*.ogg"))
    recording = compose_wav([p for _ in range(4) for c in clips for p in (c, 0.4)], tmp_path / "meeting.wav")

    serve = start_serve(data, port, log)
    try:
        wait_healthy(url, timeout=120)
        eventually_sync(lambda: "workers running" in log.read_text(), within=60)
        user_add = ["user", "add", "ann@example.com", "--password", "pw-ann-123456", "--data-dir", str(data)]
        added = subprocess.run(
            [sys.executable, "-m", "sidecar", *user_add],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        assert "created" in added.stdout
        ann = signed_in(url, "sender", "users", "ann@example.com", "pw-ann-123456")
        with ann.http as http:
            rid = ann.upload(recording, name="meeting.wav")

            def poll() -> dict[str, Any]:
                return dict(http.get(f"/api/transcriber/records/{rid}").json())

            # Recognition runs in the submit step of the `normalized` stage.
            eventually_sync(lambda: poll()["status"] == "normalized", within=60)
            time.sleep(3)  # well inside the decoding of the first pieces
            assert poll()["status"] == "normalized"
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait(10)

            restarted = time.monotonic()
            serve = start_serve(data, port, log)
            wait_healthy(url, timeout=120)
            done = eventually_sync(
                lambda: (body := poll())["status"] == "done" and body, within=RECOVERED_WITHIN + 60, every=1
            )
            took = time.monotonic() - restarted
            assert took <= RECOVERED_WITHIN, f"done {took:.0f} s after the restart"
            figures["crash recovery"] = (
                f"serve SIGKILLed mid-recognition (default settings), restarted at once: done {took:.0f} s later"
            )
            assert not done["halted"] and "quick brown fox" in str(done["text"]).lower()
        assert json.loads((data / "service-account.json").read_text())["password"] not in log.read_text()
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGTERM)
            serve.wait(30)
