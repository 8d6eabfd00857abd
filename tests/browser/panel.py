"""The admin panel as the owner uses it: a headless system Chromium, driven with Playwright.

Only the browser shipped by the system (``/usr/bin/chromium``, the Debian
package) is used: nothing is downloaded. Selectors follow what the stock panel
renders: named form inputs in the record dialog (``[data-pb=recordUpsertModal]``),
one ``td[data-name=<field>]`` per list column (``[data-pb=recordsListTable]``).
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    from playwright.sync_api import Locator, Page, Response, expect, sync_playwright
except ImportError:  # the tests skip: see missing_browser()
    pass

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 20_000
SCREENSHOTS_ENV = "TRANSCRIBER_SCREENSHOTS"


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (it is in the dev extras: pip install -e '.[dev]')"
    if not CHROMIUM.exists():
        return f"no system Chromium at {CHROMIUM} (apt-get install -y chromium)"
    return None


@dataclass
class Screenshots:
    """Saves each screenshot under ``root`` and, when TRANSCRIBER_SCREENSHOTS names a folder, there too."""

    root: Path
    saved: list[Path] = field(default_factory=list)
    taken: int = 0

    def take(self, page: Page, name: str) -> Path:
        self.taken += 1
        path = self.root / f"{self.taken:02d}-{name}.png"
        page.screenshot(path=path, animations="disabled")
        self.saved.append(path)
        extra = os.environ.get(SCREENSHOTS_ENV)
        if extra:
            Path(extra).mkdir(parents=True, exist_ok=True)
            self.saved.append(Path(shutil.copy2(path, Path(extra) / path.name)))
        return path


@contextmanager
def chromium_page(
    profile: Path,
    *,
    locale: str = "en-US",
    viewport: tuple[int, int] = (1600, 1000),
    args: tuple[str, ...] = (),
    **options: Any,
) -> Iterator[Page]:
    """A page in a fresh headless Chromium with an empty profile, on UTC, sized like a laptop screen
    (or as asked: ``locale``, ``viewport``, more command-line ``args``, Playwright context options)."""
    profile.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            args=[*CHROMIUM_ARGS, *args],
            headless=True,
            viewport={"width": viewport[0], "height": viewport[1]},
            timezone_id="UTC",
            locale=locale,
            **options,
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            yield page
        finally:
            context.close()


class Panel:
    """PocketBase's admin panel at /_/, one action at a time, as a person would do it."""

    def __init__(self, page: Page, base_url: str, shots: Screenshots) -> None:
        self.page = page
        self.base_url = base_url.rstrip("/")
        self.shots = shots

    def shot(self, name: str) -> Path:
        return self.shots.take(self.page, name)

    def login(self, email: str, password: str) -> None:
        self.page.goto(f"{self.base_url}/_/")
        form = self.page.locator("form[data-pb=authWithPasswordForm]")
        form.locator("input[name=identity]").fill(email)
        form.locator("input[name=password]").fill(password)
        form.get_by_role("button", name="Login").click()
        self.page.locator("[data-pb=recordsListTable]").wait_for()

    def rows(self, collection: str, search: str = "") -> Locator:
        """The rows of a collection's records list, with ``search`` (filter syntax) in its search bar."""
        self.page.goto(f"{self.base_url}/_/#/collections?{urllib.parse.urlencode({'collection': collection})}")
        bar = self.page.locator("form.searchbar")
        box = bar.locator(".code-editor-content")
        box.fill(search)
        box.press("Enter")
        expect(box).to_have_text(search)
        return self.page.locator("[data-pb=recordsListTable] tbody tr.handle")

    def rows_of(self, collection: str, record_id: str, *, at_least: int = 1) -> Locator:
        """The rows of ``collection`` about one recording (its journal, files, attempts or texts)."""
        rows = self.rows(collection, f"record={json.dumps(record_id)}").filter(
            has=self.page.locator("td[data-name=record]", has_text=record_id)
        )
        rows.nth(at_least - 1).wait_for()
        return rows

    def row(self, collection: str, record_id: str, *, search: str | None = None) -> Locator:
        """A record's row in its list, searched for by id unless ``search`` says otherwise."""
        search = f"id={json.dumps(record_id)}" if search is None else search
        row = self.rows(collection, search).filter(has=self.page.locator("td[data-name=id]", has_text=record_id))
        row.wait_for()
        return row

    def open(self, collection: str, record_id: str) -> Locator:
        """Opens a record's edit dialog by clicking its row in the list."""
        self.row(collection, record_id).locator("td[data-name=id]").click()
        modal = self.modal()
        modal.locator("textarea[name=id]").wait_for(state="attached")
        return modal

    def modal(self) -> Locator:
        return self.page.locator("[data-pb=recordUpsertModal][data-modal-state=open]")

    def set_date(self, modal: Locator, name: str, value: str) -> None:
        """Types into (or, with "", clears) a date field: the panel takes the value when the field loses focus."""
        date = modal.locator(f"input[name={name}]")
        date.fill(value)
        date.blur()
        if not value:
            expect(date).to_have_value("")
        expect(modal.get_by_role("button", name="Save changes")).to_be_enabled()

    def save(self, modal: Locator, *, closes: bool = True) -> Response:
        """Clicks Save; a save the server refuses leaves the dialog open (``closes=False``)."""
        with self.page.expect_response(lambda r: r.request.method == "PATCH") as response:
            modal.get_by_role("button", name="Save changes").click()
        if closes:
            modal.wait_for(state="detached")
        return response.value

    def delete(self, modal: Locator) -> Response:
        modal.get_by_role("button", name="More options").click()
        modal.get_by_role("button", name="Delete", exact=True).click()
        confirm = self.page.get_by_role("button", name="Delete record", exact=True)
        with self.page.expect_response(lambda r: r.request.method == "DELETE") as response:
            confirm.click()
        confirm.wait_for(state="hidden")
        return response.value
