"""Each closed vocabulary is declared once in the sidecar and once in the schema; these hold the two together."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sidecar.activity import REPORTED, Activity
from sidecar.media.audio import FORMATS
from sidecar.outcome import HaltCode
from sidecar.pipeline.stages import STAGES
from sidecar.providers.speechkit.provider import CONTAINERS
from sidecar.serving.assembly import make_provider
from sidecar.settings import Settings
from sidecar.storage.model import AttemptStatus, FileRole
from sidecar.transcript.languages import LANGUAGES
from testkit.pocketbase import PocketBaseServer


@pytest.fixture(scope="module")
def fields(shared_pb: PocketBaseServer) -> dict[str, dict[str, Any]]:
    su = shared_pb.superuser()
    out: dict[str, dict[str, Any]] = {}
    for collection in ("audio_records", "files", "recognition_attempts"):
        for f in su.http.get(f"/api/collections/{collection}").json()["fields"]:
            out[f"{collection}.{f['name']}"] = f
    return out


def test_stages(fields: dict[str, dict[str, Any]]) -> None:
    assert fields["audio_records.state"]["values"] == [s.name for s in STAGES]


def test_halt_codes(fields: dict[str, dict[str, Any]]) -> None:
    assert fields["audio_records.halt_code"]["values"] == [c.value for c in HaltCode]


def test_attempt_statuses(fields: dict[str, dict[str, Any]]) -> None:
    assert fields["recognition_attempts.status"]["type"] == "select"
    assert fields["recognition_attempts.status"]["values"] == [s.value for s in AttemptStatus]


def test_file_roles(fields: dict[str, dict[str, Any]]) -> None:
    assert fields["files.role"]["values"] == [r.value for r in FileRole]


def test_languages(fields: dict[str, dict[str, Any]]) -> None:
    assert fields["audio_records.language"]["values"] == list(LANGUAGES)
    assert fields["audio_records.language_hint"]["values"] == list(LANGUAGES)


def test_activities(fields: dict[str, dict[str, Any]]) -> None:
    assert fields["audio_records.activity"]["type"] == "select"
    assert fields["audio_records.activity"]["values"] == [a.value for a in Activity]


def test_the_hooks_say_only_activities_of_the_list_and_let_steps_report_the_same_ones() -> None:
    records_js = (Path(__file__).resolve().parents[2] / "pb_hooks" / "lib" / "records.js").read_text()
    derived_only = re.search(r"const DERIVED_ONLY = \[([^\]]*)\]", records_js)
    assert derived_only is not None
    assert set(re.findall(r'"(\w+)"', derived_only.group(1))) == {a.value for a in Activity} - REPORTED
    body = records_js[records_js.index("function activityOf") :]
    body = body[: body.index("\n}\n")]
    said = set(re.findall(r'return "(\w+)"', body))
    assert said and said <= {a.value for a in Activity}


def test_every_provider_asks_for_a_format_normalize_writes() -> None:
    settings = Settings()
    for name in ("offline", "speechkit", "openai", "instant"):
        assert make_provider(settings, name).audio_spec.format in FORMATS, name
    assert set(CONTAINERS) <= set(FORMATS)
