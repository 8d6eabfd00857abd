"""The sender's page in a real browser: sign in, upload a real clip and watch it move to done without a
reload, read the transcript with its speakers, play from a line, search, download every format, rename;
a voice note from the microphone; a halted recording resumed; the Russian interface on a phone; a
second sender who sees none of it; a change made while the page opens its live stream; and the page's
weight and time to its first list.

PocketBase and the pipeline are the real ones (the pipeline in a background thread, with a provider
that stops halfway until the test lets it go on); the browser is the system's headless Chromium.
axe-core checks each screen for serious or critical accessibility violations.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sidecar.providers.instant import InstantProvider
from testkit.audio import reencode
from testkit.media import wav_bytes
from testkit.pocketbase import PASSWORD, Caller, PocketBaseServer, running_pocketbase
from tests.browser.panel import Screenshots, chromium_page
from tests.browser.pipeline import pipeline_in_background
from tests.browser.sender_page import FAKE_MICROPHONE, TEXT, PacedProvider, SenderPage
from tests.support.mail import configure_mail, link_in, mail_sink
from tests.support.waiting import eventually_sync

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "sample.ogg"
HALF_SECOND = wav_bytes(0.5)  # what most of these uploads hold: their titles are what the tests read
NEW_PASSWORD = "a-brand-new-secret-7"
STAGES = ("uploaded", "normalized", "submitted", "transcribed")

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def shots(tmp_path: Path) -> Iterator[Screenshots]:
    s = Screenshots(tmp_path / "screenshots")
    s.root.mkdir()
    try:
        yield s
    finally:
        print("\nscreenshots:\n" + "\n".join(f"  {path}" for path in s.saved))


@contextmanager
def page_for(
    pb: PocketBaseServer, tmp_path: Path, shots: Screenshots, name: str = "chromium", **options: Any
) -> Iterator[SenderPage]:
    with chromium_page(tmp_path / name, **options) as page:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield SenderPage(page, pb.url, shots)
        assert errors == [], f"the page raised: {errors}"


@pytest.fixture
def browser(pb: PocketBaseServer, tmp_path: Path, shots: Screenshots) -> Iterator[SenderPage]:
    with page_for(pb, tmp_path, shots, args=FAKE_MICROPHONE) as page:
        yield page


def now_ms() -> int:
    return int(time.time() * 1000)


def halt(service: Caller, rid: str, code: str) -> None:
    resp = service.http.post("/api/pipeline/claim", json={"now": now_ms(), "leases": dict.fromkeys(STAGES, 60_000)})
    assert resp.status_code == 200 and resp.json()["id"] == rid, resp.text
    resp = service.http.post(
        f"/api/pipeline/records/{rid}/settle",
        json={"outcome": "halted", "token": resp.json()["token"], "now": now_ms(), "code": code, "reason": "test"},
    )
    assert resp.status_code == 200, resp.text


def test_a_sender_uploads_watches_it_live_reads_listens_and_downloads(
    pb: PocketBaseServer, browser: SenderPage, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    sender = pb.new_sender()
    page = browser.page
    browser.open()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    browser.accessible("sign-in")
    browser.shot("sign-in")
    browser.sign_in(sender.email, PASSWORD)
    expect(page.get_by_text("No recordings yet")).to_be_visible()
    browser.accessible("empty list")
    browser.mark_loaded()

    provider = PacedProvider()
    with pipeline_in_background(pb, provider, workers=1):
        browser.upload(SAMPLE)
        done_upload = browser.uploads().filter(has_text="sample.ogg")
        expect(done_upload).to_have_attribute("data-phase", "done")
        (rid,) = [item["id"] for item in sender.http.get("/api/transcriber/records").json()["items"]]
        row = browser.row(rid)
        expect(row.locator(".record-title")).to_have_text("sample")  # named after its file

        # Halfway: the row says so, live (the provider holds here until the test lets it go on).
        assert provider.halfway.wait(60)
        expect(row).to_have_attribute("data-activity", "recognizing")
        expect(row.locator(".badge")).to_have_text("Recognizing speech")
        expect(row.locator(".pct")).to_have_text(re.compile(r"^(4[5-9]|5[0-5])%$"))
        expect(row.locator(".meta")).to_contain_text("English")
        browser.shot("recognizing-halfway")
        browser.accessible("list while recognizing")
        provider.release.set()
        expect(row).to_have_attribute("data-activity", "done", timeout=60_000)
        expect(row.locator(".badge")).to_have_text("Done")
        assert browser.still_same_load(), "the list was reloaded"
        browser.shot("done")

    # The transcript beside the audio: speakers, click a line, the player jumps there.
    row.locator(".record-title").click()
    lines = page.locator("#lines li.line")
    expect(lines).to_have_count(4)
    expect(lines.nth(0).locator(".speaker")).to_have_text("Speaker 1")
    expect(lines.nth(1).locator(".speaker")).to_have_text("Speaker 2")
    expect(lines.nth(2).locator(".text")).to_have_text("The numbers look fine.")
    segments = json.loads(sender.http.get(f"/api/transcriber/records/{rid}/transcript?format=json").text)["segments"]
    start = float(segments[2]["start"])
    assert start > 1.0
    player = page.locator("#player")
    expect(player).to_have_attribute("src", re.compile(rf"/api/transcriber/records/{rid}/audio\?token="))
    # (polled from here: the page's content security policy allows no string evaluated in it)
    eventually_sync(lambda: page.evaluate("() => document.querySelector('#player').readyState") >= 1, within=15)
    lines.nth(2).locator("button").click()
    eventually_sync(
        lambda: abs(page.evaluate("() => document.querySelector('#player').currentTime") - start) < 0.6,
        within=15,
        what="the player at the line's start",
    )
    expect(lines.nth(2)).to_have_attribute("aria-current", "true")
    expect(lines.nth(2)).to_have_class(re.compile(r"\bcurrent\b"))
    browser.shot("transcript-playing-from-a-line")
    browser.accessible("transcript")

    # Search within the text.
    page.locator("#search").fill("budget")
    expect(lines.filter(visible=True)).to_have_count(1)
    expect(lines.nth(1).locator("mark")).to_have_text("budget")
    expect(page.locator("#search-count")).to_have_text("1 matching lines")
    page.locator("#search").fill("")
    expect(lines.filter(visible=True)).to_have_count(4)

    # Every export format, byte for byte what the route gives.
    for fmt in ("txt", "srt", "vtt", "json"):
        with page.expect_download() as info:
            page.locator(f"button.download[data-format={fmt}]").click()
        got = Path(info.value.path()).read_bytes()
        want = sender.http.get(f"/api/transcriber/records/{rid}/transcript", params={"format": fmt}).content
        assert got == want, fmt
        assert info.value.suggested_filename == f"sample.{fmt}"
    assert b"Speaker 2: Let us begin with the budget." in want if fmt == "srt" else True

    # Rename.
    page.get_by_role("button", name="Rename").click()
    page.locator("#rename-input").fill("Budget meeting")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#record-title")).to_have_text("Budget meeting")
    assert sender.http.get(f"/api/transcriber/records/{rid}").json()["title"] == "Budget meeting"
    page.get_by_role("link", name=re.compile("All recordings")).click()
    expect(browser.row(rid).locator(".record-title")).to_have_text("Budget meeting")


def test_files_dropped_on_the_page_and_refusals_said_in_words(
    pb: PocketBaseServer, browser: SenderPage, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    sender = pb.new_sender()
    browser.open()
    browser.sign_in(sender.email, PASSWORD)
    text = tmp_path / "notes.txt"
    text.write_text("not audio at all\n" * 10)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    good = tmp_path / "good.wav"
    good.write_bytes(wav_bytes(0.5))
    browser.drop(text, empty, good)
    refused = browser.uploads().filter(has=browser.page.locator("[role=alert]"))
    expect(refused).to_have_count(2)
    expect(browser.uploads().filter(has_text="good.wav")).to_have_attribute("data-phase", "done")
    expect(browser.uploads().filter(has_text="notes.txt")).to_contain_text("notes.txt is not an audio or video file.")
    expect(browser.uploads().filter(has_text="empty.wav")).to_contain_text("empty.wav is empty.")
    browser.shot("refusals")
    browser.accessible("refusals")
    (item,) = sender.http.get("/api/transcriber/records").json()["items"]  # the one that was audio
    assert item["title"] == "good"
    expect(browser.row(item["id"])).to_be_visible()


def test_quota_refusal_says_when_to_retry(tmp_path: Path, shots: Screenshots) -> None:
    from playwright.sync_api import expect

    from sidecar.settings import QuotaSettings

    quotas = QuotaSettings(uploads_per_hour=1, waiting=0, audio_hours_per_day=0)
    with running_pocketbase(tmp_path / "pb", quotas=quotas, max_upload_mb=1) as pb:
        sender = pb.new_sender()
        sender.upload(HALF_SECOND, title="the hour's one")
        big = tmp_path / "big.wav"
        big.write_bytes(wav_bytes(40.0))  # 1.28 MB: over the 1 MB limit, refused before it is sent
        clip = tmp_path / "clip.wav"
        clip.write_bytes(wav_bytes(0.5))
        with page_for(pb, tmp_path, shots) as browser:
            browser.open()
            browser.sign_in(sender.email, PASSWORD)
            browser.upload(big, clip)
            expect(browser.uploads().filter(has_text="big.wav")).to_contain_text(
                "big.wav is too large: the most this service accepts is 1 MB."
            )
            expect(browser.uploads().filter(has_text="clip.wav")).to_contain_text(
                re.compile(r"as many recordings as allowed in an hour\. Try again at \d\d?:\d\d( [AP]M)?\.")
            )
            browser.shot("quota")
            browser.accessible("quota refusal")


def test_a_voice_note_from_the_microphone(pb: PocketBaseServer, browser: SenderPage) -> None:
    from playwright.sync_api import expect

    sender = pb.new_sender()
    page = browser.page
    browser.open()
    browser.sign_in(sender.email, PASSWORD)
    page.get_by_role("button", name="Record a voice note").click()
    expect(page.locator("#recorder [role=timer]")).to_contain_text("Recording 00:0")
    browser.shot("recording")
    browser.accessible("recording a voice note")
    page.wait_for_timeout(2500)
    page.get_by_role("button", name="Stop and send").click()
    note = browser.uploads().filter(has_text="Voice note")
    expect(note).to_have_attribute("data-phase", "done")
    (item,) = sender.http.get("/api/transcriber/records").json()["items"]
    assert item["title"].startswith("Voice note ")
    expect(browser.row(item["id"])).to_be_visible()
    su = pb.superuser()
    (original,) = su.http.get("/api/collections/files/records", params={"filter": f'record="{item["id"]}"'}).json()[
        "items"
    ]
    assert original["role"] == "original" and original["format"] in ("webm", "matroska")
    assert original["size"] > 1000
    audio = sender.http.get(f"/api/transcriber/records/{item['id']}/audio")
    assert audio.status_code == 200 and audio.content[:4] == b"\x1a\x45\xdf\xa3"  # EBML: WebM/Matroska

    # A second one, discarded: nothing is sent.
    page.get_by_role("button", name="Record a voice note").click()
    expect(page.locator("#recorder [role=timer]")).to_be_visible()
    page.get_by_role("button", name="Discard").click()
    expect(page.get_by_role("button", name="Record a voice note")).to_be_visible()
    page.wait_for_timeout(500)
    assert sender.http.get("/api/transcriber/records").json()["totalItems"] == 1


def test_a_halted_recording_is_resumed_from_the_page(pb: PocketBaseServer, browser: SenderPage) -> None:
    from playwright.sync_api import expect

    sender, service, su = pb.new_sender(), pb.service(), pb.superuser()
    too_long = sender.upload(HALF_SECOND, title="Six and a half hours")
    halt(service, too_long, "too_long")
    stuck = sender.upload(SAMPLE.read_bytes(), title="Interview")  # speech: the provider is asked
    halt(service, stuck, "attempts_exhausted")
    browser.open()
    browser.sign_in(sender.email, PASSWORD)
    row = browser.row(stuck)
    expect(row.locator(".badge")).to_have_text("Stopped")
    expect(row.locator(".halt")).to_contain_text("It failed several times in a row.")
    other = browser.row(too_long)
    expect(other.locator(".halt")).to_contain_text("The recording is longer than this service accepts.")
    expect(other.get_by_role("button", name="Resume")).to_have_count(0)
    browser.shot("halted")
    browser.accessible("halted list")
    browser.mark_loaded()
    row.get_by_role("button", name="Resume").click()
    expect(row.locator(".badge")).to_have_text("Queued")
    expect(row.locator(".halt")).to_have_count(0)
    assert browser.still_same_load()
    rec = su.http.get(f"/api/collections/audio_records/records/{stuck}").json()
    assert rec["halted_at"] == "" and rec["attempts"] == 0
    events = su.http.get("/api/collections/record_events/records", params={"filter": f'record="{stuck}"'}).json()
    assert [e["actor"] for e in events["items"] if e["kind"] == "resumed"] == ["sender"]

    # From the recording's own page too, and the workers finish it.
    halt(service, stuck, "stalled")
    expect(row.locator(".badge")).to_have_text("Stopped")
    row.locator(".record-title").click()
    expect(browser.page.locator("#status-card")).to_contain_text("It stopped moving for too long.")
    browser.accessible("halted recording")
    provider = PacedProvider()
    with pipeline_in_background(pb, provider, workers=1) as _:
        browser.page.get_by_role("button", name="Resume").click()
        # (the provider holds halfway; that it got so far is the resume working)
        expect(browser.page.locator("#status-card .badge")).to_have_text("Recognizing speech", timeout=60_000)
        provider.release.set()  # or the held step outlasts the pool's stop


def test_an_amr_voice_note_plays_on_its_page(pb: PocketBaseServer, browser: SenderPage, tmp_path: Path) -> None:
    """A phone's AMR note, which no browser plays: uploaded from the page, its page says the audio will be
    playable shortly; the real pipeline makes the playable copy while it transcribes, and the page's
    player really plays it (play() resolves, the time moves, no error)."""
    from playwright.sync_api import expect

    note = reencode(SAMPLE, tmp_path / "note.amr", codec="libopencore_amrnb", container="amr", rate=8000)
    sender = pb.new_sender()
    page = browser.page
    browser.open()
    browser.sign_in(sender.email, PASSWORD)
    browser.upload(note)
    expect(browser.uploads().filter(has_text="note.amr")).to_have_attribute("data-phase", "done")
    (rid,) = [item["id"] for item in sender.http.get("/api/transcriber/records").json()["items"]]
    browser.row(rid).locator(".record-title").click()
    expect(page.locator("#audio-note")).to_have_text(
        "The audio will be playable here shortly: it is being converted into a format your browser plays."
    )
    expect(page.locator("#player")).to_have_count(0)  # no player for what it cannot play
    browser.shot("amr-before-its-copy")
    browser.accessible("audio not playable yet")

    with pipeline_in_background(pb, InstantProvider(TEXT, language="en"), workers=1):
        expect(page.locator("#lines li.line").first).to_be_visible(timeout=60_000)  # done, live
    assert sender.poll(rid)["playback"] == "copy"
    served = sender.http.get(f"/api/transcriber/records/{rid}/audio")
    assert served.headers["Content-Type"] == "audio/ogg" and served.content[:4] == b"OggS"
    player = page.locator("#player")
    expect(player).to_have_attribute("src", re.compile(rf"/api/transcriber/records/{rid}/audio\?token="))
    expect(page.locator("#audio-note")).to_have_count(0)
    page.evaluate(
        """() => {
            window.__heard = {errors: 0};
            document.querySelector('#player').addEventListener('error', () => window.__heard.errors++);
        }"""
    )
    played = page.evaluate(
        """async () => {
            const audio = document.querySelector('#player');
            try { await audio.play(); return 'playing'; } catch (e) { return e.name + ': ' + e.message; }
        }"""
    )
    assert played == "playing"
    eventually_sync(
        lambda: page.evaluate("() => document.querySelector('#player').currentTime") > 1.0,
        within=15,
        what="the player's time moving",
    )
    state = page.evaluate(
        """() => {
            const a = document.querySelector('#player');
            return {error: a.error && a.error.code, duration: a.duration, paused: a.paused,
                errors: window.__heard.errors};
        }"""
    )
    assert state["error"] is None and state["errors"] == 0 and not state["paused"], state
    assert abs(state["duration"] - 5.8) < 0.2, state
    browser.shot("amr-playing")
    browser.accessible("an amr note playing")


def test_an_over_quota_halt_says_what_to_do_and_is_resumed_once_the_day_allows(
    tmp_path: Path, shots: Screenshots
) -> None:
    from playwright.sync_api import expect

    from sidecar.settings import QuotaSettings

    quotas = QuotaSettings(uploads_per_hour=0, waiting=0, audio_hours_per_day=10 / 3600)
    with running_pocketbase(tmp_path / "pb", quotas=quotas) as pb:
        sender, service, su = pb.new_sender(), pb.service(), pb.superuser()
        over = sender.upload(HALF_SECOND, title="Six seconds over")
        huge = sender.upload(HALF_SECOND, title="Longer than a day's audio")
        held = sender.upload(wav_bytes(6.0), title="Six seconds today")  # reserved at intake
        for rid, measured in ((over, 6000), (huge, 11_000)):  # as normalize measures and halts them
            halt(service, rid, "over_quota")
            pb.sql("UPDATE audio_records SET duration_ms = ?, quota_ms = 0 WHERE id = ?", measured, rid)
        with page_for(pb, tmp_path, shots) as browser:
            browser.open()
            browser.sign_in(sender.email, PASSWORD)
            row = browser.row(over)
            expect(row.locator(".halt")).to_contain_text(
                "It was stopped before being transcribed: it goes over your daily amount of audio"
            )
            expect(row.locator(".halt")).to_contain_text(re.compile(r"You can resume it from .*2\d\d\d"))
            expect(row.get_by_role("button", name="Resume")).to_have_count(0)
            expect(browser.row(huge).locator(".halt")).to_contain_text(
                "It is longer than your whole daily amount of audio, so it cannot be resumed"
            )
            browser.shot("over-quota")
            browser.accessible("over quota")
            row.locator(".record-title").click()
            expect(browser.page.locator("#status-card")).to_contain_text("You can resume it from")
            expect(browser.page.locator("#player")).to_be_visible()  # a WAV: its audio plays as it is
            browser.accessible("over quota, its page")

            # A day later the six seconds held today have left the window: the page offers Resume.
            pb.sql("UPDATE audio_records SET quota_at = quota_at - 90000000 WHERE id = ?", held)
            browser.page.reload()
            card = browser.page.locator("#status-card")
            expect(card).to_contain_text("There is room for it now: resume it.")
            card.get_by_role("button", name="Resume").click()
            expect(card.locator(".badge")).to_have_text("Queued")
            assert su.record(over)["quota_ms"] == 6000 and su.record(over)["halted_at"] == ""


def test_a_sender_changes_their_password_on_the_page(pb: PocketBaseServer, browser: SenderPage) -> None:
    """Signed in: the old password and the new one twice; every other session ends, the page goes on (its
    live list included) with the fresh token; a wrong old password is said in words."""
    from playwright.sync_api import expect

    sender = pb.new_sender()  # a session elsewhere (the sender's command, another device)
    page = browser.page
    browser.open()
    # Signed out, the bar offers neither (a class's display once showed them through `hidden`).
    expect(page.get_by_role("link", name="Change password")).to_be_hidden()
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    browser.sign_in(sender.email, PASSWORD)
    page.get_by_role("link", name="Change password").click()
    expect(page.get_by_role("heading", name="Change your password")).to_be_visible()
    browser.accessible("change password")
    browser.shot("change-password")
    page.get_by_label("Current password").fill("not-my-password")
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("New password again").fill(NEW_PASSWORD + "x")
    page.get_by_role("button", name="Change the password").click()
    expect(page.locator("#password-error")).to_have_text("The two new passwords are not the same.")
    # 71 letters, but 142 bytes of UTF-8 where bcrypt takes 72: said before anything is sent.
    page.get_by_label("New password", exact=True).fill("ж" * 71)
    page.get_by_label("New password again").fill("ж" * 71)
    page.get_by_role("button", name="Change the password").click()
    expect(page.locator("#password-error")).to_have_text(
        "The new password is 142 bytes long; at most 72 are accepted (a letter outside English takes 2 to 4 bytes)."
    )
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("New password again").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change the password").click()
    expect(page.locator("#password-error")).to_have_text("The current password is wrong.")
    browser.accessible("change password refused")
    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_role("button", name="Change the password").click()
    expect(page.locator("#toast")).to_have_text("Your password is changed; your other devices are signed out.")
    browser.listed()
    browser.mark_loaded()
    # Every other session ended; this page goes on, live.
    assert sender.http.get("/api/transcriber/records").status_code == 401
    elsewhere = pb.caller("sender", "users", sender.email, NEW_PASSWORD)
    rid = elsewhere.upload(HALF_SECOND, title="After the change")
    expect(browser.row(rid)).to_be_visible()
    assert browser.still_same_load()
    page.reload()
    expect(browser.row(rid)).to_be_visible()  # the fresh token was kept
    page.get_by_role("button", name="Sign out").click()
    browser.sign_in(sender.email, NEW_PASSWORD)
    expect(browser.row(rid)).to_be_visible()


def test_a_forgotten_password_is_reset_by_mail_from_the_page(
    pb: PocketBaseServer, browser: SenderPage, tmp_path: Path
) -> None:
    """Without mail set up the page says to ask the owner; with it, "Forgot your password?" sends PocketBase's
    reset mail, whose link opens this page's form; the new password signs in, the link serves once."""
    from playwright.sync_api import expect

    sender = pb.new_sender()
    page = browser.page
    browser.open()
    expect(page.locator("#forgot")).to_have_text(
        "Forgot your password? Ask the owner of this service to set a new one."
    )
    expect(page.get_by_role("link", name="Forgot your password?")).to_have_count(0)
    with mail_sink() as sink:
        configure_mail(pb, sink)
        page.reload()
        page.get_by_role("link", name="Forgot your password?").click()
        expect(page.get_by_role("heading", name="Forgot your password?")).to_be_visible()
        browser.accessible("forgot password")
        page.get_by_label("Email").fill(sender.email)
        page.get_by_role("button", name="Send the link").click()
        expect(page.locator("#forgot-sent")).to_contain_text("If an account has this email")
        browser.shot("reset-link-sent")
        mail = sink.wait_for(sender.email, "new password")
    link = link_in(mail, f"{pb.url}/#/reset/")
    page.goto(link)
    expect(page.get_by_role("heading", name="Set a new password")).to_be_visible()
    browser.accessible("set a new password")
    browser.shot("set-a-new-password")
    page.get_by_label("New password", exact=True).fill("short")
    page.get_by_label("New password again").fill("short")
    page.get_by_role("button", name="Set the password").click()
    expect(page.locator("#reset-error")).to_have_text("The new password must be 8 to 71 characters long.")
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("New password again").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Set the password").click()
    expect(page.locator("#signin-notice")).to_have_text("Your new password is set. Sign in with it.")
    browser.accessible("signed out after a reset")
    browser.sign_in(sender.email, NEW_PASSWORD)
    assert sender.http.get("/api/transcriber/records").status_code == 401  # the old sessions ended
    # The link served once.
    page.goto(link)
    page.get_by_label("New password", exact=True).fill("yet-another-one-9")
    page.get_by_label("New password again").fill("yet-another-one-9")
    page.get_by_role("button", name="Set the password").click()
    expect(page.locator("#reset-error")).to_have_text("This link is no longer valid. Ask for a new one.")


