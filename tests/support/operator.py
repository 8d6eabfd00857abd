"""The service run as an operator runs it: ``transcriber serve`` (or its two halves) as real processes,
stopped the ways an operator's tools stop them (a terminal's Ctrl-C, ``kill``, systemd, docker compose).

The records are read from PocketBase's database file directly, so they can be
compared before a stop and after it, when nothing answers HTTP any more.
"""

from __future__ import annotations

import configparser
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from sidecar.pocketbase.process import wait_healthy
from testkit.audio import compose_wav
from testkit.pocketbase import PASSWORD, Caller, free_port, signed_in
from tests.support.waiting import eventually_sync

ROOT = Path(__file__).resolve().parents[2]
SPEECH = ROOT / "tests" / "data" / "speech"
CLI = [sys.executable, "-m", "sidecar"]
OWNER = "owner@example.com"


# Rounds of a meeting long enough (about ten minutes) for recognition to be seen under way and
# stopped mid-way: with the speakers beside the words, a shorter one's progress came in one batch, at its end.
LONG_ROUNDS = 24


def meeting(tmp: Path, rounds: int = 4) -> Path:
    """A recording of ``rounds`` × the six English clips with pauses (about 25 s a round)."""
    clips = sorted(SPEECH.glob("*.ogg"))
    return compose_wav([p for _ in range(rounds) for c in clips for p in (c, 0.4)], tmp / f"meeting-{rounds}.wav")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a fresh shell: none of the test run's own TRANSCRIBER_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRANSCRIBER_")}
    env.update(extra)
    return env


@dataclass
class Served:
    """One ``transcriber serve`` on a data directory and a port, restartable."""

    data: Path
    port: int
    log: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    _sender: Caller | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, session: bool = True) -> subprocess.Popen[bytes]:
        """Starts ``serve``; ``session``: in a session of its own, as a terminal's job or a service unit is."""
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [*CLI, "serve", "--data-dir", str(self.data), "--http", f"127.0.0.1:{self.port}"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=session,
            )
        return self.proc

    def wait_ready(self, within: float = 120) -> None:
        assert self.proc is not None
        runs = self.log.read_text().count("workers running") if self.log.exists() else 0
        wait_healthy(self.url, self.proc, timeout=within)
        eventually_sync(
            lambda: self._alive() and self.log.read_text().count("workers running") > runs,
            within=within,
            what="serve's workers running",
        )

    def _alive(self) -> bool:
        assert self.proc is not None
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        return True

    def pocketbase(self) -> psutil.Process:
        """The PocketBase this serve started."""
        assert self.proc is not None
        children = [p for p in psutil.Process(self.proc.pid).children() if "pocketbase" in p.name()]
        assert len(children) == 1, children
        return children[0]

    def sender(self) -> Caller:
        """A sender signed in afresh (the account made once, with the CLI, as the README says)."""
        if self._sender is None:
            subprocess.run(
                [*CLI, "user", "add", "ann@example.com", "--password", PASSWORD, "--data-dir", str(self.data)],
                env=self.env,
                capture_output=True,
                check=True,
                timeout=120,
            )
        else:
            self._sender.http.close()
        self._sender = signed_in(self.url, "sender", "users", "ann@example.com")
        return self._sender

    def upload(self, audio: Path) -> str:
        return self.sender().upload(audio)

    def row(self, rid: str) -> dict[str, Any]:
        return db_row(self.data, rid)

    def journal(self, rid: str) -> list[tuple[str, str]]:
        return db_journal(self.data, rid)

    def wait_mid_recognition(self, rid: str, within: float = 240) -> dict[str, Any]:
        """The record as it stands once recognition has moved (progress > 0) under a live claim."""

        def moving() -> dict[str, Any] | None:
            self._alive()
            row = self.row(rid)
            ok = row["state"] == "normalized" and row["claim_token"] and row["progress"] > 0
            return row if ok else None

        found = eventually_sync(moving, within=within, every=0.2, what="recognition under way")
        assert found is not None
        return found

    def wait_done(self, rid: str, within: float) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            row = self.row(rid)
            assert not row["halted_at"], row
            return row if row["state"] == "done" else None

        found = eventually_sync(done, within=within, every=0.5, what=f"{rid} done")
        assert found is not None
        return found

    def close(self) -> None:
        if self._sender is not None:
            self._sender.http.close()
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextmanager
def served(tmp: Path, **env: str) -> Iterator[Served]:
    """A ``serve`` with an owner's account (to read the panel's view), stopped at the end."""
    s = Served(
        tmp / "pb_data",
        free_port(),
        tmp / "serve.log",
        clean_env(
            TRANSCRIBER_POCKETBASE__SUPERUSER_EMAIL=OWNER,
            TRANSCRIBER_POCKETBASE__SUPERUSER_PASSWORD=PASSWORD,
            **env,
        ),
    )
    try:
        yield s
    finally:
        s.close()


