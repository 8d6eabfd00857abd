"""Bounds on the sender's surface, on a real PocketBase: per-route read timeouts, byte
bounds before any work, JSON on every 4xx, titles without control characters, passwords counted in
bytes as bcrypt counts them, and the file token never in the request log."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.media import wav_bytes
from testkit.pocketbase import PASSWORD, Caller, PocketBaseServer, running_pocketbase

AUDIO = wav_bytes(0.5)


def _trickled(data: bytes, seconds: float, steps: int = 20) -> Iterator[bytes]:
    """``data`` sent evenly over ``seconds`` (a slow line)."""
    size = max(1, len(data) // steps)
    for i in range(0, len(data), size):
        time.sleep(seconds / steps)
        yield data[i : i + size]


# --- read timeouts per route ------------------------------------------------------------------


def test_only_the_upload_route_reads_a_body_for_longer_than_pocketbases_timeout(tmp_path: Path) -> None:
    """A slow anonymous body (a sign-in) is cut at ``[pocketbase] read_timeout`` (2 s here), while an upload
    as slow goes through within ``[intake] read_timeout`` (30 s here): before, every route had the upload's."""
    with running_pocketbase(tmp_path, read_timeout=timedelta(seconds=30), body_timeout=timedelta(seconds=2)) as server:
        login = json.dumps({"identity": "someone@example.com", "password": "x" * 40}).encode()
        started = time.monotonic()
        try:
            resp: httpx.Response | None = httpx.post(
                f"{server.url}/api/collections/users/auth-with-password",
                content=_trickled(login, 6.0),
                headers={"Content-Type": "application/json", "Content-Length": str(len(login))},
                timeout=30,
            )
        except httpx.TransportError:
            resp = None
        cut_after = time.monotonic() - started
        assert resp is None or resp.status_code >= 400, resp.text
        assert cut_after < 5.0, f"the slow sign-in body was read for {cut_after:.1f} s"

        sender = server.new_sender()
        boundary = "slow-upload"
        body = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.wav"\r\n\r\n'.encode()
            + AUDIO
            + f"\r\n--{boundary}--\r\n".encode()
        )
        upload = sender.http.post(
            "/api/transcriber/records",
            content=_trickled(body, 4.0),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}", "Content-Length": str(len(body))},
            timeout=30,
        )
        assert upload.status_code == 201, upload.text


# --- byte bounds before any work --------------------------------------------------------------

TEN_MB = "p" * (10 * 1024 * 1024)


def test_a_ten_megabyte_password_is_refused_by_its_size_before_any_work(pb: PocketBaseServer, sender: Caller) -> None:
    """It cost 6.5 s of CPU to be told it was too long; now 413 at once, on our route and PocketBase's doors."""
    asks = [
        (sender.http, "/api/transcriber/password", {"old_password": PASSWORD, "password": TEN_MB}),
        (pb.anonymous(), "/api/collections/users/auth-with-password", {"identity": sender.email, "password": TEN_MB}),
        (pb.anonymous(), "/api/collections/users/confirm-password-reset",
         {"token": "x", "password": TEN_MB, "passwordConfirm": TEN_MB}),
    ]  # fmt: skip
    for http, path, body in asks:
        started = time.monotonic()
        resp = http.post(path, json=body)
        took = time.monotonic() - started
        assert resp.status_code == 413, (path, resp.status_code, resp.text[:200])
        assert resp.json()["code"] == "too_large" and resp.json()["status"] == 413
        assert took < 1.5, (path, took)
    # the password is unchanged: the old one still signs in
    assert pb.caller("sender", "users", sender.email).token


# --- passwords in bytes, as bcrypt counts them --------------------------------------------------


def test_a_password_is_counted_in_bytes_as_bcrypt_counts_them(pb: PocketBaseServer, sender: Caller) -> None:
    """71 Cyrillic letters are 142 bytes: a clear refusal that says so, not bcrypt's error; 36 of them fit."""
    limits = pb.anonymous().get("/api/transcriber/options").json()["password_length"]
    assert limits == {"min": 8, "max": 71, "max_bytes": 72}

    long = "ж" * 71
    resp = sender.http.post("/api/transcriber/password", json={"old_password": PASSWORD, "password": long})
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert body["code"] == "weak_password"
    assert "142 bytes" in body["message"] and "71 characters" in body["message"] and "72 bytes" in body["message"]
    assert "bcrypt" not in body["message"].lower()
    assert (body["data"]["bytes"], body["data"]["chars"], body["data"]["max_bytes"]) == (142, 71, 72)

    fits = "ж" * 36  # 72 bytes
    resp = sender.http.post("/api/transcriber/password", json={"old_password": PASSWORD, "password": fits})
    assert resp.status_code == 200, resp.text
    signed_in = httpx.post(
        f"{pb.url}/api/collections/users/auth-with-password", json={"identity": sender.email, "password": fits}
    )
    assert signed_in.status_code == 200


