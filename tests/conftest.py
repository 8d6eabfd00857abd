from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import stamina
from hypothesis import settings

from testkit.pocketbase import Caller, PocketBaseServer, running_pocketbase
from testkit.s3 import S3Server, running_s3

DATA = Path(__file__).parent / "data"

# Retries inside a call (the providers' HTTP, the PocketBase client riding out a
# restart, the sender's command) wait nothing in tests: each keeps its own number
# of attempts, capped, and its backoff is zero. The one place a test's retries are
# made fast; no test defines a quicker policy of its own. Processes a test starts
# (workers, the CLI) keep real backoff: they wait through real restarts.
RETRY_ATTEMPTS_CAP = 20
stamina.set_testing(True, attempts=RETRY_ATTEMPTS_CAP, cap=True)

# Property tests draw the same examples every run, so a run's verdict is the code's, not the draw's;
# HYPOTHESIS_PROFILE=explore draws new ones (a find there becomes an @example).
# No per-example deadline: a busy 2-core machine is slow by moments, which is not a fault.
settings.register_profile("repeatable", derandomize=True, deadline=None)
settings.register_profile("explore", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# The sender's command keeps its device tokens in the user's state directory (sidecar.sender.devices):
# the tests' go to a directory of their own.
os.environ.setdefault(
    "TRANSCRIBER_DEVICES", str(Path(tempfile.mkdtemp(prefix="transcriber-devices-")) / "devices.json")
)

# Figures the survival tests measure (kills survived, stale writes refused, …),
# printed at the end of the run.
FIGURES: dict[str, str] = {}


@pytest.fixture
def figures() -> dict[str, str]:
    return FIGURES


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A test worker (pytest-xdist) hands its figures to the controller, which prints them."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["figures"] = json.dumps(FIGURES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    FIGURES.update(json.loads(getattr(node, "workeroutput", {}).get("figures", "{}")))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("survival figures")
        for name, value in FIGURES.items():
            terminalreporter.write_line(f"{name}: {value}")


@pytest.fixture(autouse=True)
def _environment_kept() -> Iterator[None]:
    """Each test leaves the environment as it found it: ``load_settings(path)`` names its file in
    ``TRANSCRIBER_CONFIG`` for the processes it starts, and a command run later in the same test
    process must not inherit another test's server from there."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """A real S3-compatible server (moto's) on loopback; each test takes its own bucket."""
    with running_s3() as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server) -> str:
    return s3.new_bucket()


@pytest.fixture
def pb(tmp_path: Path) -> Iterator[PocketBaseServer]:
    """A fresh PocketBase per test: the claim tests need an empty queue."""
    with running_pocketbase(tmp_path) as server:
        yield server


@pytest.fixture(scope="module")
def shared_pb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PocketBaseServer]:
    """One PocketBase for a module whose tests do not depend on the queue being empty."""
    with running_pocketbase(tmp_path_factory.mktemp("pb")) as server:
        yield server


@pytest.fixture
def sender(pb: PocketBaseServer) -> Caller:
    return pb.new_sender()


@pytest.fixture
def other_sender(pb: PocketBaseServer) -> Caller:
    return pb.new_sender()


@pytest.fixture
def service(pb: PocketBaseServer) -> Caller:
    return pb.service()


@pytest.fixture
def superuser(pb: PocketBaseServer) -> Caller:
    return pb.superuser()