def test_the_brief_and_topics_beside_the_transcript(pb: PocketBaseServer, browser: SenderPage) -> None:
    """A brief written by the insights step while the transcript is open shows above it, live; each quote
    plays from its time."""
    from playwright.sync_api import expect

    sender, service = pb.new_sender(), pb.service()
    rid = sender.upload(SAMPLE.read_bytes(), title="Planning")
    with pipeline_in_background(pb, InstantProvider(), workers=1):
        eventually_sync(
            lambda: sender.http.get(f"/api/transcriber/records/{rid}").json()["status"] == "done", within=60
        )
    segments = sender.http.get(f"/api/transcriber/records/{rid}/transcript?format=json").json()["segments"]
    quote_at = float(segments[1]["start"])
    browser.open()
    browser.sign_in(sender.email, PASSWORD)
    browser.row(rid).locator(".record-title").click()
    expect(browser.page.locator("#lines li.line")).to_have_count(len(segments))
    expect(browser.page.locator("#brief")).to_have_count(0)
    browser.mark_loaded()
    # The owner asks for a brief in the panel (insights were off while it ran); the step's answer follows.
    asked = pb.superuser().http.post("/api/collections/insights/records", json={"record": rid, "state": "queued"})
    assert asked.status_code == 200, asked.text
    claim = service.http.post(
        "/api/pipeline/claim", json={"now": now_ms(), "leases": dict.fromkeys(STAGES, 60_000), "insights_lease": 60_000}
    )
    assert claim.status_code == 200 and claim.json()["queue"] == "insights", claim.text
    sentence = "They start with the budget; «итоги» next week."
    resp = service.http.post(
        f"/api/pipeline/insights/{claim.json()['id']}/result",
        json={
            "token": claim.json()["token"],
            "now": now_ms(),
            "brief": sentence,
            "quotes": [{"sentence": sentence, "quote": segments[1]["text"], "start": quote_at, "end": quote_at + 1}],
            "topics": ["Budget", "Планирование"],
            "language": "en",
        },
    )
    assert resp.status_code == 200, resp.text

    card = browser.page.locator("#brief")
    expect(card).to_be_visible(timeout=15_000)
    assert browser.still_same_load(), "the page was reloaded"
    expect(card.locator(".sentence")).to_have_text(sentence)
    expect(card.locator(".topic")).to_have_text(["Budget", "Планирование"])
    eventually_sync(lambda: browser.page.evaluate("() => document.querySelector('#player').readyState") >= 1, within=15)
    card.locator("button.quote").click()
    eventually_sync(
        lambda: abs(browser.page.evaluate("() => document.querySelector('#player').currentTime") - quote_at) < 0.6,
        within=15,
        what="the player at the quote's time",
    )
    browser.shot("brief")
    browser.accessible("brief")


