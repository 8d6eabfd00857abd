"""The sender's side of the HTTP contract, used by ``transcriber transcribe``, ``transcriber wait`` and ``demo``.

Upload a file (its bytes streamed from disk, with their own progress), say
the record's id, then poll until the transcript is ready and fetch it in
the format asked (the txt export included: speaker labels as the HTTP
export has them).

While waiting it rides out a server that goes away for a while (a
PocketBase restart, a dropped connection, 5xx, 429): it notes the outage
once, backs off (``stamina``), and goes on; a token the restarted server no
longer accepts is replaced by signing in again. The upload itself is never
repeated on its own: a second upload would be a second recording.

What it shows goes to stderr, so stdout carries the transcript alone: on a
terminal, bars; elsewhere (a log, a pipe), one plain line per change.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol, cast

import httpx
import stamina
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from sidecar.activity import words_for
from sidecar.sender.devices import HEADER, DeviceTokens
from sidecar.transcript.languages import LANGUAGES

__all__ = [
    "FORMATS",
    "Display",
    "Lines",
    "SenderError",
    "Session",
    "check_options",
    "display_for",
    "shown",
    "transcribe_file",
    "wait_for",
]

FORMATS = ("txt", "srt", "vtt", "json")

# How long a poll waits between tries while the server is away: from half a second, doubling, up to this.
OUTAGE_WAIT_MAX = 5.0

# stamina logs each retry through the standard library; the command says it its own way (once per outage).
logging.getLogger("stamina").addHandler(logging.NullHandler())


class SenderError(Exception):
    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Unavailable(Exception):
    """The server did not answer this time (unreachable, 5xx, 429); worth asking again."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


def check_options(fmt: str, language: str | None) -> None:
    """Refuses a format or a language the server would refuse, before anything is uploaded (exit 2)."""
    if fmt not in FORMATS:
        raise SenderError(f"unknown format '{fmt}': use txt, srt, vtt or json", exit_code=2)
    if language is not None and language not in LANGUAGES:
        raise SenderError(
            f"unknown language '{language}': use an ISO 639-1 code such as ru or en, or leave it out", exit_code=2
        )


def _error(resp: httpx.Response) -> str:
    try:
        return str(resp.json().get("message", resp.text))
    except ValueError:
        return resp.text[:300]


# --- what the sender sees ---------------------------------------------------------------


def shown(name: str, body: dict[str, Any]) -> tuple[str, float | None]:
    """What is said while waiting on a poll body: what is happening, and how far it has come (0..1)."""
    words = words_for(body.get("activity"), body.get("status"))
    language = body.get("language")
    description = f"{name}: {words}" + (f" ({language})" if isinstance(language, str) and language else "")
    fraction = body.get("progress")
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not math.isfinite(fraction):
        return description, None
    return description, min(max(float(fraction), 0.0), 1.0)


class Display(Protocol):
    def note(self, text: str) -> None:
        """A line of its own (the record's id, an outage and its end)."""
        ...

    def uploading(self, name: str, sent: int, total: int) -> None: ...

    def waiting(self, name: str, body: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class Lines:
    """Without a terminal: one plain line per change (a tenth of the upload; what is happening, or a percent)."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._last_upload = -1
        self._last: str = ""

    def _say(self, text: str) -> None:
        self._out.write(text + "\n")
        self._out.flush()

    def note(self, text: str) -> None:
        self._say(text)

    def uploading(self, name: str, sent: int, total: int) -> None:
        tenth = 10 if total <= 0 else min(10, sent * 10 // total)
        if tenth != self._last_upload:
            self._last_upload = tenth
            self._say(f"{name}: uploading {tenth * 10}% ({_size(sent)} of {_size(total)})")

    def waiting(self, name: str, body: dict[str, Any]) -> None:
        description, fraction = shown(name, body)
        line = description if fraction is None else f"{description} {math.floor(fraction * 100)}%"
        if line != self._last:
            self._last = line
            self._say(line)

    def close(self) -> None:
        return None


class Bars:
    """On a terminal: a bar of the bytes sent while uploading, then one of the work's progress."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._kind = ""

    def _bar(self, kind: str, description: str, total: float | None) -> tuple[Progress, TaskID]:
        if self._progress is None or self._task is None or self._kind != kind:
            self.close()
            if kind == "upload":
                columns: tuple[Any, ...] = (
                    TextColumn("{task.description}"),
                    BarColumn(),
                    DownloadColumn(),
                    TransferSpeedColumn(),
                    TimeRemainingColumn(),
                )
            else:
                columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TaskProgressColumn())
                columns += (TimeElapsedColumn(),)
            self._progress = Progress(*columns, console=self._console, transient=True)
            self._task = self._progress.add_task(description, total=total)
            self._progress.start()
            self._kind = kind
        return self._progress, self._task

    def note(self, text: str) -> None:
        self._console.print(text, markup=False, highlight=False)  # above a running bar

    def uploading(self, name: str, sent: int, total: int) -> None:
        progress, task = self._bar("upload", f"{name}: uploading", total or None)
        progress.update(task, completed=sent)

    def waiting(self, name: str, body: dict[str, Any]) -> None:
        description, fraction = shown(name, body)
        # Unknown progress (null) is a pulsing bar; known, a filling one.
        total = 1.0 if fraction is not None else None
        progress, task = self._bar("wait", description, total)
        progress.update(task, description=description, total=total)
        if fraction is not None:
            progress.update(task, completed=fraction)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        self._progress, self._task, self._kind = None, None, ""


