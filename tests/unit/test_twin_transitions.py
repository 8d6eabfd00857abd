"""The twin's transitions (sidecar/storage/memory_transitions.py) read against pb_hooks/lib/transitions.js:
the same entries in the same order, each taking arguments, journalling, doing more and keeping quiet
where its JS twin does, writing the same fields with the same constants, in the same journal words. A
transition changed on one side alone fails here (what each writes, value for value, on the same rows:
tests/integration/test_twin_transitions_alike.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from sidecar.storage.memory_transitions import OUTCOMES, TRANSITIONS, Args, Transition
from tests.support.operator import ROOT

# Both without their comments: what they do, not what they say.
JS = re.sub(r"^ *//.*\n| +//[^\n\"]*$", "", (ROOT / "pb_hooks" / "lib" / "transitions.js").read_text(), flags=re.M)
PY = re.sub(
    r"^ *#.*\n|  # [^\n\"]*$", "", (ROOT / "sidecar" / "storage" / "memory_transitions.py").read_text(), flags=re.M
)


def _block(text: str, start: str, end: str) -> str:
    m = re.search(rf"^{re.escape(start)}\n(.*?)^{re.escape(end)}", text, re.M | re.S)
    assert m, start
    return m.group(1)


def _entries(block: str, head: str) -> dict[str, str]:
    """Each entry's text, by name: from its head line to the next one's."""
    parts = re.split(head, block, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


# A stored row's field read as the twin reads it: `rec.getInt("queue_rev")` is `rec.queue_rev`.
JS_ENTRIES = _entries(
    re.sub(r'rec\.get\w+\("(\w+)"\)', r"rec.\1", _block(JS, "const TRANSITIONS = {", "};")), r"^  (\w+): \{\n"
)
PY_ENTRIES = _entries(_block(PY, "TRANSITIONS: dict[str, Transition] = {", "}"), r'^    "(\w+)": Transition\(\n')


def _part(entry: str, name: str) -> str:
    """An entry's part ``name`` (args, fields, journal, after): its text up to the next part."""
    m = re.search(rf"^    {name}: (.*?)(?=^    \w+:|\Z)", entry, re.M | re.S)
    return m.group(1) if m else ""


def _py_part(entry: str, name: str) -> str:
    """A Python entry's argument ``name``: its text up to the next argument."""
    m = re.search(rf"^        {name}=(.*?)(?=^        \w+=|\Z)", entry, re.M | re.S)
    return m.group(1) if m else ""


def _keys(js: str) -> set[str]:
    """The field names an object literal of JS code sets (``name: value``; a ternary's ``a ? b : c`` has a
    space before its colon)."""
    return set(re.findall(r"\b(\w+): ", js))


FREED = _keys(_block(JS, "function freed(fields) {", "}"))


@dataclass(frozen=True)
class Words:
    queued: str = "queued words"
    done: str = "done words"
    again: str = "again words"


class World:
    """What the transitions read of the modules around them, on a recording or a follow-up row."""

    def __init__(self) -> None:
        self.journal: list[tuple[str, str, str, str, str]] = []
        self.queued: list[str] = []

    def is_terminal(self, stage: str) -> bool:
        return stage == "done"

    def allowed(self, table: str) -> Sequence[str]:
        return ["queued", "done"] if table == "checklist" else ["uploaded", "normalized", "done"]

    def follow_up(self, table: str) -> Words | None:
        return Words() if table == "checklist" else None

    def follow_up_names(self) -> Sequence[str]:
        return ["checklist"]

    def halt_codes(self) -> Sequence[str]:
        return ["stalled"]

    def reported_activities(self) -> Sequence[str]:
        return ["recognizing"]

    def languages(self) -> Sequence[str]:
        return ["en"]

    def queue_follow_up(self, table: str, record_id: str, now: int) -> None:
        self.queued.append(table)

    def journal_add(self, record_id: str, stage: str, kind: str, text: str, actor: str) -> None:
        self.journal.append((record_id, stage, kind, text, actor))