def db_row(data: Path, rid: str) -> dict[str, Any]:
    with closing(sqlite3.connect(f"file:{data / 'data.db'}?mode=ro", uri=True, timeout=30)) as db:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM audio_records WHERE id = ?", (rid,)).fetchone()
    assert row is not None, rid
    return dict(row)


def db_journal(data: Path, rid: str) -> list[tuple[str, str]]:
    """The record's journal, oldest first: (kind, text)."""
    with closing(sqlite3.connect(f"file:{data / 'data.db'}?mode=ro", uri=True, timeout=30)) as db:
        rows = db.execute(
            "SELECT kind, outcome_text FROM record_events WHERE record = ? ORDER BY created, rowid", (rid,)
        ).fetchall()
    return [(str(k), str(t)) for k, t in rows]


def family(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """A process and all its descendants (what a service manager's control group holds)."""
    main = psutil.Process(proc.pid)
    return [main, *main.children(recursive=True)]


def gone(processes: Sequence[psutil.Process], within: float) -> bool:
    _, alive = psutil.wait_procs(list(processes), timeout=within)
    return not alive


# -- systemd ------------------------------------------------------------------------------------------


def read_unit(path: Path) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    unit.read(path)
    return unit


def systemd_seconds(value: str) -> float:
    """A systemd time span ("90", "1min 30s", "60s")."""
    units = {"": 1, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "ms": 0.001}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * units[unit]
    return total


def systemd_stop(unit_file: Path, proc: subprocess.Popen[bytes]) -> int:
    """Stops ``proc`` as systemd stops the unit: KillSignal to the main process alone (KillMode=mixed)
    or to every process of the control group at once (control-group, the default); whatever is left
    after TimeoutStopSec gets SIGKILL. Returns the main process's exit status."""
    service = read_unit(unit_file)["Service"]
    mode = service.get("KillMode", "control-group")
    sig = signal.Signals[service.get("KillSignal", "SIGTERM")]
    timeout = systemd_seconds(service.get("TimeoutStopSec", "90"))
    group = family(proc)
    targets = group if mode == "control-group" else group[:1] if mode == "mixed" else []
    for p in targets:
        p.send_signal(sig)
    deadline = time.monotonic() + timeout
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        code = -9
    remaining = max(deadline - time.monotonic(), 0.0)
    _, alive = psutil.wait_procs(group, timeout=remaining)
    for p in alive:  # systemd's final SIGKILL to what is left in the control group
        p.kill()
    return code


# -- docker compose ----------------------------------------------------------------------------------


def compose_seconds(value: str | None, default: float = 10.0) -> float:
    """A compose duration ("30s", "1m30s", "1m")."""
    if not value:
        return default
    spans = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(n) * spans[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", str(value)))


def compose_stop_order(services: dict[str, Any]) -> list[str]:
    """``docker compose stop``'s order: a service before the services it depends on."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        for other, spec in services.items():  # dependents first
            if name in (spec.get("depends_on") or {}):
                visit(other)
        order.append(name)

    for name in services:
        visit(name)
    return order


def compose_stop(services: dict[str, Any], procs: dict[str, subprocess.Popen[bytes]]) -> dict[str, int]:
    """Stops each service's main process as ``docker compose stop`` does its container: in
    dependency order, ``stop_signal`` (SIGTERM), then SIGKILL after ``stop_grace_period``."""
    codes: dict[str, int] = {}
    for name in compose_stop_order(services):
        spec, proc = services[name], procs[name]
        proc.send_signal(signal.Signals[spec.get("stop_signal", "SIGTERM")])
        try:
            codes[name] = proc.wait(compose_seconds(spec.get("stop_grace_period")))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes[name] = proc.wait()
    return codes
