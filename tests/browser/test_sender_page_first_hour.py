"""The sender's page where a newcomer stumbled: ``#/forgot`` opened directly without mail, the
password's bounds, the language list's names, the record page's found language and its speakers in
Russian, live, and its "reconnecting" sign while the server is down."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from testkit.pocketbase import PASSWORD, PocketBaseServer
from tests.browser.panel import Screenshots, chromium_page
from tests.browser.pipeline import pipeline_in_background
from tests.browser.sender_page import PacedProvider, SenderPage

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "sample.ogg"

pytestmark = pytest.mark.timeout(240)


@contextmanager
def page_for(pb: PocketBaseServer, tmp_path: Path, **options: Any) -> Iterator[SenderPage]:
    shots = Screenshots(tmp_path / "screenshots")
    shots.root.mkdir(exist_ok=True)
    with chromium_page(tmp_path / "chromium", **options) as page:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield SenderPage(page, pb.url, shots)
        assert errors == [], f"the page raised: {errors}"


def test_forgot_without_mail_the_password_bounds_and_the_language_names(pb: PocketBaseServer, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    sender = pb.new_sender()
    with page_for(pb, tmp_path) as browser:
        page = browser.page
        # #/forgot opened directly (a bookmark, a link passed on) where no mail is set up: nothing is sent,
        # and the page says so and what to do.
        browser.open("/#/forgot")
        notice = page.locator("#forgot-no-mail")
        expect(notice).to_contain_text("This service sends no mail")
        expect(notice).to_contain_text("transcriber user password")
        expect(page.get_by_text("on its way")).to_have_count(0)
        expect(page.get_by_role("button", name="Send the link")).to_have_count(0)
        browser.accessible("forgot without mail")

        # The hint and the error name the same bounds.
        browser.open("/")
        browser.sign_in(sender.email, PASSWORD)
        page.get_by_role("link", name="Change password").click()
        expect(page.locator("#new-password-hint")).to_have_text(
            "8 to 71 characters. Your other devices will be signed out."
        )
        page.get_by_label("Current password").fill(PASSWORD)
        page.get_by_label("New password", exact=True).fill("short")
        page.get_by_label("New password again").fill("short")
        page.get_by_role("button", name="Change the password").click()
        expect(page.locator("#password-error")).to_have_text("The new password must be 8 to 71 characters long.")

        # Every language offered by its name, the two Chromium's own data does not name included.
        page.get_by_role("link", name=re.compile("All recordings|transcriber")).first.click()
        options = page.locator("#upload-language option")
        expect(options.first).to_have_text("Find it automatically")
        expect(page.locator("#upload-language option[value=ba]")).to_have_text("Bashkir")
        expect(page.locator("#upload-language option[value=bo]")).to_have_text("Tibetan")
        pairs = options.evaluate_all("os => os.map(o => [o.value, o.textContent])")
        raw = [value for value, text in pairs if value and text.strip().lower() == value.lower()]
        assert len(pairs) > 90 and raw == [], f"shown as codes: {raw}"
        page.get_by_role("button", name="Русский").click()
        expect(page.locator("#upload-language option[value=ba]")).to_have_text("Башкирский")


def test_the_record_page_in_russian_live_with_its_speakers_and_the_reconnecting_sign(
    pb: PocketBaseServer, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    sender = pb.new_sender()
    rid = sender.upload(SAMPLE.read_bytes(), name="sample.ogg", title="Планёрка")
    provider = PacedProvider()
    with page_for(pb, tmp_path, locale="ru-RU") as browser:
        page = browser.page
        browser.open("/")
        browser.sign_in(sender.email, PASSWORD, submit="Войти")
        page.goto(f"{pb.url}/#/r/{rid}")
        expect(page.locator("#record-title")).to_have_text("Планёрка")
        meta = page.locator("#record-head .meta")
        expect(meta).not_to_contain_text("Английский")
        expect(page.locator("#live")).to_have_text("Обновляется само")
        browser.mark_loaded()
        with pipeline_in_background(pb, provider, workers=1):
            assert provider.halfway.wait(60)
            # The language found while recognition runs: on the page at once, no reload.
            expect(meta).to_contain_text("Английский")
            assert browser.still_same_load()
            browser.shot("language-found-live")
            provider.release.set()
            lines = page.locator("#lines li.line")
            expect(lines).to_have_count(4, timeout=60_000)
        # Speaker labels in the page's language.
        expect(lines.nth(0).locator(".speaker")).to_have_text("Говорящий 1")
        expect(lines.nth(1).locator(".speaker")).to_have_text("Говорящий 2")
        page.locator("#search").fill("Говорящий 2")
        expect(lines.filter(visible=True)).to_have_count(2)
        page.locator("#search").fill("")
        browser.shot("speakers-in-russian")

        # The server goes away for a while: the page says it is reconnecting, then that it is live again.
        restart = threading.Thread(target=pb.restart, kwargs={"down_for": 6})
        restart.start()
        try:
            expect(page.locator("#live")).to_have_text("Переподключаемся…", timeout=15_000)
            browser.shot("reconnecting")
        finally:
            restart.join(60)
        expect(page.locator("#live")).to_have_text("Обновляется само", timeout=30_000)
        assert browser.still_same_load()
