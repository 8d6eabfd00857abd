"""PF2: claim latency at 1,000,000 rows with 100,000 leased or paused rows ahead in the order.

Rows are written straight into the SQLite file of a stopped test PocketBase
(the columns the migration created, a real owner), then PocketBase is started
on it. The oldest rows (created first) are leased (``claim_expires_at`` and
``available_at`` hours ahead) or paused (``paused_until`` = ``available_at``
ahead); every later row is claimable now. The reference is a second
PocketBase with 1,000 claimable rows; claims alternate between the two
servers (one at a time, through the route, by the service user) so both see
the same noise. Each claim takes the oldest claimable row, which then becomes
leased; there are always more claimable rows than claims.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
import string
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench.common import ROOT, Figure, cleanup, median, percentile, pocketbase, scratch

ALPHABET = string.ascii_lowercase + string.digits
BATCH = 50_000
LEASES_MS = {"uploaded": 8 * 3_600_000, "normalized": 900_000, "submitted": 300_000, "transcribed": 900_000}


def _ids(n: int) -> list[str]:
    seen: set[str] = set()
    while len(seen) < n:
        seen.update("".join(secrets.choice(ALPHABET) for _ in range(15)) for _ in range(n - len(seen)))
    return list(seen)


def _db_time(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def fill(db_path: Path, owner: str, total: int, ahead: int) -> float:
    """Inserts ``total`` rows, the first ``ahead`` of them leased or paused; seconds taken."""
    t0 = time.perf_counter()
    now = time.time_ns() // 1_000_000
    first = now - total - 60_000  # one row per millisecond, all created in the past
    rng_ids = _ids(total)
    db = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        cols = {r[1] for r in db.execute("PRAGMA table_info(audio_records)")}
        needed = {
            "id",
            "owner",
            "title",
            "state",
            "state_entered_at",
            "attempts",
            "claim_token",
            "claim_expires_at",
            "paused_until",
            "available_at",
            "created",
            "updated",
        }
        missing = needed - cols
        if missing:
            raise RuntimeError(f"audio_records lacks {sorted(missing)}: the schema changed")
        db.execute("PRAGMA synchronous = OFF")
        sql = (
            "INSERT INTO audio_records (id, owner, title, state, state_entered_at, attempts, claim_token, "
            "claim_expires_at, paused_until, available_at, created, updated) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
        )

        def rows(lo: int, hi: int) -> Iterator[tuple[Any, ...]]:
            for i in range(lo, hi):
                created = first + i
                ts = _db_time(created)
                if i < ahead and i % 2 == 0:  # leased by a worker (still running)
                    until = now + 3_600_000 + i
                    yield (
                        rng_ids[i],
                        owner,
                        "",
                        "uploaded",
                        created,
                        1,
                        secrets.token_hex(20),
                        until,
                        0,
                        until,
                        ts,
                        ts,
                    )
                elif i < ahead:  # paused (waiting on a provider)
                    until = now + 600_000 + i
                    yield (rng_ids[i], owner, "", "submitted", created, 0, "", 0, until, until, ts, ts)
                else:  # claimable since its creation
                    yield (rng_ids[i], owner, "", "uploaded", created, 0, "", 0, 0, created, ts, ts)

        for lo in range(0, total, BATCH):
            db.execute("BEGIN")
            db.executemany(sql, rows(lo, min(lo + BATCH, total)))
            db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return time.perf_counter() - t0


@contextmanager
def filled_pocketbase(tmp: Path, total: int, ahead: int) -> Iterator[tuple[Any, Any, float]]:
    """A running PocketBase holding ``total`` rows; yields (server, service caller, fill seconds)."""
    with pocketbase(tmp) as pb:
        owner = pb.new_sender().id
        pb.proc.terminate()
        pb.proc.wait(15)
        took = fill(pb.settings.pocketbase.data_dir / "data.db", owner, total, ahead)
        pb.restart()
        yield pb, pb.service(), took


def _claim_source() -> str:
    """The claim's ``FROM`` clause as pb_hooks/lib/claim.js writes it (an index hint included)."""
    text = (ROOT / "pb_hooks" / "lib" / "claim.js").read_text()
    m = re.search(r"SELECT id FROM (audio_records(?: INDEXED BY \w+| NOT INDEXED)?)", text)
    return m.group(1) if m else "audio_records"


def query_plan(db_path: Path) -> str:
    """What SQLite does for the claim's SELECT on this file (read-only)."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        now = time.time_ns() // 1_000_000
        rows = db.execute(
            f"EXPLAIN QUERY PLAN SELECT id FROM {_claim_source()} WHERE available_at > 0 AND available_at <= ? "  # noqa: S608
            "AND halted_at = '' AND paused_until <= ? AND claim_expires_at <= ? "
            "AND state IN ('uploaded','normalized','submitted','transcribed') ORDER BY available_at, id LIMIT 1",
            (now, now, now),
        ).fetchall()
        return "; ".join(str(r[-1]) for r in rows)
    finally:
        db.close()


def claim_once(caller: Any) -> float:
    body = {"now": time.time_ns() // 1_000_000, "leases": LEASES_MS}
    t0 = time.perf_counter()
    resp = caller.http.post("/api/pipeline/claim", json=body)
    took = time.perf_counter() - t0
    if resp.status_code != 200:
        raise RuntimeError(f"claim answered {resp.status_code}: no work found")
    return took


def run(quick: bool) -> list[Figure]:
    total, ahead, claims = (200_000, 20_000, 400) if quick else (1_000_000, 100_000, 300)
    work = scratch("pf2")
    try:
        with ExitStack() as stack:
            _, small, _ = stack.enter_context(filled_pocketbase(work / "small", 1_000, 0))
            big_pb, big, fill_s = stack.enter_context(filled_pocketbase(work / "big", total, ahead))
            plan = query_plan(big_pb.settings.pocketbase.data_dir / "data.db")
            for _ in range(20):  # warm-up: connections, JS VMs, page cache
                claim_once(small)
                claim_once(big)
            t_small: list[float] = []
            t_big: list[float] = []
            for _ in range(claims):
                t_small.append(claim_once(small))
                t_big.append(claim_once(big))
    finally:
        cleanup(work)
    p50_big, p50_small = median(t_big) * 1000, median(t_small) * 1000
    ratio = p50_big / p50_small
    scale = "" if not quick else " (quick: scaled down from 1,000,000/100,000)"
    return [
        Figure(
            "PF2",
            f"claim p50 at {total:,} rows, {ahead:,} leased/paused ahead{scale}",
            p50_big,
            "ms",
            "≤ 1.5×",
            ratio <= 1.5,
            reference=p50_small,
            ref_label="1,000 rows",
            ratio=ratio,
            digits=2,
            note=f"{claims} claims each, alternating; p90 {percentile(t_big, 90) * 1000:.2f} vs "
            f"{percentile(t_small, 90) * 1000:.2f} ms; rows written in {fill_s:.0f} s; plan: {plan}",
        )
    ]
