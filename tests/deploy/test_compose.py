"""The compose file, as the README runs it: ``docker compose up`` with no settings file, the image
built from this checkout by the Dockerfile, a sender's upload over HTTP transcribed by the worker
container; and a release mismatch between the containers refused with one line.

Real containers on a real Docker engine (``docker-compose`` 1.29, which reads the same file).
Each test is a compose project of its own (its containers, network and volume), taken down with
its volume at the end.
"""

from __future__ import annotations

import re
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sidecar import __version__
from testkit.pocketbase import PASSWORD, free_port, signed_in
from tests.support import containers
from tests.support.containers import compose, container_state, docker, ensure_base, machine_lock
from tests.support.operator import ROOT
from tests.support.tools import require
from tests.support.waiting import eventually_sync

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

COMPOSE = ROOT / "docker-compose.yml"
SAMPLE = ROOT / "samples" / "sample.ogg"
IMAGE = str(yaml.safe_load(COMPOSE.read_text())["x-image"]["image"]).replace("${EXTRAS:-base}", "base")
OLDER = "0.1.9"  # a release other than this one, for the image made to stand for it


@dataclass(frozen=True)
class Built:
    tag: str
    how: str  # what it took, for the run's figures


@pytest.fixture(scope="module")
def built() -> Built:
    """The project's image, built by the compose file's build settings (Docker's cache keeps the
    dependencies' layer between runs)."""
    require(containers.missing())
    with machine_lock():
        base = ensure_base()
        started = time.monotonic()
        compose("transcribertestbuild", [COMPOSE], {"SERVICE_PASSWORD": "unused"}, "build", timeout=3600)
        took = time.monotonic() - started
    size = int(docker("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout.strip())
    return Built(IMAGE, f"{IMAGE} built in {took:.0f} s ({size / 1e9:.2f} GB); base {containers.BASE}: {base}")


@pytest.fixture
def project() -> Iterator[str]:
    """A compose project name of the test's own; everything of it (the volume too) removed at the end."""
    name = f"transcribertest{secrets.token_hex(4)}"
    yield name
    compose(name, [COMPOSE], {"SERVICE_PASSWORD": "unused"}, "down", "-v", "--remove-orphans", check=False)


def the_readme_line(port: int) -> dict[str, str]:
    """The README's `docker compose up` line's variables (and a free port: 8090 may be taken here)."""
    return {
        "SERVICE_PASSWORD": secrets.token_hex(16),
        "SUPERUSER_EMAIL": "owner@example.com",
        "SUPERUSER_PASSWORD": PASSWORD,
        "HTTP_PORT": str(port),
    }


def container(project: str, env: dict[str, str], service: str) -> str:
    found = compose(project, [COMPOSE], env, "ps", "-q", service).stdout.strip()
    assert found, f"no container for {service}"
    return found


def logs(project: str, files: list[Path], env: dict[str, str], service: str = "") -> str:
    return compose(project, files, env, "logs", "--no-color", *([service] if service else []), check=False).stdout


def health(cid: str) -> str:
    """The container's health check's status ("starting", "healthy", "unhealthy")."""
    found = container_state(cid).get("Health")
    return str(found.get("Status", "")) if isinstance(found, dict) else ""


def refused_and_restarted(cid: str) -> dict[str, Any]:
    """The container's state once it has exited 2 after a restart (between two tries: Docker waits
    longer before each)."""

    def seen() -> dict[str, Any] | None:
        state = container_state(cid)
        return state if state["RestartCount"] >= 1 and state["ExitCode"] == 2 else None

    found = eventually_sync(seen, within=180, every=0.1, what="exit 2, restarted by the restart policy")
    assert found is not None
    return found


def test_compose_up_with_no_settings_file_transcribes_the_sample(
    built: Built, project: str, figures: dict[str, str]
) -> None:
    port = free_port()
    env = the_readme_line(port)
    started = time.monotonic()
    compose(project, [COMPOSE], env, "up", "-d", "--no-build")
    pocketbase, sidecar = container(project, env, "pocketbase"), container(project, env, "sidecar")

    def both_healthy() -> bool:
        for cid in (pocketbase, sidecar):
            state = container_state(cid)
            assert state["Status"] == "running" and state["RestartCount"] == 0, (state, logs(project, [COMPOSE], env))
        return health(pocketbase) == health(sidecar) == "healthy"

    eventually_sync(both_healthy, within=300, every=1, what="both health checks passing")
    ready = time.monotonic() - started
    # No settings file anywhere: the image's working directory holds none, nor is one named.
    for cid in (pocketbase, sidecar):
        listing = docker("exec", cid, "sh", "-c", "ls -A /app; printenv TRANSCRIBER_CONFIG || true").stdout
        assert listing.strip() == "", listing
    # The hooks PocketBase runs are the image's own, of this release.
    assert httpx.get(f"http://127.0.0.1:{port}/api/transcriber/version", timeout=10).json() == {"version": __version__}

    added = compose(project, [COMPOSE], env, "exec", "-T", "pocketbase", "transcriber", "user", "add",
                    "ann@example.com", "--password", PASSWORD)  # fmt: skip
    assert "ann@example.com" in added.stdout + added.stderr
    sender = signed_in(f"http://127.0.0.1:{port}", "sender", "users", "ann@example.com")
    uploaded = time.monotonic()
    try:
        rid = sender.upload(SAMPLE)

        def done() -> dict[str, object] | None:
            poll = sender.poll(rid)
            assert not poll["halted"], (poll, logs(project, [COMPOSE], env, "sidecar"))
            return poll if poll["status"] == "done" else None

        poll = eventually_sync(done, within=300, every=0.5, what="the sample transcribed")
        assert poll is not None
    finally:
        sender.http.close()
    transcribed = time.monotonic() - uploaded
    assert "welcome" in str(poll["text"]).lower(), poll["text"]
    figures["the compose file's image"] = built.how
    figures["docker compose up"] = (
        f"both health checks passing {ready:.0f} s after `up -d` (no settings file);"
        f" the sample transcribed {transcribed:.0f} s after its upload"
    )


def override(tmp: Path, services: dict[str, object]) -> Path:
    """A second compose file over the project's (``-f docker-compose.yml -f override.yml``)."""
    path = tmp / "override.yml"
    path.write_text(yaml.safe_dump({"services": services}))
    return path


def refusals(text: str) -> set[str]:
    """The distinct ``error:`` lines of a container's output (compose prefixes each with the container)."""
    return {m.group(1) for m in re.finditer(r"(error: .*)$", text, flags=re.MULTILINE)}


def test_hooks_mounted_from_an_older_checkout_are_refused(built: Built, project: str, tmp_path: Path) -> None:
    """The compose file's old way: the host's pb_hooks mounted over the image's (a checkout from before
    release files, so none) and named in the environment. PocketBase refuses, exit 2, and is
    restarted by the restart policy (Docker's growing delay), refusing again each time."""
    old = tmp_path / "pb_hooks"
    shutil.copytree(ROOT / "pb_hooks", old)
    (old / "RELEASE").unlink()
    old.chmod(0o755)
    files = [COMPOSE, override(tmp_path, {"pocketbase": {
        "volumes": [f"{old}:/app/pb_hooks:ro"],
        "environment": {"TRANSCRIBER_POCKETBASE__HOOKS_DIR": "/app/pb_hooks"},
    }})]  # fmt: skip
    env = the_readme_line(free_port())
    compose(project, files, env, "up", "-d", "--no-build", "pocketbase")
    refused_and_restarted(compose(project, files, env, "ps", "-q", "pocketbase").stdout.strip())
    said = refusals(logs(project, files, env, "pocketbase"))
    assert said == {
        f"error: the hooks in /app/pb_hooks are of no release (no RELEASE file: from before 0.2.0, or not this"
        f" project's), this transcriber is release {__version__}: use the hooks of its own release (remove the"
        " mount or the [pocketbase] hooks_dir that names them)"
    }, logs(project, files, env)


def test_a_worker_refuses_a_pocketbase_of_another_release(built: Built, project: str, tmp_path: Path) -> None:
    """PocketBase from an image of another release (this one with its release marks rewritten, as a
    release's own build would have them), the worker from this release's: the worker says so in one
    line, exit 2, and the restart policy keeps trying (it would start once PocketBase is replaced)."""
    other = f"transcriber-test:{OLDER}"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "Dockerfile").write_text(
        f"FROM {built.tag}\nUSER root\n"
        "RUN site=$(python -c 'import sidecar, pathlib; print(pathlib.Path(sidecar.__file__).parents[1])')"
        f" && sed -i 's/^Version: .*/Version: {OLDER}/' $site/transcriber-*.dist-info/METADATA"
        f" && echo {OLDER} > $site/sidecar/_pb/pb_hooks/RELEASE"
        f" && echo {OLDER} > $site/sidecar/_pb/pb_migrations/RELEASE\n"
        "USER transcriber\n"
    )
    with machine_lock():
        docker("build", "-t", other, str(tmp_path / "other"))
    assert docker("run", "--rm", other, "transcriber", "--version").stdout.strip() == f"transcriber {OLDER}"
    files = [COMPOSE, override(tmp_path, {"pocketbase": {"image": other}})]
    port = free_port()
    env = the_readme_line(port)
    compose(project, files, env, "up", "-d", "--no-build")
    pocketbase = compose(project, files, env, "ps", "-q", "pocketbase").stdout.strip()
    assert health(pocketbase) == "healthy"  # `up` started the worker only once PocketBase was healthy
    assert httpx.get(f"http://127.0.0.1:{port}/api/transcriber/version", timeout=10).json() == {"version": OLDER}
    refused_and_restarted(compose(project, files, env, "ps", "-q", "sidecar").stdout.strip())
    said = refusals(logs(project, files, env, "sidecar"))
    assert said == {
        f"error: PocketBase at http://pocketbase:8090 runs release {OLDER}, this worker is release {__version__}:"
        " run both from one release (the same image, or the same installed package)"
    }, logs(project, files, env)
    assert "pool running" not in logs(project, files, env, "sidecar")
