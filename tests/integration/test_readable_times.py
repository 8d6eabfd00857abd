"""The pipeline's times readable in the panel (pb_migrations/1766880000_readable_times.js): for each
collection whose number fields hold unix milliseconds, a read-only view of the same rows shows each such
time as a date — on the previous release's data directory, its rows written before the migration, as on
rows written after it; and an odd value a hand edit left is shown as it is, never hidden."""

from __future__ import annotations

import json
import sqlite3
import tarfile
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testkit.pocketbase import Caller, PocketBaseServer, free_port
from testkit.pocketbase import test_settings as settings_on
from tests.integration.test_attempt_status_lost import _pocketbase
from tests.support.operator import ROOT

MIGRATION = "1766880000_readable_times.js"
FIXTURE = ROOT / "tests" / "data" / "upgrade" / "v0.1.0.tar.gz"
# Each collection's times (unix ms), as the schema has them: the view shows each under its own name.
QUEUED = ["state_entered_at", "paused_until", "claim_expires_at", "available_at", "progress_at", "lease_ended_at"]
TIMES = {
    "audio_records": [*QUEUED, "quota_at"],
    "insights": QUEUED,
    "literary": QUEUED,
    "files": ["removed_at"],
    "recognition_attempts": ["copies_removed_at"],
}


def shown(value: Any) -> str:
    """What the view should show of a stored value: its date as PocketBase writes its own, or the value."""
    if value == 0:
        return ""
    if isinstance(value, int | float) and 0 < value < 253402300800000:  # up to the year 9999
        ms = round(value)  # (SQLite's dates are whole milliseconds)
        return datetime.fromtimestamp(ms // 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"
    return str(value)


def _rows(db: sqlite3.Connection, table: str) -> dict[str, dict[str, Any]]:
    db.row_factory = sqlite3.Row
    return {r["id"]: dict(r) for r in db.execute(f"SELECT * FROM {table}")}  # noqa: S608 (fixed names)


def _number_fields(db: sqlite3.Connection) -> dict[str, set[str]]:
    out = {}
    for name, fields in db.execute("SELECT name, fields FROM _collections WHERE type = 'base'"):
        out[name] = {f["name"] for f in json.loads(fields) if f["type"] == "number"}
    return out


def _helps(db: sqlite3.Connection) -> dict[tuple[str, str], str]:
    return {
        (name, f["name"]): f.get("help", "")
        for name, fields in db.execute("SELECT name, fields FROM _collections")
        for f in json.loads(fields)
    }


def test_the_previous_releases_rows_read_as_dates_in_their_views(tmp_path: Path) -> None:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    settings = settings_on(tmp_path / "pb_data", free_port())
    _pocketbase(settings, "migrate", "up")  # every migration since the previous release, this one included
    data = settings.pocketbase.data_dir
    with closing(sqlite3.connect(data / "data.db")) as db:
        numbers = _number_fields(db)
        # Every time of the schema has its view (a new one would be left raw in the panel: name it above).
        for table, times in TIMES.items():
            assert set(times) <= numbers[table], table
        timed = {(t, f) for t, fs in numbers.items() for f in fs if f.endswith(("_at", "_until"))}
        assert timed == {(t, f) for t, fs in TIMES.items() for f in fs}
        rows = _rows(db, "audio_records")
        assert len(rows) >= 8 and sum(1 for r in rows.values() if r["state_entered_at"] > 0) >= 8
        # A hand edit can leave anything in a column: a fraction, text, a number past any date.
        rid, other, third = sorted(rows)[:3]
        with db:
            db.execute("UPDATE audio_records SET paused_until = 1765000000123.7 WHERE id = ?", (rid,))
            db.execute("UPDATE audio_records SET paused_until = 'soon' WHERE id = ?", (other,))
            db.execute("UPDATE audio_records SET paused_until = 99999999999999999 WHERE id = ?", (third,))
        for table, times in TIMES.items():
            raw, view = _rows(db, table), _rows(db, f"{table}_times")
            assert set(view) == set(raw), table
            for row_id, row in raw.items():
                assert {f: view[row_id][f] for f in times} == {f: shown(row[f]) for f in times}, (table, row_id)
        view = _rows(db, "audio_records_times")
        assert view[rid]["paused_until"] == "2025-12-06 05:46:40.124Z"
        assert view[other]["paused_until"] == "soon"
        assert view[third]["paused_until"] == "99999999999999999"
        some = next(r for r in rows.values() if r["state_entered_at"] > 0)
        assert view[some["id"]]["state_entered_at"].startswith("20")  # a date, not 13 digits
        assert (view[some["id"]]["title"], view[some["id"]]["state"]) == (some["title"], some["state"])
        helps = _helps(db)
    assert helps[("audio_records", "available_at")].endswith("Readable as a date in the audio_records_times view.")
    assert helps[("files", "removed_at")].endswith("Readable as a date in the files_times view.")

    # Down to before this migration (and those after it): the views go, the help texts are as they were.
    after = [m for m in (ROOT / "pb_migrations").glob("*.js") if m.name >= MIGRATION]
    _pocketbase(settings, "migrate", "down", str(len(after)), answer="y\n")
    with closing(sqlite3.connect(data / "data.db")) as db:
        left = {n for (n,) in db.execute("SELECT name FROM _collections")}
        assert not {f"{t}_times" for t in TIMES} & left
        assert not any("_times view" in h for h in _helps(db).values())


def test_only_the_owner_reads_the_views_and_no_one_writes_them(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    rid = sender.upload()
    token = service.claim(rid)["token"]
    base = "/api/collections/audio_records_times/records"
    got = superuser.http.get(f"{base}/{rid}")
    assert got.status_code == 200, got.text
    expires = pb.sql_one("SELECT claim_expires_at FROM audio_records WHERE id = ?", rid)[0]
    assert got.json()["claim_expires_at"] == shown(expires) and token
    assert got.json()["paused_until"] == ""
    for caller in (sender, service):
        assert caller.http.get(base).json().get("items", []) == []
        assert caller.http.get(f"{base}/{rid}").status_code in (403, 404)
    assert superuser.http.patch(f"{base}/{rid}", json={"claim_expires_at": ""}).status_code == 400
