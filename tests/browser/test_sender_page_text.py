"""The literary text on the sender's page, in the system's headless Chromium: once the service made it,
a toggle beside "Transcript" shows "Text" (paragraphs, fillers and repeats gone, a click plays from a
paragraph), and its downloads (TXT, Markdown, DOCX) are byte for byte what the route gives; so is the
transcript's own DOCX, its words the transcript's txt export. PocketBase and the pipeline are the real
ones."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidecar.providers.instant import InstantProvider
from testkit.pocketbase import PASSWORD, PocketBaseServer
from tests.browser.panel import Screenshots, chromium_page
from tests.browser.pipeline import pipeline_in_background
from tests.browser.sender_page import SenderPage
from tests.support.waiting import eventually_sync

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "sample.ogg"
SAID = "Um, good morning, everyone. Let us let us begin with the budget. Uh, the numbers look fine."

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def browser(pb: PocketBaseServer, tmp_path: Path) -> Iterator[SenderPage]:
    shots = Screenshots(tmp_path / "screenshots")
    shots.root.mkdir()
    with chromium_page(tmp_path / "chromium") as page:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield SenderPage(page, pb.url, shots)
        assert errors == [], f"the page raised: {errors}"


def test_the_text_beside_the_transcript_and_its_docx_download(pb: PocketBaseServer, browser: SenderPage) -> None:
    from docx import Document
    from playwright.sync_api import expect

    sender = pb.new_sender()
    rid = sender.upload(SAMPLE.read_bytes(), title="Budget")
    with pipeline_in_background(pb, InstantProvider(SAID, language="en"), workers=1):
        eventually_sync(lambda: sender.poll(rid)["literary"] == "ready", within=60, what="the literary text made")
    page = browser.page
    browser.open()
    browser.sign_in(sender.email, PASSWORD)
    browser.row(rid).locator(".record-title").click()
    expect(page.locator("#lines li.line").first).to_be_visible()
    toggle = page.get_by_role("group", name="Show")
    expect(toggle.get_by_role("button", name="Transcript")).to_have_attribute("aria-pressed", "true")
    browser.accessible("transcript with its toggle")

    toggle.get_by_role("button", name="Text").click()
    expect(page.locator("#transcript-heading")).to_have_text("Text")
    paragraphs = page.locator("#paragraphs p.paragraph .text")
    expect(paragraphs.first).to_be_visible()
    shown = " ".join(paragraphs.all_inner_texts())
    want = sender.http.get(f"/api/transcriber/records/{rid}/text", params={"format": "json"}).json()
    assert shown == " ".join(p["text"] for p in want["paragraphs"])
    assert shown.startswith("Good morning, everyone. Let us begin with the budget.")
    assert "Um" not in shown and "Uh" not in shown and "us let us" not in shown
    expect(page.locator("#lines")).to_have_count(0)
    browser.accessible("the text")
    browser.shot("text")

    # Its downloads: what the text route gives, named after the recording.
    for fmt in ("docx", "md", "txt"):
        with page.expect_download() as info:
            page.locator(f"button.download[data-of=text][data-format={fmt}]").click()
        got = Path(info.value.path()).read_bytes()
        assert got == sender.http.get(f"/api/transcriber/records/{rid}/text", params={"format": fmt}).content, fmt
        assert info.value.suggested_filename == f"Budget.{fmt}"
        if fmt == "docx":
            words = [p.text for p in Document(io.BytesIO(got)).paragraphs]
            assert words[0] == "Budget" and " ".join(words[1:]) == shown

    # Back to the transcript: its lines and its own downloads.
    toggle.get_by_role("button", name="Transcript").click()
    expect(page.locator("#lines li.line").first).to_be_visible()
    expect(page.locator("button.download[data-of=transcript][data-format=srt]")).to_be_visible()
    # The transcript's Word document (made with the text): what the route gives, its words the txt export's.
    word = page.locator("button.download[data-of=transcript][data-format=docx]")
    expect(word).to_have_attribute("title", "Word document")
    with page.expect_download() as info:
        word.click()
    got = Path(info.value.path()).read_bytes()
    route = f"/api/transcriber/records/{rid}/transcript"
    assert got == sender.http.get(route, params={"format": "docx"}).content
    assert info.value.suggested_filename == "Budget.docx"
    plain = sender.http.get(route, params={"format": "txt"}).text
    assert [p.text for p in Document(io.BytesIO(got)).paragraphs] == ["Budget", *plain.strip().split("\n\n")]
    assert "let us let us begin with the budget" in plain.lower()  # the words as recognized, not the text's