def test_the_russian_interface_on_a_phone(pb: PocketBaseServer, tmp_path: Path, shots: Screenshots) -> None:
    from playwright.sync_api import expect

    sender, service = pb.new_sender(), pb.service()
    rid = sender.upload(HALF_SECOND, title="Планёрка")
    halt(service, rid, "stalled")
    # A finished one with a long transcript, to read on the phone.
    text = " ".join(f"Пункт номер {i} обсуждён." for i in range(1, 41))
    done = sender.upload(SAMPLE.read_bytes(), title="Интервью")
    with pipeline_in_background(pb, InstantProvider(text, language="ru"), workers=1):
        eventually_sync(
            lambda: sender.http.get(f"/api/transcriber/records/{done}").json()["status"] == "done",
            within=60,
            what="the interview done",
        )
    with page_for(pb, tmp_path, shots, locale="ru-RU", viewport=(390, 844), is_mobile=True, has_touch=True) as browser:
        page = browser.page
        browser.open()
        expect(page.get_by_role("heading", name="Вход")).to_be_visible()
        browser.expect_no_horizontal_scroll()
        browser.accessible("вход")
        browser.shot("ru-sign-in")
        browser.sign_in(sender.email, PASSWORD, submit="Войти")
        expect(page.get_by_role("heading", name="Ваши записи")).to_be_visible()
        expect(page.get_by_role("heading", name="Новая запись")).to_be_visible()
        expect(page.locator("label[for=file-input]")).to_have_text("Выбрать файлы")
        expect(browser.row(rid).locator(".badge")).to_have_text("Остановлено")
        expect(browser.row(rid).locator(".halt")).to_contain_text("Обработка слишком долго стояла на месте.")
        expect(browser.row(rid).get_by_role("button", name="Возобновить")).to_be_visible()
        expect(page.locator("#upload-language option").first).to_have_text("Определить автоматически")
        expect(page.locator("#upload-language option[value=ru]")).to_have_text("Русский")
        assert page.evaluate("document.documentElement.lang") == "ru"
        browser.expect_no_horizontal_scroll()
        browser.accessible("список")
        browser.shot("ru-list-on-a-phone")
        # The other language, kept for the next visit.
        page.get_by_role("button", name="English").click()
        expect(page.get_by_role("heading", name="Your recordings")).to_be_visible()
        page.reload()
        expect(page.get_by_role("heading", name="Your recordings")).to_be_visible()
        page.get_by_role("button", name="Русский").click()
        expect(page.get_by_role("heading", name="Ваши записи")).to_be_visible()
        browser.row(rid).locator(".record-title").click()
        expect(page.locator("#status-card")).to_contain_text("Ещё одна попытка может помочь.")
        browser.expect_no_horizontal_scroll()
        browser.shot("ru-halted-recording-on-a-phone")

        # The transcript on the phone: the player stays on screen while the text scrolls under it.
        page.goto(f"{pb.url}/#/r/{done}")
        lines = page.locator("#lines li.line")
        expect(lines).to_have_count(40)
        expect(page.get_by_role("heading", name="Расшифровка")).to_be_visible()
        expect(page.get_by_role("button", name="TXT")).to_be_visible()
        browser.expect_no_horizontal_scroll()
        browser.accessible("расшифровка")
        lines.nth(39).scroll_into_view_if_needed()
        top = page.evaluate("document.querySelector('#player').getBoundingClientRect().top")
        assert page.evaluate("window.scrollY") > 500 and 0 <= top < 100, top
        lines.nth(39).locator("button").click()
        expect(lines.nth(39)).to_have_attribute("aria-current", "true")
        browser.shot("ru-transcript-on-a-phone")


