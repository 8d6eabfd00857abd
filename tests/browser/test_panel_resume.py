"""The README's owner chapter, word for word, in a real browser: a recording the pipeline halted is
found with the filter it gives and resumed with the one edit it names. The panel takes a date when
its field loses focus (before that, "Save changes" stays disabled): the words say so, and this test
does only what they say: nothing is done to ``halt_reason``."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.pocketbase import PASSWORD, PocketBaseServer
from tests.browser.panel import Panel, Screenshots, chromium_page

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = (ROOT / "samples" / "sample.ogg").read_bytes()
README = " ".join((ROOT / "README.md").read_text().split())

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def panel(pb: PocketBaseServer, tmp_path: Path) -> Iterator[Panel]:
    shots = Screenshots(tmp_path / "screenshots")
    shots.root.mkdir()
    with chromium_page(tmp_path / "chromium-profile") as page:
        p = Panel(page, pb.url, shots)
        p.login(pb.superuser_email, PASSWORD)
        yield p


def test_the_owner_resumes_a_halted_recording_by_clearing_the_date_alone(pb: PocketBaseServer, panel: Panel) -> None:
    from playwright.sync_api import expect

    # The words followed, as the README gives them.
    assert '**Find what is stuck**: filter `halted_at != ""`' in README
    assert (
        "**Resume** a halted record: clear `halted_at` (Backspace in the date), click any other field, and save."
        in (README)
    )

    su = pb.superuser()
    rid = pb.new_sender().upload(SAMPLE, name="meeting.ogg", title="Weekly meeting")
    worker = pb.service()
    now = int(time.time() * 1000)
    claimed = worker.http.post("/api/pipeline/claim", json={"now": now, "leases": {"uploaded": 60_000}}).json()
    assert claimed["id"] == rid
    reason = "the provider failed: 503 Service Unavailable (3 tries)"
    halted = worker.http.post(
        f"/api/pipeline/records/{rid}/settle",
        json={"outcome": "halted", "token": claimed["token"], "now": now, "code": "provider_failed", "reason": reason},
    )
    assert halted.status_code == 200, halted.text

    # Find what is stuck: the filter.
    rows = panel.rows("audio_records", 'halted_at != ""')
    expect(rows).to_have_count(1)
    rows.first.locator("td[data-name=id]").click()
    modal = panel.modal()
    date = modal.locator("input[name=halted_at]")
    expect(date).not_to_have_value("")
    expect(
        modal.get_by_text(re.compile(r"Resume: clear the date \(Backspace in it\), click any other field"))
    ).to_be_visible()
    panel.shot("halted-by-the-pipeline")

    # Clear the date as a person does: into it, Backspace.
    date.click()
    date.press("Backspace")
    save = modal.get_by_role("button", name="Save changes")
    expect(save).to_be_disabled()  # why the words say to leave the field: the panel has not taken it yet
    # Click any other field.
    modal.locator("input[name=attempts]").click()
    expect(save).to_be_enabled()
    expect(modal.locator("textarea[name=halt_reason]")).to_have_value(reason)  # untouched
    panel.shot("date-cleared")
    # And save.
    assert panel.save(modal).status == 200
    resumed = su.record(rid)
    assert resumed["halted_at"] == "" and resumed["halt_code"] == "" and resumed["state"] == "uploaded"
