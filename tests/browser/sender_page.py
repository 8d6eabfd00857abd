"""The sender's page (PocketBase's public folder, ``/``) as a person uses it, in the system's headless
Chromium; a provider whose recognition stops halfway until the test lets it go on; axe-core on each
screen (the ``axe-playwright-python`` package carries it)."""

from __future__ import annotations

import base64
import threading
from pathlib import Path
from typing import Any

import anyio

from sidecar.activity import Activity
from sidecar.providers.base import OnProgress, Started, StartRequest
from sidecar.providers.instant import InstantProvider
from sidecar.transcript.model import Transcript
from tests.browser.panel import Screenshots

try:
    from playwright.sync_api import Locator, Page, expect
except ImportError:  # the tests skip: see panel.missing_browser()
    pass

# Headless Chromium's own microphone: a beep, allowed without asking.
FAKE_MICROPHONE = ("--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream")
TEXT = "Good morning, everyone. Let us begin with the budget. The numbers look fine. Any questions?"
# Impacts that fail a screen (axe-core's scale: minor, moderate, serious, critical).
FAILING_IMPACTS = ("serious", "critical")


class PacedProvider(InstantProvider):
    """The instant provider with two speakers taking turns, whose recognition stops halfway (half
    the audio reported, "recognizing") until ``release`` is set, so a test can watch it move."""

    def __init__(self) -> None:
        super().__init__(TEXT, language="en")
        self.halfway = threading.Event()
        self.release = threading.Event()

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        if request.report is not None:
            request.report(request.duration_ms / 2000)
        if request.found_language is not None:
            request.found_language("en")
        if request.doing is not None:
            request.doing(Activity.RECOGNIZING)  # written at once, with the progress and the language
        self.halfway.set()
        await anyio.to_thread.run_sync(self.release.wait, 60)
        return await super().start(request, on_progress)

    def transcript(self, duration: float) -> Transcript:
        out = super().transcript(duration)
        for i, segment in enumerate(out.segments):
            segment.speaker = f"Speaker {i % 2 + 1}"
        return out


def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings on the page as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [v for v in results.response["violations"] if v.get("impact") in FAILING_IMPACTS]


class SenderPage:
    """The sender's page, one action at a time."""

    def __init__(self, page: Page, base_url: str, shots: Screenshots) -> None:
        self.page = page
        self.base_url = base_url.rstrip("/")
        self.shots = shots
        self.checked: list[str] = []  # the screens axe-core found clean

    def shot(self, name: str) -> Path:
        return self.shots.take(self.page, name)

    def accessible(self, screen: str) -> None:
        found = serious_violations(self.page)
        assert found == [], (screen, [(v["id"], v["impact"], [n["target"] for n in v["nodes"]]) for v in found])
        self.checked.append(screen)

    def open(self, path: str = "/") -> None:
        self.page.goto(self.base_url + path)

    def sign_in(self, email: str, password: str, *, submit: str = "Sign in") -> None:
        self.page.locator("#email").fill(email)
        self.page.locator("#password").fill(password)
        self.page.get_by_role("button", name=submit).click()
        self.listed()

    def listed(self) -> Locator:
        """The list of recordings, once loaded."""
        records = self.page.locator("#records[aria-busy=false]")
        records.wait_for()
        return records

    def row(self, rid: str) -> Locator:
        return self.page.locator(f'li.record[data-id="{rid}"]')

    def upload(self, *files: Path) -> None:
        self.page.locator("#file-input").set_input_files([str(f) for f in files])

    def drop(self, *files: Path) -> None:
        """Drags ``files`` from outside the browser and drops them on the drop area (as a file manager would)."""
        payload = [(f.name, base64.b64encode(f.read_bytes()).decode()) for f in files]
        self.page.evaluate(
            """(files) => {
                const dt = new DataTransfer();
                for (const [name, b64] of files) {
                    dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name));
                }
                const zone = document.getElementById('drop');
                for (const kind of ['dragenter', 'dragover', 'drop']) {
                    zone.dispatchEvent(new DragEvent(kind, {bubbles: true, cancelable: true, dataTransfer: dt}));
                }
            }""",
            payload,
        )

    def uploads(self) -> Locator:
        return self.page.locator("#uploads li.upload")

    def mark_loaded(self) -> None:
        """Marks this load of the page: ``still_same_load`` is false after a reload."""
        self.page.evaluate("window.__sameLoad = true")

    def still_same_load(self) -> bool:
        return bool(self.page.evaluate("window.__sameLoad === true"))

    def expect_no_horizontal_scroll(self) -> None:
        width = self.page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], f"the page is wider than the screen: {width[0]} > {width[1]}"


__all__ = ["FAKE_MICROPHONE", "PacedProvider", "SenderPage", "expect", "serious_violations"]
