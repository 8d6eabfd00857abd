"""One contract, two storages: every test runs on the in-memory twin and on a real PocketBase.

What the unit tests assume of the twin is proved here of PocketBase: the claim
(atomic, ordered, leased), each fenced transition, the fenced writes of a
step's results, the reads, the counts and the change stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread
import pytest

from sidecar.activity import Activity
from sidecar.outcome import HaltCode
from sidecar.pocketbase.client import PocketBaseClient
from sidecar.runtime.clock import FakeClock
from sidecar.storage.errors import FencedOut, StorageError
from sidecar.storage.model import AttemptChange, AttemptStatus, Claimed, FileRole, LoginFigures, NoWork, PiecePlace
from sidecar.storage.protocol import Storage
from sidecar.storage.transitions import Advanced, Extended, Failed, Halted, Postponed, Progressed, Released, Transition
from testkit.media import wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer, created_ms
from tests.support.sidecar import twin

pytestmark = pytest.mark.anyio

LEASES = {"uploaded": timedelta(minutes=5), "normalized": timedelta(minutes=10), "submitted": timedelta(minutes=2)}
QUEUE_FIELDS = (
    "state",
    "state_entered_at",
    "halted_at",
    "halt_code",
    "halt_reason",
    "attempts",
    "claim_token",
    "claim_expires_at",
    "paused_until",
    "available_at",
    "language",
    "progress",
    "activity",
)


class Backend(Protocol):
    @property
    def storage(self) -> Storage: ...

    @property
    def clock(self) -> FakeClock: ...

    async def add(self, owner: str = "a") -> str: ...

    async def row(self, rid: str) -> dict[str, Any]: ...

    async def journal(self, rid: str) -> list[tuple[str, str]]: ...

    async def owner(self, rid: str, **changes: Any) -> None:
        """A panel save of ``changes`` (``halted_at``, ``state``)."""
        ...

    async def text(self, rid: str, kind: str) -> tuple[str, Any]: ...

    async def corrupt(self, rid: str, field: str, value: Any) -> None:
        """A value of another kind stored in a claimed field (a hand edit, an older release)."""
        ...


class Memory:
    def __init__(self) -> None:
        self.clock = FakeClock(start_ms=1_800_000_000_000)
        self.twin = twin(self.clock)
        self.storage: Storage = self.twin

    async def add(self, owner: str = "a") -> str:
        self.clock.advance(0.002)
        return self.twin.add_record(owner)

    async def row(self, rid: str) -> dict[str, Any]:
        r = self.twin.row(rid)
        return {f: getattr(r, f) for f in QUEUE_FIELDS}

    async def journal(self, rid: str) -> list[tuple[str, str]]:
        return [(e.kind, e.text) for e in self.twin.journal_of(rid)]

    async def owner(self, rid: str, **changes: Any) -> None:
        if "state" in changes:
            self.twin.owner_set_stage(rid, changes["state"])
        if changes.get("halted_at") == "":
            self.twin.owner_resume(rid)
        elif changes.get("halted_at"):
            self.twin.owner_halt(rid, changes.get("halt_reason", "halted by the owner"))

    async def text(self, rid: str, kind: str) -> tuple[str, Any]:
        t = self.twin.texts[(rid, kind)]
        return t.content, t.segments

    async def corrupt(self, rid: str, field: str, value: Any) -> None:
        setattr(self.twin.row(rid), field, value)


class Remote:
    def __init__(self, pb: PocketBaseServer) -> None:
        self.pb = pb
        self.su = pb.superuser()
        self.senders: dict[str, Caller] = {}
        self.clock = FakeClock()
        account = pb.service_account
        self.storage = PocketBaseClient(pb.url, account.email, account.password, clock=self.clock)

    async def add(self, owner: str = "a") -> str:
        def upload() -> dict[str, Any]:
            if owner not in self.senders:
                self.senders[owner] = self.pb.new_sender()
            resp = self.senders[owner].try_upload()
            assert resp.status_code == 201, resp.text
            return dict(resp.json())

        body = await anyio.to_thread.run_sync(upload)
        created = created_ms({"created": body["created"].replace("T", " ")})
        self.clock.advance(max(created + 2 - self.clock.now_ms(), 0) / 1000)  # the record exists "now"
        return str(body["id"])

    async def _get(self, path: str, **params: Any) -> Any:
        return (await anyio.to_thread.run_sync(lambda: self.su.http.get(path, params=params))).json()

    async def row(self, rid: str) -> dict[str, Any]:
        rec = await self._get(f"/api/collections/audio_records/records/{rid}")
        return {f: rec[f] for f in QUEUE_FIELDS}

    async def journal(self, rid: str) -> list[tuple[str, str]]:
        body = await self._get(
            "/api/collections/record_events/records", filter=f'record="{rid}"', sort="created,@rowid", perPage=500
        )
        return [(e["kind"], e["outcome_text"]) for e in body["items"]]

    async def owner(self, rid: str, **changes: Any) -> None:
        def save() -> None:
            url = f"/api/collections/audio_records/records/{rid}"
            form = dict(self.su.http.get(url).json())
            form.update(changes)
            for k in ("id", "collectionId", "collectionName", "created", "updated"):
                form.pop(k, None)
            assert self.su.http.patch(url, json=form).status_code == 200

        await anyio.to_thread.run_sync(save)

    async def text(self, rid: str, kind: str) -> tuple[str, Any]:
        body = await self._get("/api/collections/texts/records", filter=f'record="{rid}" && kind="{kind}"')
        [row] = body["items"]
        return row["content"], row["segments"]

    async def corrupt(self, rid: str, field: str, value: Any) -> None:
        statement = {name: f"UPDATE audio_records SET {name} = ? WHERE id = ?" for name in CORRUPTIBLE}[field]  # noqa: S608
        await anyio.to_thread.run_sync(lambda: self.pb.sql(statement, value, rid))


@pytest.fixture(params=["memory", "pocketbase"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "memory":
        yield Memory()
        return
    from testkit.pocketbase import running_pocketbase

    with running_pocketbase(tmp_path) as pb:
        remote = Remote(pb)
        await remote.storage.connect()
        try:
            yield remote
        finally:
            await remote.storage.aclose()


async def claim(b: Backend, leases: dict[str, timedelta] = LEASES) -> Claimed:
    got = await b.storage.claim(leases)
    assert isinstance(got, Claimed), got
    return got


# --- the claim ---------------------------------------------------------------------


# Claimed fields holding a value of another kind: text in a number, a pause that is no time, a length
# past any (the claim would otherwise hand them out, or never reach the record).
CORRUPTIBLE = {"progress": "abc", "paused_until": "later", "duration_ms": 1e300}


@pytest.mark.parametrize(("field", "value"), sorted(CORRUPTIBLE.items()))
async def test_a_record_the_claim_cannot_read_is_set_aside_and_the_next_is_claimed(
    backend: Backend, field: str, value: Any
) -> None:
    broken, behind = await backend.add(), await backend.add()
    await backend.corrupt(broken, field, value)
    got = await claim(backend)
    assert got.record.id == behind and got.set_aside == (broken,)
    row = await backend.row(broken)
    assert (row["halt_code"], row["claim_token"], row["available_at"]) == ("unclaimable", "", 0)
    [text] = [t for k, t in await backend.journal(broken) if k == "halted"]
    assert text.startswith("unclaimable: the claim could not read this record (") and field in text
    assert await backend.storage.claim(LEASES) == NoWork(got.record.claim_expires_at)  # set aside once


async def test_a_claimed_record_is_set_aside_under_its_claim(backend: Backend) -> None:
    """What a sidecar that cannot read a claimed record writes: the halt, fenced, nothing read back."""
    rid = await backend.add()
    got = await claim(backend)
    await backend.storage.set_aside(got.claim, "title: a title this release cannot read")
    row = await backend.row(rid)
    assert (row["halt_code"], row["claim_token"], row["halt_reason"]) == (
        "unclaimable",
        "",
        "title: a title this release cannot read",
    )
    assert ("halted", "unclaimable: title: a title this release cannot read") in await backend.journal(rid)
    with pytest.raises(FencedOut):
        await backend.storage.set_aside(got.claim, "again")


async def test_an_empty_queue_has_no_work(backend: Backend) -> None:
    assert await backend.storage.claim(LEASES) == NoWork(0)


async def test_a_claim_hands_out_the_record_with_its_queue_fields(backend: Backend) -> None:
    rid = await backend.add()
    got = await claim(backend)
    now = backend.clock.now_ms()
    assert got.record.id == got.claim.id == rid
    assert (got.record.state, got.record.attempts, got.record.claim_token) == ("uploaded", 1, got.claim.token)
    assert got.record.claim_expires_at == now + 5 * 60_000
    row = await backend.row(rid)
    assert row["claim_token"] == got.claim.token and row["attempts"] == 1
    assert row["claim_expires_at"] == row["available_at"] == now + 5 * 60_000


async def test_of_many_claims_at_once_exactly_one_wins(backend: Backend) -> None:
    await backend.add()
    results: list[object] = []

    async def one() -> None:
        results.append(await backend.storage.claim(LEASES))

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(one)
    winners = [r for r in results if isinstance(r, Claimed)]
    assert len(winners) == 1 and len(results) == 20


async def test_records_are_handed_out_in_creation_order_across_owners(backend: Backend) -> None:
    ids = [await backend.add(owner) for owner in ("a", "b", "a", "b")]
    assert [(await claim(backend)).record.id for _ in ids] == ids


async def test_a_leased_record_returns_when_its_lease_ends(backend: Backend) -> None:
    rid = await backend.add()
    first = await claim(backend)
    empty = await backend.storage.claim(LEASES)
    assert empty == NoWork(first.record.claim_expires_at)  # when something becomes claimable
    backend.clock.advance(5 * 60 + 0.001)
    second = await claim(backend)
    assert second.record.id == rid and second.record.attempts == 2 and second.claim.token != first.claim.token


async def test_a_claim_names_only_stages_it_may_take(backend: Backend) -> None:
    await backend.add()
    assert isinstance(await backend.storage.claim({"normalized": timedelta(minutes=1)}), NoWork)
    for leases in ({"done": timedelta(minutes=1)}, {"nowhere": timedelta(minutes=1)}, {"uploaded": timedelta(0)}):
        with pytest.raises(StorageError):
            await backend.storage.claim(leases)


# --- the transitions ---------------------------------------------------------------


async def test_enter_moves_the_record_on(backend: Backend) -> None:
    rid = await backend.add()
    got = await claim(backend)
    backend.clock.advance(3)
    await backend.storage.settle(got.claim, Advanced("normalized", "normalized it"))
    row = await backend.row(rid)
    assert (row["state"], row["attempts"], row["claim_token"], row["claim_expires_at"]) == ("normalized", 0, "", 0)
    assert row["state_entered_at"] == backend.clock.now_ms()
    assert (await backend.journal(rid))[-1] == ("advanced", "normalized it")
    assert (await claim(backend)).record.state == "normalized"


async def test_settle_answers_with_the_row_as_written(backend: Backend) -> None:
    """Whatever is settled, the answer is the row as stored after it: the caller never reads it again."""
    rid = await backend.add()
    got = await claim(backend)
    backend.clock.advance(1)
    changes: list[Transition] = [
        Progressed(0.25),
        Extended(backend.clock.now_ms() + 120_000),
        Postponed(backend.clock.now_ms() + 1_000, "later"),
    ]
    for change in changes:
        written = await backend.storage.settle(got.claim, change)
        row = await backend.row(rid)
        for key in ("state", "state_entered_at", "attempts", "claim_token", "claim_expires_at", "paused_until"):
            assert getattr(written, key) == row[key], (change, key)
        assert written.progress == row["progress"] == 0.25
        if isinstance(change, Postponed):
            break
    backend.clock.advance(2)
    got = await claim(backend)
    written = await backend.storage.settle(got.claim, Advanced("normalized"))
    assert (written.id, written.state, written.attempts, written.claim_token) == (rid, "normalized", 0, "")


async def test_a_record_that_enters_the_last_stage_is_never_claimed_again(backend: Backend) -> None:
    rid = await backend.add()
    await backend.storage.settle((await claim(backend)).claim, Advanced("done"))
    assert (await backend.row(rid))["available_at"] == 0
    backend.clock.advance(86400)
    assert isinstance(await backend.storage.claim(LEASES), NoWork)


async def test_pause_keeps_the_stage_and_its_clock(backend: Backend) -> None:
    rid = await backend.add()
    entered = (await backend.row(rid))["state_entered_at"]
    got = await claim(backend)
    until = backend.clock.now_ms() + 60_000
    with pytest.raises(StorageError):
        await backend.storage.settle(got.claim, Postponed(backend.clock.now_ms(), "too soon"))
    await backend.storage.settle(got.claim, Postponed(until, "not yet"))
    row = await backend.row(rid)
    assert (row["state"], row["state_entered_at"], row["attempts"], row["paused_until"]) == (
        "uploaded",
        entered,
        0,
        until,
    )
    assert await backend.storage.claim(LEASES) == NoWork(until)
    backend.clock.advance(60)
    assert (await claim(backend)).record.id == rid


async def test_halt_is_a_flag_that_keeps_the_stage(backend: Backend) -> None:
    rid = await backend.add()
    await backend.storage.settle((await claim(backend)).claim, Halted(HaltCode.TOO_LONG, "the audio is 9:00:00 long"))
    row = await backend.row(rid)
    assert (row["state"], row["halt_code"], row["halt_reason"], row["claim_token"]) == (
        "uploaded",
        "too_long",
        "the audio is 9:00:00 long",
        "",
    )
    assert row["halted_at"] != "" and row["available_at"] == 0
    assert (await backend.journal(rid))[-1] == ("halted", "too_long: the audio is 9:00:00 long")
    backend.clock.advance(86400)
    assert isinstance(await backend.storage.claim(LEASES), NoWork)


async def test_retry_keeps_the_attempt_spent_and_waits(backend: Backend) -> None:
    rid = await backend.add()
    at = backend.clock.now_ms() + 30_000
    await backend.storage.settle((await claim(backend)).claim, Failed(at, "step normalize failed: boom"))
    row = await backend.row(rid)
    assert (row["attempts"], row["claim_token"], row["available_at"]) == (1, "", at)
    assert (await backend.journal(rid))[-1] == ("failed", "step normalize failed: boom")
    assert await backend.storage.claim(LEASES) == NoWork(at)
    backend.clock.advance(30)
    assert (await claim(backend)).record.attempts == 2


async def test_release_gives_the_attempt_back_and_the_record_to_the_queue(backend: Backend) -> None:
    rid = await backend.add()
    await backend.storage.settle((await claim(backend)).claim, Released())
    row = await backend.row(rid)
    assert (row["attempts"], row["claim_token"]) == (0, "")
    assert (await backend.journal(rid))[-1][0] == "released"
    assert (await claim(backend)).record.attempts == 1


async def test_extend_keeps_the_record_from_other_claims(backend: Backend) -> None:
    rid = await backend.add()
    got = await claim(backend)
    until = backend.clock.now_ms() + 20 * 60_000
    await backend.storage.settle(got.claim, Extended(until))
    assert (await backend.row(rid))["claim_expires_at"] == until
    backend.clock.advance(6 * 60)  # past the first lease
    assert await backend.storage.claim(LEASES) == NoWork(until)


async def test_progress_carries_what_the_step_does_and_the_language_it_found(backend: Backend) -> None:
    rid = await backend.add()
    got = await claim(backend)
    await backend.storage.settle(got.claim, Progressed(0.25, Activity.FINDING_SPEAKERS, "ru"))
    row = await backend.row(rid)
    assert (row["progress"], row["activity"], row["language"]) == (0.25, "finding_speakers", "ru")
    await backend.storage.settle(got.claim, Progressed(0.1, None, "zz"))  # never back; an unknown code is not kept
    row = await backend.row(rid)
    assert (row["progress"], row["activity"], row["language"]) == (0.25, "finding_speakers", "ru")
    for derived in (Activity.QUEUED, Activity.DONE, Activity.HALTED):  # the record alone says these
        with pytest.raises(StorageError):
            await backend.storage.settle(got.claim, Progressed(0.3, derived))
    # What a step said it did ends with its claim: a lease that ran out, then a claim of the next stage.
    backend.clock.advance(5 * 60 + 0.001)
    again = await claim(backend)
    assert (await backend.row(rid))["activity"] == ""
    await backend.storage.settle(again.claim, Progressed(0.3, Activity.NORMALIZING))
    assert (await backend.row(rid))["activity"] == "normalizing"
    await backend.storage.settle(again.claim, Advanced("normalized"))
    row = await backend.row(rid)
    assert (row["activity"], row["language"], row["progress"]) == ("", "ru", 0.3)


async def test_every_write_of_a_lost_claim_is_refused(backend: Backend, tmp_path: Path) -> None:
    rid = await backend.add()
    old = await claim(backend)
    backend.clock.advance(5 * 60 + 0.001)
    new = await claim(backend)
    audio = tmp_path / "n.wav"
    audio.write_bytes(wav_bytes(0.1))
    for change in (Advanced("normalized"), Postponed(backend.clock.now_ms() + 1000), Released(), Extended(10**13)):
        with pytest.raises(FencedOut):
            await backend.storage.settle(old.claim, change)
    with pytest.raises(FencedOut):
        await backend.storage.attach_file(old.claim, audio, role="normalized", format="wav_pcm16", duration_ms=100)
    with pytest.raises(FencedOut):
        await backend.storage.create_attempt(old.claim, provider="p", model="m")
    with pytest.raises(FencedOut):
        await backend.storage.put_text(old.claim, "transcript", "stale")
    with pytest.raises(FencedOut):
        await backend.storage.note(old.claim, "stale")
    with pytest.raises(FencedOut):
        await backend.storage.charge_audio(old.claim, 1000)
    assert await backend.storage.charge_audio(new.claim, 1000) is None  # no quota set: it fits
    row = await backend.row(rid)
    assert row["claim_token"] == new.claim.token and row["state"] == "uploaded"
    assert await backend.storage.files_of(rid, FileRole.NORMALIZED) == []
    assert await backend.storage.attempts_of(rid) == []


# --- the owner's panel ---------------------------------------------------------------


async def test_the_owner_halts_and_resumes(backend: Backend) -> None:
    rid = await backend.add()
    got = await claim(backend)
    await backend.owner(rid, halted_at="2026-01-01 00:00:00.000Z", halt_reason="checking it")
    row = await backend.row(rid)
    assert (row["halt_code"], row["halt_reason"], row["claim_token"]) == ("halted_by_owner", "checking it", "")
    with pytest.raises(FencedOut):
        await backend.storage.settle(got.claim, Advanced("normalized"))
    await backend.owner(rid, halted_at="")
    row = await backend.row(rid)
    assert (row["halted_at"], row["halt_code"], row["attempts"]) == ("", "", 0)
    assert (await claim(backend)).record.id == rid


async def test_the_owner_sets_the_stage_back_and_supersedes_the_attempts(backend: Backend) -> None:
    rid = await backend.add()
    got = await claim(backend)
    aid = await backend.storage.create_attempt(got.claim, provider="p", model="m")
    await backend.storage.settle(got.claim, Advanced("normalized"))
    await backend.owner(rid, state="uploaded")
    row = await backend.row(rid)
    assert (row["state"], row["attempts"], row["claim_token"]) == ("uploaded", 0, "")
    [attempt] = await backend.storage.attempts_of(rid)
    assert attempt.id == aid and attempt.status == AttemptStatus.SUPERSEDED
    assert (await claim(backend)).record.state == "uploaded"


# --- a step's results ------------------------------------------------------------------


async def test_files_attempts_texts_and_notes_of_a_claim(backend: Backend, tmp_path: Path) -> None:
    rid = await backend.add()
    got = await claim(backend)
    [original] = await backend.storage.files_of(rid, FileRole.ORIGINAL)
    assert original.record == rid and original.size > 0
    audio = tmp_path / "n.wav"
    audio.write_bytes(wav_bytes(0.2))
    made = await backend.storage.attach_file(got.claim, audio, role="normalized", format="wav_pcm16", duration_ms=200)
    [stored] = await backend.storage.files_of(rid, FileRole.NORMALIZED)
    assert (stored.id, stored.format, stored.duration_ms) == (made.id, "wav_pcm16", 200)
    assert await backend.storage.download(stored, tmp_path / "back.wav") == audio.stat().st_size
    assert (tmp_path / "back.wav").read_bytes() == audio.read_bytes()

    aid = await backend.storage.create_attempt(got.claim, provider="p", model="m")
    await backend.storage.update_attempt(got.claim, aid, AttemptChange("op-7", status=AttemptStatus.RUNNING))
    raw = json.dumps({"text": "привет"}, ensure_ascii=False).encode()
    await backend.storage.update_attempt(got.claim, aid, AttemptChange(status=AttemptStatus.READY, raw_response=raw))
    [attempt] = await backend.storage.attempts_of(rid)
    assert (attempt.provider, attempt.operation_id, attempt.status) == ("p", "op-7", "ready")
    assert await backend.storage.raw_response(attempt) == raw

    segments = [{"start": 0.0, "end": 1.0, "text": "привет"}]
    await backend.storage.put_text(got.claim, "transcript", "привет", segments, language="ru")
    assert await backend.text(rid, "transcript") == ("привет", segments)
    assert (await backend.row(rid))["language"] == "ru"
    await backend.storage.put_text(got.claim, "transcript", "again", [], language="xx")  # not a known code
    assert (await backend.row(rid))["language"] == "ru"
    await backend.storage.note(got.claim, "provider operation started")
    assert (await backend.journal(rid))[-1] == ("note", "provider operation started")


async def test_what_normalize_found_is_kept_and_the_claim_brings_the_rows(backend: Backend, tmp_path: Path) -> None:
    """The length (with the charge), where the speech is (with the piece), and the rows with the claim;
    each write answers the row as written."""
    rid = await backend.add()
    got = await claim(backend)
    assert got.rows is not None and [f.role for f in got.rows.files] == ["original"] and got.rows.attempts == []
    assert got.record.duration_ms == 0
    assert await backend.storage.charge_audio(got.claim, 61_250) is None
    audio = tmp_path / "n.wav"
    audio.write_bytes(wav_bytes(0.2))
    place = PiecePlace(0, 1, 0, 150, ((10, 90), (120, 160)))
    made = await backend.storage.attach_file(
        got.claim, audio, role="normalized", format="wav_pcm16", duration_ms=200, place=place
    )
    assert (made.record, made.size, made.speech, made.speech_ms) == (rid, audio.stat().st_size, place.speech, 150)
    aid = await backend.storage.create_attempt(got.claim, provider="p", model="m", piece=0)
    raw = b'{"text": "hi"}'
    row = await backend.storage.update_attempt(
        got.claim, aid, AttemptChange("op-1", status=AttemptStatus.READY, raw_response=raw)
    )
    assert (row.id, row.operation_id, row.status) == (aid, "op-1", "ready") and row.raw_response
    assert await backend.storage.raw_response(row) == raw
    row = await backend.storage.update_attempt(
        got.claim, aid, AttemptChange(status=AttemptStatus.CLEANED, copies_removed_at=backend.clock.now_ms())
    )
    assert (row.status, row.copies_removed_at) == ("cleaned", backend.clock.now_ms())
    await backend.storage.settle(got.claim, Advanced("normalized"))

    again = await claim(backend)
    assert again.record.id == rid and again.record.duration_ms == 61_250
    assert again.rows is not None
    assert [f.id for f in again.rows.files if f.role == "normalized"] == [made.id]
    assert [a.id for a in again.rows.attempts] == [aid]
    read = await backend.storage.rows_of(rid)
    assert [(f.id, f.speech) for f in read.files] == [(f.id, f.speech) for f in again.rows.files]
    assert [a.id for a in read.attempts] == [aid]


async def test_records_are_counted_by_stage_and_halt(backend: Backend) -> None:
    for _ in range(3):
        await backend.add()
    await backend.storage.settle((await claim(backend)).claim, Advanced("normalized"))
    uploaded_only = {"uploaded": timedelta(minutes=5)}
    await backend.storage.settle((await claim(backend, uploaded_only)).claim, Halted(HaltCode.STALLED, "stalled"))
    counts = await backend.storage.count_records(["uploaded", "normalized"])
    assert counts == {
        ("uploaded", False): 1,
        ("uploaded", True): 1,
        ("normalized", False): 1,
        ("normalized", True): 0,
    }


async def test_the_login_figures_start_at_nothing(backend: Backend) -> None:
    """The metrics' read of the login guard: a fresh server has counted no failure and sees no attack."""
    assert await backend.storage.login_figures() == LoginFigures(
        failed_logins=0, refused_logins=0, accounts_under_attack=0
    )