def test_a_second_sender_sees_none_of_it(pb: PocketBaseServer, browser: SenderPage) -> None:
    from playwright.sync_api import expect

    alice, bob, service = pb.new_sender(), pb.new_sender(), pb.service()
    hers = alice.upload(HALF_SECOND, title="Alice's private meeting")
    halt(service, hers, "stalled")
    page = browser.page
    # Alice on this browser first, then she signs out and Bob signs in at the same page.
    browser.open()
    browser.sign_in(alice.email, PASSWORD)
    expect(browser.row(hers)).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("localStorage.getItem('pocketbase_auth')") in (None, "", "null")
    browser.sign_in(bob.email, PASSWORD)
    expect(page.get_by_text("No recordings yet")).to_be_visible()
    expect(page.get_by_text("Alice's private meeting")).to_have_count(0)
    # Her recording by its address: the same as one that does not exist.
    page.goto(f"{pb.url}/#/r/{hers}")
    expect(page.get_by_role("heading", name="There is no such recording.")).to_be_visible()
    # Her routes from his browser, with his token: 404 everywhere, nothing changed.
    answers = page.evaluate(
        """async (id) => {
            const token = JSON.parse(localStorage.getItem('pocketbase_auth')).token;
            const ask = (path, method) => fetch('/api/transcriber/records/' + id + path,
                {method: method || 'GET', headers: {Authorization: token}}).then((r) => r.status);
            return [await ask(''), await ask('/audio'), await ask('/transcript'), await ask('/resume', 'POST')];
        }""",
        hers,
    )
    assert answers == [404, 404, 404, 404]
    assert alice.http.get(f"/api/transcriber/records/{hers}").json()["halted"] is True
    # His page listens, and hears nothing of hers while it moves (and neither does a second client of his).
    page.goto(f"{pb.url}/#/")
    browser.listed()
    heard = page.evaluate(
        """async () => {
            const { default: PocketBase } = await import('/vendor/pocketbase.es.mjs');
            const probe = new PocketBase(location.origin);
            window.__heard = [];
            await probe.collection('record_status').subscribe('*', (e) => window.__heard.push(e.record.id));
            return probe.authStore.isValid;
        }"""
    )
    assert heard is True  # the probe shares the page's sign-in (the same storage)
    assert alice.http.post(f"/api/transcriber/records/{hers}/resume").status_code == 200
    mine = bob.upload(HALF_SECOND, title="Bob's own")
    expect(browser.row(mine)).to_be_visible()  # his own news arrives...
    eventually_sync(lambda: page.evaluate("window.__heard.length") > 0 or None, within=10, what="bob's own event")
    assert hers not in page.evaluate("window.__heard")  # ...hers never
    expect(browser.row(hers)).to_have_count(0)


