"""What one recording costs storage, and what is done once: the whole pipeline on the twin.

Counted on the in-memory twin with the real steps: every call of the
``Storage`` seam a recording's steps make, claims and transitions included.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from sidecar.pipeline.pool import WorkerPool
from sidecar.providers.base import OnProgress, Started, StartRequest
from sidecar.providers.instant import InstantProvider
from sidecar.runtime.clock import FakeClock
from sidecar.serving.assembly import default_steps, pipeline
from sidecar.storage.copies import LocalCopies
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import AttemptChange, AttemptStatus, Claimed, FileRole
from sidecar.storage.protocol import Storage
from sidecar.storage.transitions import Advanced
from sidecar.transcript.model import Segment, Transcript
from tests.support.sidecar import twin_settings

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SPEECH = ROOT / "tests" / "data" / "speech" / "fox.ogg"
# What one recording on a provider that answers at once may cost (issue 26; it cost 28 before).
MOST_CALLS = 17
_SEAM = {n for n, v in vars(Storage).items() if inspect.iscoroutinefunction(v)}


class Counting:
    """The twin, every call of the storage seam counted by name."""

    def __init__(self, inner: InMemoryStorage) -> None:
        self.inner = inner
        self.calls: list[str] = []

    @property
    def clock(self) -> Any:
        return self.inner.clock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in _SEAM:
            return attr

        async def counted(*args: Any, **kw: Any) -> Any:
            self.calls.append(name)
            return await cast(Callable[..., Awaitable[Any]], attr)(*args, **kw)

        return counted


@asynccontextmanager
async def counted_pipeline(
    storage: InMemoryStorage, provider: Any, **pipeline_settings: Any
) -> AsyncIterator[tuple[WorkerPool, Counting]]:
    counting = Counting(storage)
    async with pipeline(
        twin_settings(**pipeline_settings), steps=default_steps(), provider=provider, storage=cast(Storage, counting)
    ) as pool:
        counting.calls.clear()  # the sign-in is the process's, not the recording's
        yield pool, counting


async def finish(pool: WorkerPool, storage: InMemoryStorage, rid: str) -> list[str]:
    """Claims and runs until the record is done; the stages it passed through."""
    stages = [storage.row(rid).state]
    for _ in range(10):
        got = await pool.runner.storage.claim(pool.runner.table.leases())
        assert isinstance(got, Claimed), storage.journal_of(rid)
        await pool.runner.run(got)
        row = storage.row(rid)
        assert not row.halted_at, row.halt_reason
        stages.append(row.state)
        if row.state == "done":
            return stages
    raise AssertionError(f"not done: {stages}")


async def test_one_recording_on_a_synchronous_provider_costs_at_most_17_storage_calls(
    storage: InMemoryStorage, capsys: pytest.CaptureFixture[str]
) -> None:
    rid = storage.add_record(audio=SPEECH.read_bytes())
    async with counted_pipeline(storage, InstantProvider()) as (pool, counting):
        stages = await finish(pool, storage, rid)
        calls = list(counting.calls)
    with capsys.disabled():
        print(f"\nstorage calls for one recording on the instant provider: {len(calls)}: {calls}")
    # No empty 'submitted': the result came back with the start.
    assert stages == ["uploaded", "normalized", "transcribed", "done"]
    assert len(calls) <= MOST_CALLS, calls
    # Each step reads the record's rows once at most (here: never, the claim brought them),
    # no write is followed by a read, and nothing stored by this process is fetched back.
    assert "rows_of" not in calls and "files_of" not in calls and "attempts_of" not in calls
    assert calls.count("download") == 1  # the original: the sender's upload, never here before
    assert "raw_response" not in calls
    assert storage.row(rid).duration_ms > 0
    assert storage.texts[(rid, "transcript")].content


async def test_a_replica_elsewhere_fetches_what_this_one_stored(storage: InMemoryStorage) -> None:
    """The local copies are this process's: another process (another host) reads from storage."""
    rid = storage.add_record(audio=SPEECH.read_bytes())
    async with counted_pipeline(storage, InstantProvider()) as (here, _counting_here):
        got = await storage.claim(here.runner.table.leases())
        assert isinstance(got, Claimed)
        await here.runner.run(got)  # normalize, here
    async with counted_pipeline(storage, InstantProvider()) as (there, counting_there):
        stages = await finish(there, storage, rid)
    assert stages == ["normalized", "transcribed", "done"]
    # The piece normalize stored is fetched by the other process (there is no local copy there).
    assert counting_there.calls.count("download") == 1


async def test_a_worker_told_to_keep_no_copies_fetches_what_it_stored(storage: InMemoryStorage) -> None:
    rid = storage.add_record(audio=SPEECH.read_bytes())
    async with counted_pipeline(storage, InstantProvider(), local_copies_mb=0) as (pool, counting):
        assert await finish(pool, storage, rid) == ["uploaded", "normalized", "transcribed", "done"]
    # The original, then the piece normalize stored: fetched back, as a replica elsewhere would.
    assert counting.calls.count("download") == 2


