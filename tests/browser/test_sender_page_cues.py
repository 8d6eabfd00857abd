"""The sender's page shows a transcript as the timed exports time it: on a transcript no provider should
write (unsorted, fractional, missing, textual, reversed and absurd times, empty texts, speaker labels),
the page's lines are the SRT's and the WebVTT's cues, in the same order, from the same times, with the
same words and speakers. The page derives no cues of its own: it shows the JSON export's ``cues``."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.pocketbase import PASSWORD, Caller, PocketBaseServer
from tests.browser.panel import Screenshots, chromium_page
from tests.browser.sender_page import SenderPage
from tests.support.exports import NASTY, exported, finished, parse_srt, vtt_cues

pytestmark = pytest.mark.timeout(240)

# Each line of the transcript as the page shows it.
LINES = """() => Array.from(document.querySelectorAll('#lines li.line'), (li) => ({
    start: Number(li.dataset.start),
    time: li.querySelector('.time').textContent,
    speaker: li.querySelector('.speaker') ? li.querySelector('.speaker').textContent : null,
    text: li.querySelector('.text').textContent,
}))"""


def clock(seconds: float) -> str:
    """The page's time of a line: whole seconds, hours only when there are some."""
    s = int(seconds)
    return (f"{s // 3600}:" if s >= 3600 else "") + f"{s % 3600 // 60:02d}:{s % 60:02d}"


def test_the_pages_lines_are_the_timed_exports_cues(
    pb: PocketBaseServer, sender: Caller, service: Caller, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    rid = finished(sender, service, NASTY, content="whatever was said")
    vtt = vtt_cues(exported(sender, rid, "vtt"))
    srt = parse_srt(exported(sender, rid, "srt"))
    assert len(vtt) == len(srt) == 7  # (the two empty segments are no cue)

    with chromium_page(tmp_path / "chromium") as page:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        shots = Screenshots(tmp_path / "screenshots")
        shots.root.mkdir()
        browser = SenderPage(page, pb.url, shots)
        browser.open()
        browser.sign_in(sender.email, PASSWORD)
        browser.open(f"/#/r/{rid}")
        expect(page.locator("#lines li.line")).to_have_count(len(vtt))
        shown = page.evaluate(LINES)
        browser.shot("a-nasty-transcript")
        assert errors == [], f"the page raised: {errors}"

    # The cues' times are in milliseconds; the page keeps the seconds it was given.
    assert [{**line, "start": round(line["start"], 3)} for line in shown] == [
        {"start": cue["start"], "time": clock(cue["start"]), "speaker": cue["speaker"], "text": cue["text"]}
        for cue in vtt
    ]
    assert [line["start"] for line in shown] == sorted(line["start"] for line in shown)
    assert [round(line["start"], 3) for line in shown] == [start for _, start, _, _ in srt]
