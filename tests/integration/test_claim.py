"""P1–P5 at the HTTP level: the claim route and the fenced writes, with real concurrency."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import httpx
import pytest

from sidecar.outcome import Outcome
from sidecar.runtime.clock import SystemClock
from sidecar.storage.model import AudioRecord, Claim, Claimed
from testkit.pocketbase import CLAIMABLE, LEASE_MS, Caller, PocketBaseServer, created_ms, now_ms


def race(pb: PocketBaseServer, n: int) -> list[httpx.Response]:
    """n claims at once, each on its own connection, released together."""
    service = pb.service()
    callers = [
        replace(service, http=httpx.Client(base_url=pb.url, headers={"Authorization": service.token}, timeout=30))
        for _ in range(n)
    ]
    try:
        for c in callers:  # open the connections first so the requests really overlap
            c.http.get("/api/health")
        with ThreadPoolExecutor(n) as ex:
            return list(ex.map(lambda c: c.try_claim(), callers))
    finally:
        for c in callers:
            c.http.close()


@pytest.mark.parametrize("n", [3, 50])
def test_concurrent_claims_hand_one_record_to_exactly_one(pb: PocketBaseServer, sender: Caller, n: int) -> None:
    rid = sender.upload()
    answers = race(pb, n)
    winners = [r for r in answers if r.status_code == 200]
    assert len(winners) == 1
    assert winners[0].json()["id"] == rid
    assert sorted(r.status_code for r in answers) == [200] + [204] * (n - 1)


def test_many_rounds_of_racing_claims_never_grant_twice(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    ids = [sender.upload() for _ in range(10)]
    answers = race(pb, 30)
    won = [r.json()["id"] for r in answers if r.status_code == 200]
    assert sorted(won) == sorted(ids)  # each record exactly once
    tokens = {r.json()["token"] for r in answers if r.status_code == 200}
    assert len(tokens) == 10


def test_claim_returns_only_id_and_token(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    sender.upload()
    resp = service.try_claim()
    assert resp.status_code == 200
    assert set(resp.json()) == {"id", "token"}


def test_a_leased_record_is_not_handed_out_until_the_lease_expires(
    pb: PocketBaseServer, sender: Caller, service: Caller
) -> None:
    rid = sender.upload()
    t0 = now_ms()
    first = service.try_claim(now=t0)
    assert first.status_code == 200
    assert service.try_claim(now=t0 + 59_000).status_code == 204
    second = service.try_claim(now=t0 + 61_000)
    assert second.status_code == 200 and second.json()["id"] == rid
    assert second.json()["token"] != first.json()["token"]


def test_empty_claim_says_when_the_next_record_becomes_available(
    pb: PocketBaseServer, sender: Caller, service: Caller
) -> None:
    sender.upload()
    t0 = now_ms()
    assert service.try_claim(now=t0).status_code == 200
    empty = service.try_claim(now=t0 + 1)
    assert empty.status_code == 204
    assert int(empty.headers["X-Next-Available-At"]) == pytest.approx(t0 + 60_000, abs=5)


def test_claim_hands_out_only_the_stages_it_is_given(pb: PocketBaseServer, sender: Caller, service: Caller) -> None:
    sender.upload()
    assert service.try_claim(leases={"normalized": 1000}).status_code == 204
    assert service.try_claim(leases={"uploaded": 1000}).status_code == 200
    bad = service.try_claim(leases={"done": 1000})
    assert bad.status_code == 400


def test_claims_follow_creation_order_across_owners(pb: PocketBaseServer, service: Caller) -> None:
    a, b = pb.new_sender(), pb.new_sender()
    order = [a.upload(), b.upload(), a.upload(), b.upload()]
    got = [service.try_claim().json()["id"] for _ in order]
    assert got == order


def test_a_record_that_moved_on_keeps_its_place_in_creation_order(pb: PocketBaseServer, service: Caller) -> None:
    owner = pb.new_sender()
    older, newer = owner.upload(), owner.upload()
    first = service.try_claim().json()
    assert first["id"] == older
    assert write(service, older, "advanced", token=first["token"], to="normalized").status_code == 200
    # The older recording is finished first: its next step comes before the newer upload's first.
    assert service.try_claim().json()["id"] == older
    assert service.try_claim().json()["id"] == newer


def test_the_claim_key_is_the_creation_time_from_upload_to_advance(
    pb: PocketBaseServer, service: Caller, superuser: Caller
) -> None:
    rid = pb.new_sender().upload()
    rec = superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()
    assert rec["available_at"] == created_ms(rec)
    c = service.try_claim().json()
    assert write(service, rid, "advanced", token=c["token"], to="normalized").status_code == 200
    assert (
        superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()["available_at"]
        == (rec["available_at"])
    )


def test_a_released_record_keeps_its_place_too(pb: PocketBaseServer, service: Caller) -> None:
    owner = pb.new_sender()
    older, newer = owner.upload(), owner.upload()
    first = service.try_claim().json()
    assert write(service, older, "released", token=first["token"]).status_code == 200
    assert service.try_claim().json()["id"] == older
    assert service.try_claim().json()["id"] == newer


def write(service: Caller, rid: str, outcome: str, **body: Any) -> httpx.Response:
    """The one fenced write: ``outcome`` settled under the claim's token."""
    return service.http.post(f"/api/pipeline/records/{rid}/settle", json={"now": now_ms(), "outcome": outcome, **body})