@dataclass
class Rec:
    id: str = "r1"
    created_ms: int = 1000
    state: str = "normalized"
    halted_at: str = ""
    halt_code: str = ""
    attempts: int = 2
    queue_rev: int = 7
    progress: float = 0.25


NOW = 50_000
# Arguments with every name any entry reads, so that every branch that writes a field writes it.
EVERY = Args(
    to="normalized",
    text=None,
    follow_ups=["checklist"],
    until=NOW + 10,
    code="stalled",
    reason="why",
    retry_at=NOW + 5,
    progress=0.5,
    activity="recognizing",
    language="en",
    why="asked",
)


def _written(spec: Transition) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rec in (Rec(), Rec(progress=0.9, halted_at="2026-01-01 00:00:00.000Z")):
        out.update(spec.fields(World(), rec, NOW, EVERY))
    return out


def test_the_same_entries_in_the_same_order_taking_journalling_and_quiet_alike() -> None:
    assert list(JS_ENTRIES) == list(PY_ENTRIES) == list(TRANSITIONS)
    assert OUTCOMES == [name for name, entry in JS_ENTRIES.items() if _part(entry, "args")]
    for name, entry in JS_ENTRIES.items():
        spec = TRANSITIONS[name]
        assert (spec.args is not None) == bool(_part(entry, "args")), name
        assert (spec.journal is not None) == bool(_part(entry, "journal")), name
        assert (spec.after is not None) == bool(_part(entry, "after")), name
        assert spec.quiet == ("quiet: true" in entry), name


@pytest.mark.parametrize("name", list(JS_ENTRIES))
def test_each_writes_the_fields_its_js_twin_writes_with_the_same_constants(name: str) -> None:
    fields = _part(JS_ENTRIES[name], "fields")
    assert fields, name
    written = _written(TRANSITIONS[name])
    assert set(written) == _keys(fields) | (FREED if "freed(" in fields else set()), name
    # A field set to a constant: the same constant (`freed`'s too).
    constants = re.findall(
        r'\b(\w+): (0|1|"")\s*[,})]',
        fields + (_block(JS, "function freed(fields) {", "}") if "freed(" in fields else ""),
    )
    assert constants or name in ("extended", "progressed"), name
    for field, literal in constants:
        assert written[field] == (0 if literal == "0" else 1 if literal == "1" else ""), (name, field)


@pytest.mark.parametrize("name", [n for n, e in JS_ENTRIES.items() if _part(e, "journal")])
def test_each_journals_in_its_js_twins_words(name: str) -> None:
    said = set(re.findall(r'"([^"]*)"', _part(JS_ENTRIES[name], "journal")))
    mine = set(re.findall(r'"([^"]*)"', _py_part(PY_ENTRIES[name], "journal")))
    # The same words in the same literals (`a.text || "postponed"`: `a.text or "postponed"`).
    assert said == mine, name


def test_the_journal_rows_read_alike_on_a_recording_and_a_follow_up_row() -> None:
    """A few of the words, as both tables put them together."""
    world = World()
    rec = Rec(halt_code="stalled")
    journal = TRANSITIONS["stage_set"].journal
    assert journal is not None
    assert journal(world, Args(to="queued", why="asked"), "checklist", rec, "owner") == (
        None,
        "checklist set to queued by the owner: again words (asked)",
    )
    assert journal(world, Args(to="done"), "audio_records", rec, "owner") == (
        "done",
        "stage changed by the owner from normalized to done",
    )
    resumed = TRANSITIONS["resumed"].journal
    assert resumed is not None
    assert resumed(world, Args(), "audio_records", rec, "sender") == (None, "halt cleared by the sender (stalled)")
    after = TRANSITIONS["advanced"].after
    assert after is not None
    after(world, "audio_records", rec, Args(to="done", follow_ups=["checklist"]), NOW)
    assert world.queued == ["checklist"] and world.journal == [("r1", "done", "note", "queued words", "worker")]