def display_for(console: Console | None = None) -> Display:
    """Bars on a terminal, plain lines elsewhere (stderr either way)."""
    console = console or Console(stderr=True)
    if console.is_terminal and not console.is_dumb_terminal:
        return Bars(console)
    return Lines(console.file)


def _size(n: int) -> str:
    if n < 1000:
        return f"{n} B"
    for unit, scale in (("KB", 1e3), ("MB", 1e6)):
        if n < scale * 1000:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1e9:.2f} GB"


# --- talking to the server ---------------------------------------------------------------


class _Counted:
    """A file read by httpx in chunks, counting the bytes as they go (memory stays flat whatever its size)."""

    def __init__(self, fh: IO[bytes], on_read: Callable[[int], None]) -> None:
        self._fh = fh
        self._on_read = on_read
        self._read = 0

    def fileno(self) -> int:
        return self._fh.fileno()  # httpx takes the length from it (Content-Length), without reading

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        at = self._fh.seek(offset, whence)
        self._read = at
        return at

    def tell(self) -> int:
        return self._fh.tell()

    def read(self, size: int = -1) -> bytes:
        chunk = self._fh.read(size)
        self._read += len(chunk)
        self._on_read(self._read)
        return chunk


class Session:
    """One sender, signed in; asks again through outages and signs in again when the token is refused."""

    def __init__(
        self, server: str, email: str, password: str, display: Display, devices: DeviceTokens | None = None
    ) -> None:
        self.server = server.rstrip("/")
        self._devices = devices or DeviceTokens()
        self._email = email
        self._password = password
        self._display = display
        self._token = ""
        self._outage = ""  # what went wrong, while the server is away; "" while it answers
        self._outage_since = 0.0
        self.http = httpx.Client(base_url=self.server, timeout=httpx.Timeout(30, write=None, read=600))

    @property
    def email(self) -> str:
        return self._email

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def sign_in(self) -> None:
        # This computer's device token for the account (lib/logins.js): strangers' wrong passwords never keep it out.
        device = self._devices.get(self.server, self._email)
        try:
            resp = self.http.post(
                "/api/collections/users/auth-with-password",
                json={"identity": self._email, "password": self._password},
                headers={HEADER: device} if device else None,
            )
        except httpx.TransportError as exc:
            if self._token:  # signing in again, in the middle of an outage
                raise Unavailable("server unreachable") from exc
            raise SenderError(f"cannot reach {self.server}: {type(exc).__name__}") from exc
        if self._token and (resp.status_code >= 500 or resp.status_code == 429):
            raise Unavailable(f"server answered {resp.status_code}", _retry_after(resp))
        if resp.status_code != 200:
            raise SenderError(f"sign-in failed for {self._email}: {_error(resp)}")
        self._token = str(resp.json()["token"])
        given = resp.headers.get(HEADER)
        if given and given != device:
            self._devices.put(self.server, self._email, given)

    def upload(self, file: Path, *, title: str | None, language: str | None) -> dict[str, Any]:
        """Creates the recording (once: never repeated on its own); its poll body."""
        data = {k: v for k, v in (("title", title), ("language", language)) if v}
        total = file.stat().st_size
        self._display.uploading(file.name, 0, total)
        with file.open("rb") as fh:
            counted = _Counted(fh, lambda sent: self._display.uploading(file.name, sent, total))
            try:
                resp = self.http.post(
                    "/api/transcriber/records",
                    files={"file": (file.name, cast(IO[bytes], counted))},
                    data=data,
                    headers={"Authorization": self._token},
                )
            except httpx.TransportError as exc:
                raise SenderError(
                    f"the upload did not complete ({type(exc).__name__}); if the server got it all, "
                    "GET /api/transcriber/records lists the recording"
                ) from exc
        if resp.status_code != 201:
            raise SenderError(f"upload refused ({resp.status_code}): {_error(resp)}")
        return dict(resp.json())

    def get(self, path: str, *, until: float, **params: str) -> httpx.Response:
        """GET ``path``, asking again through outages until the monotonic time ``until``."""
        for attempt in stamina.retry_context(
            on=self._outage_hook,
            attempts=None,
            timeout=max(until - time.monotonic(), 1.0),
            wait_initial=0.5,
            wait_max=OUTAGE_WAIT_MAX,
            wait_jitter=0.5,
        ):
            with attempt:
                resp = self._once("GET", path, params)
        if self._outage:
            self._display.note(f"server back after {time.monotonic() - self._outage_since:.0f} s")
            self._outage = ""
        return resp

    def _once(self, method: str, path: str, params: dict[str, str]) -> httpx.Response:
        for again in (True, False):
            try:
                resp = self.http.request(method, path, params=params, headers={"Authorization": self._token})
            except httpx.TransportError as exc:
                raise Unavailable("server unreachable") from exc
            if resp.status_code == 401 and again:
                self.sign_in()  # a restarted server may no longer know the token
                continue
            if resp.status_code >= 500 or resp.status_code == 429:
                raise Unavailable(f"server answered {resp.status_code}", _retry_after(resp))
            return resp
        return resp

    def _outage_hook(self, exc: Exception) -> bool | float:
        """stamina's verdict on a failure: what is worth asking again, and after how long (Retry-After)."""
        if not isinstance(exc, Unavailable):
            return False
        if not self._outage:
            self._outage, self._outage_since = str(exc), time.monotonic()
            self._display.note(f"{exc}, retrying…")
        return exc.retry_after if exc.retry_after is not None else True


