"""The steps on the in-memory twin: what each reads and writes under its claim."""

from __future__ import annotations

import tempfile
import threading
from datetime import timedelta
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from sidecar.activity import Activity
from sidecar.outcome import CredentialsRefused, HaltCode, PermanentError, RetryableError, Verdict
from sidecar.providers.base import OnProgress, Polled, Started, StartRequest
from sidecar.runtime.clock import FakeClock
from sidecar.runtime.threads import run_in_thread
from sidecar.serving.assembly import default_steps
from sidecar.settings import Settings
from sidecar.steps.base import Providers, StepContext, StepKit
from sidecar.steps.progress import ProgressWriter
from sidecar.storage.errors import StorageError
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import AttemptChange, AttemptStatus, Claimed, PiecePlace
from sidecar.storage.session import ClaimSession
from sidecar.storage.transitions import Advanced, Progressed
from sidecar.transcript.model import Segment, Transcript
from tests.support.fakes import StubProvider
from tests.support.sidecar import twin_sidecar
from tests.support.waiting import eventually

pytestmark = pytest.mark.anyio


async def submitted(storage: InMemoryStorage, provider: str = "stub") -> str:
    """A record whose recognition was started (operation op-1), waiting in ``submitted``."""
    rid = storage.add_record()
    for to in ("normalized", "submitted"):
        got = await storage.claim({"uploaded": timedelta(minutes=5), "normalized": timedelta(minutes=5)})
        assert isinstance(got, Claimed)
        if to == "normalized":
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "audio.wav").write_bytes(b"RIFF")
                await storage.attach_file(
                    got.claim, Path(tmp) / "audio.wav", role="normalized", format="wav_pcm16", duration_ms=1000
                )
        if to == "submitted":
            aid = await storage.create_attempt(got.claim, provider=provider, model="m")
            await storage.update_attempt(got.claim, aid, AttemptChange("op-1", status=AttemptStatus.RUNNING))
        await storage.settle(got.claim, Advanced(to))
    return rid


