"""Stops and restarts as an operator makes them, with real processes and the real offline engine.

Each stop lands while a recording is being recognized (progress already > 0):
a terminal's Ctrl-C (SIGINT to the whole foreground group), ``kill PID``,
systemd stopping the shipped unit, and ``docker compose stop`` on the compose
file's two services. Each must hand the record back with its attempt
unchanged and exit 0, PocketBase stopping after the workers. Then restarts
after partial progress (SIGTERM and SIGKILL): the interrupted recording and
one uploaded behind it both finish. The times from a restart to the
interrupted recording being claimed again are the issue's figures.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sidecar.pipeline.runner import RELEASE_TIMEOUT
from sidecar.serving.supervise import CHILD_STOP_TIMEOUT
from sidecar.settings import PipelineSettings
from testkit.pocketbase import PocketBaseServer, free_port
from tests.support.operator import (
    CLI,
    LONG_ROUNDS,
    ROOT,
    Served,
    clean_env,
    compose_seconds,
    compose_stop,
    compose_stop_order,
    db_journal,
    db_row,
    family,
    gone,
    meeting,
    read_unit,
    served,
    systemd_seconds,
    systemd_stop,
)
from tests.support.waiting import eventually_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # real restarts wait out real leases

UNIT = ROOT / "deploy" / "transcriber.service"
COMPOSE = ROOT / "docker-compose.yml"
# A step still running a second after the stop is cancelled and its record handed back.
QUICK_GRACE = {"TRANSCRIBER_PIPELINE__SHUTDOWN_GRACE": "1s"}


def assert_handed_back(s: Served, rid: str, claimed: dict[str, Any]) -> None:
    """The record as the stop left it: no claim, the claim's attempt given back, the hand-back journalled."""
    after = s.row(rid)
    assert after["claim_token"] == "" and after["halted_at"] == "", after
    assert after["attempts"] == claimed["attempts"] - 1, (claimed["attempts"], after["attempts"])
    assert after["state"] == "normalized" and after["progress"] >= claimed["progress"] > 0
    assert s.journal(rid)[-1][0] == "released", s.journal(rid)[-3:]
    text = s.log.read_text()
    # PocketBase stopped after the workers: the pool drained before it was asked to stop.
    assert text.rindex("pool stopped") < text.rindex("stopping PocketBase"), text[-2000:]


@pytest.mark.parametrize("how", ["ctrl-c", "kill", "systemd"])
def test_a_stop_mid_recognition_hands_the_record_back_and_exits_0(tmp_path: Path, how: str) -> None:
    with served(tmp_path, **QUICK_GRACE) as s:
        s.start()
        s.wait_ready()
        rid = s.upload(meeting(tmp_path, rounds=LONG_ROUNDS))
        claimed = s.wait_mid_recognition(rid)
        assert s.proc is not None
        everything = family(s.proc)
        if how == "ctrl-c":
            os.killpg(s.proc.pid, signal.SIGINT)  # the terminal signals its whole foreground group
            code = s.proc.wait(60)
        elif how == "kill":
            os.kill(s.proc.pid, signal.SIGTERM)
            code = s.proc.wait(60)
        else:
            code = systemd_stop(UNIT, s.proc)
        assert code == 0, s.log.read_text()[-3000:]
        assert gone(everything, within=5), "a process of the service outlived its stop"
        assert_handed_back(s, rid, claimed)


def test_on_the_default_grace_a_stop_mid_recognition_hands_the_record_back_within_it(tmp_path: Path) -> None:
    """The default grace (10 s) is the whole stop, not a wait before it: a batch of windows that the
    decoder is in the middle of (10-25 s at a beam of five on 2 cores) does not hold the record."""
    grace = PipelineSettings().shutdown_grace.total_seconds()
    with served(tmp_path) as s:
        s.start()
        s.wait_ready()
        rid = s.upload(meeting(tmp_path, rounds=LONG_ROUNDS))
        claimed = s.wait_mid_recognition(rid)
        assert s.proc is not None
        os.kill(s.proc.pid, signal.SIGTERM)
        stopped = time.monotonic()
        back = eventually_sync(lambda: s.row(rid)["claim_token"] == "", within=60, every=0.1, what="handed back")
        took = time.monotonic() - stopped
        assert back and took <= grace, f"handed back {took:.1f} s after SIGTERM (grace {grace:.0f} s)"
        assert s.proc.wait(30) == 0, s.log.read_text()[-3000:]
        assert_handed_back(s, rid, claimed)