def test_the_page_keeps_the_newest_status_whatever_order_it_hears_them_in(
    pb: PocketBaseServer, browser: SenderPage
) -> None:
    """Realtime events may arrive out of order (each numbered by ``seq``), and a read that began
    before an event may answer with what preceded it: the page's ledger (latest.js, loaded as the
    page loads it) keeps the newest either way."""
    browser.open()
    outcome = browser.page.evaluate(
        """async () => {
            const { createLatest } = await import('/js/latest.js');
            const latest = createLatest();
            const poll = (progress) => ({ id: 'r1', progress });
            const out = {};
            // The claim (seq 2) arrives after the first progress (seq 3): dropped.
            out.first = latest.hear(poll(0.5), 3);
            out.late = latest.hear(poll(null), 2);
            out.again = latest.hear(poll(0.5), 3);
            out.next = latest.hear(poll(0.6), 4);
            // A list read that began before seq 5 arrived answers with 0.6: seq 5's 0.7 is shown.
            const before = latest.begin();
            out.fifth = latest.hear(poll(0.7), 5);
            out.stale = latest.settle(poll(0.6), before).progress;
            // A read begun after every event heard: its answer stands (it can only be newer).
            out.fresh = latest.settle(poll(0.8), latest.begin()).progress;
            // Another recording's numbers are its own.
            out.other = latest.hear({ id: 'r2', progress: 0.1 }, 1);
            // After a break (the numbering may have started again): heard afresh.
            latest.forget();
            out.restarted = latest.hear(poll(0.9), 1);
            return out;
        }"""
    )
    assert outcome == {
        "first": True,
        "late": False,
        "again": False,
        "next": True,
        "fifth": True,
        "stale": 0.7,
        "fresh": 0.8,
        "other": True,
        "restarted": True,
    }


