"""Real kills, real restarts, real signals: an accepted recording is never lost silently."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from testkit.audio import speech_wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer
from tests.support.waiting import eventually_sync

pytestmark = pytest.mark.slow


def worker_env(pb: PocketBaseServer, tmp: Path, *, lease: str = "2", **extra: str) -> dict[str, str]:
    """Quick settings; leases of ``lease`` seconds (short: a killed worker's claims run out soon)."""
    return pb.worker_env(
        TRANSCRIBER_PIPELINE__WORKERS="3",
        TRANSCRIBER_PIPELINE__MAX_ATTEMPTS="12",
        TRANSCRIBER_PIPELINE__RETRY_DELAY="0.2",
        TRANSCRIBER_PIPELINE__POLL_DELAY="0.2",
        TRANSCRIBER_PIPELINE__IDLE_POLL="0.3",
        TRANSCRIBER_PIPELINE__SHUTDOWN_GRACE="0.5",
        TRANSCRIBER_PIPELINE__LEASES__UPLOADED=lease,
        TRANSCRIBER_PIPELINE__LEASES__NORMALIZED=lease,
        TRANSCRIBER_PIPELINE__LEASES__SUBMITTED=lease,
        TRANSCRIBER_PIPELINE__LEASES__TRANSCRIBED=lease,
        TEST_STARTS=str(tmp / "starts.txt"),
        **extra,
    )


def start_worker(env: dict[str, str], log: Path, *, wait_running: bool = False) -> subprocess.Popen[bytes]:
    """Starts a worker process; with ``wait_running``, returns once its pool has logged that it runs."""
    before = log.read_text().count("pool running") if log.exists() else 0
    with log.open("ab") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.chaos_worker"], env=env, stdout=fh, stderr=subprocess.STDOUT
        )
    if wait_running:
        wait_for_line(proc, log, "pool running", seen_before=before)
    return proc


def wait_for_line(proc: subprocess.Popen[bytes], log: Path, text: str, *, seen_before: int = 0) -> None:
    """Waits until the (shared) log holds one more ``text`` than before, while ``proc`` lives."""

    def logged() -> bool:
        assert proc.poll() is None, log.read_text()[-2000:]
        return log.read_text().count(text) > seen_before

    eventually_sync(logged, within=60, what=f"{text!r} in {log}")


def records(su: Caller) -> list[dict[str, Any]]:
    return list(
        su.http.get("/api/collections/audio_records/records", params={"perPage": 500, "sort": "created,@rowid"}).json()[
            "items"
        ]
    )


def settled(su: Caller) -> bool:
    return all(r["state"] == "done" or r["halted_at"] for r in records(su))


def wait_settled(su: Caller, timeout: float) -> None:
    eventually_sync(lambda: settled(su), within=timeout, every=0.2, what="every record done or halted")


def check_nothing_lost(su: Caller, uploaded: list[str]) -> Counter[str]:
    rows = records(su)
    assert sorted(r["id"] for r in rows) == sorted(uploaded)  # none lost
    outcome: Counter[str] = Counter()
    for r in rows:
        events = su.http.get(
            "/api/collections/record_events/records", params={"filter": f'record="{r["id"]}"', "perPage": 500}
        ).json()["items"]
        done_entries = [e for e in events if e["kind"] == "advanced" and e["stage"] == "done"]
        if r["state"] == "done":
            assert len(done_entries) == 1  # done exactly once
            texts = su.http.get(
                "/api/collections/texts/records", params={"filter": f'record="{r["id"]}" && kind="transcript"'}
            ).json()
            assert texts["totalItems"] == 1 and texts["items"][0]["content"].startswith("text of op-")
            outcome["done"] += 1
        else:
            assert r["halted_at"] and r["halt_reason"] and r["halt_code"]
            assert any(e["kind"] == "halted" for e in events)
            outcome[f"halted:{r['halt_code']}"] += 1
    return outcome


