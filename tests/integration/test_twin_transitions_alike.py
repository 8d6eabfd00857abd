"""The twin's transitions and pb_hooks/lib/transitions.js, run on the same rows: every transition of a
recording and of a follow-up row writes the same fields with the same values and journals the same words
in both. The hooks' table runs in PocketBase's own JS runtime, asked through a route that exists in this
test only (a hook file beside a copy of the project's hooks); the twin's is the one the unit tests run on.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from sidecar.pipeline.stages import STAGES
from sidecar.storage import memory
from sidecar.storage.memory import InMemoryStorage, LiteraryRow, Row
from sidecar.storage.memory_transitions import TRANSITIONS, Args, db_time
from testkit.pocketbase import Caller, running_pocketbase
from tests.support.operator import ROOT

# Asked with a row's stored fields, a transition's name and arguments: what transitions.js writes and journals.
PROBE = """/// <reference path="../pb_data/types.d.ts" />
routerAdd("POST", "/api/test/transitions", (e) => {
  const transitions = require(`${__hooks}/lib/transitions.js`);
  const body = e.requestInfo().body;
  const rec = new Record($app.findCollectionByNameOrId(body.table));
  for (const f in body.rec) rec.set(f, body.rec[f]);
  rec.setRaw("created", body.created);  // an autodate field takes no value set
  const said = transitions.TRANSITIONS[body.name].journal;
  return e.json(200, {
    fields: transitions.fieldsOf(rec, body.name, body.now, body.a),
    journal: said ? said(body.a, body.table, rec, body.actor) : null,
  });
}, $apis.requireSuperuserAuth());
"""

NOW = 1_800_000_000_123
CREATED = 1_700_000_000_456


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Caller]:
    tmp = tmp_path_factory.mktemp("transitions")
    hooks = tmp / "pb_hooks"
    shutil.copytree(ROOT / "pb_hooks", hooks)
    (hooks / "transitions_probe.pb.js").write_text(PROBE)
    with running_pocketbase(tmp, hooks_dir=hooks) as pb:
        yield pb.superuser()


def _rows(table: str) -> list[dict[str, Any]]:
    states = ["normalized", "done"] if table == "audio_records" else ["queued", "done"]
    out = []
    for state, halted, progress, attempts in itertools.product(states, (False, True), (0.5, 1), (0, 3)):
        out.append(
            {
                "id": "r" * 15,
                "state": state,
                "halted_at": db_time(NOW - 5000) if halted else "",
                "halt_code": "stalled" if halted else "",
                "progress": progress,
                "attempts": attempts,
                "queue_rev": 4,
            }
        )
    return out


def _args(name: str, table: str) -> list[dict[str, Any]]:
    recording = table == "audio_records"
    stages = ["normalized", "done"] if recording else ["queued", "done"]
    texts = (None, "as the step said")
    match name:
        case "advanced":
            return [{"to": s, "text": t, "follow_ups": []} for s in stages for t in texts]
        case "postponed":
            return [{"until": NOW + 60_000, "text": t} for t in texts]
        case "halted":
            return [{"code": "stalled", "reason": "slow " * 600}]
        case "failed":
            return [{"retry_at": at, "text": "step failed"} for at in (NOW - 1, NOW + 30_000)]
        case "extended":
            return [{"until": NOW + 90_000}]
        case "progressed":
            if not recording:  # a follow-up row keeps its progress alone (its arguments say no more)
                return [{"progress": p, "activity": None, "language": None} for p in (0.25, 0.75)]
            return [
                {"progress": p, "activity": act, "language": lang}
                for p in (0.25, 0.75)
                for act in (None, "recognizing")
                for lang in (None, "en")
            ]
        case "stage_set":
            return [
                {"to": s, "why": w} for s in (*stages, "uploaded" if recording else "queued") for w in (None, "asked")
            ]
        case _:
            return [{}]


def _twin_row(table: str, stored: dict[str, Any]) -> Row | LiteraryRow:
    if table == "audio_records":
        return Row(owner="o", created_ms=CREATED, **stored)
    return LiteraryRow(record="x" * 15, created_ms=CREATED, **stored)


@pytest.mark.parametrize("table", ["audio_records", "literary"])
@pytest.mark.parametrize("name", list(TRANSITIONS))
def test_each_transition_writes_and_journals_alike_in_the_twin_and_the_hooks(
    probe: Caller, table: str, name: str
) -> None:
    world = memory._World(
        InMemoryStorage([s.name for s in STAGES], frozenset(s.name for s in STAGES if s.step is None))
    )
    spec = TRANSITIONS[name]
    compared = 0
    for stored, a in itertools.product(_rows(table), _args(name, table)):
        for actor in ("owner", "sender") if name == "resumed" else ("worker",):
            got = probe.http.post(
                "/api/test/transitions",
                json={
                    "table": table,
                    "name": name,
                    "rec": stored,
                    "created": db_time(CREATED),
                    "now": NOW,
                    "a": a,
                    "actor": actor,
                },
            )
            assert got.status_code == 200, got.text
            js = got.json()
            rec = _twin_row(table, stored)
            mine = spec.fields(world, rec, NOW, Args(**a))
            case = (stored, a, actor)
            assert mine == js["fields"], case
            said = spec.journal(world, Args(**a), table, rec, actor) if spec.journal else None
            assert (list(said) if said else None) == js["journal"], case
            compared += 1
    assert compared >= 8