def test_fenced_writes_land_only_for_the_current_token(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    rid = sender.upload()
    t0 = now_ms()
    old = service.try_claim(now=t0).json()["token"]
    new = service.try_claim(now=t0 + 61_000).json()["token"]  # lease expired, re-claimed
    writes: list[tuple[str, dict[str, Any]]] = [
        ("advanced", {"to": "normalized"}),
        ("postponed", {"until": now_ms() + 10_000}),
        ("halted", {"code": "stalled", "reason": "x"}),
        ("failed", {"retry_at": now_ms()}),
        ("released", {}),
        ("extended", {"until": now_ms() + 10_000}),
        ("progressed", {"progress": 0.5}),
    ]
    for op, extra in writes:
        resp = write(service, rid, op, token=old, **extra)
        assert resp.status_code == 409, op
        assert resp.json()["code"] == "fenced_out"
    files = service.http.post(
        f"/api/pipeline/records/{rid}/files",
        data={"token": old, "role": "normalized"},
        files={"blob": ("n.ogg", b"OggS")},
    )
    assert files.status_code == 409
    att = service.http.post(f"/api/pipeline/records/{rid}/attempts", json={"token": old, "provider": "offline"})
    assert att.status_code == 409
    text = service.http.put(f"/api/pipeline/records/{rid}/texts/transcript", json={"token": old, "content": "stale"})
    assert text.status_code == 409
    rec = superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()
    assert rec["state"] == "uploaded" and rec["claim_token"] == new and rec["halted_at"] == ""
    assert superuser.http.get("/api/collections/texts/records").json()["totalItems"] == 0
    assert superuser.http.get("/api/collections/recognition_attempts/records").json()["totalItems"] == 0
    # the holder's write lands, and answers with the row as written (nothing to read again)
    landed = write(service, rid, "advanced", token=new, to="normalized")
    assert landed.status_code == 200
    rec = superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()
    assert rec["state"] == "normalized" and rec["attempts"] == 0 and rec["claim_token"] == ""
    written = landed.json()
    assert written["id"] == rid
    for key in ("state", "state_entered_at", "attempts", "claim_token", "claim_expires_at", "paused_until", "progress"):
        assert written[key] == rec[key], key


def test_release_gives_the_attempt_back_and_postpone_keeps_the_stage_clock(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    rid = sender.upload()
    rec0 = superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()
    tok = service.try_claim().json()["token"]
    assert write(service, rid, "released", token=tok).status_code == 200
    rec = superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()
    assert rec["attempts"] == 0 and rec["claim_token"] == "" and rec["halted_at"] == ""
    tok = service.try_claim().json()["token"]
    until = now_ms() + 30_000
    assert write(service, rid, "postponed", token=tok, until=until).status_code == 200
    rec = superuser.http.get(f"/api/collections/audio_records/records/{rid}").json()
    assert rec["paused_until"] == until and rec["available_at"] == until
    assert rec["state_entered_at"] == rec0["state_entered_at"] and rec["state"] == "uploaded" and rec["attempts"] == 0
    assert service.try_claim().status_code == 204  # paused
    assert service.try_claim(now=until + 1).status_code == 200


def test_the_first_try_in_a_stage_starts_its_stall_clock_and_later_claims_keep_it(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    """A record that waited two hours in the queue: its first claim sets ``progress_at`` to the claim's
    time (the wait is not charged to a try killed later); the claim after that dead try keeps it, and so
    does a claim after a postpone (the postponed stage's clock runs on, P10)."""
    rid = sender.upload()

    def stored() -> dict[str, Any]:
        return dict(superuser.http.get(f"/api/collections/audio_records/records/{rid}").json())

    entered = stored()["state_entered_at"]
    first_at = entered + 2 * 3600 * 1000
    service.claim(rid, now=first_at)  # its worker dies: nothing settles it
    assert stored()["progress_at"] == first_at
    again = service.claim(rid, now=first_at + LEASE_MS + 1)
    assert stored()["progress_at"] == first_at and stored()["attempts"] == 2
    until = first_at + LEASE_MS + 30_000
    postponed = write(service, rid, "postponed", token=again["token"], until=until, now=first_at + LEASE_MS + 2)
    assert postponed.status_code == 200
    service.claim(rid, now=until + 1)
    assert stored()["progress_at"] == first_at and stored()["state_entered_at"] == entered


# -- the states a running system reaches -----------------------------------------------------------

# Values a record's claimed columns hold after a long life: fractional and negative-zero
# progress, counters far past any test's, a title of 500 characters of mixed scripts, the
# latest time a fenced route accepts (year 9999).
MAX_NUMBER = 253402214400000 - 86400000  # Date.UTC(9999, 11, 31)
LONG_TITLE = ("Совещание 🎙️ 会議 اجتماع e\u0301 " * 30)[:500]


@pytest.mark.parametrize("progress", [0.3297, -0.0, 1e-9, 0.9999999, 1.0])
def test_a_record_with_any_stored_values_is_claimed_with_them(
    pb: PocketBaseServer, sender: Caller, service: Caller, progress: float
) -> None:
    rid = sender.upload()
    now = now_ms()
    pb.sql(
        "UPDATE audio_records SET progress = ?, progress_at = ?, attempts = ?, queue_rev = ?, title = ?,"
        " state_entered_at = ?, language = 'yue', language_hint = 'haw', paused_until = ? WHERE id = ?",
        progress,
        MAX_NUMBER,
        2**40 + 7,
        2**41,
        LONG_TITLE,
        MAX_NUMBER,
        now - 1,
        rid,
    )
    max_lease = 366 * 24 * 3600 * 1000
    resp = service.http.post(
        "/api/pipeline/claim", json={"now": now, "leases": {"uploaded": max_lease}, "with_record": True}
    )
    assert resp.status_code == 200, resp.text
    got = resp.json()["record"]
    assert got["id"] == rid
    assert got["progress"] == pytest.approx(progress) and isinstance(got["progress"], (int, float))
    assert got["attempts"] == 2**40 + 8  # the claim counted one more
    assert got["progress_at"] == MAX_NUMBER and got["state_entered_at"] == MAX_NUMBER
    assert got["claim_expires_at"] == now + max_lease
    assert got["title"] == LONG_TITLE
    assert (got["language"], got["language_hint"]) == ("yue", "haw")


@pytest.mark.anyio
async def test_the_sidecar_reads_a_claimed_record_with_fractional_progress(
    pb: PocketBaseServer, sender: Caller
) -> None:
    from datetime import timedelta

    from sidecar.serving.assembly import pocketbase_storage

    rid = sender.upload()
    pb.sql("UPDATE audio_records SET progress = 0.3297, attempts = 3 WHERE id = ?", rid)
    async with pocketbase_storage(pb.settings, SystemClock()) as storage:
        await storage.connect()
        got = await storage.claim({"uploaded": timedelta(minutes=2)})
    assert isinstance(got, Claimed)
    assert got.record.progress == pytest.approx(0.3297) and got.record.attempts == 4


def test_a_record_the_claim_cannot_read_is_set_aside_and_the_queue_moves_on(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    broken, behind = sender.upload(), sender.upload()
    # A value no claim can return (a BLOB where text belongs): the claim's read fails on it.
    pb.sql("UPDATE audio_records SET title = CAST(X'C3A9FF00' AS BLOB) WHERE id = ?", broken)
    first = service.try_claim()
    assert first.status_code == 200, first.text
    assert first.json()["id"] == behind
    assert first.headers["X-Set-Aside"] == broken
    row = superuser.http.get(f"/api/collections/audio_records/records/{broken}").json()
    assert row["halt_code"] == "unclaimable" and row["halted_at"] != "" and row["claim_token"] == ""
    events = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record = "{broken}"'}
    ).json()["items"]
    assert [e["kind"] for e in events if e["kind"] == "halted"] == ["halted"]
    assert "BLOB" in next(e["outcome_text"] for e in events if e["kind"] == "halted")
    # Set aside once: later claims do not meet it again.
    again = service.try_claim()
    assert again.status_code == 204 and "X-Set-Aside" not in again.headers


def test_the_journal_names_each_outcome_as_the_settle_route_does(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    kinds = superuser.http.get("/api/collections/record_events").json()["fields"]
    values = next(f["values"] for f in kinds if f["name"] == "kind")
    assert {o.value for o in Outcome} <= set(values)
    assert not {"stage_entered", "step_failed"} & set(values)
    rid = sender.upload()
    tok = service.try_claim().json()["token"]
    assert write(service, rid, "failed", token=tok, retry_at=now_ms(), text="boom").status_code == 200
    tok = service.try_claim(now=now_ms() + 1).json()["token"]
    assert write(service, rid, "advanced", token=tok, to="normalized").status_code == 200
    events = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record = "{rid}"', "sort": "created,@rowid"}
    ).json()["items"]
    assert [e["kind"] for e in events] == ["accepted", "failed", "advanced"]
    refused = service.http.post(
        f"/api/pipeline/records/{rid}/settle", json={"outcome": "advance", "token": tok, "now": now_ms()}
    )
    assert refused.status_code == 400 and "advanced" in refused.json()["message"]


def test_a_step_journals_notes_only_and_an_outcome_only_through_settle(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller
) -> None:
    """The events route writes a note, whatever else the body says: a try that failed is the settle route's
    `failed` (its attempt spent, its retry time kept), never a journal row beside it."""
    rid = sender.upload()
    tok = service.try_claim().json()["token"]
    for body in ({"text": "provider operation started"}, {"kind": "failed", "text": "boom"}):
        resp = service.http.post(f"/api/pipeline/records/{rid}/events", json={"token": tok, **body})
        assert resp.status_code == 200, resp.text
    fenced = service.http.post(f"/api/pipeline/records/{rid}/events", json={"token": "stale", "text": "late"})
    assert fenced.status_code == 409 and fenced.json()["code"] == "fenced_out"
    events = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record = "{rid}"', "sort": "created,@rowid"}
    ).json()["items"]
    assert [(e["kind"], e["outcome_text"], e["actor"]) for e in events[1:]] == [
        ("note", "provider operation started", "worker"),
        ("note", "boom", "worker"),
    ]


# -- rows a claimer cannot read ---------------------------------------------------------------------------------
#
# Every column the claim hands out is NOT NULL (sqlite3 .schema audio_records), so no NULL can be stored there;
# but SQLite keeps a value of any other type in any column (a hand edit, an older release), and the JSON columns
# hold whatever text they were given. Each shape below, stored beside the running server, must leave the record
# halted `unclaimable` with what is wrong in its journal, and the record behind it claimed.


def _attempt_with(piece: object) -> Callable[[PocketBaseServer, str], None]:
    def add(pb: PocketBaseServer, rid: str) -> None:
        pb.sql(
            "INSERT INTO recognition_attempts (id, record, provider, status, piece, created, updated)"
            " VALUES (?, ?, 'offline', 'running', ?, '2026-01-01 00:00:00.000Z', '2026-01-01 00:00:00.000Z')",
            "attempt" + rid[:8],
            rid,
            piece,
        )

    return add


def _stored(statement: str, value: object) -> Callable[[PocketBaseServer, str], None]:
    return lambda pb, rid: pb.sql(statement, value, rid)


RECORD_SET = "UPDATE audio_records SET {} = ? WHERE id = ?"
FILE_SET = "UPDATE files SET {} = ? WHERE record = ?"
UNREADABLE: list[tuple[str, Callable[[PocketBaseServer, str], None], str]] = [
    ("text in progress", _stored(RECORD_SET.format("progress"), "abc"), "progress holds text 'abc'"),
    ("text in attempts", _stored(RECORD_SET.format("attempts"), "many"), "attempts holds text 'many'"),
    ("text in state_entered_at", _stored(RECORD_SET.format("state_entered_at"), "soon"), "state_entered_at"),
    ("text in claim_expires_at", _stored(RECORD_SET.format("claim_expires_at"), "never"), "claim_expires_at"),
    ("text in paused_until", _stored(RECORD_SET.format("paused_until"), "later"), "paused_until"),
    ("a BLOB in the title", _stored(RECORD_SET.format("title"), b"\xc3\xa9\xff\x00"), "title holds a BLOB"),
    ("a BLOB in progress_at", _stored(RECORD_SET.format("progress_at"), b"\x01"), "progress_at holds a BLOB"),
    ("a fraction of an attempt", _stored(RECORD_SET.format("attempts"), 2.5), "attempts holds real 2.5"),
    ("a length past any", _stored(RECORD_SET.format("duration_ms"), 1e300), "duration_ms holds real 1.0e+300"),
    ("a time before any", _stored(RECORD_SET.format("lease_ended_at"), -5), "lease_ended_at holds integer -5"),
    ("progress past the whole", _stored(RECORD_SET.format("progress"), 7.5), "progress holds real 7.5"),
    ("infinite progress", _stored(RECORD_SET.format("progress"), float("inf")), "progress holds real"),
    ("speech that is no JSON", _stored(FILE_SET.format("speech"), "[[1,2"), 'speech holds text "[[1,2"'),
    ("speech of another shape", _stored(FILE_SET.format("speech"), '{"from": 1}'), 'speech holds the JSON {"from":1}'),
    ("speech in text", _stored(FILE_SET.format("speech"), '[["a", "b"]]'), "speech holds the JSON"),
    ("speech in fractions", _stored(FILE_SET.format("speech"), "[[1.5, 2]]"), "speech holds the JSON [[1.5,2]]"),
    ("a file size past any", _stored(FILE_SET.format("size"), 1e300), "size holds the number 1e+300"),
    ("an attempt's piece past any", _attempt_with(1e300), "piece holds the number 1e+300"),
]


def claim_as_the_sidecar(service: Caller, now: int | None = None) -> httpx.Response:
    """The claim as the sidecar sends it: the record's fields and its rows with it."""
    body = {
        "now": now or now_ms(),
        "leases": dict.fromkeys(CLAIMABLE, LEASE_MS),
        "with_record": True,
        "with_rows": True,
    }
    return service.http.post("/api/pipeline/claim", json=body)


def halted_events(superuser: Caller, rid: str) -> list[str]:
    events = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record = "{rid}"', "perPage": 100}
    ).json()["items"]
    return [e["outcome_text"] for e in events if e["kind"] == "halted"]


@pytest.mark.parametrize(("shape", "store", "said"), UNREADABLE, ids=[u[0] for u in UNREADABLE])
def test_a_record_the_claim_cannot_read_in_any_shape_is_set_aside(
    pb: PocketBaseServer,
    sender: Caller,
    service: Caller,
    superuser: Caller,
    shape: str,
    store: Callable[[PocketBaseServer, str], None],
    said: str,
) -> None:
    broken, behind = sender.upload(), sender.upload()
    store(pb, broken)
    first = claim_as_the_sidecar(service)
    assert first.status_code == 200, first.text
    assert first.json()["id"] == behind and first.headers["X-Set-Aside"] == broken
    Claimed(Claim(behind, first.json()["token"]), AudioRecord.model_validate(first.json()["record"]))
    row = pb.sql_one("SELECT halt_code, halted_at, claim_token, available_at FROM audio_records WHERE id = ?", broken)
    assert row[0] == "unclaimable" and row[1] != "" and row[2] == "" and row[3] == 0
    [text] = halted_events(superuser, broken)
    assert text.startswith("unclaimable: the claim could not read this record (") and said in text, text
    again = claim_as_the_sidecar(service)
    assert again.status_code == 204 and "X-Set-Aside" not in again.headers


def _insights_row(pb: PocketBaseServer, recording: str, **values: object) -> str:
    """An insights row queued for ``recording`` (which is done), with ``values`` stored as they are."""
    iid = "ins" + recording[:12]
    at = now_ms() - 1000
    pb.sql("UPDATE audio_records SET state = 'done', available_at = 0 WHERE id = ?", recording)
    pb.sql(
        "INSERT INTO insights (id, record, state, state_entered_at, available_at, created, updated)"
        " VALUES (?, ?, 'queued', ?, ?, '2026-01-01 00:00:00.000Z', '2026-01-01 00:00:00.000Z')",
        iid,
        recording,
        at,
        at,
    )
    for name, value in values.items():
        pb.sql(f"UPDATE insights SET {name} = ? WHERE id = ?", value, iid)  # noqa: S608
    return iid


@pytest.mark.parametrize("broken_by", ["text in progress", "its recording gone"])
def test_an_insights_row_the_claim_cannot_read_is_set_aside(
    pb: PocketBaseServer, sender: Caller, service: Caller, superuser: Caller, broken_by: str
) -> None:
    first_recording, second_recording = sender.upload(), sender.upload()
    if broken_by == "text in progress":
        broken = _insights_row(pb, first_recording, progress="abc")
    else:  # the claim's owner, title and language of it are NULL
        broken = _insights_row(pb, first_recording, record="gone")
    behind = _insights_row(pb, second_recording, available_at=now_ms() - 500)
    got = service.http.post(
        "/api/pipeline/claim",
        json={"now": now_ms(), "leases": {"uploaded": 1000}, "insights_lease": 60_000, "with_record": True},
    )
    assert got.status_code == 200, got.text
    assert got.json()["id"] == behind and got.json()["queue"] == "insights" and got.headers["X-Set-Aside"] == broken
    row = pb.sql_one("SELECT halt_code, claim_token FROM insights WHERE id = ?", broken)
    assert row == ("unclaimable", "")
    if broken_by == "text in progress":
        [text] = halted_events(superuser, first_recording)
        assert "could not read this insights row (progress holds text 'abc'" in text
    else:
        assert "owner holds null" in pb.sql_one("SELECT halt_reason FROM insights WHERE id = ?", broken)[0]


def test_past_five_rows_set_aside_the_claimer_is_told_to_come_back_at_once(
    pb: PocketBaseServer, sender: Caller, service: Caller
) -> None:
    broken = [sender.upload() for _ in range(6)]
    behind = sender.upload()
    for rid in broken:
        pb.sql("UPDATE audio_records SET progress = 'abc' WHERE id = ?", rid)
    now = now_ms()
    first = claim_as_the_sidecar(service, now)
    assert first.status_code == 204 and first.headers["X-Set-Aside"] == ",".join(broken[:5])
    assert first.headers["X-Next-Available-At"] == str(now)
    second = claim_as_the_sidecar(service)
    assert second.json()["id"] == behind and second.headers["X-Set-Aside"] == broken[5]


def test_racing_claims_that_meet_a_row_nobody_can_read_set_it_aside_once(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    broken, behind = sender.upload(), sender.upload()
    pb.sql("UPDATE audio_records SET progress = 'abc' WHERE id = ?", broken)
    answers = race(pb, 20)
    assert [r.headers.get("X-Set-Aside") for r in answers if "X-Set-Aside" in r.headers] == [broken]
    assert [r.json()["id"] for r in answers if r.status_code == 200] == [behind]
    assert len(halted_events(superuser, broken)) == 1
