"""The owner's panel in a real browser: a halted recording and everything about it, a halt
and a resume that the real pipeline finishes, and a refused delete.

PocketBase and the pipeline are the real ones (the pipeline runs in a background
thread with the instant provider); the browser is the system's headless
Chromium. Screenshots go to the test's tmp dir and, when TRANSCRIBER_SCREENSHOTS
names a folder, there too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.providers.instant import InstantProvider
from testkit.pocketbase import PASSWORD, Caller, PocketBaseServer
from tests.browser.panel import Panel, Screenshots, chromium_page
from tests.browser.pipeline import pipeline_in_background
from tests.support.waiting import eventually_sync

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = (ROOT / "samples" / "sample.ogg").read_bytes()
# A valid Ogg page header, then garbage: intake accepts it, the real normalize halts it.
UNDECODABLE = b"OggS\x00\x02" + bytes(range(256)) * 40
NOT_READABLE = "the file is not a readable audio or video file"
NEVER_DELETED = "Recordings are never deleted"

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def panel(pb: PocketBaseServer, tmp_path: Path) -> Iterator[Panel]:
    """The admin panel in headless Chromium, signed in as the owner (the superuser)."""
    shots = Screenshots(tmp_path / "screenshots")
    shots.root.mkdir()
    with chromium_page(tmp_path / "chromium-profile") as page:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        p = Panel(page, pb.url, shots)
        p.login(pb.superuser_email, PASSWORD)
        try:
            yield p
        finally:
            print("\nscreenshots:\n" + "\n".join(f"  {path}" for path in shots.saved))
        assert errors == [], f"the panel raised in the page: {errors}"


def record_file(su: Caller, rid: str) -> str:
    """The file name of the recording's (only) recognition attempt's raw response."""
    resp = su.http.get("/api/collections/recognition_attempts/records", params={"filter": f'record="{rid}"'})
    (attempt,) = resp.json()["items"]
    return str(attempt["raw_response"])


def wait_for_record(
    su: Caller, rid: str, done: Callable[[dict[str, Any]], bool], timeout: float = 60
) -> dict[str, Any]:
    def there() -> dict[str, Any] | None:
        rec = su.record(rid)
        return rec if done(rec) else None

    found = eventually_sync(there, within=timeout, every=0.1, what=f"record {rid} in the state the test waits for")
    assert found is not None
    return found


def test_the_owner_inspects_halts_resumes_and_cannot_delete_in_the_panel(pb: PocketBaseServer, panel: Panel) -> None:
    from playwright.sync_api import expect

    su = pb.superuser()
    sender = pb.new_sender()
    broken = sender.upload(UNDECODABLE, name="broken.ogg", title="Broken upload")
    good = sender.upload(SAMPLE, name="sample.ogg", title="Board meeting")
    held = sender.upload(SAMPLE, name="interview.ogg", title="Interview")

    # The owner halts one recording before any worker takes it.
    modal = panel.open("audio_records", held)
    modal.locator("textarea[name=halt_reason]").fill("waiting for the guest's consent")
    panel.set_date(modal, "halted_at", "2026-01-01T09:00:00")
    panel.shot("halting-a-recording")
    assert panel.save(modal).status == 200
    halted = su.record(held)
    assert halted["halted_at"] and halted["halt_code"] == "halted_by_owner"
    assert halted["halt_reason"] == "waiting for the guest's consent"

    with pipeline_in_background(pb, InstantProvider()):
        wait_for_record(su, broken, lambda r: bool(r["halted_at"]))
        wait_for_record(su, good, lambda r: r["state"] == "done")
        assert su.record(held)["state"] == "uploaded"  # the halt holds while the workers run

        # The halted recording, in the list of all recordings and in its edit dialog.
        row = panel.row("audio_records", broken, search="")
        for column, text in [("state", "uploaded"), ("halt_code", "unsupported_media"), ("attempts", "1")]:
            expect(row.locator(f"td[data-name={column}]")).to_have_text(text)
        expect(row.locator("td[data-name=halt_reason]")).to_contain_text(NOT_READABLE)
        expect(row.locator("td[data-name=owner]")).to_contain_text(sender.email)
        panel.shot("recordings")
        modal = panel.open("audio_records", broken)
        expect(modal.locator("output[name=state] .selected-item")).to_have_text("uploaded")
        expect(modal.locator("output[name=halt_code] .selected-item")).to_have_text("unsupported_media")
        reason = modal.locator("textarea[name=halt_reason]")
        expect(reason).to_be_visible()
        expect(reason).to_have_value(re.compile(re.escape(NOT_READABLE)))
        expect(modal.locator("input[name=attempts]")).to_have_value("1")
        expect(modal.locator("input[name=halted_at]")).not_to_have_value("")
        expect(modal.get_by_text("Clear the date", exact=False)).to_be_visible()  # the how-to beside the field
        panel.shot("halted-recording")

        # Its journal: accepted at intake, then halted by the worker on the first try.
        journal = panel.rows_of("record_events", broken, at_least=2)
        expect(journal).to_have_count(2)
        expect(journal.filter(has_text="halted")).to_contain_text(f"unsupported_media: {NOT_READABLE}")
        expect(journal.filter(has_text="accepted").locator("td[data-name=actor]")).to_have_text("intake")
        expect(journal.first.locator("td[data-name=record]")).to_contain_text("Broken upload")
        panel.shot("journal-of-the-halted-recording")

        # Its files: the original as uploaded (nothing was normalized).
        files = panel.rows_of("files", broken)
        expect(files).to_have_count(1)
        expect(files.locator("td[data-name=role]")).to_have_text("original")
        expect(files.locator("td[data-name=name]")).to_have_text("broken.ogg")
        expect(files.locator("td[data-name=blob] .thumb")).to_be_visible()
        panel.shot("files-of-the-halted-recording")

        # The recording that went through: both files, and the attempt with the provider's raw response.
        files = panel.rows_of("files", good, at_least=2)
        expect(files.locator("td[data-name=role]")).to_have_text(["normalized", "original"])
        attempts = panel.rows_of("recognition_attempts", good)
        expect(attempts).to_have_count(1)
        expect(attempts.locator("td[data-name=provider]")).to_have_text("instant")
        raw = attempts.locator("td[data-name=raw_response] .thumb")
        expect(raw).to_be_visible()
        expect(raw).to_have_attribute("title", "Download " + record_file(su, good))
        panel.shot("recognition-attempt-with-raw-response")
        attempts.locator("td[data-name=id]").click()
        expect(panel.modal().get_by_text(record_file(su, good))).to_be_visible()
        panel.shot("raw-response-in-the-attempt")

        # The owner resumes the held recording: clear halted_at, save; the workers finish it.
        modal = panel.open("audio_records", held)
        panel.set_date(modal, "halted_at", "")
        panel.shot("resuming-a-recording")
        assert panel.save(modal).status == 200
        done = wait_for_record(su, held, lambda r: r["state"] == "done" or bool(r["halted_at"]))
        assert done["state"] == "done" and done["halted_at"] == "" and done["halt_code"] == ""
        # The recording's own lines, and the two its literary text adds once it is done (queued, made).
        events: dict[str, str | int] = {"filter": f'record="{held}"', "perPage": 1}
        eventually_sync(
            lambda: su.http.get("/api/collections/record_events/records", params=events).json()["totalItems"] >= 8,
            what="the literary text's lines in the journal",
        )
        journal = panel.rows_of("record_events", held, at_least=8)
        kinds = journal.locator("td[data-name=kind]")
        # newest first; the instant provider answers at once: normalized → transcribed → done
        expect(kinds).to_have_text(["advanced", "note"] + ["advanced"] * 3 + ["resumed", "halted", "accepted"])
        expect(journal.filter(has_text="resumed").locator("td[data-name=actor]")).to_have_text("owner")
        panel.shot("journal-of-the-resumed-recording")

    # O8: a form opened before a worker moved the recording cannot undo the move: the save is refused
    # with a message the panel shows, and nothing of the form lands.
    late = sender.upload(SAMPLE, name="late.ogg", title="Late upload")
    modal = panel.open("audio_records", late)
    worker = pb.service()
    now = int(time.time() * 1000)
    claimed = worker.http.post("/api/pipeline/claim", json={"now": now, "leases": {"uploaded": 60_000}}).json()
    assert claimed["id"] == late
    moved = worker.http.post(
        f"/api/pipeline/records/{late}/settle",
        json={"outcome": "advanced", "token": claimed["token"], "now": now, "to": "normalized"},
    )
    assert moved.status_code == 200
    panel.set_date(modal, "halted_at", "2026-01-01T09:00:00")
    assert panel.save(modal, closes=False).status == 400
    expect(panel.page.get_by_text("changed since you opened it", exact=False)).to_be_visible()
    expect(modal).to_be_visible()  # still open: the owner reads why, closes it, reopens
    panel.shot("stale-save-refused")
    late_now = su.record(late)
    assert late_now["state"] == "normalized" and late_now["halted_at"] == ""

    # Deleting a recording is refused, with the reason shown to the owner.
    modal = panel.open("audio_records", broken)
    response = panel.delete(modal)
    assert response.status == 400
    expect(panel.page.get_by_text(NEVER_DELETED)).to_be_visible()
    panel.shot("delete-refused")
    assert su.record(broken)["halt_code"] == "unsupported_media"
    panel.row("audio_records", broken)  # still listed


def test_the_pipelines_times_read_as_dates_in_the_recordings_view(
    pb: PocketBaseServer, panel: Panel, sender: Caller, service: Caller
) -> None:
    """A claimed recording's times, 13-digit integers in ``audio_records``, are dates in ``audio_records_times``."""
    from playwright.sync_api import expect

    rid = sender.upload(SAMPLE, title="Weekly sync")
    service.claim(rid)
    entered, expires = pb.sql_one("SELECT state_entered_at, claim_expires_at FROM audio_records WHERE id = ?", rid)
    raw = panel.row("audio_records", rid)
    expect(raw.locator("td[data-name=claim_expires_at]")).to_contain_text(str(expires))
    row = panel.row("audio_records_times", rid)
    for name, ms in (("state_entered_at", entered), ("claim_expires_at", expires)):
        at = time.gmtime(ms / 1000)
        expect(row.locator(f"td[data-name={name}]")).to_contain_text(time.strftime("%Y-%m-%d %H:%M:%S", at))
    expect(row.locator("td[data-name=title]")).to_contain_text("Weekly sync")
    panel.shot("times-as-dates")
