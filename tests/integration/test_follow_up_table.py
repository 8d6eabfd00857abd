"""The follow-up queues are a declaration, the hooks' half: a queue that exists in this test only (its
declaration a file of the hooks' `followups/` directory, its table made through the superuser's API) is
queued when a recording is done, claimed through the claim route, noted, settled and journalled by the
project's hooks, none of which is changed for it (the sidecar's half: tests/unit/test_follow_up_table.py);
and with the sidecar's declaration beside it, its step is run by the pool against the real server.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from sidecar.outcome import Advance, StepResult
from sidecar.pipeline import stages
from sidecar.pipeline.stages import StageTable
from sidecar.serving.assembly import pipeline
from sidecar.steps.base import Step, StepContext
from testkit.pocketbase import CLAIMABLE, LEASE_MS, Caller, PocketBaseServer, now_ms, running_pocketbase
from tests.support.fakes import StubProvider
from tests.support.operator import ROOT
from tests.support.sidecar import pool_running, settings_for
from tests.support.waiting import eventually

QUEUE = "checklist"
DECLARATION = """// A follow-up queue of one test's own (tests/integration/test_follow_up_table.py).
module.exports = {
  checklist: {
    journal: "checklist", what: "checklist row", queued: "checklist queued (a test's step)",
    done: "checklist made", again: "the checklist will be made again", live: false,
  },
};
"""


@pytest.fixture
def pb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PocketBaseServer]:
    tmp = tmp_path_factory.mktemp("follow-up-table")
    hooks = tmp / "pb_hooks"
    shutil.copytree(ROOT / "pb_hooks", hooks)
    (hooks / "followups").mkdir()
    (hooks / "followups" / f"{QUEUE}.js").write_text(DECLARATION)
    with running_pocketbase(tmp, hooks_dir=hooks) as server:
        yield server


def make_table(superuser: Caller) -> None:
    """The queue's table: the literary queue's columns and indexes under the test queue's name (what its
    migration would make)."""
    literary = superuser.http.get("/api/collections/literary").json()
    fields = [{k: v for k, v in f.items() if k != "id"} for f in literary["fields"]]
    made = superuser.http.post(
        "/api/collections",
        json={
            "name": QUEUE,
            "type": "base",
            "listRule": literary["listRule"],
            "viewRule": literary["viewRule"],
            "fields": fields,
            "indexes": [i.replace("literary", QUEUE) for i in literary["indexes"]],
        },
    )
    assert made.status_code == 200, made.text


def claim(service: Caller, follow_ups: dict[str, int] | None = None) -> dict[str, Any] | None:
    body: dict[str, Any] = {"now": now_ms(), "leases": dict.fromkeys(CLAIMABLE, LEASE_MS)}
    if follow_ups is not None:
        body["follow_ups"] = follow_ups
    got = service.http.post("/api/pipeline/claim", json=body)
    assert got.status_code in (200, 204), got.text
    return dict(got.json()) if got.status_code == 200 else None


def settle(service: Caller, queue: str, claimed: dict[str, Any], **body: Any) -> dict[str, Any]:
    got = service.http.post(
        f"/api/pipeline/{queue}/{claimed['id']}/settle", json={"token": claimed["token"], "now": now_ms(), **body}
    )
    assert got.status_code == 200, got.text
    return dict(got.json())


def test_a_follow_up_declared_alone_is_queued_claimed_settled_and_journalled(
    pb: PocketBaseServer, superuser: Caller, sender: Caller, service: Caller
) -> None:
    make_table(superuser)
    rid = sender.upload()
    # The recording through its stages; entering `done`, it asks for the test's queue.
    for to in ("normalized", "submitted", "transcribed", "done"):
        got = claim(service)
        assert got is not None and got["id"] == rid
        extra = {"follow_ups": [QUEUE]} if to == "done" else {}
        settle(service, "records", got, outcome="advanced", to=to, **extra)
    rows = superuser.http.get(f"/api/collections/{QUEUE}/records", params={"filter": f'record = "{rid}"'}).json()
    (row,) = rows["items"]
    assert row["state"] == "queued" and row["available_at"] > 0

    # Only a claimer that takes the queue's work gets it.
    assert claim(service) is None
    got = claim(service, {QUEUE: LEASE_MS})
    assert got is not None and (got["id"], got["queue"]) == (row["id"], QUEUE)
    noted = service.http.post(
        f"/api/pipeline/{QUEUE}/{row['id']}/events", json={"token": got["token"], "text": "three items found"}
    )
    assert noted.status_code == 200, noted.text
    written = settle(service, QUEUE, got, outcome="advanced", to="done")
    assert (written["state"], written["attempts"], written["recording"]) == ("done", 0, rid)
    assert claim(service, {QUEUE: LEASE_MS}) is None

    row = superuser.http.get(f"/api/collections/{QUEUE}/records/{row['id']}").json()
    assert (row["state"], row["claim_token"], row["available_at"], row["progress"]) == ("done", "", 0, 1)
    journal = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record = "{rid}"', "sort": "created"}
    ).json()["items"]
    said = [(e["stage"], e["kind"], e["outcome_text"], e["actor"]) for e in journal]
    # (rows of one millisecond may come in either order)
    assert set(said[-3:]) == {
        ("done", "note", "checklist queued (a test's step)", "worker"),
        (QUEUE, "note", "three items found", "worker"),
        (QUEUE, "advanced", "checklist made", "worker"),
    }


def test_a_follow_up_claimed_after_its_lease_ran_out_says_when_it_ran_out(
    sender: Caller, service: Caller, superuser: Caller
) -> None:
    """The claim keeps a follow-up row's previous lease end as it keeps a recording's: a literary text whose
    worker died, claimed again after the service was down for three hours, is seen to have waited since
    that lease ran out (the stall watchdog counts its time up to there), not to have stalled all along."""
    rid = sender.upload()
    for to in ("normalized", "submitted", "transcribed", "done"):
        got = claim(service)
        assert got is not None and got["id"] == rid
        settle(
            service, "records", got, outcome="advanced", to=to, **({"follow_ups": ["literary"]} if to == "done" else {})
        )
    t0 = now_ms()

    def claim_at(now: int) -> dict[str, Any]:
        body = {
            "now": now,
            "leases": dict.fromkeys(CLAIMABLE, LEASE_MS),
            "follow_ups": {"literary": 60_000},
            "with_record": True,
        }
        got = service.http.post("/api/pipeline/claim", json=body)
        assert got.status_code == 200, got.text
        return dict(got.json())

    first = claim_at(t0)  # its worker dies: nothing settles it
    assert first["queue"] == "literary" and first["record"]["lease_ended_at"] == 0
    assert first["record"]["progress_at"] == t0  # its first try: the wait in the queue before is not a stall
    second = claim_at(t0 + 3 * 3600 * 1000)
    assert (second["id"], second["record"]["attempts"]) == (first["id"], 2)
    assert second["record"]["lease_ended_at"] == t0 + 60_000 and second["record"]["progress_at"] == t0
    row = superuser.http.get(f"/api/collections/literary/records/{first['id']}").json()
    assert row["lease_ended_at"] == t0 + 60_000 and row["claim_token"] == second["token"]


async def advance(ctx: StepContext) -> StepResult:
    return Advance("test step done")


async def checklist(ctx: StepContext) -> StepResult:
    await ctx.session.note("three items found")
    return Advance("checklist made by the test's step")


@pytest.mark.anyio
async def test_the_sidecar_and_the_hooks_run_a_follow_up_declared_alone(
    pb: PocketBaseServer, superuser: Caller, sender: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both halves at once: the queue declared beside the sidecar's (its stage table) and the hooks' (the
    file above), its step run by the pool against the real server."""
    make_table(superuser)
    monkeypatch.setattr(
        stages, "FOLLOW_UPS", (*stages.FOLLOW_UPS, stages.Stage(QUEUE, QUEUE, stages.Work.OWN, stages.LEASE, "done"))
    )
    steps: dict[str, Step] = {
        "normalize": advance,
        "submit": advance,
        "poll": advance,
        "finalize": advance,
        QUEUE: checklist,
    }
    settings = settings_for(pb, workers=1)
    rid = sender.upload()
    async with pipeline(settings, steps=steps, provider=StubProvider()) as pool:
        pool.runner.table = StageTable(settings.pipeline, steps, follow_ups={QUEUE: "test"})
        async with pool_running(pool):
            row = await eventually(lambda: done_row(superuser, rid))
    assert (row["attempts"], row["claim_token"], row["halted_at"]) == (0, "", "")
    journal = superuser.http.get(
        "/api/collections/record_events/records", params={"filter": f'record = "{rid}"', "sort": "created"}
    ).json()["items"]
    said = {(e["stage"], e["kind"], e["outcome_text"]) for e in journal}
    assert {
        ("done", "note", "checklist queued (a test's step)"),
        (QUEUE, "note", "three items found"),
        (QUEUE, "advanced", "checklist made by the test's step"),
    } <= said


def done_row(superuser: Caller, rid: str) -> dict[str, Any]:
    items = superuser.http.get(f"/api/collections/{QUEUE}/records", params={"filter": f'record = "{rid}"'}).json()
    rows = items["items"]
    return dict(rows[0]) if rows and rows[0]["state"] == "done" else {}