def _retry_after(resp: httpx.Response) -> float | None:
    try:
        return min(float(resp.headers.get("Retry-After", "")), 60.0)
    except ValueError:
        return None


# --- the commands ------------------------------------------------------------------------


def transcribe_file(
    server: str,
    email: str,
    password: str,
    file: Path,
    *,
    fmt: str = "txt",
    title: str | None = None,
    language: str | None = None,
    timeout: float = 86400,
    poll_every: float = 0.2,
    console: Console | None = None,
    on_record: Callable[[str], None] | None = None,
) -> str:
    """Uploads ``file``, says its record id, waits for ``done`` and returns the transcript in ``fmt``.

    ``on_record`` is told the record's id the moment it exists (a caller that
    stops waiting can say how to resume).
    """
    check_options(fmt, language)
    display = display_for(console)
    try:
        with Session(server, email, password, display) as session:
            session.sign_in()
            body = session.upload(file, title=title, language=language)
            display.close()
            display.note(f"record: {body['id']}")
            if on_record is not None:
                on_record(str(body["id"]))
            return _wait(session, display, str(body["id"]), file.name, fmt, timeout, poll_every)
    finally:
        display.close()


def wait_for(
    server: str,
    email: str,
    password: str,
    record_id: str,
    *,
    fmt: str = "txt",
    timeout: float = 86400,
    poll_every: float = 0.2,
    console: Console | None = None,
) -> str:
    """Waits for a recording uploaded earlier and returns its transcript in ``fmt``."""
    check_options(fmt, None)
    display = display_for(console)
    try:
        with Session(server, email, password, display) as session:
            session.sign_in()
            display.note(f"record: {record_id}")
            return _wait(session, display, record_id, record_id, fmt, timeout, poll_every)
    finally:
        display.close()


def _wait(session: Session, display: Display, rid: str, name: str, fmt: str, timeout: float, every: float) -> str:
    deadline = time.monotonic() + timeout
    wait = every
    last: tuple[object, ...] = ()
    while True:
        try:
            poll = session.get(f"/api/transcriber/records/{rid}", until=deadline)
        except Unavailable as exc:
            raise SenderError(f"{exc} for too long; resume with: transcriber wait {rid}", exit_code=4) from exc
        if poll.status_code == 404:
            raise SenderError(f"no recording {rid} of {session.email}")
        if poll.status_code != 200:
            raise SenderError(f"poll failed ({poll.status_code}): {_error(poll)}")
        body = poll.json()
        display.waiting(name, body)
        if body["halted"]:
            raise SenderError(f"recording {rid} halted: {body['halt_code']}", exit_code=3)
        if body["status"] == "done":
            break
        if time.monotonic() > deadline:
            raise SenderError(
                f"gave up waiting after {timeout:.0f} s ({body['status']}); resume with: transcriber wait {rid}",
                exit_code=4,
            )
        # A long recording is polled less often while nothing changes (up to every 5 s).
        now = tuple(body.get(k) for k in ("status", "activity", "progress", "language"))
        wait = every if now != last else min(wait * 1.5, max(every, 5.0))
        last = now
        time.sleep(wait)
    display.close()
    try:
        out = session.get(f"/api/transcriber/records/{rid}/transcript", until=deadline + 300, format=fmt)
    except Unavailable as exc:
        raise SenderError(f"{exc} for too long; resume with: transcriber wait {rid}", exit_code=4) from exc
    if out.status_code != 200:
        raise SenderError(f"export failed ({out.status_code}): {_error(out)}")
    return out.text


def write_transcript(text: str, out: IO[bytes] | None = None, *, terminal: bool | None = None) -> None:
    """The transcript on stdout exactly as the server's export has it (a newline added only on a terminal)."""
    stream = out if out is not None else sys.stdout.buffer
    tty = terminal if terminal is not None else sys.stdout.isatty()
    data = text.encode("utf-8")
    if tty and not data.endswith(b"\n"):
        data += b"\n"
    stream.write(data)
    stream.flush()
