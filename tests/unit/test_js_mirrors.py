"""The JS side's declarations of what Python or the schema also declares: each mirror read from its file
and held to the original, so a stage or a setting added on one side alone fails here, not in production."""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sidecar.pipeline.stages import FOLLOW_UP, FOLLOW_UPS, STAGES
from sidecar.pocketbase import process, seeds
from sidecar.pocketbase.lock import LOCK_FILE
from sidecar.settings import Settings
from tests.support.operator import ROOT

HOOKS = ROOT / "pb_hooks"
MIGRATIONS = ROOT / "pb_migrations"


def _js_strings(text: str) -> dict[str, str]:
    """The ``const NAME = "value";`` declarations of a JS file."""
    return dict(re.findall(r'^const (\w+) = "([^"]*)";', text, re.M))


def _js_list(text: str, name: str, constants: dict[str, str]) -> list[str]:
    """``const NAME = [A, B];`` with each item a constant of the file."""
    m = re.search(rf"^const {name} = \[([^\]]*)\];", text, re.M)
    assert m, f"no list {name}"
    return [constants[item.strip()] for item in m.group(1).split(",") if item.strip()]


def _select_values(migration: str, field: str) -> list[str]:
    """The values of the select field ``field`` as a migration creates it."""
    text = (MIGRATIONS / migration).read_text()
    m = re.search(rf'name: "{field}", type: "select"[^\[]*values: \[([^\]]*)\]', text)
    assert m, f"{migration}: no select {field}"
    values: list[str] = json.loads(f"[{m.group(1)}]")
    return values


def test_stages_js_names_the_schemas_and_the_stage_tables_stages() -> None:
    text = (HOOKS / "lib" / "stages.js").read_text()
    constants = _js_strings(text)
    recording = _js_list(text, "RECORDING", constants)
    assert recording == _select_values("1764460800_init_schema.js", "state")
    assert recording == [s.name for s in STAGES]
    assert _js_list(text, "TERMINAL", constants) == [s.name for s in STAGES if s.step is None]
    assert _js_list(text, "INSIGHTS", constants) == _select_values("1765843200_insights.js", "state")
    assert constants["INSIGHTS_JOURNAL_STAGE"] == FOLLOW_UP.name
    assert _js_list(text, "INSIGHTS", constants) == _select_values("1766793600_literary.js", "state")


def test_the_follow_up_queues_are_declared_alike_by_both_halves_and_the_schema() -> None:
    """pb_hooks/lib/followups.js, the sidecar's FOLLOW_UPS and the twin's: the same queues in the same (claim)
    order, each journalled under its own name, each a table of the schema with the queue fields."""
    from sidecar.storage import memory

    text = (HOOKS / "lib" / "followups.js").read_text()
    block = re.search(r"^const QUEUES = \{\n(.*?)^\};", text, re.M | re.S)
    assert block, "no QUEUES in followups.js"
    js = re.findall(r"^  (\w+): \{\s*journal: \"(\w+)\"", block.group(1), re.M)
    assert [name for name, _ in js] == [f.name for f in FOLLOW_UPS] == list(memory.FOLLOW_UPS)
    assert all(name == journal for name, journal in js)
    insights_fields = set(re.findall(r'\{ name: "(\w+)"', (MIGRATIONS / "1765843200_insights.js").read_text()))
    for name, _ in js:
        made = [m for m in MIGRATIONS.glob("*.js") if f'name: "{name}",' in m.read_text()]
        assert made, f"no migration makes the {name} table"
        fields = set(re.findall(r'\{ name: "(\w+)"', made[0].read_text()))
        queue_fields = {
            "record",
            "state",
            "halted_at",
            "halt_code",
            "halt_reason",
            "attempts",
            "state_entered_at",
            "claim_token",
            "claim_expires_at",
            "paused_until",
            "available_at",
            "queue_rev",
            "progress",
            "progress_at",
            "activity",
        }
        assert queue_fields <= fields & insights_fields, name
        assert f"idx_{name}_claim ON {name} (available_at, id)" in made[0].read_text()
    # Every follow-up table also keeps its previous lease's end (added after the queues were made).
    added = (MIGRATIONS / "1766966400_follow_up_lease_ended_at.js").read_text()
    assert re.search(r"const QUEUES = \[([^\]]*)\]", added).group(1).replace('"', "").split(", ") == [  # type: ignore[union-attr]
        name for name, _ in js
    ]


def test_no_hook_spells_a_stage_out() -> None:
    """Outside stages.js a stage is named by its constant: a quoted stage name in a hook is a second declaration.
    (The words shared with other lists are allowed where they are those: a file role, an activity.)"""
    stage_words = {s.name for s in STAGES} | {"queued"}
    shared = {"normalized", "done", "queued"}  # also a file role ("normalized") and activities ("done", "queued")
    found = []
    for path in sorted(HOOKS.rglob("*.js")):
        if path.name == "stages.js":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//")[0]
            for word in re.findall(r"""["'](\w+)["']""", code):
                if word in stage_words - shared:
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
            if re.search(r"""state"?\)? *[!=]==? *["']\w+["']|state *!?= *'\w+'|"state", *"\w+"\)""", code):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def _declared_settings() -> dict[str, dict[str, list[Any]]]:
    text = (HOOKS / "lib" / "settings.js").read_text()
    m = re.search(r"^const DECLARED = (\{.*?^\});", text, re.M | re.S)
    assert m, "settings.js: no DECLARED"
    declared: dict[str, dict[str, list[Any]]] = json.loads(m.group(1))
    return declared


