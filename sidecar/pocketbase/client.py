"""``Storage`` over PocketBase's HTTP API: one httpx.AsyncClient logged in as the service user.

Every call has a timeout (P19); answers are mapped to the storage errors at
this boundary: ``FencedOut`` (409: the claim is gone), ``StorageUnavailable``
(down, 5xx, 429: retry), ``StorageError`` (refused). An expired token is
renewed by logging in again, once per call.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import stamina
from pydantic import ValidationError

from sidecar.outcome import HaltCode
from sidecar.pocketbase import realtime
from sidecar.runtime.clock import Clock, SystemClock
from sidecar.storage.errors import (
    AuthFailed,
    FencedOut,
    LoginRateLimited,
    ReleaseMismatch,
    StorageError,
    StorageUnavailable,
    UnreadableClaim,
)
from sidecar.storage.model import (
    INSIGHTS,
    RECORDS,
    AttemptChange,
    AttemptRow,
    AudioRecord,
    Claim,
    Claimed,
    FileRow,
    LoginFigures,
    NoWork,
    PiecePlace,
    RecordRows,
    SweepItem,
)
from sidecar.storage.transitions import Transition

SERVICE_COLLECTION = "services"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

# A PocketBase restart must not cost a finished step its result: outcome
# writes and reads ride out a short outage. Fenced writes are safe to repeat:
# a repeat after a write that landed answers 409 (the claim is released).
_ride_out_restart = stamina.retry(on=StorageUnavailable, attempts=20, timeout=60, wait_initial=0.2, wait_max=5)


def _message(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200]
    if isinstance(body, dict):
        return str(body.get("message", ""))[:500]
    return ""


def _seconds(value: str | None, *, default: float) -> float:
    """A ``Retry-After`` in seconds (bounded to an hour); ``default`` when absent or not a number."""
    try:
        return min(max(float(value or ""), 0.0), 3600.0)
    except ValueError:
        return default


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
        release: str | None = None,
    ) -> None:
        self._email = email
        # The project's release PocketBase must run (its hooks and migrations) for this client to
        # start: checked by ``connect``. None: not checked.
        self._release = release
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
                raise StorageUnavailable(f"PocketBase unreachable: {type(exc).__name__}") from exc
            if resp.status_code >= 500:
                raise StorageUnavailable(f"PocketBase answered {resp.status_code} to login")
            if resp.status_code == 429:
                wait = _seconds(resp.headers.get("Retry-After"), default=10.0)
                raise LoginRateLimited("the service login was rate limited", retry_after=timedelta(seconds=wait))
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
                raise StorageUnavailable(
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
            raise StorageUnavailable(f"{where} answered {resp.status_code}")
        raise StorageError(f"{where} answered {resp.status_code}: {_message(resp)}", status=resp.status_code)

    async def connect(self) -> None:
        if self._release is not None:
            await self._check_release(self._release)
        await self.login()

    async def _check_release(self, ours: str) -> None:
        """Refuses a PocketBase of another release (``GET /api/transcriber/version``, no sign-in needed)."""
        try:
            resp = await self._http.get("/api/transcriber/version")
        except httpx.TransportError as exc:
            raise StorageUnavailable(f"PocketBase unreachable: {type(exc).__name__}") from exc
        if resp.status_code >= 500 or resp.status_code == 429:
            raise StorageUnavailable(f"PocketBase answered {resp.status_code} to GET /api/transcriber/version")
        theirs = ""
        if resp.status_code == 200:
            try:
                theirs = str(resp.json().get("version") or "")
            except (ValueError, AttributeError):
                theirs = ""
        if theirs != ours:
            said = f"release {theirs}" if theirs and theirs != "unknown" else "a release it does not say"
            raise ReleaseMismatch(
                f"PocketBase at {self.base_url.rstrip('/')} runs {said}, this worker is release {ours}:"
                " run both from one release (the same image, or the same installed package)"
            )

    # -- the queue ------------------------------------------------------------------

    async def claim(
        self,
        leases: Mapping[str, timedelta],
        insights_lease: timedelta | None = None,
        *,
        follow_ups: Mapping[str, timedelta] | None = None,
    ) -> Claimed | NoWork:
        body: dict[str, Any] = {
            "now": self.clock.now_ms(),
            "leases": {stage: int(lease.total_seconds() * 1000) for stage, lease in leases.items()},
            # The record's queue fields come back with the claim: the runner needs
            # them at once, and a second request would cost a round trip per claim.
            "with_record": True,
            # ... and so do a recording's files and attempts, which its step reads first.
            "with_rows": True,
        }
        queues = dict(follow_ups or {})
        if insights_lease is not None:
            queues[INSIGHTS] = insights_lease
        if queues:
            body["follow_ups"] = {name: int(lease.total_seconds() * 1000) for name, lease in queues.items()}
        resp = await self.request("POST", "/api/pipeline/claim", json=body)
        set_aside = tuple(i for i in resp.headers.get("X-Set-Aside", "").split(",") if i)
        if resp.status_code == 204:
            return NoWork(int(resp.headers.get("X-Next-Available-At", "0") or 0), set_aside)
        data = resp.json()
        claim = Claim(id=str(data["id"]), token=str(data["token"]), queue=str(data.get("queue") or RECORDS))
        rows = data.get("rows")
        try:
            record = AudioRecord.model_validate(data["record"])
            return Claimed(claim, record, set_aside, _record_rows(rows) if rows else None)
        except ValidationError as exc:
            # PocketBase checks what it hands out; should a value it let through not read here (a
            # release apart), the claim is held: the caller sets the row aside under it.
            raise UnreadableClaim(claim, _unreadable(exc), set_aside) from exc

    @_ride_out_restart
    async def settle(self, claim: Claim, change: Transition) -> AudioRecord:
        resp = await self._settle(claim, change.outcome.value, change.body())
        return AudioRecord.model_validate(resp.json())

    @_ride_out_restart
    async def set_aside(self, claim: Claim, reason: str) -> None:
        await self._settle(claim, "halted", {"code": HaltCode.UNCLAIMABLE.value, "reason": reason})

    async def _settle(self, claim: Claim, outcome: str, args: Mapping[str, Any]) -> httpx.Response:
        body = {"token": claim.token, "now": self.clock.now_ms(), "outcome": outcome, **args}
        return await self.request("POST", f"/api/pipeline/{claim.queue}/{claim.id}/settle", json=body)

    async def note(self, claim: Claim, text: str) -> None:
        body = {"token": claim.token, "text": text, "write_key": _write_key()}
        await self._write("POST", f"/api/pipeline/{claim.queue}/{claim.id}/events", json=body)

    @_ride_out_restart
    async def words(self, claim: Claim) -> list[str]:
        resp = await self.request("POST", f"/api/pipeline/records/{claim.id}/words", json={"token": claim.token})
        data = resp.json()
        found = data.get("words") if isinstance(data, dict) else None
        return [str(w) for w in found] if isinstance(found, list) else []

    async def insights_source(self, claim: Claim) -> dict[str, Any]:
        resp = await self.request(
            "POST",
            f"/api/pipeline/insights/{claim.id}/source",
            json={"token": claim.token},
            timeout_s=self._upload_timeout,
        )
        data = resp.json()
        return data if isinstance(data, dict) else {}

    async def store_insights(self, claim: Claim, result: dict[str, Any]) -> None:
        body = {"token": claim.token, "now": self.clock.now_ms(), **result}
        await self._write("POST", f"/api/pipeline/insights/{claim.id}/result", json=body)

    async def literary_source(self, claim: Claim) -> dict[str, Any]:
        resp = await self.request(
            "POST",
            f"/api/pipeline/{claim.queue}/{claim.id}/source",
            json={"token": claim.token},
            timeout_s=self._upload_timeout,
        )
        data = resp.json()
        return data if isinstance(data, dict) else {}

    async def store_literary(
        self,
        claim: Claim,
        result: dict[str, Any],
        document: bytes | None = None,
        *,
        transcript_document: bytes | None = None,
    ) -> None:
        url = f"/api/pipeline/{claim.queue}/{claim.id}/result"
        given = {
            "document": ("literary.docx", document),
            "transcript_document": ("transcript.docx", transcript_document),
        }
        files = {field: (name, data, DOCX) for field, (name, data) in given.items() if data is not None}
        if not files:
            await self._write("POST", url, json={"token": claim.token, "now": self.clock.now_ms(), **result})
            return
        # With its DOCX: a form whose `payload` holds what the JSON body would.
        fields = {"token": claim.token, "payload": json.dumps({"now": self.clock.now_ms(), **result})}
        await self._write("POST", url, data=fields, files=files, timeout_s=self._upload_timeout)

    # -- reads ------------------------------------------------------------------

    async def _related(self, record_id: str, *collections: str) -> dict[str, list[dict[str, Any]]]:
        """Rows of each of ``collections`` that point at the record, oldest first, in one request.

        Read through the record (a back-relation expand) rather than a filtered
        list: PocketBase delays empty filtered lists for non-superusers by up to
        half a second, and "no normalized file yet" is the common case.
        """
        rels = [f"{c}_via_record" for c in collections]
        resp = await self.request(
            "GET",
            f"/api/collections/audio_records/records/{record_id}",
            params={"expand": ",".join(rels), "fields": "id," + ",".join(f"expand.{r}" for r in rels)},
        )
        expand = resp.json().get("expand", {})
        return {
            c: sorted(expand.get(rel, []), key=lambda r: (str(r.get("created", "")), str(r["id"])))
            for c, rel in zip(collections, rels, strict=True)
        }

    async def rows_of(self, record_id: str) -> RecordRows:
        got = await self._related(record_id, "files", "recognition_attempts")
        return _record_rows(got)

    async def files_of(self, record_id: str, role: str) -> list[FileRow]:
        rows = [FileRow.model_validate(r) for r in (await self._related(record_id, "files"))["files"]]
        return [f for f in rows if f.role == role and not f.superseded]

    async def attempts_of(self, record_id: str) -> list[AttemptRow]:
        got = await self._related(record_id, "recognition_attempts")
        return [AttemptRow.model_validate(r) for r in got["recognition_attempts"]]

    async def count_records(self, stages: Sequence[str]) -> dict[tuple[str, bool], int]:
        counts: dict[tuple[str, bool], int] = {}
        for stage in stages:
            for halted in (False, True):
                flt = f'state = "{stage}" && halted_at {"!=" if halted else "="} ""'
                resp = await self.request(
                    "GET",
                    "/api/collections/audio_records/records",
                    params={"filter": flt, "perPage": 1, "fields": "id"},
                )
                counts[(stage, halted)] = int(resp.json()["totalItems"])
        return counts

    async def login_figures(self) -> LoginFigures:
        resp = await self.request("GET", "/api/pipeline/logins")
        return LoginFigures.model_validate(resp.json())

    async def watch(self, on_change: Callable[[], None]) -> None:
        async def subscribe(client_id: str) -> None:
            body = {"clientId": client_id, "subscriptions": ["audio_records/*"]}
            await self.request("POST", "/api/realtime", json=body)

        await realtime.listen(self.base_url, subscribe, self.clock, on_change)

    async def stream_file(self, collection: str, record_id: str, filename: str) -> AsyncIterator[bytes]:
        """Streams a protected file without holding it in memory.

        Through the pipeline's own route, under the Authorization header: PocketBase's file
        route takes a token in the URL, and its request log keeps URLs.
        """
        url = f"/api/pipeline/files/{collection}/{record_id}/{filename}"
        if not self._token:
            await self.login()
        try:
            for again in (True, False):
                async with self._http.stream(
                    "GET", url, headers={"Authorization": self._token}, timeout=self._upload_timeout
                ) as resp:
                    if resp.status_code == 401 and again:
                        await self.login()
                        continue
                    if resp.status_code >= 400:
                        await resp.aread()
                    self._check(resp, "GET", url)
                    async for chunk in resp.aiter_bytes(1 << 20):
                        yield chunk
                    return
        except httpx.TransportError as exc:
            raise StorageUnavailable(f"download of {filename} failed: {type(exc).__name__}") from exc

    async def download(self, file: FileRow, dest: Path) -> int:
        size = 0
        async with await anyio.open_file(dest, "wb") as out:
            async for chunk in self.stream_file("files", file.id, file.blob):
                await out.write(chunk)
                size += len(chunk)
        return size

    async def raw_response(self, attempt: AttemptRow) -> bytes:
        parts = [c async for c in self.stream_file("recognition_attempts", attempt.id, attempt.raw_response)]
        return b"".join(parts)

    # -- fenced writes of a step's results ----------------------------------------------
    #
    # O4: each rides out a PocketBase restart like the queue writes. A repeat is
    # harmless: rows a write creates carry a key made once per write, so a repeat
    # of a write that landed (its answer lost with the connection) finds the row
    # it made; the other writes overwrite with the same values.

    @_ride_out_restart
    async def _write(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return await self.request(method, path, **kw)

    async def attach_file(
        self,
        claim: Claim,
        path: Path | None,
        *,
        role: str,
        format: str,
        duration_ms: int,
        location: str = "",
        place: PiecePlace | None = None,
    ) -> FileRow:
        place = place or PiecePlace.whole(duration_ms)
        key = _write_key()
        fields = {
            "token": claim.token,
            "role": role,
            "format": format,
            "duration_ms": str(duration_ms),
            "location": location,
            "write_key": key,
            "piece": str(place.piece),
            "pieces": str(place.pieces),
            "offset_ms": str(place.offset_ms),
            "speech_ms": str(place.speech_ms),
        }
        if place.speech is not None:
            fields["speech"] = json.dumps([list(r) for r in place.speech], separators=(",", ":"))
        url = f"/api/pipeline/records/{claim.id}/files"

        @_ride_out_restart
        async def upload() -> httpx.Response:
            if path is None:  # a piece without speech: its row, no blob
                return await self.request("POST", url, json=fields)
            # The file is opened afresh for each try: a consumed stream cannot be sent twice.
            with path.open("rb") as fh:
                return await self.request(
                    "POST",
                    url,
                    data=fields,
                    files={"blob": (path.name, fh, "application/octet-stream")},
                    timeout_s=self._upload_timeout,
                )

        return FileRow.model_validate((await upload()).json())

    @_ride_out_restart
    async def charge_audio(self, claim: Claim, duration_ms: int) -> str | None:
        body = {"token": claim.token, "duration_ms": duration_ms}
        data = (await self.request("POST", f"/api/pipeline/records/{claim.id}/audio", json=body)).json()
        return None if data.get("fits") else str(data.get("reason") or "over the sender's audio quota")

    async def create_attempt(
        self, claim: Claim, *, provider: str, model: str, audio_uri: str = "", piece: int = 0, offset_ms: int = 0
    ) -> str:
        body = {
            "token": claim.token,
            "provider": provider,
            "model": model,
            "audio_uri": audio_uri,
            "piece": piece,
            "offset_ms": offset_ms,
            "write_key": _write_key(),
        }
        resp = await self._write("POST", f"/api/pipeline/records/{claim.id}/attempts", json=body)
        return str(resp.json()["id"])

    async def update_attempt(self, claim: Claim, attempt_id: str, change: AttemptChange) -> AttemptRow:
        path = f"/api/pipeline/records/{claim.id}/attempts/{attempt_id}"
        fields: dict[str, Any] = {"token": claim.token}
        for name in ("operation_id", "audio_uri", "status"):
            value = getattr(change, name)
            if value is not None:
                fields[name] = str(value)
        if change.copies_removed_at is not None:
            fields["copies_removed_at"] = change.copies_removed_at
        if change.raw_response is None:
            return AttemptRow.model_validate((await self._write("POST", path, json=fields)).json())
        fields = {k: str(v) for k, v in fields.items()}
        resp = await self._write(
            "POST",
            path,
            data=fields,
            files={"raw_response": (change.raw_name, change.raw_response, "application/octet-stream")},
            timeout_s=self._upload_timeout,
        )
        return AttemptRow.model_validate(resp.json())

    async def put_text(
        self, claim: Claim, kind: str, content: str, segments: Any = None, *, language: str | None = None
    ) -> None:
        """The record's text of ``kind`` (created or replaced) and, with it, the language it is in."""
        body: dict[str, Any] = {"token": claim.token, "content": content, "segments": segments}
        if language:
            body["language"] = language
        await self._write("PUT", f"/api/pipeline/records/{claim.id}/texts/{kind}", json=body)

    # -- provider-side copies (O6) ---------------------------------------------------------

    async def attempts_to_sweep(self, limit: int = 100) -> list[SweepItem]:
        rows = await self.request(
            "GET",
            "/api/collections/recognition_attempts/records",
            params={
                "filter": 'copies_removed_at = 0 && (operation_id != "" || audio_uri != "")',
                "expand": "record",
                "fields": "id,record,provider,operation_id,audio_uri,status,created,copies_error,"
                "expand.record.state,expand.record.halted_at",
                "sort": "created",
                "perPage": limit,
            },
        )
        items = []
        for row in rows.json().get("items", []):
            record = row.get("expand", {}).get("record", {})
            items.append(
                SweepItem(
                    AttemptRow.model_validate(row), str(record.get("state", "")), str(record.get("halted_at", ""))
                )
            )
        return items

    @_ride_out_restart
    async def copies_removed(self, attempt_id: str, error: str = "") -> None:
        body = {"now": self.clock.now_ms(), "error": error}
        await self.request("POST", f"/api/pipeline/attempts/{attempt_id}/copies", json=body)

    # -- normalized copies of finished recordings -------------------------------------------

    async def records_with_normalized_copies(self, done_before_ms: int, limit: int = 100) -> list[str]:
        done_before = int(done_before_ms)
        resp = await self.request(
            "GET",
            "/api/collections/files/records",
            params={
                "filter": 'role = "normalized" && removed_at = 0 && blob != "" && record.state = "done" '
                f'&& record.halted_at = "" && record.state_entered_at <= {done_before}',
                "fields": "record",
                "sort": "created",
                "perPage": limit,
                "skipTotal": "true",
            },
        )
        return list(dict.fromkeys(str(r["record"]) for r in resp.json().get("items", [])))

    @_ride_out_restart
    async def remove_normalized(self, record_id: str, done_before_ms: int) -> tuple[int, int]:
        body = {"now": self.clock.now_ms(), "done_before": int(done_before_ms)}
        resp = await self.request("POST", f"/api/pipeline/records/{record_id}/normalized/remove", json=body)
        data = resp.json()
        return int(data["removed"]), int(data["bytes"])


def _write_key() -> str:
    return uuid.uuid4().hex


def _unreadable(exc: ValidationError) -> str:
    """What did not read, by field and expected kind (never the values: a title is the sender's)."""
    said = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_input=False)[:5]]
    return "; ".join(said)


def _record_rows(rows: dict[str, Any]) -> RecordRows:
    """A record's rows as the claim or the back-relation read carries them."""
    files = rows.get("files") or []
    attempts = rows.get("attempts") or rows.get("recognition_attempts") or []
    return RecordRows(
        [FileRow.model_validate(r) for r in files],
        [AttemptRow.model_validate(r) for r in attempts],
    )
