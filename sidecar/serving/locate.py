"""Which server an owner's or a sender's command means: one answer for every command.

``serve`` decides its data directory and address from ``--data-dir``/``--http`` and the
settings (file and environment). The other commands take the same flags (``--server`` is
``--http``'s other name) and, when none is given, find the server the way an owner means
it: the settings where they name one, else the ``transcriber serve`` (or ``pocketbase``)
running on this host, else the settings' defaults. Running servers are found by their
PocketBase's command line (``--dir=``, ``--http=``), which ``serve`` always writes in full,
so nothing has to be remembered on disk and nothing goes stale when a server stops.

Every answer says how it was found (``how``), so an error can name the server tried and
the flag that changes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from sidecar.settings import Settings

NAME_IT = "name it with --data-dir DIR or --server HOST:PORT"


class ServerNotFound(Exception):
    """No single server answers the description; the message says what to pass."""


@dataclass(frozen=True)
class RunningServer:
    pid: int
    data_dir: Path
    listen: str
    cwd: Path | None

    @property
    def url(self) -> str:
        return url_of(self.listen)

    def describe(self) -> str:
        return f"{self.data_dir} on {self.listen} (PID {self.pid})"


@dataclass(frozen=True)
class Server:
    data_dir: Path
    url: str
    how: str  # how it was found, for the messages: "--data-dir", "the server running on this host (PID 12)", …
    running: RunningServer | None


def url_of(address: str) -> str:
    """``HOST:PORT`` or a URL as a URL to connect to (a wildcard listen address is reached on loopback)."""
    address = address.strip().rstrip("/")
    if "://" in address:
        return address
    host, _, port = address.rpartition(":")
    if host in ("", "0.0.0.0", "[::]", "::"):  # noqa: S104 - a listen address, read, never bound here
        host = "127.0.0.1"
    return f"http://{host}:{port}"


def _port(address: str) -> str:
    return address.rstrip("/").rpartition(":")[2]


def running_servers() -> list[RunningServer]:
    """The PocketBase servers running on this host that ``transcriber`` started (any user's it may see)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        args = proc.info["cmdline"] or []
        if not args or Path(args[0]).name != "pocketbase" or "serve" not in args:
            continue
        options = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
        if "dir" not in options or "http" not in options:
            continue
        try:
            cwd: Path | None = Path(proc.cwd())
        except psutil.Error:
            cwd = None
        data_dir = Path(options["dir"])
        if not data_dir.is_absolute():
            if cwd is None:
                continue
            data_dir = cwd / data_dir
        found.append(RunningServer(proc.info["pid"], data_dir.resolve(), options["http"], cwd))
    return found


def locate(settings: Settings, *, data_dir: Path | None = None, server: str | None = None) -> Server:
    """The server a command means: named by a flag, by the settings, or running here; else the defaults."""
    pb = settings.pocketbase
    running = running_servers()
    if data_dir is not None:
        return _on_dir(running, data_dir, server or _named_url(settings), "named by --data-dir")
    if server is not None:
        return _at(running, url_of(server), pb.data_dir, "named by --server")
    named = pb.model_fields_set
    if "data_dir" in named:
        return _on_dir(running, pb.data_dir, _named_url(settings), "[pocketbase] data_dir in the settings")
    configured = _named_url(settings)
    if configured is not None:
        return _at(running, configured, pb.data_dir, "[pocketbase] url in the settings")
    here = Path.cwd().resolve()
    chosen = [r for r in running if r.cwd is not None and r.cwd.resolve() == here] if len(running) > 1 else running
    if len(chosen) == 1:
        r = chosen[0]
        return Server(r.data_dir, r.url, f"the server running on this host (PID {r.pid})", r)
    if len(chosen) > 1 or running:
        servers = "; ".join(r.describe() for r in (chosen or running))
        raise ServerNotFound(f"several servers run on this host ({servers}): {NAME_IT}")
    return Server(pb.data_dir.expanduser().resolve(), pb.url, "the default: no server runs on this host", None)


def _named_url(settings: Settings) -> str | None:
    """The address the settings name: ``url``, else where ``http`` has the server listen; None: neither."""
    pb = settings.pocketbase
    if "url" in pb.model_fields_set:
        return pb.url
    return url_of(pb.http) if "http" in pb.model_fields_set else None


def _on_dir(running: list[RunningServer], data_dir: Path, url: str | None, how: str) -> Server:
    path = data_dir.expanduser().resolve()
    mine = next((r for r in running if r.data_dir == path), None)
    if url is None:
        url = mine.url if mine else "http://127.0.0.1:8090"
    return Server(path, url, how, mine)


def _at(running: list[RunningServer], url: str, data_dir: Path, how: str) -> Server:
    port = _port(url)
    mine = next((r for r in running if _port(r.listen) == port), None)
    return Server(mine.data_dir if mine else data_dir.expanduser().resolve(), url, how, mine)


def check_reachable(server: Server, timeout: float = 5.0) -> None:
    """Raises ``ServerNotFound`` naming the server and the flag when nothing answers there."""
    try:
        answer = httpx.get(f"{server.url.rstrip('/')}/api/health", timeout=timeout)
    except httpx.TransportError as exc:
        raise ServerNotFound(
            f"cannot reach the server at {server.url} ({server.how}; {type(exc).__name__}):"
            f" start it (transcriber serve), or {NAME_IT}"
        ) from None
    if answer.status_code != 200:
        raise ServerNotFound(
            f"{server.url} ({server.how}) answers /api/health with {answer.status_code}: is it this service? {NAME_IT}"
        )


def is_new(data_dir: Path) -> bool:
    """A directory no server has used yet (no ``data.db``): a command would create it."""
    return not (data_dir / "data.db").is_file()