async def test_the_length_is_stored_once_and_read_from_the_record(storage: InMemoryStorage) -> None:
    rid = storage.add_record(audio=SPEECH.read_bytes())
    async with counted_pipeline(storage, InstantProvider()) as (pool, _counting):
        got = await storage.claim(pool.runner.table.leases())
        assert isinstance(got, Claimed)
        await pool.runner.run(got)
        length = storage.row(rid).duration_ms
        pieces = await storage.files_of(rid, FileRole.NORMALIZED)
        assert length == max(f.offset_ms + f.duration_ms for f in pieces)
        # Where the speech is was kept with the piece (ms from its start).
        assert pieces[0].speech and all(0 <= a < b <= pieces[0].duration_ms + 1 for a, b in pieces[0].speech)
        storage.row(rid).duration_ms = 4321  # what the record says is what every later step reads
        await finish(pool, storage, rid)
    assert storage.texts[(rid, "transcript")].content
    assert storage.row(rid).duration_ms == 4321
    # The instant provider lays its text over the length it was sent; finalize's is the record's.
    transcript = storage.texts[(rid, "transcript")]
    assert transcript.segments


async def test_a_recording_waiting_in_submitted_from_before_still_finishes(
    storage: InMemoryStorage, clock: FakeClock, tmp_path: Path
) -> None:
    """Before the upgrade, a synchronous result went through 'submitted': such a record is polled
    (nothing to ask: the result is stored) and finalized as before."""
    rid = storage.add_record()
    wav = tmp_path / "audio.wav"
    wav.write_bytes(b"RIFF")
    leases = {"uploaded": timedelta(minutes=5), "normalized": timedelta(minutes=5)}
    got = await storage.claim(leases)
    assert isinstance(got, Claimed)
    await storage.attach_file(got.claim, wav, role="normalized", format="wav_pcm16", duration_ms=1000)
    await storage.settle(got.claim, Advanced("normalized"))
    got = await storage.claim(leases)
    assert isinstance(got, Claimed)
    aid = await storage.create_attempt(got.claim, provider="instant", model="fixed")
    raw = Transcript(text="from before", segments=[Segment(start=0, end=1, text="from before")]).model_dump_json()
    await storage.update_attempt(
        got.claim, aid, AttemptChange("instant-1", status=AttemptStatus.READY, raw_response=raw.encode())
    )
    await storage.settle(got.claim, Advanced("submitted"))
    assert storage.row(rid).duration_ms == 0  # normalized before the length was stored
    async with counted_pipeline(storage, InstantProvider()) as (pool, _counting):
        stages = await finish(pool, storage, rid)
    assert stages == ["submitted", "transcribed", "done"]
    assert storage.texts[(rid, "transcript")].content == "from before"


async def test_a_provider_that_does_not_answer_at_once_still_waits_in_submitted(storage: InMemoryStorage) -> None:
    class Later(InstantProvider):
        async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
            await on_progress("operation_id", "op-" + request.attempt_key)
            return Started("op-" + request.attempt_key)

    rid = storage.add_record(audio=SPEECH.read_bytes())
    async with counted_pipeline(storage, Later(audio_spec=None)) as (pool, _counting):
        for _ in range(2):
            got = await storage.claim(pool.runner.table.leases())
            assert isinstance(got, Claimed)
            await pool.runner.run(got)
    assert storage.row(rid).state == "submitted"


def _imports(module: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


def test_the_pipeline_names_no_provider() -> None:
    """The pipeline passes providers on to the steps; none of its modules imports one."""
    for module in (ROOT / "sidecar" / "pipeline").glob("*.py"):
        for name in _imports(module):
            assert not name.startswith("sidecar.providers"), f"{module.name} imports {name}"


def test_the_runner_and_the_pool_name_no_step_and_no_stage() -> None:
    """What a stage's step needs (its CPUs, where it goes next, whether work follows it) is the stage
    table's to declare: the runner and the pool run whatever it says, so they import no step's module
    and spell no stage's or step's name."""
    from sidecar.pipeline.stages import FOLLOW_UP, STAGES

    words = {s.name for s in (*STAGES, FOLLOW_UP)} | {s.step for s in (*STAGES, FOLLOW_UP) if s.step}
    for module in ("runner.py", "pool.py"):
        path = ROOT / "sidecar" / "pipeline" / module
        for name in _imports(path):
            assert not name.startswith(("sidecar.insights", "sidecar.steps.")) or name == "sidecar.steps.base", name
        strings = {
            n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Constant)
        }
        assert not words & strings, f"{module} spells {sorted(words & strings)}"


def test_a_local_copy_is_found_by_its_row_stored_name_and_size_and_goes_with_its_recording(tmp_path: Path) -> None:
    copies = LocalCopies(tmp_path / "copies", max_bytes=10)
    src = tmp_path / "piece.wav"
    src.write_bytes(b"12345")
    key = LocalCopies.key("files", "f1", "piece_abc.wav")
    copies.put("r1", key, src)
    src.unlink()  # the step's scratch space goes; the copy stays
    held = copies.get(key, 5)
    assert held is not None and held.read_bytes() == b"12345"
    assert copies.get(key, 6) is None  # another size: another file
    assert copies.get(LocalCopies.key("files", "f1", "piece_def.wav")) is None  # another stored version
    copies.put_bytes("r2", LocalCopies.key("recognition_attempts", "a1", "response_x.json"), b"123456")
    assert copies.get(key) is None  # past max_bytes the oldest went
    copies.forget("r2")
    assert copies.get(LocalCopies.key("recognition_attempts", "a1", "response_x.json")) is None
    copies.close()
    assert not (tmp_path / "copies").exists()
