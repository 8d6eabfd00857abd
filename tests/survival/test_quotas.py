"""H4: one sender cannot flood the service. Quotas at intake through the real
server, raced by real parallel uploads; every refusal is a 429 with a code, a
message and a Retry-After, and leaves nothing behind."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import anyio
import httpx
import pytest

from sidecar.providers.instant import InstantProvider
from sidecar.serving.assembly import default_steps
from sidecar.settings import QuotaSettings
from testkit.audio import SPEECH_DIR, long_recording
from testkit.media import wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer, created_ms, now_ms, running_pocketbase
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow

INTAKE = "/api/transcriber/records"


def upload_at_once(http: httpx.Client, n: int, seconds: float = 0.2) -> list[httpx.Response]:
    body = wav_bytes(seconds)
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda _: http.post(INTAKE, files={"file": ("a.wav", body)}), range(n)))


def records_of(pb: PocketBaseServer, owner: str) -> int:
    found = pb.superuser().http.get(
        "/api/collections/audio_records/records", params={"filter": f"owner='{owner}'", "perPage": 1}
    )
    return int(found.json()["totalItems"])


def assert_refused(resp: httpx.Response, code: str, *, most: int) -> int:
    assert resp.status_code == 429, resp.text
    body = resp.json()
    assert body["code"] == code and len(body["message"]) > 20
    retry = int(resp.headers["Retry-After"])
    assert 1 <= retry <= most
    return retry


def test_on_the_defaults_a_burst_of_uploads_stops_at_twenty_waiting(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path, quotas=QuotaSettings()) as pb:
        sender, neighbour = pb.new_sender(), pb.new_sender()
        answers = upload_at_once(sender.http, 30)
        assert sorted(r.status_code for r in answers) == [201] * 20 + [429] * 10
        for refused in (r for r in answers if r.status_code == 429):
            assert_refused(refused, "too_many_waiting", most=60)
        assert records_of(pb, sender.id) == 20  # a refusal writes nothing
        # another sender's queue is their own
        assert neighbour.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.2))}).status_code == 201

        # a halted recording no longer waits: its place is free again
        su = pb.superuser()
        first = next(r.json()["id"] for r in answers if r.status_code == 201)
        assert (
            su.http.patch(
                f"/api/collections/audio_records/records/{first}",
                json={"halted_at": "2026-01-01 00:00:00.000Z", "halt_code": "halted_by_owner", "halt_reason": "hold"},
            ).status_code
            == 200
        )
        assert sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.2))}).status_code == 201
        assert_refused(sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.2))}), "too_many_waiting", most=60)


def test_uploads_per_hour_are_counted_exactly_under_parallel_uploads(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path, quotas=QuotaSettings(uploads_per_hour=7, waiting=0, audio_hours_per_day=0)) as pb:
        sender = pb.new_sender()
        answers = upload_at_once(sender.http, 16)
        assert sorted(r.status_code for r in answers) == [201] * 7 + [429] * 9
        for refused in (r for r in answers if r.status_code == 429):
            # the hour counts from the oldest upload in it, made just now
            assert assert_refused(refused, "too_many_uploads", most=3600) > 3500
        assert records_of(pb, sender.id) == 7


def flac_declaring(path: Path, seconds: float | None) -> bytes:
    """``path`` (a FLAC) with its STREAMINFO claiming ``seconds`` of audio, or (None) saying nothing."""
    data = bytearray(path.read_bytes())
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0  # STREAMINFO first
    rate = (data[18] << 12) | (data[19] << 4) | (data[20] >> 4)
    samples = 0 if seconds is None else round(seconds * rate)
    data[21] = (data[21] & 0xF0) | (samples >> 32 & 0x0F)
    data[22:26] = (samples & 0xFFFFFFFF).to_bytes(4, "big")
    return bytes(data)


def ten_minutes_of_speech(tmp: Path) -> Path:
    """A 10-minute FLAC (a spoken sentence, then silence): a few hundred KB, its length in its header."""
    path = tmp / "meeting.flac"
    long_recording(path, 600, [(1.0, SPEECH_DIR / "fox.ogg")])
    return path


def run_until_settled(pb: PocketBaseServer, owner: str, n: int, *, workers: int = 2) -> list[dict[str, Any]]:
    """Runs the pipeline until each of the sender's ``n`` recordings is done or halted; their rows."""
    su = pb.superuser()

    def rows() -> list[dict[str, Any]]:
        found = su.http.get(
            "/api/collections/audio_records/records", params={"filter": f"owner='{owner}'", "perPage": 100}
        ).json()["items"]
        return cast(list[dict[str, Any]], found)

    async def drain() -> None:
        async with running_sidecar(pb, default_steps(), provider=InstantProvider(), workers=workers) as pool:
            async with pool_running(pool):
                await eventually(
                    lambda: (
                        len(settled := [r for r in rows() if r["state"] == "done" or r["halted_at"]]) == n and settled
                    ),
                    within=180,
                )

    anyio.run(drain)
    return rows()