async def test_changes_are_reported(backend: Backend) -> None:
    connected, seen = anyio.Event(), anyio.Event()

    def on_change() -> None:
        (seen if connected.is_set() else connected).set()  # the (re)connect itself counts first

    async with anyio.create_task_group() as tg:
        tg.start_soon(backend.storage.watch, on_change)
        with anyio.fail_after(10):
            await connected.wait()
            await backend.add()
            await seen.wait()
        tg.cancel_scope.cancel()


async def test_the_owner_setting_uploaded_supersedes_the_normalized_files(backend: Backend, tmp_path: Path) -> None:
    rid = await backend.add()
    got = await claim(backend)
    audio = tmp_path / "n.wav"
    audio.write_bytes(wav_bytes(0.2))
    await backend.storage.attach_file(got.claim, audio, role="normalized", format="wav_pcm16", duration_ms=200)
    await backend.storage.settle(got.claim, Advanced("normalized"))
    assert len(await backend.storage.files_of(rid, FileRole.NORMALIZED)) == 1
    await backend.owner(rid, state="uploaded")
    assert await backend.storage.files_of(rid, FileRole.NORMALIZED) == []  # kept as history, not current
    assert len(await backend.storage.files_of(rid, FileRole.ORIGINAL)) == 1


async def test_attempts_with_copies_are_listed_until_removed(backend: Backend) -> None:
    rid = await backend.add()
    got = await claim(backend)
    plain = await backend.storage.create_attempt(got.claim, provider="offline", model="m")
    copied = await backend.storage.create_attempt(got.claim, provider="p", model="m")
    await backend.storage.update_attempt(got.claim, copied, AttemptChange("op-9", "s3://b/k", AttemptStatus.RUNNING))
    [item] = await backend.storage.attempts_to_sweep()
    assert (item.attempt.id, item.record_state, item.record_halted_at) == (copied, "uploaded", "")
    assert plain != copied
    await backend.storage.copies_removed(copied, error="503 SlowDown")
    await backend.storage.copies_removed(copied, error="503 SlowDown")
    notes = [t for k, t in await backend.journal(rid) if k == "note"]
    assert len(notes) == 1 and "503 SlowDown" in notes[0]  # journalled once, not at every try
    assert [i.attempt.copies_error for i in await backend.storage.attempts_to_sweep()] == ["503 SlowDown"]
    await backend.storage.copies_removed(copied)
    assert await backend.storage.attempts_to_sweep() == []


