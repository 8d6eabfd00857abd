"""The time left beside the progress bar: estimated on the page from how the progress the record reports
moved while the page watched (js/eta.js), shown once it has moved enough to be read, in words of both
languages, and gone while the progress stands still. The page's clock is Playwright's (``page.clock``):
the test says what time it is when each move arrives."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from testkit.media import wav_bytes
from testkit.pocketbase import PASSWORD, Caller, PocketBaseServer, now_ms
from tests.browser.panel import Screenshots, chromium_page
from tests.browser.sender_page import SenderPage

pytestmark = pytest.mark.timeout(240)


def settle(service: Caller, rid: str, token: str, outcome: str, **body: Any) -> None:
    resp = service.http.post(
        f"/api/pipeline/records/{rid}/settle", json={"token": token, "now": now_ms(), "outcome": outcome, **body}
    )
    assert resp.status_code == 200, resp.text


def recognizing(sender: Caller, service: Caller) -> tuple[str, str]:
    """A recording under recognition (normalized, claimed): its id and the claim's token."""
    rid = sender.upload(wav_bytes(0.5), title="Board meeting")
    settle(service, rid, service.claim(rid)["token"], "advanced", to="normalized")
    return rid, service.claim(rid)["token"]


def test_the_time_left_shows_once_progress_has_moved_and_goes_while_it_stands_still(
    pb: PocketBaseServer, sender: Caller, service: Caller, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    rid, token = recognizing(sender, service)
    settle(service, rid, token, "progressed", progress=0.1)
    t0 = time.time()  # the page's clock starts at the real time: the sign-in's token must be valid on it
    with chromium_page(tmp_path / "chromium") as page:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.clock.set_fixed_time(t0)
        browser = SenderPage(page, pb.url, Screenshots(tmp_path / "screenshots"))
        browser.shots.root.mkdir()
        browser.open()
        browser.sign_in(sender.email, PASSWORD)
        browser.open(f"/#/r/{rid}")
        card = page.locator("#status-card")
        pct, eta = card.locator(".pct"), card.locator(".eta")
        expect(pct).to_have_text("10%")
        expect(eta).to_be_hidden()  # 10 % may have been reached long before the page looked

        def move(progress: float, at: float) -> None:
            page.clock.set_fixed_time(t0 + at)
            settle(service, rid, token, "progressed", progress=progress)
            expect(pct).to_have_text(f"{round(progress * 100)}%")

        move(0.2, 20)
        expect(eta).to_be_hidden()  # the first move seen: nothing to read a rate from yet
        move(0.3, 40)  # 10 % in 20 s, 70 % to go
        expect(eta).to_have_text("About 2 minutes left")
        expect(eta).to_be_visible()
        move(0.35, 60)  # 15 % in 40 s: 65 % takes 173 s
        expect(eta).to_have_text("About 3 minutes left")
        browser.shot("the-time-left")
        page.clock.set_fixed_time(t0 + 100)  # no move for 40 s: the estimate counts down (said again every 5 s)
        expect(eta).to_have_text("About 2 minutes left", timeout=10_000)
        page.clock.set_fixed_time(t0 + 125)  # 65 s without a move, three times its usual gap: not moving
        expect(eta).to_be_hidden(timeout=10_000)
        expect(pct).to_have_text("35%")  # the bar stays: only the estimate goes
        move(0.5, 130)  # moving again: 30 % in 110 s
        expect(eta).to_have_text("About 3 minutes left")
        page.locator("#lang-switch").click()
        expect(eta).to_have_text("Осталось примерно 3 минуты")
        # Done: neither bar nor estimate.
        settle(service, rid, token, "advanced", to="submitted")
        settle(service, rid, service.claim(rid)["token"], "advanced", to="transcribed")
        settle(service, rid, service.claim(rid)["token"], "advanced", to="done")
        expect(page.locator(".eta")).to_have_count(0)
        assert errors == [], f"the page raised: {errors}"


# The page's own modules, loaded as the page loads them, driven with times of the test's choosing.
ESTIMATES = """async () => {
    const eta = await import('/js/eta.js');
    const i18n = await import('/js/i18n.js');
    const s = (...pairs) => pairs.map(([at, progress]) => ({ at: at * 1000, progress }));
    const left = (samples, now) => {
        const v = eta.timeLeft(samples, now * 1000);
        return v === null ? null : Math.round(v);
    };
    const out = {};
    out.none = left([], 0);
    out.one = left(s([0, 0.1]), 5);
    out.tooLittle = left(s([0, 0.1], [20, 0.14]), 20);  // 4 %
    out.tooSoon = left(s([0, 0.1], [9, 0.3]), 9);  // 9 s
    out.atTheMove = left(s([0, 0.1], [20, 0.2]), 20);  // 10 % in 20 s: 80 % takes 160 s
    out.later = left(s([0, 0.1], [20, 0.2]), 30);
    out.stalled = left(s([0, 0.1], [20, 0.2]), 81);  // over 60 s (three gaps of 20 s) without a move
    out.quickGaps = left(s([0, 0.1], [5, 0.15], [10, 0.2]), 39);  // gaps of 5 s: still moving within 30 s
    out.quickStalled = left(s([0, 0.1], [5, 0.15], [10, 0.2]), 41.5);
    out.done = left(s([0, 0.5], [20, 1]), 20);
    // The latest two minutes are read: a slow start no longer counts.
    out.recent = left(s([0, 0], [200, 0.1], [260, 0.2], [320, 0.4]), 320);  // 30 % in 120 s
    const log = eta.createPaceLog();
    const poll = (progress, more) =>
        ({ id: 'r', status: 'normalized', activity: 'recognizing', halted: false, progress, ...more });
    const seen = () => log.samples('r').map((x) => [x.at, x.progress]);
    out.log = [];
    log.note(poll(0.3), 0); out.log.push(seen());  // first seen: no move
    log.note(poll(0.3), 1); out.log.push(seen());
    log.note(poll(0.4), 2); out.log.push(seen());
    log.note(poll(0.4), 3); log.note(poll(0.5), 4); out.log.push(seen());
    log.note(poll(0.55, { activity: 'finding_speakers' }), 5); out.log.push(seen());  // another thing: afresh
    log.note(poll(0.1), 6); out.log.push(seen());  // went back: started over
    log.note(poll(null), 7); out.log.push(seen());
    log.note(poll(0.2), 8); out.log.push(seen());
    log.note(poll(0.2, { halted: true }), 9); out.log.push(seen());
    log.note(poll(0.3), 10); log.note(poll(0.4), 11); log.forget(); out.log.push(seen());
    log.note(poll(0.5), 12); out.log.push(seen());  // after a sign-out: seen for the first time
    const say = (lang, values) => { i18n.setLang(lang); return values.map((v) => eta.leftWords(v)); };
    out.en = say('en', [59, 60, 150, 7 * 60, 13 * 60, 17 * 60 + 40, 62 * 60, 95 * 60, 21 * 3600]);
    out.ru = say('ru', [30, 60, 120, 5 * 60, 9 * 60, 17 * 60 + 40, 3600, 3 * 3600, 5 * 3600, 11 * 3600, 21 * 3600,
        22 * 3600]);
    i18n.setLang('en');
    return out;
}"""


def test_the_estimate_and_its_words(pb: PocketBaseServer, tmp_path: Path) -> None:
    with chromium_page(tmp_path / "chromium") as page:
        page.goto(pb.url + "/")
        out = page.evaluate(ESTIMATES)
    assert {k: v for k, v in out.items() if k not in ("log", "en", "ru")} == {
        "none": None,
        "one": None,
        "tooLittle": None,
        "tooSoon": None,
        "atTheMove": 160,
        "later": 150,
        "stalled": None,
        "quickGaps": 51,  # 80 % at 10 % per 10 s, 29 s of it gone
        "quickStalled": None,
        "done": None,
        "recent": 240,
    }
    assert out["log"] == [
        [],
        [],
        [[2, 0.4]],
        [[2, 0.4], [4, 0.5]],
        [[5, 0.55]],
        [[6, 0.1]],
        [],
        [[8, 0.2]],
        [],
        [],
        [],
    ]
    assert out["en"] == [
        "Less than a minute left",
        "About 1 minute left",
        "About 3 minutes left",
        "About 7 minutes left",
        "About 15 minutes left",
        "About 20 minutes left",
        "About 1 hour left",
        "About 2 hours left",
        "About 21 hours left",
    ]
    assert out["ru"] == [
        "Осталось меньше минуты",
        "Осталась примерно 1 минута",
        "Осталось примерно 2 минуты",
        "Осталось примерно 5 минут",
        "Осталось примерно 9 минут",
        "Осталось примерно 20 минут",
        "Остался примерно 1 час",
        "Осталось примерно 3 часа",
        "Осталось примерно 5 часов",
        "Осталось примерно 11 часов",
        "Остался примерно 21 час",
        "Осталось примерно 22 часа",
    ]