def audio_spent(pb: PocketBaseServer, record_ids: list[str]) -> tuple[float, int]:
    """Seconds of audio normalized (to be recognized) for these records, and their recognition attempts."""
    su = pb.superuser()
    seconds, attempts = 0.0, 0
    for rid in record_ids:
        files = su.http.get(
            "/api/collections/files/records", params={"filter": f"record='{rid}' && role='normalized'"}
        ).json()["items"]
        seconds += max((f["offset_ms"] + f["duration_ms"] for f in files), default=0) / 1000
        attempts += su.http.get(
            "/api/collections/recognition_attempts/records", params={"filter": f"record='{rid}'"}
        ).json()["totalItems"]
    return seconds, attempts


# Only the day's audio limits: 15 minutes in 24 hours.
A_QUARTER_HOUR_A_DAY = QuotaSettings(uploads_per_hour=0, waiting=0, audio_hours_per_day=0.25)


def ten_at_once(sender: Caller, meeting: bytes) -> list[httpx.Response]:
    """``meeting`` uploaded ten times in parallel by ``sender``: the ten answers."""
    with ThreadPoolExecutor(10) as pool:
        return list(pool.map(lambda _: sender.http.post(INTAKE, files={"file": ("meeting.flac", meeting)}), range(10)))


def test_a_burst_of_long_recordings_cannot_spend_more_than_the_days_audio(tmp_path: Path) -> None:
    """The probe's burst: with 15 minutes a day, ten parallel 10-minute uploads were all accepted and
    recognized (1.7 h), only normalized audio counting. Now each reserves the length its header
    declares in the transaction that creates it: one fits, nine are refused at once."""
    meeting = ten_minutes_of_speech(tmp_path).read_bytes()
    with running_pocketbase(tmp_path / "pb", quotas=A_QUARTER_HOUR_A_DAY) as pb:
        sender = pb.new_sender()
        answers = ten_at_once(sender, meeting)
        assert sorted(r.status_code for r in answers) == [201] + [429] * 9
        for refused in (r for r in answers if r.status_code == 429):
            # space returns when the accepted recording leaves the 24-hour window
            assert assert_refused(refused, "too_much_audio", most=86400) > 86000
            assert refused.json()["message"] == (
                "You have sent 10 minutes of audio in the last 24 hours and this recording is 10 minutes long; "
                "the limit is 15 minutes."
            )
        assert records_of(pb, sender.id) == 1
        rows = run_until_settled(pb, sender.id, 1)
        assert [r["state"] for r in rows] == ["done"]
        spent, _ = audio_spent(pb, [r["id"] for r in rows])
        assert spent == 600.0
        # a recording longer than a whole day's quota is refused for what it is
        hour = tmp_path / "hour.flac"
        long_recording(hour, 3600, [(1.0, SPEECH_DIR / "fox.ogg")])
        too_long = sender.http.post(INTAKE, files={"file": ("hour.flac", hour.read_bytes())})
        assert_refused(too_long, "too_much_audio", most=86400)
        assert too_long.json()["message"] == (
            "This recording is 1 hour long; the limit is 15 minutes of audio in 24 hours."
        )


