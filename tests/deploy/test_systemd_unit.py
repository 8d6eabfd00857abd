"""The shipped unit, ``deploy/transcriber.service``, run by a real systemd on a host with no settings file.

The unit file is installed unchanged; a drop-in (``transcriber.service.d/test.conf``, as an operator
would write one) changes only what a test host must have different, each line saying why. Everything
else is the unit's own: its sandbox (``ProtectSystem=strict``, ``PrivateTmp``, ``NoNewPrivileges``), its
state and cache directories (``%S``, ``%C``: made by systemd, the only places it may write), its
optional settings file, its stop (``KillMode=mixed``, SIGTERM to ``serve`` alone) and its restart rules.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from testkit.pocketbase import PASSWORD, free_port, signed_in
from tests.support.operator import CLI, ROOT, clean_env, read_unit
from tests.support.tools import require
from tests.support.user_manager import UserManager, missing, user_manager
from tests.support.waiting import eventually_sync

pytestmark = [pytest.mark.systemd, pytest.mark.timeout(600)]

UNIT = ROOT / "deploy" / "transcriber.service"
SAMPLE = ROOT / "samples" / "sample.ogg"
HOST_CONFIG = Path("/etc/transcriber/transcriber.toml")
SHIPPED_EXECUTABLE = "/opt/transcriber/bin/transcriber"


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[UserManager]:
    require(missing())
    require(f"this host has {HOST_CONFIG}: the unit would read it (the test is of a host without one)"
            if HOST_CONFIG.exists() else None)  # fmt: skip
    with user_manager(tmp_path / "manager") as m:
        yield m


def dropin(log: Path, port: int, *extra: str) -> str:
    """What differs on a test host, and only that."""
    exec_start = read_unit(UNIT)["Service"]["ExecStart"]
    assert exec_start.startswith(SHIPPED_EXECUTABLE + " "), exec_start
    here = Path(sys.executable).parent / "transcriber"
    lines = [
        "[Service]",
        "# A test host has no `transcriber` account; this one runs as the test's user (root), whose",
        "# interpreter may be readable by root alone (e.g. under /root).",
        "User=root",
        "Group=root",
        "# The checkout's environment is installed here, not in /opt/transcriber; the arguments are the unit's.",
        "ExecStart=",
        f"ExecStart={here}{exec_start.removeprefix(SHIPPED_EXECUTABLE)}",
        "# A free port: 8090 may be taken on a test host.",
        f"Environment=TRANSCRIBER_POCKETBASE__HTTP=127.0.0.1:{port} TRANSCRIBER_POCKETBASE__URL=http://127.0.0.1:{port}",
        "# No journal without systemd as PID 1: the output goes to a file the test reads.",
        f"StandardOutput=append:{log}",
        "StandardError=inherit",
    ]
    if os.environ.get("PYTHONPATH"):
        lines += [
            "# The code under test (a checkout run through another environment's interpreter).",
            f"Environment=PYTHONPATH={os.environ['PYTHONPATH']}",
        ]
    hidden = sorted({str(p) for p in (Path(sys.prefix), Path(sys.base_prefix), ROOT) if p.is_relative_to("/tmp")})
    if hidden:
        lines += [
            "# The checkout lies under /tmp, which PrivateTmp= replaces with an empty one: shown again.",
            f"BindReadOnlyPaths={' '.join(hidden)}",
        ]
    return "\n".join([*lines, *extra, ""])


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def test_the_unit_starts_without_a_settings_file_transcribes_and_stops_cleanly(
    manager: UserManager, tmp_path: Path, figures: dict[str, str]
) -> None:
    log, port = tmp_path / "serve.log", free_port()
    log.touch()
    unit = manager.install(UNIT, dropin(log, port))
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    manager.systemctl("start", unit)

    def running() -> bool:
        state = manager.show(unit, "ActiveState", "NRestarts")
        assert state == {"ActiveState": "active", "NRestarts": "0"}, (state, log.read_text()[-3000:])
        return healthy(url) and "workers running" in log.read_text()

    eventually_sync(running, within=180, every=0.2, what="PocketBase healthy and the workers running")
    ready = time.monotonic() - started
    state_dir = manager.config / "transcriber"  # %S/transcriber: the unit's StateDirectory=
    assert (state_dir / "pb_data" / "data.db").is_file()
    assert state_dir.stat().st_mode & 0o777 == 0o700  # StateDirectoryMode=
    assert (manager.cache / "transcriber").is_dir()  # CacheDirectory=, the model's joined parts
    assert "config file" not in log.read_text()

    email = "ann@example.com"
    added = subprocess.run(
        [*CLI, "user", "add", email, "--password", PASSWORD, "--data-dir", str(state_dir / "pb_data")],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    sender = signed_in(url, "sender", "users", email)
    try:
        rid = sender.upload(SAMPLE)

        def done() -> dict[str, object] | None:
            poll = sender.poll(rid)
            assert not poll["halted"], poll
            return poll if poll["status"] == "done" else None

        poll = eventually_sync(done, within=300, every=0.5, what="the sample transcribed")
        assert poll is not None
    finally:
        sender.http.close()
    assert "welcome" in str(poll["text"]).lower(), poll["text"]

    stopping = time.monotonic()
    manager.systemctl("stop", unit)  # returns once the unit is stopped (or killed after TimeoutStopSec)
    stopped = time.monotonic() - stopping
    after = manager.show(unit, "ActiveState", "Result", "ExecMainStatus", "NRestarts")
    assert after == {"ActiveState": "inactive", "Result": "success", "ExecMainStatus": "0", "NRestarts": "0"}, after
    text = log.read_text()
    # The workers drained before PocketBase was asked to stop, and nothing needed systemd's SIGKILL.
    assert text.rindex("pool stopped") < text.rindex("stopping PocketBase"), text[-3000:]
    assert not healthy(url)
    figures["the shipped systemd unit"] = (
        f"healthy with workers running {ready:.0f} s after `systemctl start` (no settings file),"
        f" stopped cleanly in {stopped:.1f} s"
    )


def test_a_named_settings_file_that_is_missing_exits_2_and_is_not_restarted(
    manager: UserManager, tmp_path: Path
) -> None:
    """The unit's optional file is optional; a file named without the ``-`` is a start-up mistake."""
    log, port = tmp_path / "serve.log", free_port()
    log.touch()
    absent = tmp_path / "etc" / "transcriber.toml"
    mistake = "# The mistake under test: a settings file named without the '-', and absent."
    unit = manager.install(UNIT, dropin(log, port, mistake, f"Environment=TRANSCRIBER_CONFIG={absent}"))
    manager.systemctl("start", unit)
    eventually_sync(
        lambda: manager.show(unit, "ActiveState")["ActiveState"] == "failed", within=120, what="the unit failed"
    )
    restart_sec = float(read_unit(UNIT)["Service"]["RestartSec"])
    time.sleep(restart_sec + 2)  # a restart would have come by now
    after = manager.show(unit, "ActiveState", "Result", "ExecMainStatus", "NRestarts")
    assert after == {"ActiveState": "failed", "Result": "exit-code", "ExecMainStatus": "2", "NRestarts": "0"}, after
    errors = [line for line in log.read_text().splitlines() if line.startswith("error:")]
    assert errors == [f"error: config file not found: {absent} (TRANSCRIBER_CONFIG)"], log.read_text()
    assert not healthy(f"http://127.0.0.1:{port}")