async def test_a_step_stores_normalized_pieces_and_playable_copies_never_an_original(
    backend: Backend, tmp_path: Path
) -> None:
    audio = tmp_path / "p.ogg"
    audio.write_bytes(wav_bytes(0.2))
    rid = await backend.add()
    got = await claim(backend)
    with pytest.raises(StorageError):
        await backend.storage.attach_file(got.claim, audio, role="original", format="riff", duration_ms=200)
    made = await backend.storage.attach_file(got.claim, audio, role="playable", format="ogg_opus", duration_ms=200)
    assert [f.id for f in await backend.storage.files_of(rid, FileRole.PLAYABLE)] == [made.id]
    assert len(await backend.storage.files_of(rid, FileRole.ORIGINAL)) == 1


async def test_a_piece_without_speech_is_a_row_without_a_blob(backend: Backend, tmp_path: Path) -> None:
    rid = await backend.add()
    got = await claim(backend)
    silent = PiecePlace(0, 1, 0, 0)
    made = await backend.storage.attach_file(
        got.claim, None, role="normalized", format="wav_pcm16", duration_ms=3_600_000, place=silent
    )
    [stored] = await backend.storage.files_of(rid, FileRole.NORMALIZED)
    assert (stored.id, stored.blob, stored.size, stored.duration_ms, stored.speech_ms) == (made.id, "", 0, 3_600_000, 0)
    with pytest.raises(StorageError):  # a piece with speech is sent somewhere: it needs its audio
        await backend.storage.attach_file(
            got.claim, None, role="normalized", format="wav_pcm16", duration_ms=1000, place=PiecePlace(0, 1, 0, 500)
        )