def test_recordings_whose_header_says_nothing_are_measured_before_any_recognition(tmp_path: Path) -> None:
    """Ten parallel 10-minute recordings whose headers declare no length: accepted on a guess from
    their size (a few hundred KB of FLAC), measured at normalize, and halted over_quota there,
    before anything is sent to be recognized, once they would break 15 minutes a day."""
    meeting = flac_declaring(ten_minutes_of_speech(tmp_path), None)
    with running_pocketbase(tmp_path / "pb", quotas=A_QUARTER_HOUR_A_DAY) as pb:
        sender = pb.new_sender()
        answers = ten_at_once(sender, meeting)
        assert [r.status_code for r in answers] == [201] * 10
        rows = run_until_settled(pb, sender.id, 10)
        done = [r for r in rows if r["state"] == "done"]
        halted = [r for r in rows if r["halted_at"]]
        assert len(done) == 1 and len(halted) == 9
        assert {(r["halt_code"], r["state"]) for r in halted} == {("over_quota", "uploaded")}
        assert "the limit is 15 minutes of audio in 24 hours" in halted[0]["halt_reason"]
        assert sender.http.get(f"{INTAKE}/{halted[0]['id']}").json()["halt_code"] == "over_quota"
        # nothing of the halted ones was cut or sent; the day's audio is within the quota
        assert audio_spent(pb, [r["id"] for r in halted]) == (0.0, 0)
        spent, attempts = audio_spent(pb, [r["id"] for r in rows])
        assert spent == 600.0 and attempts >= 1
        assert sum(r["quota_ms"] for r in rows) == 600_000


TEN_SECONDS_A_DAY = QuotaSettings(uploads_per_hour=0, waiting=0, audio_hours_per_day=10 / 3600)


def six_seconds_and_a_header_saying_two(tmp_path: Path) -> tuple[Path, bytes]:
    """A 6-second recording (a FLAC file), and the same audio in a FLAC whose header says 2 seconds."""
    short = tmp_path / "short.flac"
    long_recording(short, 6, [(0.5, SPEECH_DIR / "fox.ogg")])
    return short, flac_declaring(short, 2)


def test_the_decoded_length_replaces_what_the_header_declared(tmp_path: Path) -> None:
    """A header that says 2 seconds of a 6-second recording reserves 2; normalize charges the 6 it
    decodes, and a recording whose true length breaks the quota halts over_quota, charged nothing."""
    short, liar = six_seconds_and_a_header_saying_two(tmp_path)
    with running_pocketbase(tmp_path / "pb", quotas=TEN_SECONDS_A_DAY) as pb:
        sender, su = pb.new_sender(), pb.superuser()
        first = sender.http.post(INTAKE, files={"file": ("liar.flac", liar)})
        second = sender.http.post(INTAKE, files={"file": ("honest.flac", short.read_bytes())})
        assert (first.status_code, second.status_code) == (201, 201)  # 2 + 6 reserved of 10
        refused = sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(6.0))})
        assert assert_refused(refused, "too_much_audio", most=86400) > 86000
        assert refused.json()["message"].startswith("You have sent 8 seconds of audio in the last 24 hours")

        rows = {r["id"]: r for r in run_until_settled(pb, sender.id, 2, workers=1)}
        liar_row, honest_row = rows[first.json()["id"]], rows[second.json()["id"]]
        # oldest first: the liar measures 6 s beside the other's 6 s reserved, 12 > 10
        assert (liar_row["halt_code"], liar_row["quota_ms"]) == ("over_quota", 0)
        assert (honest_row["state"], honest_row["quota_ms"]) == ("done", 6000)
        journal = su.http.get(
            "/api/collections/record_events/records", params={"filter": f"record='{liar_row['id']}'"}
        ).json()["items"]
        assert any(e["kind"] == "halted" and "over_quota" in e["outcome_text"] for e in journal)
        # what was measured counts now: 6 s sent, 4 s left
        assert sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(4.0))}).status_code == 201
        refused = sender.http.post(INTAKE, files={"file": ("a.wav", wav_bytes(0.5))})
        assert refused.json()["message"].startswith("You have sent 10 seconds of audio")


