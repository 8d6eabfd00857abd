"""One vocabulary for what a claim's holder writes (sidecar/outcome.py): the same names in the Python types,
the transition table (pb_hooks/lib/transitions.js), the journal's kinds and the metrics' labels."""

from __future__ import annotations

import re
import typing

from sidecar.outcome import Keep, Outcome, Verdict
from sidecar.storage import transitions
from tests.support.operator import ROOT

TRANSITIONS_JS = (ROOT / "pb_hooks" / "lib" / "transitions.js").read_text()


def _entries() -> dict[str, str]:
    """Each entry of transitions.js's ``const TRANSITIONS = { name: { … }, … }`` (names two-space indented,
    what each says four), by name."""
    m = re.search(r"^const TRANSITIONS = \{\n(.*?)^\};", TRANSITIONS_JS, re.M | re.S)
    assert m, "transitions.js: no TRANSITIONS"
    parts = re.split(r"^  (\w+): \{\n", m.group(1), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_transition_type_is_named_by_its_outcome() -> None:
    types = typing.get_args(transitions.Transition)
    names = [t.outcome.value for t in types]
    assert sorted(names) == sorted([*Outcome, *Keep])
    for t in types:
        assert t.__name__.lower() == t.outcome.value, t


def test_the_settle_routes_table_takes_exactly_the_python_names() -> None:
    entries = _entries()
    # What the settle route takes: the entries a claim's holder sends arguments for.
    assert sorted(name for name, says in entries.items() if re.search(r"^    args: ", says, re.M)) == sorted(
        [*Outcome, *Keep]
    )
    # The transition table: the same names, and the owner's own (panel.js) beside them.
    assert set(entries) == {*Outcome, *Keep, "resumed", "stage_set"}
    # Every one writes its fields; every outcome (not the two that keep the claim) journals.
    assert all(re.search(r"^    fields: ", says, re.M) for says in entries.values())
    assert {name for name, says in entries.items() if re.search(r"^    journal: ", says, re.M)} == {
        *Outcome,
        "resumed",
        "stage_set",
    }


def test_every_outcome_is_a_verdict_and_a_documented_metric_label() -> None:
    assert {o.value for o in Outcome} <= {v.value for v in Verdict}
    row = re.search(
        r"^\| `transcriber_step_runs_total\{stage,outcome\}` \| ([^|]*)\|", (ROOT / "README.md").read_text(), re.M
    )
    assert row, "README: no transcriber_step_runs_total row"
    assert set(re.findall(r"`(\w+)`", row.group(1))) == {v.value for v in Verdict}


def test_the_journals_kinds_end_as_the_outcomes() -> None:
    """The init schema's kinds, renamed by the later migration, hold every outcome (the live schema is checked
    against a real PocketBase in tests/integration/test_claim.py)."""
    init = (ROOT / "pb_migrations" / "1764460800_init_schema.js").read_text()
    kinds = re.search(r'"accepted",[^\]]*', init)
    assert kinds
    values = re.findall(r'"(\w+)"', kinds.group(0))
    renamed = (ROOT / "pb_migrations" / "1766016000_journal_outcomes.js").read_text()
    mapping = dict(re.findall(r"(\w+): \"(\w+)\"", re.search(r"const RENAMED = \{([^}]*)\}", renamed).group(1)))  # type: ignore[union-attr]
    now = {mapping.get(v, v) for v in values}
    assert {o.value for o in Outcome} <= now
