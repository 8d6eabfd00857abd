"""One data directory, one server.

Two PocketBase servers on one data directory would both write its SQLite
files and both run the claim route: the second is refused before anything
starts. ``serve`` and ``pocketbase`` take an exclusive lock on
``<data_dir>/transcriber.lock`` (``flock``: the kernel drops it when the
holder dies, however it dies, so a crash never leaves a stale lock) and
write who holds it there, for the refusal to name. The PocketBase child
inherits the lock, so the directory stays taken until the last of them is
gone.

A ``pocketbase serve`` started by hand on the same directory takes no lock;
it is found among the running processes by its ``--dir``.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import psutil

LOCK_FILE = "transcriber.lock"


class DataDirInUse(Exception):
    """Another server holds the data directory; the message names it."""


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.resolve()
        self.path = self.data_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def fd(self) -> int:
        """The lock's file descriptor, for a child that must hold it too (``pass_fds``)."""
        assert self._fd is not None, "not locked"
        return self._fd

    def acquire(self, command: str, listen: str) -> None:
        """Takes the directory for this process, or raises ``DataDirInUse`` naming who has it."""
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe_holder(fd)
            os.close(fd)
            raise DataDirInUse(f"the data directory {self.data_dir} is in use by {holder}") from None
        stranger = foreign_server(self.data_dir)
        if stranger:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise DataDirInUse(f"the data directory {self.data_dir} is in use by {stranger}")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "command": command, "listen": listen}).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the lock
            self._fd = None


def _describe_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        info = {}
    pid, command, listen = info.get("pid"), info.get("command", "a server"), info.get("listen", "")
    where = f", listening on {listen}" if listen else ""
    if isinstance(pid, int) and psutil.pid_exists(pid):
        return f"{command} (PID {pid}{where})"
    # The starter is gone but the lock is held: its PocketBase child is still running (or stopping).
    return f"the PocketBase that {command} (PID {pid}, exited) started{where}"


def foreign_server(data_dir: Path) -> str:
    """A running ``pocketbase serve`` on ``data_dir`` that this process did not start, described; or ""."""
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "ppid", "cmdline"]):
        args = proc.info["cmdline"] or []
        if proc.info["pid"] == me or proc.info["ppid"] == me or "serve" not in args:
            continue
        for arg in args:
            if arg.startswith("--dir=") and _same_dir(arg.removeprefix("--dir="), data_dir, proc):
                return f"PocketBase (PID {proc.info['pid']}: {' '.join(args)[:200]})"
    return ""


def _same_dir(value: str, data_dir: Path, proc: psutil.Process) -> bool:
    path = Path(value)
    if not path.is_absolute():
        try:
            path = Path(proc.cwd()) / path
        except psutil.Error:
            return False
    try:
        return path.resolve() == data_dir
    except OSError:
        return False
