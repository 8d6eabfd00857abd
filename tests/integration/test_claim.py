"""P1–P5 at the HTTP level: the claim route and the fenced writes, with real concurrency."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import httpx
import pytest

from sidecar.clock import SystemClock
from sidecar.outcome import Outcome
from sidecar.storage.model import Claimed
from testkit.pocketbase import Caller, PocketBaseServer, created_ms, now_ms


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

    from sidecar.service import pocketbase_storage

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