@pytest.mark.timeout(900)  # up to 80 kills and a 180 s settle on a slow machine
def test_sigkill_at_random_points_loses_nothing_and_finishes_nothing_twice(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, tmp_path: Path, figures: dict[str, str]
) -> None:
    rng = random.Random(20261129)
    uploaded = [sender.upload(speech_wav_bytes(1.0)) for _ in range(8)]
    env = worker_env(
        pb,
        tmp_path,
        TEST_DELAY_NORMALIZE="0.3",
        TEST_DELAY_SUBMIT="0.3",
        TEST_DELAY_FINALIZE="0.3",
        TEST_READY_AFTER="0.8",
    )
    log = tmp_path / "workers.log"
    kills = 0
    stages_hit: Counter[str] = Counter()
    # At least 20 kills, and until a kill has caught a claim in every stage.
    every_stage = {"uploaded", "normalized", "submitted", "transcribed"}
    while (kills < 20 or not every_stage <= set(stages_hit)) and kills < 80:
        if settled(superuser):  # keep records in flight
            uploaded += [sender.upload(speech_wav_bytes(1.0)) for _ in range(3)]
        proc = start_worker(env, log)
        missing = every_stage - set(stages_hit)
        if kills >= 12 and missing:
            # random kills rarely catch the short stages: aim one at a stage not yet caught
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline and not missing & {
                r["state"] for r in records(superuser) if r["claim_token"]
            }:
                time.sleep(0.02)
        else:
            time.sleep(rng.uniform(0.4, 1.6))
        busy = [r["state"] for r in records(superuser) if r["claim_token"]]
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        kills += 1
        stages_hit.update(busy)
    # A SIGTERM is only graceful once the process runs: wait for that before the stop below.
    final = start_worker(env, log, wait_running=True)
    try:
        wait_settled(superuser, 180)
    finally:
        final.send_signal(signal.SIGTERM)
        assert final.wait(30) == 0
    outcome = check_nothing_lost(superuser, uploaded)
    starts = Counter((tmp_path / "starts.txt").read_text().split())
    repeated = sum(1 for n in starts.values() if n > 1)
    assert kills >= 20
    figures["SIGKILL"] = (
        f"{kills} kills with {len(uploaded)} records in flight "
        f"(claims held at the kills, by stage: {dict(stages_hit)}); "
        f"outcome {dict(outcome)}; paid-call window hit {repeated} time(s)"
    )
    assert set(stages_hit) >= every_stage


def test_the_sidecar_rides_out_pocketbase_restarts(
    pb: PocketBaseServer, sender: Caller, tmp_path: Path, figures: dict[str, str]
) -> None:
    env = worker_env(pb, tmp_path, TEST_DELAY_NORMALIZE="0.2", TEST_READY_AFTER="0.5")
    log = tmp_path / "worker.log"
    worker = start_worker(env, log, wait_running=True)
    uploaded: list[str] = []
    try:
        for _ in range(5):
            for _ in range(2):
                uploaded.append(sender.upload(speech_wav_bytes(0.5)))
            time.sleep(0.4)
            pb.restart()
            sender = pb.caller("sender", "users", sender.email)
        su = pb.superuser()
        wait_settled(su, 180)
        assert worker.poll() is None  # the same worker process, never restarted
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
    outcome = check_nothing_lost(su, uploaded)
    assert outcome["done"] == len(uploaded), outcome
    figures["PocketBase restarts"] = (
        f"5 restarts under a running worker: {outcome['done']}/{len(uploaded)} records done"
    )


def test_an_outage_is_logged_once_and_its_end_too(pb: PocketBaseServer, sender: Caller, tmp_path: Path) -> None:
    """O2: three workers keep trying through six seconds without PocketBase and say so once, not at every try."""
    env = worker_env(pb, tmp_path)
    log = tmp_path / "worker.log"
    worker = start_worker(env, log, wait_running=True)
    try:
        pb.restart(down_for=6)
        sender = pb.caller("sender", "users", sender.email)
        rid = sender.upload(speech_wav_bytes(0.5))
        su = pb.superuser()
        eventually_sync(
            lambda: su.http.get(f"/api/collections/audio_records/records/{rid}").json()["state"] == "done",
            within=60,
        )
        assert worker.poll() is None
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
    text = log.read_text()
    assert text.count("PocketBase is unavailable") == 1, text[-3000:]
    assert text.count("PocketBase is back after") == 1, text[-3000:]