# --- JSON on every 4xx: the audio route's 416 -------------------------------------------------


@pytest.mark.parametrize("asked", ["bytes={past}-", "bytes={past}-{beyond}", "bytes=abc", "items=0-1", "bytes=9-3"])
def test_a_range_the_audio_cannot_serve_is_answered_416_in_json(sender: Caller, asked: str) -> None:
    rid = sender.upload(AUDIO)
    n = len(AUDIO)
    resp = sender.http.get(
        f"/api/transcriber/records/{rid}/audio", headers={"Range": asked.format(past=n + 10, beyond=n + 20)}
    )
    assert resp.status_code == 416, resp.text
    assert resp.headers["Content-Type"].startswith("application/json")
    body = resp.json()
    assert (body["status"], body["code"]) == (416, "range_not_satisfiable") and str(n) in body["message"]
    assert resp.headers["Content-Range"] == f"bytes */{n}"


@pytest.mark.parametrize(
    "condition", [{"If-Match": '"some-tag"'}, {"If-Unmodified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"}]
)
def test_a_precondition_the_audio_fails_is_answered_412_in_json(sender: Caller, condition: dict[str, str]) -> None:
    rid = sender.upload(AUDIO)
    resp = sender.http.get(f"/api/transcriber/records/{rid}/audio", headers=condition)
    assert resp.status_code == 412, resp.text
    assert (resp.json()["status"], resp.json()["code"]) == (412, "precondition_failed")


def test_preconditions_the_audio_meets_still_serve_it(sender: Caller) -> None:
    rid = sender.upload(AUDIO)
    url = f"/api/transcriber/records/{rid}/audio"
    later = "Fri, 01 Jan 2100 00:00:00 GMT"
    for condition in ({"If-Match": "*"}, {"If-Unmodified-Since": later}, {"If-Unmodified-Since": "not a date"}):
        resp = sender.http.get(url, headers=condition)
        assert resp.status_code == 200 and resp.content == AUDIO, condition


def test_ranges_that_overlap_the_file_are_still_served(sender: Caller) -> None:
    rid = sender.upload(AUDIO)
    n = len(AUDIO)
    url = f"/api/transcriber/records/{rid}/audio"
    for asked, status in [(f"bytes=0-{n + 50}", 206), (f"bytes={n + 5}-,0-9", 206), ("bytes=-5", 206), ("bytes=", 200)]:
        assert sender.http.get(url, headers={"Range": asked}).status_code == status, asked


# --- titles -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "shown"),
    [("Standup\x00 and the rest", "U+0000"), ("invoice \u202egnp.exe", "U+202E"), ("a\x1bb", "U+001B"),
     ("x\u2066y", "U+2066")],
    ids=["nul", "rtl-override", "escape", "isolate"],
)  # fmt: skip
def test_a_title_with_a_control_character_is_refused_not_cut(
    sender: Caller, superuser: Caller, title: str, shown: str
) -> None:
    resp = sender.try_upload(AUDIO, title=title)
    assert resp.status_code == 400, resp.text
    assert resp.json()["code"] == "invalid_title" and shown in resp.json()["message"]
    assert superuser.http.get("/api/collections/audio_records/records").json()["totalItems"] == 0

    rid = sender.upload(AUDIO, title="fair")
    renamed = sender.http.patch(f"/api/transcriber/records/{rid}", json={"title": title})
    assert renamed.status_code == 400 and renamed.json()["code"] == "invalid_title", renamed.text
    assert sender.poll(rid)["title"] == "fair"


def test_right_to_left_marks_and_line_breaks_stay_in_a_title(sender: Caller) -> None:
    title = "ישיבה\u200f 3\tA"
    rid = sender.upload(AUDIO, title=title)
    assert sender.poll(rid)["title"] == title


# --- the file token never in the request log --------------------------------------------------


def test_a_file_token_beside_an_authorization_header_stays_out_of_the_request_log(
    pb: PocketBaseServer, sender: Caller
) -> None:
    rid = sender.upload(AUDIO)
    token = sender.http.post("/api/files/token").json()["token"]
    url = f"/api/transcriber/records/{rid}/audio"
    assert sender.http.get(url, params={"token": token}).status_code == 200  # the header names the sender
    assert pb.superuser().http.get(url, params={"token": token}).status_code == 403  # not a sender: refused
    su = pb.superuser()

    def logged() -> list[dict[str, Any]]:
        resp = su.http.get("/api/logs", params={"filter": 'data.url ~ "/audio"', "perPage": 50})
        return list(resp.json()["items"])

    deadline = time.monotonic() + 10
    while len(logged()) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    rows = logged()
    assert len(rows) >= 2
    assert token not in json.dumps(rows)
