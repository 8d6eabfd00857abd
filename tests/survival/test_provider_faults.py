"""Provider faults through a real fault-injecting HTTP server on loopback: every fault is
classified, retries are bounded, the record ends halted with a reason (or, when our own
credentials are refused, waits for the owner), no worker hangs."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import SecretStr

from sidecar.providers.http import RetryPolicy
from sidecar.providers.openai.provider import OpenAIProvider
from sidecar.serving.assembly import default_steps
from testkit.pocketbase import PocketBaseServer, free_port, running_pocketbase
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
CLIP = Path(__file__).resolve().parents[1] / "data" / "speech" / "fox.ogg"
KEY = "sk-fault-test-PLANTED-1234567890"
GOOD = {
    "text": "The quick brown fox.",
    "language": "english",
    "duration": 3.0,
    "segments": [{"id": 0, "start": 0.0, "end": 3.0, "text": "The quick brown fox."}],
}


class Faulty(BaseHTTPRequestHandler):
    """Answers /v1/audio/transcriptions according to the mode in the first path segment."""

    hits: ClassVar[dict[str, int]] = {}
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        return None

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None, length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        mode = self.path.strip("/").split("/")[0]
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Faulty.hits[mode] = Faulty.hits.get(mode, 0) + 1
        n = Faulty.hits[mode]
        err = {"error": {"message": f"bad key {self.headers.get('Authorization')}", "type": "invalid_request_error"}}
        if mode == "e500":
            self._send(500, b'{"error": {"message": "internal"}}')
        elif mode == "e500once":
            self._send(500, b"{}") if n == 1 else self._send(200, json.dumps(GOOD).encode())
        elif mode == "e429":
            self._send(429, b'{"error": {"message": "Rate limit reached for requests"}}', {"Retry-After": "1"})
        elif mode == "quota":
            self._send(
                429,
                b'{"error": {"message": "You exceeded your current quota, please check your plan and '
                b'billing details", "type": "insufficient_quota"}}',
            )
        elif mode == "e400":
            self._send(400, json.dumps(err).encode())
        elif mode == "e401":
            self._send(401, json.dumps(err).encode())
        elif mode == "malformed":
            self._send(200, b"<html>not json</html>")
        elif mode == "truncated":
            body = json.dumps(GOOD).encode()
            self._send(200, body[: len(body) // 2], length=len(body))
            self.close_connection = True
        elif mode == "hang":
            time.sleep(30)
        else:
            self._send(200, json.dumps(GOOD).encode())


# mode → (halt code, what the journal must show)
FAULTS = {
    "e500": ("attempts_exhausted", "500"),
    "e429": ("attempts_exhausted", "429"),
    "quota": ("provider_rejected", "quota"),
    "e400": ("provider_rejected", "400"),
    "malformed": ("attempts_exhausted", "not JSON"),
    "truncated": ("attempts_exhausted", "RemoteProtocolError"),  # the body ended before its declared length
    "hang": ("attempts_exhausted", "time"),
    "refused": ("attempts_exhausted", "connect"),
}


async def test_each_fault_is_classified_bounded_and_ends_in_a_halt(tmp_path: Path, figures: dict[str, str]) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Faulty)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    closed_port = free_port()
    outcomes: dict[str, str] = {}
    try:
        with running_pocketbase(tmp_path / "pb") as pb:
            sender, su = pb.new_sender(), pb.superuser()
            for mode in [*FAULTS, "e401", "e500once"]:
                base = (
                    f"http://127.0.0.1:{closed_port}"
                    if mode == "refused"
                    else f"http://127.0.0.1:{server.server_port}/{mode}"
                )
                settings = pb.settings.model_copy(deep=True)
                settings.openai.base_url = base
                settings.openai.api_key = SecretStr(KEY)
                settings.openai.timeout = timedelta(seconds=1.5)
                provider = OpenAIProvider(settings.openai, retry=RetryPolicy(attempts=2))
                rid = sender.upload(CLIP)
                t0 = time.monotonic()
                await drain(pb, su, rid, provider, until_journal="refused our credentials" if mode == "e401" else "")
                rec = su.record(rid)
                journal = _journal(su, rid)
                assert KEY not in journal and KEY not in rec["halt_reason"]
                if mode == "e401":
                    # O5: our key refused is not the recording's fault: it waits, nothing failed, nothing halted.
                    assert (rec["state"], rec["halted_at"], rec["attempts"]) == ("normalized", "", 0), rec
                    attempts = su.http.get(
                        "/api/collections/recognition_attempts/records", params={"filter": f'record="{rid}"'}
                    ).json()["items"]
                    assert [a["status"] for a in attempts] == ["started"], attempts
                    outcomes[mode] = f"postponed (credentials) in {time.monotonic() - t0:.1f} s"
                    continue
                if mode == "e500once":
                    assert rec["state"] == "done" and not rec["halted_at"]
                    outcomes[mode] = "done after an in-call retry"
                    continue
                code, shows = FAULTS[mode]
                assert rec["halt_code"] == code, (mode, rec["halt_code"], rec["halt_reason"], journal)
                assert shows.lower() in journal.lower(), (mode, journal)
                if code == "attempts_exhausted":
                    # The first try failed and was retried; the second, the last allowed, halted as it failed.
                    assert journal.count("step submit failed") == 1, (mode, journal)
                    assert "2 tries of step submit did not succeed" in rec["halt_reason"], (mode, rec)
                outcomes[mode] = f"{code} in {time.monotonic() - t0:.1f} s"
    finally:
        server.shutdown()
        server.server_close()
    figures["provider faults"] = "; ".join(f"{m}: {o}" for m, o in outcomes.items())


def _journal(su: Any, rid: str) -> str:
    ev = su.http.get("/api/collections/record_events/records", params={"filter": f'record="{rid}"'}).json()
    return "\n".join(e["outcome_text"] for e in ev["items"])


async def drain(pb: PocketBaseServer, su: Any, rid: str, provider: OpenAIProvider, *, until_journal: str = "") -> None:
    """Runs the sidecar until the record is done or halted (or, given ``until_journal``, its journal says that)."""
    async with running_sidecar(
        pb, default_steps(), provider=provider, workers=1, max_attempts=2, retry_delay=0, idle_poll=0.1
    ) as pool:
        async with pool_running(pool):

            def settled() -> bool:
                if until_journal:
                    return until_journal in _journal(su, rid)
                rec = su.record(rid)
                return bool(rec["state"] == "done" or rec["halted_at"])

            await eventually(settled, within=60, what="the record done or halted")  # no worker hangs