async def test_normalized_copies_of_a_recording_done_long_enough_are_removed_once(
    backend: Backend, tmp_path: Path
) -> None:
    audio = tmp_path / "n.wav"
    audio.write_bytes(wav_bytes(0.2))
    done, waiting = await backend.add(), await backend.add()
    for _ in range(2):
        got = await claim(backend)
        await backend.storage.attach_file(got.claim, audio, role="normalized", format="wav_pcm16", duration_ms=200)
        # A copy a browser plays (of an original it cannot): kept for good, whatever the sweep removes.
        await backend.storage.attach_file(got.claim, audio, role="playable", format="ogg_opus", duration_ms=200)
        await backend.storage.settle(got.claim, Advanced("done" if got.claim.id == done else "normalized"))
    done_at = backend.clock.now_ms()
    assert await backend.storage.records_with_normalized_copies(done_at - 1000) == []  # done only just now
    assert await backend.storage.remove_normalized(done, done_at - 1000) == (0, 0)
    assert await backend.storage.remove_normalized(waiting, done_at + 1000) == (0, 0)  # not done: kept

    assert await backend.storage.records_with_normalized_copies(done_at + 1000) == [done]
    backend.clock.advance(3600)
    assert await backend.storage.remove_normalized(done, done_at + 1000) == (1, audio.stat().st_size)
    [row] = await backend.storage.files_of(done, FileRole.NORMALIZED)
    assert (row.blob, row.removed_at, row.size) == ("", backend.clock.now_ms(), audio.stat().st_size)
    assert len((await backend.storage.files_of(done, FileRole.ORIGINAL))[0].blob) > 0
    [copy] = await backend.storage.files_of(done, FileRole.PLAYABLE)
    assert len(copy.blob) > 0 and copy.removed_at == 0
    assert await backend.storage.records_with_normalized_copies(done_at + 1000) == []
    assert await backend.storage.remove_normalized(done, done_at + 1000) == (0, 0)
    notes = [t for k, t in await backend.journal(done) if k == "note"]
    assert notes == [
        "normalized audio removed, the recording done 0.0 days ago: 1 file(s), 0.0 MB; "
        "the original and the transcript stay (set the stage to 'uploaded' to normalize again)"
    ]
    assert len((await backend.storage.files_of(waiting, FileRole.NORMALIZED))[0].blob) > 0