def _default_of(model: type[BaseModel], key: str) -> Any:
    field = model.model_fields[key]
    return field.get_default(call_default_factory=True)


def test_settings_js_reads_the_sidecars_settings_with_its_defaults() -> None:
    for section, keys in _declared_settings().items():
        assert section in Settings.model_fields, f"[{section}] is no section of the sidecar's settings"
        model = Settings.model_fields[section].annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for key, (kind, default) in keys.items():
            assert key in model.model_fields, f"[{section}] {key} is no setting of the sidecar"
            expected = _default_of(model, key)
            if kind == "duration":
                assert isinstance(expected, timedelta) and expected.total_seconds() == default, (section, key)
            elif kind == "text":
                assert (expected or "") == default, (section, key)
            elif kind == "bool":
                assert expected is default, (section, key)
            else:
                assert kind in ("int", "number") and expected == default, (section, key)


def test_pocketbase_gets_every_setting_the_hooks_read_and_nothing_else(tmp_path: Path) -> None:
    settings = Settings()
    settings.pocketbase.data_dir = tmp_path
    env = process.environment(settings)
    given = {k for k in env if k.startswith("TRANSCRIBER_") and env.get(k) != os.environ.get(k)}
    text = (HOOKS / "lib" / "settings.js").read_text()
    read = {f"TRANSCRIBER_{s.upper()}__{k.upper()}" for s, keys in _declared_settings().items() for k in keys}
    read |= set(re.findall(r'^\s+\w+: "(TRANSCRIBER_\w+)",', text, re.M))  # PROCESS
    optional = {
        "TRANSCRIBER_POCKETBASE__PUBLIC_DIR",
        "TRANSCRIBER_ACCOUNT_PASSWORD",
        "TRANSCRIBER_ERASE_PROVIDER_COPIES",
        "TRANSCRIBER_SEED_FINGERPRINTS",
    }
    assert given <= read, given - read
    assert read - given <= optional, read - given - optional


def test_only_settings_js_reads_the_environment() -> None:
    readers = [
        str(p.relative_to(ROOT))
        for p in sorted([*HOOKS.rglob("*.js"), *MIGRATIONS.glob("*.js")])
        if p.name != "settings.js" and "$os.getenv" in p.read_text()
    ]
    assert readers == []


def test_the_files_backups_leave_out_are_the_sidecars_secret_and_lock() -> None:
    text = (HOOKS / "lib" / "private.js").read_text()
    m = re.search(r"^const PRIVATE = (\[[^\]]*\]);", text, re.M)
    assert m, "private.js: no PRIVATE"
    assert json.loads(m.group(1)) == [process.SERVICE_FILE, LOCK_FILE]


def test_the_seeds_variable_is_the_one_the_hooks_read() -> None:
    text = (HOOKS / "lib" / "settings.js").read_text()
    assert f'seedFingerprints: "{seeds.SEEDS_ENV}"' in text


def test_what_a_claimer_must_read_is_declared_alike_by_the_hook_the_twin_and_the_model() -> None:
    """pb_hooks/lib/readable.js's RECORD (checked by the claim), the twin's mirror of it, the fields the
    claim hands out (readable.js CLAIMED_JSON) and the sidecar's AudioRecord: one list of fields, one kind each."""
    from sidecar.storage import memory
    from sidecar.storage.model import AudioRecord

    text = (HOOKS / "lib" / "readable.js").read_text()
    block = re.search(r"^const RECORD = Object\.assign\((.*?)\n\);", text, re.M | re.S)
    assert block, "no RECORD in readable.js"
    hook: dict[str, str] = {}
    for helper, names in re.findall(r"(TEXTS|COUNTS)\(\[([^\]]*)\]\)", block.group(1)):
        hook.update(dict.fromkeys(re.findall(r'"(\w+)"', names), "text" if helper == "TEXTS" else "count"))
    hook.update(re.findall(r'\{ (\w+): "(\w+)" \}', block.group(1)))
    twin_kinds = {memory._TEXT: "text", memory._COUNT: "count", memory._FRACTION: "fraction"}
    assert hook == {name: twin_kinds[kind] for name, kind in memory._READABLE.items()}
    # The claim (and the settle route's answer) hands out a recording's fields as RECORD names them, an
    # insights row's as INSIGHTS does.
    # insights row's (and every follow-up row's) as FOLLOW_UP does.
    assert 'const CLAIMED_JSON = { audio_records: "json_object(" + pairs(Object.keys(RECORD)) + ")" };' in text
    assert "for (const table of followups.names()) CLAIMED_JSON[table] = followUpJson(table);" in text
    follow = re.search(r"^function followUpJson\(table\) \{\n(.*?)^\}", text, re.M | re.S)
    assert follow and "pairs(Object.keys(FOLLOW_UP))" in follow.group(1)
    assert set(hook) == set(AudioRecord.model_fields) - {"recording"}
