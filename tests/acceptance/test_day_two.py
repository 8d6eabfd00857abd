"""Day two for an operator: the version, logs a machine can read, the worker's health check."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import tomllib
from pathlib import Path

import httpx
import yaml

from sidecar import __version__
from testkit.audio import speech_wav_bytes
from testkit.pocketbase import PocketBaseServer, free_port
from tests.support.operator import CLI, ROOT, clean_env
from tests.support.waiting import eventually_sync


def test_the_version_is_one_everywhere(pb: PocketBaseServer) -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    printed = subprocess.run([*CLI, "--version"], capture_output=True, text=True, check=True, timeout=60).stdout
    assert printed.strip() == f"transcriber {declared}" == f"transcriber {__version__}"
    served = httpx.get(f"{pb.url}/api/transcriber/version", timeout=10)
    assert served.status_code == 200 and served.json() == {"version": declared}
    for which in ("pb_hooks", "pb_migrations"):  # the release the hooks and migrations belong to
        assert (ROOT / which / "RELEASE").read_text() == f"{declared}\n", which
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    # One image for both services, tagged with the release.
    assert compose["pocketbase"]["image"] == compose["sidecar"]["image"]
    assert compose["pocketbase"]["image"].startswith(f"transcriber:{declared}-")
    assert f'org.opencontainers.image.version="{declared}"' in (ROOT / "Dockerfile").read_text()
    headings = [line for line in (ROOT / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ")]
    assert any(re.search(rf"\b{re.escape(declared)}\b", h) for h in headings), headings


def _worker(pb: PocketBaseServer, log: Path, **env: str) -> subprocess.Popen[bytes]:
    full = clean_env(
        TRANSCRIBER_POCKETBASE__URL=pb.url,
        TRANSCRIBER_POCKETBASE__DATA_DIR=str(pb.settings.pocketbase.data_dir),
        TRANSCRIBER_PROVIDER__NAME="instant",
        **env,
    )
    with log.open("ab") as out:
        return subprocess.Popen([*CLI, "worker"], env=full, stdout=out, stderr=subprocess.STDOUT)


def test_json_logs_carry_the_record_stage_claim_outcome_and_duration(pb: PocketBaseServer, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = _worker(pb, log, TRANSCRIBER_LOGS__FORMAT="json", TRANSCRIBER_PIPELINE__WORKERS="1")
    try:
        eventually_sync(lambda: "pool running" in log.read_text(), within=120)
        sender = pb.new_sender()
        rid = sender.upload(speech_wav_bytes(1.0))
        eventually_sync(lambda: sender.poll(rid)["status"] == "done", within=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]  # every line is JSON
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    # The recording's own stages (its literary text's step, after done, is on a queue of its own).
    runs = [line for line in lines if line.get("record") == rid and "outcome" in line and line["stage"] != "literary"]
    # The instant provider answers at once: nothing to poll, no run in 'submitted'.
    assert [r["stage"] for r in runs] == ["uploaded", "normalized", "transcribed"][: len(runs)]
    assert {r["outcome"] for r in runs} == {"advanced"} and len(runs) >= 3
    for r in runs:
        assert r["provider"] == "instant" and len(r["claim"]) == 8 and r["duration_s"] >= 0
        assert r["time"].endswith("+00:00") and r["level"] == "INFO"


def test_the_worker_health_check_follows_pocketbase(pb: PocketBaseServer, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "worker.log"
    worker = _worker(pb, log, TRANSCRIBER_METRICS__PORT=str(port))
    health = f"http://127.0.0.1:{port}/health"

    def status() -> int:
        try:
            return httpx.get(health, timeout=10).status_code
        except httpx.TransportError:
            return 0

    try:
        eventually_sync(lambda: status() == 200, within=120, what="healthy once signed in")
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).status_code == 200
        pb.proc.terminate()
        pb.proc.wait(10)
        assert status() == 503
        assert "PocketBase does not answer" in httpx.get(health, timeout=10).json()["detail"]
        pb.restart()
        eventually_sync(lambda: status() == 200, within=60, what="healthy again")
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