@pytest.mark.parametrize("stage", ["uploaded", "normalized", "submitted", "transcribed"])
def test_sigterm_during_a_step_spends_no_attempt_and_the_work_resumes(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, tmp_path: Path, stage: str
) -> None:
    step = {"uploaded": "NORMALIZE", "normalized": "SUBMIT", "submitted": "POLL", "transcribed": "FINALIZE"}[stage]
    rid = sender.upload(speech_wav_bytes(0.5))
    # Leases far longer than a renewal could be late on a busy machine: only the SIGTERM may hand it back.
    env = worker_env(pb, tmp_path, lease="30", **{f"TEST_DELAY_{step}": "60", "TEST_READY_AFTER": "0"})
    log = tmp_path / "worker.log"
    worker = start_worker(env, log)

    def claimed_in_stage() -> bool:
        assert worker.poll() is None, log.read_text()[-2000:]
        rec = superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()
        return bool(rec["state"] == stage and rec["claim_token"])

    eventually_sync(claimed_in_stage, within=60, what=f"the record claimed in {stage}")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    rec = superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()
    assert rec["state"] == stage and rec["attempts"] == 0 and rec["halted_at"] == "" and rec["claim_token"] == ""
    events = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record="{rid}"', "sort": "created,@rowid"}
    )
    assert events.json()["items"][-1]["kind"] == "released"
    resumed = start_worker(worker_env(pb, tmp_path, TEST_READY_AFTER="0"), log, wait_running=True)
    try:
        wait_settled(superuser, 60)
    finally:
        resumed.send_signal(signal.SIGTERM)
        resumed.wait(30)
    assert superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()["state"] == "done"


def test_sigterm_while_waiting_for_pocketbase_ends_cleanly(tmp_path: Path) -> None:
    from testkit.pocketbase import free_port

    env = dict(
        os.environ,
        TRANSCRIBER_POCKETBASE__URL=f"http://127.0.0.1:{free_port()}",  # nothing listens here
        TRANSCRIBER_POCKETBASE__SERVICE_EMAIL="svc@example.com",
        TRANSCRIBER_POCKETBASE__SERVICE_PASSWORD="not-used-yet-1234",
        TEST_STARTS=str(tmp_path / "starts.txt"),
    )
    log = tmp_path / "worker.log"
    worker = start_worker(env, log)
    wait_for_line(worker, log, "waiting for PocketBase")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0, log.read_text()
    assert "stopped before the pool started" in log.read_text()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_a_restart_mid_proofread_hands_the_literary_claim_back_and_finishes(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, tmp_path: Path, how: str
) -> None:
    rid = sender.upload(speech_wav_bytes(0.5))
    # The literary step held for a minute after its claim: the worker is stopped inside it.
    lease = "30" if how == "sigterm" else "3"
    env = worker_env(
        pb,
        tmp_path,
        lease=lease,
        TRANSCRIBER_PIPELINE__LEASES__LITERARY=lease,
        TEST_DELAY_LITERARY="60",
        TEST_READY_AFTER="0",
    )
    log = tmp_path / "worker.log"
    worker = start_worker(env, log)

    def literary_row() -> dict[str, Any]:
        items = superuser.http.get("/api/collections/literary/records", params={"filter": f'record="{rid}"'}).json()[
            "items"
        ]
        return dict(items[0]) if items else {}

    def proofreading() -> bool:
        assert worker.poll() is None, log.read_text()[-2000:]
        return bool(literary_row().get("claim_token"))

    eventually_sync(proofreading, within=60, what="the literary text claimed")
    if how == "sigterm":
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        row = literary_row()  # handed back at once, no attempt spent
        assert row["state"] == "queued" and row["claim_token"] == "" and row["attempts"] == 0 and not row["halted_at"]
    else:
        worker.kill()
        worker.wait(30)
        assert literary_row()["claim_token"]  # still held: only its lease running out frees it
    resumed = start_worker(worker_env(pb, tmp_path, TEST_READY_AFTER="0"), log, wait_running=True)
    try:
        eventually_sync(lambda: literary_row().get("state") == "done", within=120, what="the literary text done")
    finally:
        resumed.send_signal(signal.SIGTERM)
        resumed.wait(30)
    row = literary_row()
    assert row["claim_token"] == "" and not row["halted_at"]
    texts = superuser.http.get(
        "/api/collections/texts/records", params={"filter": f'record="{rid}" && kind="literary"'}
    ).json()
    assert texts["totalItems"] == 1  # made once, whatever the restart
    rec = superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()
    assert rec["state"] == "done"
