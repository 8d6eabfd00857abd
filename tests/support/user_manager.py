"""A real systemd to run the shipped unit under, on a host where systemd is not PID 1 (a container, CI).

systemd's user manager (``systemd --user``) runs units exactly as the system manager does (the
same ``[Service]`` semantics: sandboxing, restarts, stop signals, state directories), and runs as
root once ``/run/systemd/system`` exists: that directory is only the "booted with systemd" marker,
made here when missing and removed again after. One manager runs at a time on a machine (they
would share control groups); each gets directories of its own (``XDG_RUNTIME_DIR`` for its
sockets, ``XDG_CONFIG_HOME`` for unit files and, as ``%S``, state directories, ``XDG_CACHE_HOME``
as ``%C``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.waiting import eventually_sync

SYSTEMD = Path("/lib/systemd/systemd")
BOOTED = Path("/run/systemd/system")
_LOCK = Path("/run/transcriber-tests-systemd.lock")


def missing() -> str | None:
    """Why a user manager cannot run here, or None."""
    if shutil.which("systemctl") is None or not SYSTEMD.is_file():
        return "systemd is not installed (apt-get install systemd)"
    if os.geteuid() != 0 and not BOOTED.is_dir():
        return f"a user manager needs {BOOTED} (made by root) or a systemd booted as PID 1"
    return None


@contextmanager
def machine_turn() -> Iterator[None]:
    """One user manager on the machine at a time, and ``/run/systemd/system`` present meanwhile (made
    if missing, and then removed after). Two managers started in the same control group would both
    put their units' processes in the same groups (``app.slice/transcriber.service``): one stopping
    its unit would kill the other's."""
    with _LOCK.open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = not BOOTED.is_dir()
        if made:
            BOOTED.mkdir(parents=True)
        try:
            yield
        finally:
            if made:
                BOOTED.rmdir()


@dataclass
class UserManager:
    home: Path
    proc: subprocess.Popen[bytes]

    @property
    def runtime(self) -> Path:
        return self.home / "runtime"

    @property
    def config(self) -> Path:
        """``XDG_CONFIG_HOME``: the unit files (``systemd/user/``) and ``%S`` (systemd 252 keeps a user
        manager's state directories there; later releases in ``XDG_STATE_HOME``, set to the same place)."""
        return self.home / "config"

    @property
    def cache(self) -> Path:
        """``XDG_CACHE_HOME``: ``%C``."""
        return self.home / "cache"

    @property
    def units(self) -> Path:
        return self.config / "systemd" / "user"

    def env(self) -> dict[str, str]:
        return _environment(self.home)

    def systemctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["systemctl", "--user", *args], env=self.env(), capture_output=True, text=True, timeout=120, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"systemctl --user {' '.join(args)}: {done.returncode}: {done.stderr}{done.stdout}")
        return done

    def show(self, unit: str, *props: str) -> dict[str, str]:
        out = self.systemctl("show", unit, *(f"--property={p}" for p in props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def install(self, unit_file: Path, dropin: str) -> str:
        """``unit_file`` copied unchanged, with ``dropin`` as ``<unit>.d/test.conf``; returns the unit's name."""
        self.units.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(unit_file, self.units / unit_file.name)
        d = self.units / f"{unit_file.name}.d"
        d.mkdir(exist_ok=True)
        (d / "test.conf").write_text(dropin)
        self.systemctl("daemon-reload")
        return unit_file.name


def _environment(home: Path) -> dict[str, str]:
    """The manager's whole environment (and so its services' base): nothing of the test run's own."""
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "XDG_RUNTIME_DIR": str(home / "runtime"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_STATE_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }


@contextmanager
def user_manager(home: Path) -> Iterator[UserManager]:
    """A ``systemd --user`` of its own under ``home``, exited at the end."""
    with machine_turn():
        for sub in ("runtime", "config", "cache"):
            (home / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        with (home / "manager.log").open("ab") as log:
            proc = subprocess.Popen(
                [str(SYSTEMD), "--user"],
                env=_environment(home),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        manager = UserManager(home, proc)

        def up() -> bool:
            assert proc.poll() is None, (home / "manager.log").read_text()
            return manager.systemctl("is-system-running", check=False).stdout.strip() in ("running", "degraded")

        try:
            eventually_sync(up, within=60, what="the user manager running")
            yield manager
        finally:
            if proc.poll() is None:
                manager.systemctl("exit", check=False)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
