"""An upgrade: this code started on a data directory written by the previous release.

The fixture (tests/data/upgrade/v0.1.0.tar.gz) was made by 0.1.0's own code
(tests/data/upgrade/make_fixture.py says how): records in every stage, a
halted one, one in flight whose worker is gone, one recognized in pieces, one
with speakers, one corrected by the owner. Started on a copy, every migration
since runs forward, every record keeps its data, the unfinished ones finish,
and nothing finished is recognized again.
"""

from __future__ import annotations

import json
import sqlite3
import tarfile
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.pocketbase import PASSWORD
from tests.support.operator import ROOT, db_row, served

pytestmark = pytest.mark.slow

FIXTURE = ROOT / "tests" / "data" / "upgrade" / "v0.1.0.tar.gz"
UNFINISHED = ("uploaded", "normalized", "submitted", "transcribed", "in_flight")
FINISHED = ("done", "corrected", "pieces", "speakers")


def _rows(data: Path, table: str) -> dict[str, dict[str, Any]]:
    with closing(sqlite3.connect(f"file:{data / 'data.db'}?mode=ro", uri=True)) as db:
        db.row_factory = sqlite3.Row
        return {row["id"]: dict(row) for row in db.execute(f"SELECT * FROM {table}")}  # noqa: S608 (fixed names)


def _of(rows: dict[str, dict[str, Any]], record: str) -> list[dict[str, Any]]:
    return sorted((r for r in rows.values() if r.get("record") == record), key=lambda r: r["id"])


def _as_before(after: list[dict[str, Any]], before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``after``'s rows with only the columns ``before``'s had (a later migration adds columns, empty)."""
    return [{k: row.get(k) for k in old} for row, old in zip(after, before, strict=False)] + after[len(before) :]


def test_the_previous_releases_data_directory_upgrades_in_place(tmp_path: Path) -> None:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    data = tmp_path / "pb_data"
    ids: dict[str, str] = json.loads((data / "ids.json").read_text())
    before = {t: _rows(data, t) for t in ("audio_records", "files", "texts", "recognition_attempts", "record_events")}
    assert {before["audio_records"][ids[k]]["state"] for k in UNFINISHED} == {
        "uploaded",
        "normalized",
        "submitted",
        "transcribed",
    }
    with closing(sqlite3.connect(data / "data.db")) as db:
        applied_before = {row[0] for row in db.execute("SELECT file FROM _migrations")}
    newer = sorted(p.name for p in (ROOT / "pb_migrations").glob("*.js") if p.name not in applied_before)
    assert newer, "the fixture predates no migration: it is not the previous release's"

    # The fixture's records entered their stages when it was made: the stall watchdog, counting from
    # then, would halt them as stalled once the fixture is older than a stage's limit.
    with served(
        tmp_path,
        TRANSCRIBER_PROVIDER__NAME="instant",
        TRANSCRIBER_PIPELINE__WORKERS="1",
        TRANSCRIBER_PIPELINE__OWN_WORK_LIMIT="36500d",
        TRANSCRIBER_PIPELINE__FOREIGN_WORK_LIMIT="36500d",
    ) as s:
        s.start()
        s.wait_ready()
        for name in UNFINISHED:
            s.wait_done(ids[name], within=180)
        with closing(sqlite3.connect(data / "data.db")) as db:
            applied = {row[0] for row in db.execute("SELECT file FROM _migrations")}
        assert set(newer) <= applied  # every migration since ran forward, once

        after = {t: _rows(data, t) for t in before}
        # Nothing lost: every record, file and journal line is still there, owner and title unchanged.
        assert set(after["audio_records"]) == set(before["audio_records"])
        for rid, old in before["audio_records"].items():
            new = after["audio_records"][rid]
            assert (new["owner"], new["title"], new["created"]) == (old["owner"], old["title"], old["created"])
        assert set(before["files"]) <= set(after["files"])
        assert set(before["record_events"]) <= set(after["record_events"])
        # Finished recordings are as they were: transcripts (speakers, pieces, the owner's correction) and attempts.
        for name in FINISHED:
            rid = ids[name]
            assert after["audio_records"][rid]["state"] == "done"
            assert _as_before(_of(after["texts"], rid), _of(before["texts"], rid)) == _of(before["texts"], rid), name
            assert _of(after["recognition_attempts"], rid) == _of(before["recognition_attempts"], rid), name
        assert "Speaker 2" in _of(after["texts"], ids["speakers"])[0]["segments"]
        assert _of(after["texts"], ids["corrected"])[0]["content"] == "A corrected transcript."
        assert len([f for f in _of(after["files"], ids["pieces"]) if f["role"] == "normalized"]) >= 2
        # Recognized before the upgrade, finished after it with the same attempt: nothing paid twice.
        for name in ("submitted", "transcribed"):
            rid = ids[name]
            assert [a["id"] for a in _of(after["recognition_attempts"], rid)] == [
                a["id"] for a in _of(before["recognition_attempts"], rid)
            ]
        assert db_row(data, ids["halted"])["halt_code"] == "unsupported_media"
        # The sender reads every recording through today's poll.
        with httpx.Client(base_url=s.url, timeout=30) as http:
            token = http.post(
                "/api/collections/users/auth-with-password",
                json={"identity": "ann@example.com", "password": PASSWORD},
            ).json()["token"]
            for name, rid in ids.items():
                poll = http.get(f"/api/transcriber/records/{rid}", headers={"Authorization": token})
                assert poll.status_code == 200, name
                assert poll.json()["activity"] in ("done", "halted"), (name, poll.json())
