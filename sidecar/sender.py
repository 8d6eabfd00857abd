"""The sender's side of the HTTP contract, used by ``transcriber transcribe`` and ``demo``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn


class SenderError(Exception):
    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _error(resp: httpx.Response) -> str:
    try:
        return str(resp.json().get("message", resp.text))
    except ValueError:
        return resp.text[:300]


def transcribe_file(
    server: str,
    email: str,
    password: str,
    file: Path,
    *,
    fmt: str = "txt",
    title: str | None = None,
    timeout: float = 86400,
    poll_every: float = 0.2,
    console: Console | None = None,
) -> str:
    """Uploads ``file``, waits for ``done`` with a progress display, returns the transcript in ``fmt``."""
    console = console or Console(stderr=True)
    with httpx.Client(base_url=server.rstrip("/"), timeout=httpx.Timeout(30, write=None, read=600)) as http:
        try:
            auth = http.post(
                "/api/collections/users/auth-with-password", json={"identity": email, "password": password}
            )
        except httpx.TransportError as exc:
            raise SenderError(f"cannot reach {server}: {type(exc).__name__}") from exc
        if auth.status_code != 200:
            raise SenderError(f"sign-in failed for {email}: {_error(auth)}")
        http.headers["Authorization"] = auth.json()["token"]

        with file.open("rb") as fh:
            data = {"title": title} if title else {}
            resp = http.post("/api/transcriber/records", files={"file": (file.name, fh)}, data=data)
        if resp.status_code != 201:
            raise SenderError(f"upload refused ({resp.status_code}): {_error(resp)}")
        rec_id = resp.json()["id"]

        deadline = time.monotonic() + timeout
        wait = poll_every
        with Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress:
            task = progress.add_task(f"{file.name}: uploaded", total=None)
            last: dict[str, object] = {}
            while True:
                poll = http.get(f"/api/transcriber/records/{rec_id}")
                if poll.status_code != 200:
                    raise SenderError(f"poll failed ({poll.status_code}): {_error(poll)}")
                body = poll.json()
                if body["halted"]:
                    raise SenderError(f"recording {rec_id} halted: {body['halt_code']}", exit_code=3)
                description, completed = shown(file.name, body)
                # Unknown progress (null) is a pulsing bar; known, a filling one.
                progress.update(task, description=description, total=1.0 if completed is not None else None)
                if completed is not None:
                    progress.update(task, completed=completed)
                if body["status"] == "done":
                    break
                if time.monotonic() > deadline:
                    raise SenderError(f"gave up waiting after {timeout:.0f} s (status {body['status']})", exit_code=4)
                # A long recording is polled less often while nothing changes (up to every 5 s).
                changed = {k: body.get(k) for k in ("status", "progress")} != last
                last = {k: body.get(k) for k in ("status", "progress")}
                wait = poll_every if changed else min(wait * 1.5, max(poll_every, 5.0))
                time.sleep(wait)

        if fmt == "txt":
            return str(body["text"] or "")
        out = http.get(f"/api/transcriber/records/{rec_id}/transcript", params={"format": fmt})
        if out.status_code != 200:
            raise SenderError(f"export failed ({out.status_code}): {_error(out)}")
        return out.text


def shown(name: str, body: dict[str, Any]) -> tuple[str, float | None]:
    """The line shown while waiting on a poll body: its stage, and how far recognition has come (0..1)."""
    fraction = body.get("progress")
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool):
        return f"{name}: {body['status']}", None
    return f"{name}: {body['status']}", min(max(float(fraction), 0.0), 1.0)