def test_a_change_made_while_the_page_opens_its_live_stream_is_shown(pb: PocketBaseServer, browser: SenderPage) -> None:
    """The list is first read while the live stream is still being opened: a change that lands between
    that read and the stream's subscription is told to no one, so the page reads its view once more when
    the stream is open (the subscription is held here until the change has been made)."""
    from playwright.sync_api import Route, expect

    sender, service = pb.new_sender(), pb.service()
    rid = sender.upload(HALF_SECOND, title="Standup")
    held: list[Route] = []

    def hold_the_subscription(route: Route) -> None:
        if route.request.method == "POST":  # the subscription; the stream itself (GET) opens as usual
            held.append(route)
        else:
            route.continue_()

    browser.page.route("**/api/realtime", hold_the_subscription)
    browser.open()
    browser.sign_in(sender.email, PASSWORD)
    row = browser.row(rid)
    expect(row.locator(".badge")).to_have_text("Queued")
    # (the route handler runs only while Playwright is called: the evaluate lets it)
    eventually_sync(lambda: browser.page.evaluate("1") == 1 and bool(held), within=15, what="the subscription")
    halt(service, rid, "attempts_exhausted")  # the list was read; the page hears of nothing yet
    for route in held:
        route.continue_()
    browser.page.unroute("**/api/realtime")
    expect(row.locator(".badge")).to_have_text("Stopped", timeout=10_000)
    expect(row.locator(".halt")).to_contain_text("It failed several times in a row.")


