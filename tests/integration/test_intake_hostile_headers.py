"""Intake's container parsers are bounded by the bytes an upload has, on a real PocketBase.

Every container whose header intake reads gets a small valid seed (PyAV, or built where no encoder is
at hand); its length fields are set to the values no header may be trusted with (0, 2^32-1, 2^56,
2^63-1, …), it is cut short, its bytes are overwritten at random; each upload goes through the real
upload route and must be answered (201, or 415 with a JSON reason) within a time bound, with no 5xx,
no temporary file left behind, and PocketBase's peak memory barely moved.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.settings import QuotaSettings
from testkit.hostile_media import HUGE, hostile_matroska, length_fields, make_seeds, set_field
from testkit.media import wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer, running_pocketbase

# Well under the 35 s that the 300-byte Matroska cost before; a fair upload here takes ~50 ms.
BOUND_S = 2.0
# PocketBase's peak resident memory may grow this much over the whole run (the seeds are a few KB).
PEAK_GROWTH_BYTES = 64 * 1024 * 1024


class Intake:
    """A PocketBase with the quotas off, its temporary directory of its own, and a sender."""

    def __init__(self, server: PocketBaseServer, temp: Path) -> None:
        self.server = server
        self.temp = temp
        self.sender: Caller = server.new_sender()
        self.seeds: dict[str, bytes] = {}

    def peak_rss(self) -> int:
        for line in Path(f"/proc/{self.server.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def answers_in_bounds(self, data: bytes, name: str) -> httpx.Response:
        """Uploads ``data``: answered within BOUND_S, 201 or a JSON 415, nothing left in the temp dir."""
        started = time.monotonic()
        resp = self.sender.http.post("/api/transcriber/records", files={"file": (name, data)}, timeout=BOUND_S * 5)
        took = time.monotonic() - started
        assert took < BOUND_S, f"{name}: {len(data)} bytes took {took:.2f} s"
        assert resp.status_code in (201, 415), (name, resp.status_code, resp.text)
        if resp.status_code == 415:
            body = resp.json()
            assert (body["status"], body["code"]) == (415, "not_audio") and len(body["message"]) > 20, body
        # The spool goes as the handler ends, which the answer may just outrun.
        deadline = time.monotonic() + 2
        while list(self.temp.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert list(self.temp.iterdir()) == [], f"{name}: left behind {list(self.temp.iterdir())}"
        return resp


@pytest.fixture(scope="module")
def intake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Intake]:
    root = tmp_path_factory.mktemp("hostile")
    temp = root / "tmp"
    temp.mkdir()
    off = QuotaSettings(uploads_per_hour=0, waiting=0, audio_hours_per_day=0)
    with ExitStack() as stack:
        with pytest.MonkeyPatch.context() as mp:  # PocketBase's $os.tempDir(), where intake spools; not this process's
            mp.setenv("TMPDIR", str(temp))
            server = stack.enter_context(running_pocketbase(root, quotas=off))
        it = Intake(server, temp)
        it.seeds = make_seeds(tmp_path_factory.mktemp("seeds"))
        yield it


def test_every_seed_is_accepted_as_it_is(intake: Intake) -> None:
    """The seeds are fair files: what the mutations below break, they break from a file intake takes."""
    for name, data in intake.seeds.items():
        if name == "matroska-300":
            continue  # the hostile file's shape with a fair TimecodeScale
        assert intake.answers_in_bounds(data, name).status_code == 201, name


@pytest.mark.parametrize("info_sized", [True, False], ids=["info-sized", "info-unknown-size"])
@pytest.mark.parametrize("scale_length", [10**8, 2**56 - 2, 2**40], ids=["1e8", "2^56-2", "2^40"])
def test_the_300_byte_matroska_is_refused_at_once(intake: Intake, scale_length: int, info_sized: bool) -> None:
    """The 300-byte file: a TimecodeScale that declares 10^8 bytes kept a core busy for 35 s."""
    data = hostile_matroska(scale_length, info_sized)
    assert len(data) == 300
    resp = intake.answers_in_bounds(data, "hostile.webm")
    assert resp.status_code == 415, resp.text
    assert "TimecodeScale" in resp.json()["message"] or "Matroska element" in resp.json()["message"]


def test_every_length_field_of_every_seed_set_to_every_hostile_value(intake: Intake) -> None:
    """Each length field of each seed (every header chunk, box, element, page and block) set to each of
    0, 1, 7, 2^31-1, 2^32-1, 2^56, 2^63-1 and 2^64-1 (in its own width, or the wider form its format has)."""
    before = intake.peak_rss()
    cases = 0
    for name, seed in sorted(intake.seeds.items()):
        for field in length_fields(seed):
            for value in HUGE:
                intake.answers_in_bounds(set_field(seed, field, value), f"{name}-{field.at}-{value}")
                cases += 1
    assert cases > 2000
    assert intake.peak_rss() - before < PEAK_GROWTH_BYTES


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_mutated_and_cut_headers_are_answered_within_bounds(intake: Intake, data: st.DataObject) -> None:
    """Random mutations of the seeds: lengths, cuts, overwritten bytes, in any combination."""
    name = data.draw(st.sampled_from(sorted(intake.seeds)), label="seed")
    body = bytearray(intake.seeds[name])
    fields = length_fields(bytes(body))
    set_a_length = data.draw(st.booleans(), label="set a length")
    if fields and set_a_length:
        field = data.draw(st.sampled_from(fields), label="field")
        value = data.draw(st.sampled_from(HUGE) | st.integers(0, 2**64 - 1), label="value")
        body = bytearray(set_field(bytes(body), field, value))
    for _ in range(data.draw(st.integers(0, 4), label="overwrites")):
        at = data.draw(st.integers(4, min(len(body), 4096) - 1), label="at")
        chunk = data.draw(st.binary(min_size=1, max_size=8), label="bytes")
        body[at : at + len(chunk)] = chunk
    if data.draw(st.booleans(), label="cut"):
        body = body[: data.draw(st.integers(12, max(12, len(body) - 1)), label="length")]
    intake.answers_in_bounds(bytes(body), f"{name}-mutated")


def test_random_bytes_behind_each_signature(intake: Intake) -> None:
    """Garbage after a container's first bytes: parsed from nothing a header should hold."""
    rng = __import__("random").Random(44)
    for name, seed in sorted(intake.seeds.items()):
        for size in (16, 200, 5000):
            body = seed[:12] + bytes(rng.getrandbits(8) for _ in range(size))
            intake.answers_in_bounds(body, f"{name}-random-{size}")


