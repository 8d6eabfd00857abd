"""PF1: claim + fenced commit cycles per second through the hook routes.

A cycle is ``POST /api/pipeline/claim`` then ``POST …/{id}/settle`` (``released``) with the
claim's token: release keeps the record claimable (available again at once,
attempt given back), so the loop can go on forever over a small pool of
records. Three ways, in the same run:

* the sidecar's own ``PocketBaseClient`` (one client shared by N concurrent
  async drivers, as the worker pool shares it) — the figure;
* a bare loop: plain ``httpx.AsyncClient``, same routes, bodies, concurrency;
* the same SQL straight on a copy of the SQLite file (python ``sqlite3``,
  PocketBase's pragmas, one transaction per statement) — the ceiling;
* the HTTP floor: the bare loop on ``GET /api/health`` (no auth, JS or SQL),
  the fastest any cycle of requests can go here, printed in the note.

The HTTP loops alternate (bare, client, bare, client, …) and each keeps its
best round. CPU seconds of PocketBase and of this process are recorded per
cycle to tell where the time goes.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import time
from datetime import timedelta
from pathlib import Path

import anyio
import httpx

from bench.common import Figure, cleanup, pocketbase, scratch
from testkit.media import wav_bytes

CONCURRENCY = 8
RECORDS = 64


def _leases() -> dict[str, timedelta]:
    from sidecar.pipeline.stages import StageTable
    from sidecar.serving.assembly import default_steps
    from sidecar.settings import PipelineSettings

    return StageTable(PipelineSettings(), default_steps()).leases()


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all threads), seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


# --- the same SQL as pb_hooks/lib/claim.js, on the SQLite file directly ----------------------


def _claim_sql(stages: list[str]) -> str:
    case = "CASE state " + " ".join(f"WHEN :s{i} THEN :now + :l{i}" for i in range(len(stages))) + " END"
    names = ", ".join(f":s{i}" for i in range(len(stages)))
    # only placeholder names are formatted in: the values are bound
    return (
        f"UPDATE audio_records SET claim_token = :token, claim_expires_at = {case}, available_at = {case}, "  # noqa: S608
        "attempts = attempts + 1, queue_rev = queue_rev + 1, updated = :upd "
        "WHERE id = (SELECT id FROM audio_records WHERE available_at > 0 AND available_at <= :now AND halted_at = '' "
        f"AND paused_until <= :now AND claim_expires_at <= :now AND state IN ({names}) "
        "ORDER BY available_at, id LIMIT 1) RETURNING id, claim_token"
    )


RELEASE_SQL = (
    "UPDATE audio_records SET attempts = MAX(attempts - 1, 0), claim_token = '', claim_expires_at = 0, "
    "available_at = :now, queue_rev = queue_rev + 1, updated = :upd WHERE id = :id AND claim_token = :token"
)


def db_time(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def open_like_pocketbase(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), isolation_level=None)
    for pragma in (
        "busy_timeout = 10000",
        "journal_mode = WAL",
        "synchronous = NORMAL",
        "foreign_keys = ON",
        "temp_store = MEMORY",
        "cache_size = -16000",
    ):
        db.execute(f"PRAGMA {pragma}")
    return db


def sqlite_direct(db_path: Path, leases: dict[str, timedelta], seconds: float) -> float:
    """Cycles/s of claim UPDATE…RETURNING + fenced release, each in its own transaction."""
    import secrets

    stages = list(leases)
    params: dict[str, object] = {f"s{i}": s for i, s in enumerate(stages)}
    params.update({f"l{i}": int(leases[s].total_seconds() * 1000) for i, s in enumerate(stages)})
    claim = _claim_sql(stages)
    db = open_like_pocketbase(db_path)
    try:
        done = 0
        t0 = time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < seconds:
            now = time.time_ns() // 1_000_000
            p = {**params, "now": now, "upd": db_time(now), "token": secrets.token_urlsafe(30)}
            db.execute("BEGIN IMMEDIATE")
            row = db.execute(claim, p).fetchone()
            db.execute("COMMIT")
            if row is None:
                raise RuntimeError("direct claim found no work")
            db.execute("BEGIN IMMEDIATE")
            cur = db.execute(RELEASE_SQL, {"now": now, "upd": db_time(now), "id": row[0], "token": row[1]})
            if cur.rowcount != 1:
                raise RuntimeError("direct release was fenced out")
            db.execute("COMMIT")
            done += 1
        return done / elapsed
    finally:
        db.close()


# --- the two HTTP loops ------------------------------------------------------------------------


async def _drive(cycle: object, seconds: float, concurrency: int) -> tuple[int, int, float]:
    """Runs ``concurrency`` tasks calling ``cycle()`` until ``seconds`` pass; (cycles, empty, elapsed)."""
    counts = {"ok": 0, "empty": 0}
    deadline = time.perf_counter() + seconds

    async def one() -> None:
        while time.perf_counter() < deadline:
            got = await cycle()  # type: ignore[operator]
            counts["ok" if got else "empty"] += 1

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(one)
    return counts["ok"], counts["empty"], time.perf_counter() - t0


async def _http_rounds(
    url: str, email: str, password: str, pb_pid: int, rounds: int, seconds: float
) -> dict[str, list[tuple[float, float, float, int]]]:
    from sidecar.pocketbase.client import PocketBaseClient
    from sidecar.storage.model import Claimed
    from sidecar.storage.transitions import Released

    leases = _leases()
    lease_ms = {k: int(v.total_seconds() * 1000) for k, v in leases.items()}
    result: dict[str, list[tuple[float, float, float, int]]] = {"bare": [], "client": [], "floor": []}

    limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
    async with (
        httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as bare,
        PocketBaseClient(url, email, password) as client,
    ):
        token = (
            await bare.post(
                "/api/collections/services/auth-with-password", json={"identity": email, "password": password}
            )
        ).json()["token"]
        headers = {"Authorization": token}
        await client.login()

        async def bare_cycle() -> bool:
            now = time.time_ns() // 1_000_000
            r = await bare.post("/api/pipeline/claim", json={"now": now, "leases": lease_ms}, headers=headers)
            if r.status_code == 204:
                return False
            r.raise_for_status()
            got = r.json()
            now = time.time_ns() // 1_000_000
            r = await bare.post(
                f"/api/pipeline/records/{got['id']}/settle",
                json={"outcome": "released", "token": got["token"], "now": now},
                headers=headers,
            )
            r.raise_for_status()
            return True

        async def client_cycle() -> bool:
            got = await client.claim(leases)
            if not isinstance(got, Claimed):
                return False
            await client.settle(got.claim, Released())
            return True

        async def floor_request() -> bool:
            # The cheapest round trip there is: no auth, no JS, no SQL. It bounds any cycle of requests.
            r = await bare.get("/api/health")
            r.raise_for_status()
            return True

        await _drive(bare_cycle, 1.0, CONCURRENCY)  # warm-up: connections, JS VMs
        await _drive(client_cycle, 1.0, CONCURRENCY)
        for _ in range(rounds):
            for name, cycle in (("bare", bare_cycle), ("client", client_cycle), ("floor", floor_request)):
                pb0, me0 = cpu_seconds(pb_pid), time.process_time()
                ok, empty, elapsed = await _drive(cycle, seconds, CONCURRENCY)
                pb_cpu, my_cpu = cpu_seconds(pb_pid) - pb0, time.process_time() - me0
                result[name].append((ok / elapsed, pb_cpu / max(ok, 1), my_cpu / max(ok, 1), empty))
    return result


def run(quick: bool) -> list[Figure]:
    rounds, seconds = (4, 5.0) if quick else (6, 8.0)
    work = scratch("pf1")
    try:
        with pocketbase(work) as pb:
            sender = pb.new_sender()
            clip = wav_bytes(0.2)
            for i in range(RECORDS):
                r = sender.http.post("/api/transcriber/records", files={"file": (f"r{i}.wav", clip)})
                r.raise_for_status()
            acct = pb.service_account
            http = anyio.run(_http_rounds, pb.url, acct.email, acct.password, pb.proc.pid, rounds, seconds)
            # a consistent copy of the live database for the direct-SQL reference
            src = sqlite3.connect(str(pb.settings.pocketbase.data_dir / "data.db"))
            dst = sqlite3.connect(str(work / "copy.db"))
            src.backup(dst)
            src.close()
            dst.close()
        direct = max(sqlite_direct(work / "copy.db", _leases(), seconds) for _ in range(rounds))
    finally:
        cleanup(work)

    best = {k: max(v, key=lambda x: x[0]) for k, v in http.items()}
    client_rate, client_pb_ms, client_py_ms, client_empty = best["client"]
    bare_rate, bare_pb_ms, bare_py_ms, _ = best["bare"]
    floor_rate, floor_pb_ms, floor_py_ms, _ = best["floor"]
    cpu_note = (
        f"CPU per cycle: PocketBase {client_pb_ms * 1000:.2f} ms, client process {client_py_ms * 1000:.2f} ms "
        f"(bare loop: {bare_pb_ms * 1000:.2f} + {bare_py_ms * 1000:.2f} ms)"
    )
    cpu_note += (
        f"; HTTP floor (GET /api/health, bare loop): {floor_rate:,.0f} req/s, "
        f"PocketBase {floor_pb_ms * 1000:.2f} + client {floor_py_ms * 1000:.2f} ms CPU per request"
    )
    if importlib.util.find_spec("sniffio") is None:
        cpu_note += "; sniffio is not installed, so httpcore attempts `import sniffio` on every async request"
    rounds_note = "rounds client " + ", ".join(f"{r[0]:,.0f}" for r in http["client"])
    rounds_note += "; bare " + ", ".join(f"{r[0]:,.0f}" for r in http["bare"])
    return [
        Figure(
            "PF1",
            f"claim+release cycles/s via the hook routes, sidecar client, {CONCURRENCY} async drivers",
            client_rate,
            "/s",
            "≥ 1,000/s",
            client_rate >= 1000,
            reference=direct,
            ref_label="same SQL on the SQLite file",
            ratio=client_rate / direct,
            digits=0,
            note=f"best of {rounds}×{seconds:g} s; {cpu_note}; empty claims {client_empty}",
        ),
        Figure(
            "PF1.client",
            "sidecar client vs bare httpx loop (same routes, same concurrency)",
            client_rate,
            "/s",
            "≥ 0.7×",
            client_rate / bare_rate >= 0.7,
            reference=bare_rate,
            ref_label="bare httpx loop",
            ratio=client_rate / bare_rate,
            digits=0,
            note=rounds_note,
        ),
    ]