def test_page_weight_and_time_to_the_first_list(
    pb: PocketBaseServer, tmp_path: Path, shots: Screenshots, figures: dict[str, str]
) -> None:
    """1,000 recordings for the sender: bytes transferred on the first load (the SDK included) and the
    time from navigation to the first page of the list on screen."""
    from playwright.sync_api import expect

    sender = pb.new_sender()
    body = wav_bytes(0.1)
    with ThreadPoolExecutor(4) as pool:
        ids = list(pool.map(lambda i: sender.upload(body, title=f"Recording {i}"), range(1000)))
    assert sender.http.get("/api/transcriber/records", params={"perPage": 1}).json()["totalItems"] == 1000
    with page_for(pb, tmp_path, shots) as browser:
        page = browser.page
        browser.open()
        browser.sign_in(sender.email, PASSWORD)
        expect(page.locator("#records li.record")).to_have_count(20)
        # A fresh load of a signed-in sender, nothing cached: every byte counted as the network sent it.
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
        sizes: dict[str, int] = {}
        urls: dict[str, str] = {}
        cdp.on("Network.requestWillBeSent", lambda e: urls.__setitem__(e["requestId"], e["request"]["url"]))
        cdp.on("Network.loadingFinished", lambda e: sizes.__setitem__(e["requestId"], int(e["encodedDataLength"])))
        page.reload()
        expect(page.locator("#records li.record")).to_have_count(20)
        first_list_ms = page.evaluate("performance.now()")
        expect(browser.row(ids[-1])).to_be_visible()  # newest first
        expect(page.locator("#pager .range")).to_have_text("1–20 of 1,000")
        page.wait_for_timeout(300)
        total = sum(sizes.values())
        sdk = sum(size for rid, size in sizes.items() if urls.get(rid, "").endswith("pocketbase.es.mjs"))
        browser.shot("a-thousand-recordings")
        figures["sender page weight"] = f"{total / 1024:.1f} KiB over {len(sizes)} requests (SDK {sdk / 1024:.1f} KiB)"
        figures["sender page first list"] = f"{first_list_ms:.0f} ms with 1,000 recordings"
        print(f"\npage weight: {total} bytes ({len(sizes)} requests, SDK {sdk}); first list: {first_list_ms:.0f} ms")
        assert sdk > 40_000  # the SDK itself was counted
        assert total < 200 * 1024
        assert first_list_ms < 5_000