async def test_a_poll_that_fails_spends_an_attempt_and_keeps_the_operation(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    """O10: a poll that cannot reach its outcome counts; exhausting them halts; a resume polls again."""
    polls: list[str] = []
    down = True

    class Flaky(StubProvider):
        name = "stub"

        async def poll(self, operation_id: str) -> Polled:
            polls.append(operation_id)
            if down:
                raise RetryableError("503 from the provider", retry_after=timedelta(seconds=42))
            raw = Transcript(text="hello", segments=[Segment(start=0, end=1, text="hello")]).model_dump_json()
            return Polled(ready=True, raw=raw.encode())

    rid = await submitted(storage)
    async with twin_sidecar(storage, default_steps(), provider=Flaky(), max_attempts=2, retry_delay=1) as pool:
        verdicts = []
        for _ in range(2):
            got = await storage.claim(pool.runner.table.leases())
            assert isinstance(got, Claimed)
            verdicts.append(await pool.runner.run(got))
            clock.advance(60)
        assert verdicts == [Verdict.FAILED, Verdict.HALTED]  # the last try allowed halts as it fails
        row = storage.row(rid)
        assert row.halt_code == "attempts_exhausted" and row.state == "submitted"
        assert row.available_at == 0
        [attempt] = await storage.attempts_of(rid)
        assert (attempt.operation_id, attempt.status) == ("op-1", AttemptStatus.RUNNING)  # kept, not lost

        down = False
        storage.owner_resume(rid)
        got = await storage.claim(pool.runner.table.leases())
        assert isinstance(got, Claimed)
        assert await pool.runner.run(got) is Verdict.ADVANCED
    assert polls == ["op-1"] * 3  # the same operation asked again: nothing started, nothing paid twice
    assert len(await storage.attempts_of(rid)) == 1


async def test_credentials_refused_while_polling_postpone_and_tell_the_owner(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    """O5: our key failing is not the recording's fault: no attempt spent, the paid operation kept."""

    class Refusing(StubProvider):
        async def poll(self, operation_id: str) -> Polled:
            raise CredentialsRefused("SpeechKit refused our credentials (401)", delay=timedelta(minutes=5))

    rid = await submitted(storage)
    async with twin_sidecar(storage, default_steps(), provider=Refusing(), max_attempts=1) as pool:
        for _ in range(3):
            got = await storage.claim(pool.runner.table.leases())
            assert isinstance(got, Claimed)
            assert await pool.runner.run(got) is Verdict.POSTPONED
            clock.advance(301)
        refused = pool.runner.metrics.credentials_refused.labels(stage="submitted")._value.get()
    row = storage.row(rid)
    assert (row.attempts, row.halted_at, row.state) == (0, "", "submitted")
    assert storage.journal_of(rid)[-1].kind == "postponed"
    assert "refused our credentials" in storage.journal_of(rid)[-1].text
    [attempt] = await storage.attempts_of(rid)
    assert attempt.status == AttemptStatus.RUNNING and attempt.operation_id == "op-1"
    assert refused == 3


async def pieces_submitted(storage: InMemoryStorage, pieces: int) -> str:
    """A record cut into ``pieces`` pieces of a minute, each started (operations op-0, op-1, ...)."""
    rid = storage.add_record()
    got = await storage.claim({"uploaded": timedelta(minutes=5)})
    assert isinstance(got, Claimed)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(pieces):
            (Path(tmp) / f"p{i}.wav").write_bytes(b"RIFF")
            place = PiecePlace(i, pieces, 60_000 * i, 50_000)
            await storage.attach_file(
                got.claim,
                Path(tmp) / f"p{i}.wav",
                role="normalized",
                format="wav_pcm16",
                duration_ms=60_000,
                place=place,
            )
    await storage.settle(got.claim, Advanced("normalized"))
    got = await storage.claim({"normalized": timedelta(minutes=5)})
    assert isinstance(got, Claimed)
    for i in range(pieces):
        aid = await storage.create_attempt(got.claim, provider="stub", model="m", piece=i, offset_ms=60_000 * i)
        await storage.update_attempt(got.claim, aid, AttemptChange(f"op-{i}", status=AttemptStatus.RUNNING))
    await storage.settle(got.claim, Advanced("submitted"))
    return rid


async def test_a_lost_piece_is_recognized_again_alone_and_the_others_are_kept(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    """LA3: the piece whose operation was lost halts the record; clearing the halt starts that piece only."""
    polls: list[str] = []
    starts: list[str] = []

    class OnePieceLost(StubProvider):
        async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
            starts.append(request.audio.name)
            return Started("op-again")

        async def poll(self, operation_id: str) -> Polled:
            polls.append(operation_id)
            if operation_id == "op-1":
                raise PermanentError(HaltCode.RESULTS_EXPIRED, "results of op-1 are gone")
            said = f"said in {operation_id}"
            raw = Transcript(text=said, segments=[Segment(start=1, end=2, text=said)]).model_dump_json()
            return Polled(ready=True, raw=raw.encode())

    rid = await pieces_submitted(storage, 3)
    async with twin_sidecar(storage, default_steps(), provider=OnePieceLost()) as pool:

        async def run() -> Verdict:
            got = await storage.claim(pool.runner.table.leases())
            assert isinstance(got, Claimed)
            return await pool.runner.run(got)

        assert await run() is Verdict.HALTED
        row = storage.row(rid)
        assert row.halt_code == "results_expired" and "piece 2 of 3" in row.halt_reason
        assert "clear the halt" in row.halt_reason
        by_piece = {a.piece: a for a in await storage.attempts_of(rid)}
        assert by_piece[0].status == AttemptStatus.READY and by_piece[1].status == AttemptStatus.LOST

        storage.owner_resume(rid)
        assert await run() is Verdict.ADVANCED  # submitted → transcribed
        assert await run() is Verdict.ADVANCED  # transcribed → done
    assert len(starts) == 1  # only the lost piece was paid for again
    assert sorted(polls) == ["op-0", "op-1", "op-2", "op-again"]  # the pieces in hand never asked again
    assert storage.texts[(rid, "transcript")].content == "said in op-0 said in op-again said in op-2"
    assert storage.row(rid).state == "done"


async def normalized(storage: InMemoryStorage, seconds: int = 60) -> str:
    """A record normalized into one piece of ``seconds``, all speech, waiting in ``normalized``."""
    rid = storage.add_record()
    got = await storage.claim({"uploaded": timedelta(minutes=5)})
    assert isinstance(got, Claimed)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "p.wav").write_bytes(b"RIFF")
        place = PiecePlace(0, 1, 0, seconds * 1000)
        await storage.attach_file(
            got.claim,
            Path(tmp) / "p.wav",
            role="normalized",
            format="wav_pcm16",
            duration_ms=seconds * 1000,
            place=place,
        )
    await storage.settle(got.claim, Advanced("normalized"))
    return rid


async def test_the_language_and_what_the_engine_does_reach_the_record_at_once(
    storage: InMemoryStorage, clock: FakeClock
) -> None:
    """The poll shows the language found and the engine's activity while recognition still runs:
    written the moment the engine says them (no time passes on this clock), not at the next tick."""
    said = threading.Event()
    go_on = threading.Event()

    class Talking(StubProvider):
        async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
            def work(_cancel: threading.Event) -> None:
                assert request.report and request.found_language and request.doing
                request.report(30.0)
                request.found_language("ru")
                request.doing(Activity.FINDING_SPEAKERS)
                said.set()
                go_on.wait(30)

            await run_in_thread(work)
            raw = Transcript(text="привет", language="ru", segments=[Segment(start=0, end=1, text="привет")])
            return Started("local", raw=raw.model_dump_json().encode())

    rid = await normalized(storage)
    started_at = clock.now_ms()
    async with twin_sidecar(storage, default_steps(), provider=Talking()) as pool:
        got = await storage.claim(pool.runner.table.leases())
        assert isinstance(got, Claimed)
        verdicts: list[Verdict] = []

        async def run() -> None:
            verdicts.append(await pool.runner.run(got))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            try:
                await anyio.to_thread.run_sync(said.wait, 30)
                await eventually(
                    lambda: (storage.row(rid).activity, storage.row(rid).language) == ("finding_speakers", "ru"),
                    within=10,
                    every=0.01,
                )
                row = storage.row(rid)
                assert row.progress == 0.5  # the progress so far travels with the news
                assert clock.now_ms() == started_at  # at once: no tick of the writer has passed
            finally:
                go_on.set()
    assert verdicts == [Verdict.ADVANCED]
    row = storage.row(rid)
    assert (row.state, row.activity, row.language) == (
        "transcribed",
        "",
        "ru",
    )  # nothing to poll: past submitted; the claim's activity ended with it


async def test_storage_refuses_an_activity_that_only_the_record_says(storage: InMemoryStorage) -> None:
    rid = await normalized(storage)
    got = await storage.claim({"normalized": timedelta(minutes=5)})
    assert isinstance(got, Claimed)
    for derived in (Activity.QUEUED, Activity.DONE, Activity.HALTED):
        with pytest.raises(StorageError):
            await storage.settle(got.claim, Progressed(0.1, derived))
    await storage.settle(got.claim, Progressed(0.1, Activity.RECOGNIZING, "xx"))  # an unknown code is not kept
    assert (storage.row(rid).activity, storage.row(rid).language) == ("recognizing", "")


async def test_the_language_shown_is_the_one_most_pieces_found_so_far(storage: InMemoryStorage) -> None:
    """Each piece of a long recording votes its own language; the join keeps the most common one
    (the first on a tie), and the poll shows that one while the pieces are recognized."""
    rid = await normalized(storage)
    got = await storage.claim({"normalized": timedelta(minutes=5)})
    assert isinstance(got, Claimed)
    kit = StepKit(Providers(StubProvider(), lambda _name: StubProvider()), Settings(), storage.clock)
    ctx = StepContext(ClaimSession(storage, got.claim, got.record), kit, Path(tempfile.gettempdir()))
    progress = ProgressWriter(ctx, 60_000)
    shown = []
    for code in ("ru", "en", "en", "ru", "ru"):
        progress.found_language(code)
        await progress.write()
        shown.append(storage.row(rid).language)
    assert shown == ["ru", "ru", "en", "ru", "ru"]  # a tie goes to the first found


async def test_normalize_charges_the_decoded_length_and_halts_a_recording_over_the_quota(
    storage: InMemoryStorage,
) -> None:
    """H4: the true length replaces intake's reservation; one that breaks the sender's day halts
    over_quota before anything is cut or sent."""
    from testkit.media import wav_bytes

    storage.audio_ms_per_day = 10_000
    fits = storage.add_record("alice", audio=wav_bytes(6.0))
    over = storage.add_record("alice", audio=wav_bytes(6.0))
    elsewhere = storage.add_record("bob", audio=wav_bytes(6.0))
    async with twin_sidecar(storage, default_steps(), provider=StubProvider()) as pool:
        for _ in range(3):
            got = await storage.claim({"uploaded": timedelta(minutes=5)})
            assert isinstance(got, Claimed)
            await pool.runner.run(got)
    # The two of one sender may be claimed in either order (same creation time): one fits, one does not.
    rows = sorted((storage.row(fits), storage.row(over)), key=lambda r: r.halt_code)
    assert [(r.state, r.halt_code, r.quota_ms) for r in rows] == [
        ("normalized", "", 6000),
        ("uploaded", "over_quota", 0),
    ]
    assert await storage.files_of(rows[1].id, "normalized") == []
    assert storage.row(elsewhere).quota_ms == 6000  # another sender's day is their own


async def test_normalize_makes_a_playable_copy_only_of_an_original_a_browser_cannot_play(
    storage: InMemoryStorage,
) -> None:
    """Intake's verdict decides: "no" (an AMR, say) and "" (stored before it was decided) get an Ogg/Opus
    copy of the decoded audio, as long as the recording; "yes" gets none; normalized again, a recording
    keeps the copy it has; a recording over the quota gets none."""
    from sidecar.steps.normalize import PLAYABLE
    from testkit.audio import decode_info, speech_wav_bytes

    audio = speech_wav_bytes(3.0)
    storage.audio_ms_per_day = 10_000
    unplayable = storage.add_record("alice", audio=audio, browser_plays="no")
    unknown = storage.add_record("alice", audio=audio, browser_plays="")
    plays = storage.add_record("bob", audio=audio, browser_plays="yes")
    over = storage.add_record("carol", audio=speech_wav_bytes(11.0), browser_plays="no")
    async with twin_sidecar(storage, default_steps(), provider=StubProvider()) as pool:
        for _ in range(4):
            got = await storage.claim({"uploaded": timedelta(minutes=5)})
            assert isinstance(got, Claimed)
            await pool.runner.run(got)
        for rid in (unplayable, unknown):
            (copy,) = await storage.files_of(rid, "playable")
            assert (copy.format, copy.speech_ms) == (PLAYABLE.format, copy.duration_ms)
            assert abs(copy.duration_ms - 3000) <= 20 and storage.row(rid).state == "normalized"
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "copy.ogg"
                await storage.download(copy, path)
                heard = decode_info(path)
            assert (heard.container, heard.codec, heard.channels) == ("ogg", "opus", 1)
            assert abs(heard.seconds - 3.0) < 0.05
            assert any("a copy a browser plays made (ogg_opus" in e.text for e in storage.events if e.record == rid)
        assert await storage.files_of(plays, "playable") == []
        assert storage.row(over).halt_code == "over_quota" and await storage.files_of(over, "playable") == []

        # Normalized again (the owner set the stage back): the copy is kept, not made twice.
        storage.owner_set_stage(unplayable, "uploaded")
        before = await storage.files_of(unplayable, "playable")
        got = await storage.claim({"uploaded": timedelta(minutes=5)})
        assert isinstance(got, Claimed) and got.claim.id == unplayable
        await pool.runner.run(got)
        assert await storage.files_of(unplayable, "playable") == before  # kept, not made again
        assert len(await storage.files_of(unplayable, "normalized")) == 1  # the earlier pieces superseded
