"""The only seam to storage: one httpx.AsyncClient logged in as the service user.

Every call has a timeout (P19); answers are mapped to typed errors at this
boundary: ``FencedOut`` (the claim is gone), ``PocketBaseUnavailable``
(retry), ``PocketBaseError`` (refused). An expired token is renewed by
logging in again, once per call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import stamina
from pydantic import BaseModel, ConfigDict

from sidecar.clock import Clock, SystemClock
from sidecar.pocketbase.errors import AuthFailed, FencedOut, PocketBaseError, PocketBaseUnavailable

SERVICE_COLLECTION = "services"

# A PocketBase restart must not cost a finished step its result: outcome
# writes and reads ride out a short outage. Fenced writes are safe to repeat:
# a repeat after a write that landed answers 409 (the claim is released).
_ride_out_restart = stamina.retry(on=PocketBaseUnavailable, attempts=20, timeout=60, wait_initial=0.2, wait_max=5)


@dataclass(frozen=True)
class Claim:
    """A record claimed by this worker, and this claim's token."""

    id: str
    token: str


@dataclass(frozen=True)
class NoWork:
    """The claim found nothing; ``next_at_ms`` is when something becomes claimable (0: unknown)."""

    next_at_ms: int = 0


class AudioRecord(BaseModel):
    """The queue fields of a record, as the steps read them (content stays out: ST7)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    owner: str
    title: str = ""
    state: str
    state_entered_at: int = 0
    halted_at: str = ""
    halt_code: str = ""
    attempts: int = 0
    claim_token: str = ""
    claim_expires_at: int = 0
    paused_until: int = 0
    language_hint: str = ""  # the sender's hint at intake ("": none)
    language: str = ""  # found by recognition


class FileRow(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    record: str
    role: str
    format: str = ""
    blob: str = ""
    name: str = ""
    location: str = ""
    size: int = 0
    duration_ms: int = 0


class AttemptRow(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    record: str
    provider: str
    model: str = ""
    operation_id: str = ""
    audio_uri: str = ""
    status: str = ""
    raw_response: str = ""
    created: str = ""


def _message(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200]
    if isinstance(body, dict):
        return str(body.get("message", ""))[:500]
    return ""


class PocketBaseClient:
    def __init__(
        self,
        base_url: str,
        email: str,
        password: str,
        *,
        clock: Clock | None = None,
        timeout: timedelta = timedelta(seconds=30),
        upload_timeout: timedelta = timedelta(minutes=30),
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._email = email
        self._password = password
        self._token = ""
        self._login_lock = anyio.Lock()
        self.clock: Clock = clock or SystemClock()
        self._upload_timeout = upload_timeout.total_seconds()
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=timeout.total_seconds(),
            transport=transport,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
        )

    async def __aenter__(self) -> PocketBaseClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    @property
    def base_url(self) -> str:
        return str(self._http.base_url)

    # -- transport -----------------------------------------------------------

    async def login(self) -> None:
        async with self._login_lock:
            try:
                resp = await self._http.post(
                    f"/api/collections/{SERVICE_COLLECTION}/auth-with-password",
                    json={"identity": self._email, "password": self._password},
                )
            except httpx.TransportError as exc:
                raise PocketBaseUnavailable(f"PocketBase unreachable: {type(exc).__name__}") from exc
            if resp.status_code >= 500:
                raise PocketBaseUnavailable(f"PocketBase answered {resp.status_code} to login")
            if resp.status_code != 200:
                raise AuthFailed(
                    f"the service account {self._email} was refused ({resp.status_code}): {_message(resp)}",
                    status=resp.status_code,
                )
            self._token = str(resp.json()["token"])

    async def request(self, method: str, path: str, *, timeout_s: float | None = None, **kw: Any) -> httpx.Response:
        if not self._token:
            await self.login()
        for again in (True, False):
            try:
                resp = await self._http.request(
                    method,
                    path,
                    headers={"Authorization": self._token},
                    timeout=timeout_s if timeout_s is not None else httpx.USE_CLIENT_DEFAULT,
                    **kw,
                )
            except httpx.TransportError as exc:
                raise PocketBaseUnavailable(
                    f"PocketBase {method} {path.split('?')[0]} failed: {type(exc).__name__}"
                ) from exc
            if resp.status_code == 401 and again:
                await self.login()
                continue
            return self._check(resp, method, path)
        raise AssertionError("unreachable")

    def _check(self, resp: httpx.Response, method: str, path: str) -> httpx.Response:
        if resp.status_code < 400:
            return resp
        where = f"{method} {path.split('?')[0]}"
        if resp.status_code == 409:
            raise FencedOut(f"{where}: {_message(resp)}")
        if resp.status_code >= 500 or resp.status_code == 429:
            raise PocketBaseUnavailable(f"{where} answered {resp.status_code}")
        raise PocketBaseError(f"{where} answered {resp.status_code}: {_message(resp)}", status=resp.status_code)

    # -- the claim protocol ---------------------------------------------------

    async def claim(self, leases: Mapping[str, timedelta]) -> Claim | NoWork:
        body = {
            "now": self.clock.now_ms(),
            "leases": {stage: int(lease.total_seconds() * 1000) for stage, lease in leases.items()},
        }
        resp = await self.request("POST", "/api/pipeline/claim", json=body)
        if resp.status_code == 204:
            return NoWork(int(resp.headers.get("X-Next-Available-At", "0") or 0))
        data = resp.json()
        return Claim(id=str(data["id"]), token=str(data["token"]))

    @_ride_out_restart
    async def _fenced(self, claim: Claim, op: str, **fields: Any) -> None:
        body = {"token": claim.token, "now": self.clock.now_ms(), **fields}
        await self.request("POST", f"/api/pipeline/records/{claim.id}/{op}", json=body)

    async def advance(self, claim: Claim, to: str, text: str = "") -> None:
        await self._fenced(claim, "advance", to=to, text=text)

    async def postpone(self, claim: Claim, until_ms: int, text: str = "") -> None:
        await self._fenced(claim, "postpone", until=until_ms, text=text)

    async def halt(self, claim: Claim, code: str, reason: str) -> None:
        await self._fenced(claim, "halt", code=code, reason=reason)

    async def fail(self, claim: Claim, retry_at_ms: int, text: str) -> None:
        await self._fenced(claim, "fail", retry_at=retry_at_ms, text=text)

    async def release(self, claim: Claim) -> None:
        await self._fenced(claim, "release")

    async def extend(self, claim: Claim, until_ms: int) -> None:
        await self._fenced(claim, "extend", until=until_ms)

    async def note(self, claim: Claim, text: str) -> None:
        await self.request(
            "POST",
            f"/api/pipeline/records/{claim.id}/events",
            json={"token": claim.token, "kind": "note", "text": text},
        )

    # -- reads ------------------------------------------------------------------

    @_ride_out_restart
    async def get_record(self, record_id: str) -> AudioRecord:
        resp = await self.request("GET", f"/api/collections/audio_records/records/{record_id}")
        return AudioRecord.model_validate(resp.json())

    async def _related(self, record_id: str, collection: str) -> list[dict[str, Any]]:
        """Rows of ``collection`` that point at the record, oldest first.

        Read through the record (a back-relation expand) rather than a filtered
        list: PocketBase delays empty filtered lists for non-superusers by up to
        half a second, and "no normalized file yet" is the common case.
        """
        rel = f"{collection}_via_record"
        resp = await self.request(
            "GET",
            f"/api/collections/audio_records/records/{record_id}",
            params={"expand": rel, "fields": f"id,expand.{rel}"},
        )
        rows = resp.json().get("expand", {}).get(rel, [])
        return sorted(rows, key=lambda r: (str(r.get("created", "")), str(r["id"])))

    async def files_of(self, record_id: str, role: str) -> list[FileRow]:
        return [FileRow.model_validate(r) for r in await self._related(record_id, "files") if r.get("role") == role]

    async def attempts_of(self, record_id: str) -> list[AttemptRow]:
        return [AttemptRow.model_validate(r) for r in await self._related(record_id, "recognition_attempts")]

    async def stream_file(self, collection: str, record_id: str, filename: str) -> AsyncIterator[bytes]:
        """Streams a protected file without holding it in memory."""
        token_resp = await self.request("POST", "/api/files/token")
        file_token = token_resp.json()["token"]
        url = f"/api/files/{collection}/{record_id}/{filename}"
        try:
            async with self._http.stream(
                "GET", url, params={"token": file_token}, timeout=self._upload_timeout
            ) as resp:
                self._check(resp, "GET", url)
                async for chunk in resp.aiter_bytes(1 << 20):
                    yield chunk
        except httpx.TransportError as exc:
            raise PocketBaseUnavailable(f"download of {filename} failed: {type(exc).__name__}") from exc

    async def download(self, collection: str, record_id: str, filename: str, dest: Path) -> int:
        size = 0
        async with await anyio.open_file(dest, "wb") as out:
            async for chunk in self.stream_file(collection, record_id, filename):
                await out.write(chunk)
                size += len(chunk)
        return size

    async def read_file(self, collection: str, record_id: str, filename: str) -> bytes:
        parts = [c async for c in self.stream_file(collection, record_id, filename)]
        return b"".join(parts)

    # -- fenced attachments ---------------------------------------------------------

    async def attach_file(
        self, claim: Claim, path: Path, *, role: str, format: str, duration_ms: int, location: str = ""
    ) -> FileRow:
        with path.open("rb") as fh:
            resp = await self.request(
                "POST",
                f"/api/pipeline/records/{claim.id}/files",
                data={
                    "token": claim.token,
                    "role": role,
                    "format": format,
                    "duration_ms": str(duration_ms),
                    "location": location,
                },
                files={"blob": (path.name, fh, "application/octet-stream")},
                timeout_s=self._upload_timeout,
            )
        data = resp.json()
        return FileRow(
            id=data["id"],
            record=claim.id,
            role=role,
            format=format,
            blob=data.get("blob", ""),
            duration_ms=duration_ms,
            location=location,
        )

    async def create_attempt(self, claim: Claim, *, provider: str, model: str, audio_uri: str = "") -> str:
        resp = await self.request(
            "POST",
            f"/api/pipeline/records/{claim.id}/attempts",
            json={"token": claim.token, "provider": provider, "model": model, "audio_uri": audio_uri},
        )
        return str(resp.json()["id"])

    async def update_attempt(
        self,
        claim: Claim,
        attempt_id: str,
        *,
        operation_id: str | None = None,
        audio_uri: str | None = None,
        status: str | None = None,
        raw_response: bytes | None = None,
        raw_name: str = "response.json",
    ) -> None:
        path = f"/api/pipeline/records/{claim.id}/attempts/{attempt_id}"
        fields = {"token": claim.token}
        for name, value in (("operation_id", operation_id), ("audio_uri", audio_uri), ("status", status)):
            if value is not None:
                fields[name] = value
        if raw_response is None:
            await self.request("POST", path, json=fields)
            return
        await self.request(
            "POST",
            path,
            data=fields,
            files={"raw_response": (raw_name, raw_response, "application/octet-stream")},
            timeout_s=self._upload_timeout,
        )

    async def put_text(
        self, claim: Claim, kind: str, content: str, segments: Any = None, *, language: str | None = None
    ) -> None:
        """The record's text of ``kind`` (created or replaced) and, with it, the language it is in."""
        body: dict[str, Any] = {"token": claim.token, "content": content, "segments": segments}
        if language:
            body["language"] = language
        await self.request("PUT", f"/api/pipeline/records/{claim.id}/texts/{kind}", json=body)