def test_a_recording_without_a_brief_says_so_instead_of_leaving_the_space_empty(
    pb: PocketBaseServer, browser: SenderPage
) -> None:
    """The insights step ends without a brief while the transcript is open: the page says there is none, live,
    in the sender's language."""
    from playwright.sync_api import expect

    sender, service = pb.new_sender(), pb.service()
    rid = sender.upload(SAMPLE.read_bytes(), title="Voice note")
    with pipeline_in_background(pb, InstantProvider(), workers=1):
        eventually_sync(
            lambda: sender.http.get(f"/api/transcriber/records/{rid}").json()["status"] == "done", within=60
        )
    browser.open()
    browser.sign_in(sender.email, PASSWORD)
    browser.row(rid).locator(".record-title").click()
    expect(browser.page.locator("#lines li.line").first).to_be_visible()
    expect(browser.page.locator("#brief")).to_have_count(0)
    browser.mark_loaded()
    asked = pb.superuser().http.post("/api/collections/insights/records", json={"record": rid, "state": "queued"})
    assert asked.status_code == 200, asked.text
    claim = service.http.post(
        "/api/pipeline/claim", json={"now": now_ms(), "leases": dict.fromkeys(STAGES, 60_000), "insights_lease": 60_000}
    )
    assert claim.status_code == 200 and claim.json()["queue"] == "insights", claim.text
    resp = service.http.post(
        f"/api/pipeline/insights/{claim.json()['id']}/result",
        json={
            "token": claim.json()["token"],
            "now": now_ms(),
            "brief": "",
            "topics": [],
            "no_brief": "nothing_usable",
            "no_brief_reason": "the model's first answer gave nothing usable (it proposed no sentence), nor did ...",
        },
    )
    assert resp.status_code == 200, resp.text
    card = browser.page.locator("#brief")
    expect(card).to_be_visible(timeout=15_000)
    assert browser.still_same_load(), "the page was reloaded"
    expect(card.locator(".brief-none")).to_have_text(
        "No brief for this recording. The language model wrote nothing the recording backs."
    )
    browser.page.reload()
    browser.page.evaluate("() => localStorage.setItem('transcriber.lang', 'ru')")
    browser.page.reload()
    expect(browser.page.locator("#brief .brief-none")).to_have_text(
        "Для этой записи нет краткого содержания. Языковая модель не написала ничего, что подтверждает запись."
    )
    browser.shot("no-brief")