def test_the_unit_and_the_compose_file_give_a_stop_the_time_it_takes() -> None:
    """The service manager's patience covers the grace, the hand-back and PocketBase's own stop."""
    needed = PipelineSettings().shutdown_grace.total_seconds() + RELEASE_TIMEOUT + CHILD_STOP_TIMEOUT
    service = read_unit(UNIT)["Service"]
    assert service["KillMode"] == "mixed"  # SIGTERM to serve alone: PocketBase must outlive the workers
    assert systemd_seconds(service["TimeoutStopSec"]) >= needed
    assert service["RestartPreventExitStatus"] == "2"  # a start-up mistake is not retried in a loop
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    assert compose_stop_order(services) == ["sidecar", "pocketbase"]
    grace = PipelineSettings().shutdown_grace.total_seconds() + RELEASE_TIMEOUT
    assert compose_seconds(services["sidecar"].get("stop_grace_period")) >= grace


def test_docker_compose_stop_mid_recognition_hands_the_record_back(tmp_path: Path) -> None:
    """The compose file's two services, as processes, stopped in compose's order with its signals and grace."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    s = Served(tmp_path / "data", free_port(), tmp_path / "pb.log", {})
    env = clean_env(
        TRANSCRIBER_POCKETBASE__DATA_DIR=str(s.data),
        TRANSCRIBER_POCKETBASE__SERVICE_EMAIL="sidecar@transcriber.local",
        TRANSCRIBER_POCKETBASE__SERVICE_PASSWORD="compose-service-password",
        TRANSCRIBER_POCKETBASE__URL=s.url,
        **QUICK_GRACE,
    )
    s.env = env
    commands = {name: spec["command"] for name, spec in services.items()}
    assert commands["pocketbase"][:2] == ["transcriber", "pocketbase"] and commands["sidecar"][:2] == [
        "transcriber",
        "worker",
    ]
    listen = ["--http", f"127.0.0.1:{s.port}"]
    procs: dict[str, subprocess.Popen[bytes]] = {}
    worker_log = tmp_path / "worker.log"
    try:
        with s.log.open("ab") as out:
            procs["pocketbase"] = subprocess.Popen(
                [*CLI, "pocketbase", *listen], env=env, stdout=out, stderr=subprocess.STDOUT
            )
        eventually_sync(lambda: _healthy(s), within=60, what="PocketBase healthy")
        with worker_log.open("ab") as out:
            procs["sidecar"] = subprocess.Popen([*CLI, "worker"], env=env, stdout=out, stderr=subprocess.STDOUT)
        eventually_sync(lambda: "pool running" in worker_log.read_text(), within=120, what="workers running")
        rid = s.upload(meeting(tmp_path, rounds=LONG_ROUNDS))
        s.proc = procs["sidecar"]  # the process whose death would fail the waits
        claimed = s.wait_mid_recognition(rid)
        codes = compose_stop(services, procs)
        assert codes == {"sidecar": 0, "pocketbase": 0}, worker_log.read_text()[-3000:]
        after = db_row(s.data, rid)
        assert after["claim_token"] == "" and after["attempts"] == claimed["attempts"] - 1
        assert db_journal(s.data, rid)[-1][0] == "released"
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        if s._sender is not None:
            s._sender.http.close()


def _healthy(s: Served) -> bool:
    try:
        return httpx.get(f"{s.url}/api/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_restart_after_partial_progress_finishes_that_record_and_one_behind_it(
    tmp_path: Path, sig: signal.Signals, figures: dict[str, str]
) -> None:
    """Default settings, but for SIGTERM a short grace: with the default 10 s the recognition may end
    inside it, and nothing is left interrupted. SIGKILL reaches ``serve`` alone: its PocketBase must die
    with it."""
    with served(tmp_path, **(QUICK_GRACE if sig == signal.SIGTERM else {})) as s:
        s.start()
        s.wait_ready()
        rid = s.upload(meeting(tmp_path, rounds=LONG_ROUNDS))
        claimed = s.wait_mid_recognition(rid)
        held = claimed["claim_token"]
        assert s.proc is not None
        pocketbase = s.pocketbase()
        os.kill(s.proc.pid, sig)
        s.proc.wait(60)
        assert gone([pocketbase], within=10), "PocketBase outlived serve"
        if sig == signal.SIGTERM:
            assert_handed_back(s, rid, claimed)
        restarted = time.monotonic()
        s.start()
        s.wait_ready()
        behind = s.upload(meeting(tmp_path, rounds=1))
        # A new claim: after SIGKILL the dead claim's token stays until its lease runs out.
        eventually_sync(
            lambda: s.row(rid)["claim_token"] not in ("", held), within=300, every=0.2, what="claimed again"
        )
        claimed_after = time.monotonic() - restarted
        s.wait_done(rid, within=600)
        s.wait_done(behind, within=300)
        assert not s.row(rid)["halted_at"] and s.row(rid)["progress"] == 1
        figures[f"restart after {sig.name} mid-recognition"] = (
            f"the interrupted recording claimed again {claimed_after:.0f} s after the restart began"
            f" ({'a 1 s grace' if sig == signal.SIGTERM else 'default settings'}); it and an upload behind it done"
        )


def test_a_replica_stopped_mid_recognition_leaves_its_work_to_the_other(pb: PocketBaseServer, tmp_path: Path) -> None:
    """Two ``transcriber worker`` processes on one PocketBase; the one recognizing is stopped (SIGTERM)."""
    env = clean_env(
        TRANSCRIBER_POCKETBASE__URL=pb.url,
        TRANSCRIBER_POCKETBASE__DATA_DIR=str(pb.settings.pocketbase.data_dir),
        TRANSCRIBER_PIPELINE__WORKERS="1",
        **QUICK_GRACE,
    )
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs: list[subprocess.Popen[bytes]] = []

    def start(log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            proc = subprocess.Popen([*CLI, "worker"], env=env, stdout=out, stderr=subprocess.STDOUT)
        procs.append(proc)
        eventually_sync(lambda: "pool running" in log.read_text(), within=120, what=f"{log.name} running")
        return proc

    data = pb.settings.pocketbase.data_dir
    sender = pb.new_sender()
    try:
        first = start(logs[0])
        audio = meeting(tmp_path, rounds=LONG_ROUNDS)
        rid = sender.upload(audio)

        def moving() -> dict[str, Any] | None:
            row = db_row(data, rid)
            return row if row["state"] == "normalized" and row["claim_token"] and row["progress"] > 0 else None

        eventually_sync(moving, within=240, every=0.2, what="recognition under way in the first worker")
        start(logs[1])
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0
        later = meeting(tmp_path, rounds=1)
        behind = sender.upload(later, name="later.wav")
        for record in (rid, behind):
            eventually_sync(lambda r=record: db_row(data, r)["state"] == "done", within=600, every=0.5)  # type: ignore[misc]
        assert "claim refused" not in logs[1].read_text()
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(60)


def test_serve_killed_outright_leaves_no_pocketbase_and_frees_its_directory(tmp_path: Path) -> None:
    with served(tmp_path) as s:
        s.start(session=False)  # not a group leader: only serve itself gets the SIGKILL
        s.wait_ready()
        pocketbase = s.pocketbase()
        assert s.proc is not None
        os.kill(s.proc.pid, signal.SIGKILL)
        s.proc.wait(10)
        assert gone([pocketbase], within=10), "PocketBase outlived serve"
        s.start()
        s.wait_ready()  # the directory and the port are free again


def test_a_second_server_on_a_data_directory_in_use_is_refused_naming_the_holder(tmp_path: Path) -> None:
    with served(tmp_path) as s:
        s.start()
        s.wait_ready()
        assert s.proc is not None
        for command in (["serve"], ["pocketbase"]):
            other = subprocess.run(
                [*CLI, *command, "--data-dir", str(s.data), "--http", f"127.0.0.1:{free_port()}"],
                env=s.env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert other.returncode == 2, other.stderr
            errors = [line for line in other.stderr.splitlines() if line.startswith("error:")]
            assert errors == [
                f"error: the data directory {s.data.resolve()} is in use by transcriber serve (PID {s.proc.pid},"
                f" listening on 127.0.0.1:{s.port}): stop it first, or give this one another --data-dir"
            ]
            assert "Traceback" not in other.stderr
        assert s.proc.poll() is None  # the first server is untouched


def test_a_pocketbase_started_by_hand_on_the_directory_is_named(tmp_path: Path) -> None:
    data = tmp_path / "pb_data"
    data.mkdir(mode=0o700)
    bare = subprocess.Popen(
        [str(Path(sys.executable).parent / "pocketbase"), "serve", f"--dir={data}", f"--http=127.0.0.1:{free_port()}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually_sync(lambda: (data / "data.db").exists(), within=30)
        done = subprocess.run(
            [*CLI, "serve", "--data-dir", str(data), "--http", f"127.0.0.1:{free_port()}"],
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2
        assert f"error: the data directory {data.resolve()} is in use by PocketBase (PID {bare.pid}:" in done.stderr
    finally:
        bare.terminate()
        bare.wait(10)