# ---------------------------------------------------------------------------
# The sender pays before intake does: a quota met is refused before the file is parsed, and, for a
# client that waits for "100 Continue", before it is even sent.


@pytest.fixture
def one_an_hour(tmp_path: Path) -> Iterator[PocketBaseServer]:
    with running_pocketbase(tmp_path, quotas=QuotaSettings(uploads_per_hour=1, waiting=0, audio_hours_per_day=0)) as s:
        yield s


def test_a_sender_over_quota_is_refused_before_the_file_is_parsed(one_an_hour: PocketBaseServer) -> None:
    sender = one_an_hour.new_sender()
    sender.upload(wav_bytes(0.1))
    started = time.monotonic()
    resp = sender.http.post(
        "/api/transcriber/records", files={"file": ("x.webm", hostile_matroska(10**8))}, timeout=BOUND_S * 5
    )
    assert time.monotonic() - started < BOUND_S
    assert resp.status_code == 429 and resp.json()["code"] == "too_many_uploads", resp.text
    assert int(resp.headers["Retry-After"]) > 0


def test_a_client_waiting_for_100_continue_is_refused_before_it_sends_the_file(one_an_hour: PocketBaseServer) -> None:
    sender = one_an_hour.new_sender()
    sender.upload(wav_bytes(0.1))
    token = str(sender.http.headers["Authorization"])
    host, port = one_an_hour.url.removeprefix("http://").split(":")
    size = 500 * 1024 * 1024  # announced, never sent
    head = (
        f"POST /api/transcriber/records HTTP/1.1\r\nHost: {host}\r\nAuthorization: {token}\r\n"
        f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {size}\r\n"
        "Expect: 100-continue\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(head.encode())
        answer = conn.recv(65536).decode(errors="replace")
    status_line = answer.split("\r\n", 1)[0]
    assert status_line.startswith("HTTP/1.1 429"), answer[:300]
    assert '"too_many_uploads"' in answer


def test_the_temp_dir_fixture_is_where_uploads_spool(intake: Intake) -> None:
    """The emptiness checked above means something: an upload in flight does spool there."""
    assert os.environ.get("TMPDIR") != str(intake.temp)  # set for PocketBase only
    # A body that never ends: its spool directory appears while it is being read.
    host, port = intake.server.url.removeprefix("http://").split(":")
    token = str(intake.sender.http.headers["Authorization"])
    part = b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n' + wav_bytes(0.1)
    head = (
        f"POST /api/transcriber/records HTTP/1.1\r\nHost: {host}\r\nAuthorization: {token}\r\n"
        f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {len(part) + 100000}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(head.encode() + part)
        deadline = time.monotonic() + 5
        while not list(intake.temp.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [p.name.startswith("transcriber-upload-") for p in intake.temp.iterdir()] == [True]
    deadline = time.monotonic() + 5
    while list(intake.temp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(intake.temp.iterdir()) == []  # the client hung up: the spool is removed