def aged(pb: PocketBaseServer, owner: str, hours: float) -> None:
    """The sender's recordings as if uploaded (and charged) ``hours`` earlier: the day's window moved on."""
    shift = round(hours * 3_600_000)
    pb.sql(
        "UPDATE audio_records SET quota_at = quota_at - ?, "
        "created = strftime('%Y-%m-%d %H:%M:%f', julianday(created) - ? / 86400000.0) || 'Z' WHERE owner = ?",
        shift,
        shift,
        owner,
    )


def test_an_over_quota_halt_is_resumed_by_its_sender_once_the_days_audio_allows_it(tmp_path: Path) -> None:
    """Two recordings whose headers say 2 s and hold 6 halt over_quota beside a 6-second one (10 s a day).
    Their sender's resume is refused with 429 and the time it will fit while the day is full, changing
    nothing; once the window has moved on it is taken, and it holds its 6 s from that moment: the other
    one, resumed next, no longer fits, however long ago it was uploaded."""
    short, liar = six_seconds_and_a_header_saying_two(tmp_path)
    with running_pocketbase(tmp_path / "pb", quotas=TEN_SECONDS_A_DAY) as pb:
        sender, su = pb.new_sender(), pb.superuser()
        first, second = sender.upload(liar, name="liar.flac"), sender.upload(liar, name="liar2.flac")
        honest = sender.upload(short)
        rows = {r["id"]: r for r in run_until_settled(pb, sender.id, 3, workers=1)}
        assert [rows[i]["halt_code"] for i in (first, second)] == ["over_quota", "over_quota"]
        assert rows[honest]["state"] == "done" and rows[first]["duration_ms"] == 6000

        # The day is full: the poll says when it will fit, and a resume is refused, changing nothing.
        polled = sender.poll(first)
        assert polled["resumable"] is False
        fits_at = created_ms({"created": polled["resumable_at"]})
        assert abs(fits_at - (rows[honest]["quota_at"] + 86_400_000)) < 2000
        refused = sender.http.post(f"{INTAKE}/{first}/resume")
        retry = assert_refused(refused, "too_much_audio", most=86400)
        assert abs(retry - (fits_at - now_ms()) / 1000) < 5
        assert refused.json()["message"] == (
            "You have sent 6 seconds of audio in the last 24 hours and this recording is 6 seconds long; "
            "the limit is 10 seconds."
        )
        assert su.record(first) == rows[first] | {"updated": su.record(first)["updated"]}
        assert sender.poll(first)["halted"] is True
        journal = su.http.get("/api/collections/record_events/records", params={"filter": f"record='{first}'"})
        assert not [e for e in journal.json()["items"] if e["kind"] == "resumed"]

        # A day later (all three uploaded 25 hours ago): it fits, and is taken.
        aged(pb, sender.id, 25)
        assert sender.poll(first)["resumable"] is True and sender.poll(first)["resumable_at"] is None
        taken = sender.http.post(f"{INTAKE}/{first}/resume")
        assert taken.status_code == 200, taken.text
        assert taken.json()["halted"] is False and taken.json()["activity"] == "queued"
        resumed = su.record(first)
        assert resumed["quota_ms"] == 6000 and abs(resumed["quota_at"] - now_ms()) < 5000
        # It counts today, not on the day it was uploaded: the other no longer fits.
        assert sender.poll(second)["resumable"] is False
        assert assert_refused(sender.http.post(f"{INTAKE}/{second}/resume"), "too_much_audio", most=86400) > 86000

        # Measured and checked again at normalize: within the quota, it is done.
        rows = {r["id"]: r for r in run_until_settled(pb, sender.id, 3, workers=1)}
        assert (rows[first]["state"], rows[first]["halted_at"], rows[first]["quota_ms"]) == ("done", "", 6000)
        assert rows[second]["halt_code"] == "over_quota"
