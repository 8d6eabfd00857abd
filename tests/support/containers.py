"""The project's Dockerfile and compose file run by a real Docker engine, as an operator runs them.

The Dockerfile starts ``FROM python:3.11-slim``. Where no image registry can be reached (a test
host reaches only the package registries), a stand-in is made under that name, once per machine:
Debian's Python 3.11 in a minimal Debian 12 made by ``debootstrap`` (the rootfs kept in
``CACHE`` for the next run), with ``python``/``pip`` where the official image has them and the
host's CA bundle, so that pip inside a build trusts what the host trusts (a host that reaches the
package registry through an inspecting proxy). A ``python:3.11-slim`` already present (the real
one, pulled) is used as it is. The project's image is built with the compose file's own build
settings; Docker's layer cache keeps the dependencies' layer between runs, so a later run
rebuilds only the project's code.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

BASE = "python:3.11-slim"
CACHE = Path("/var/cache/transcriber-tests")
ROOTFS = CACHE / "rootfs-bookworm-python3.11"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
STANDIN_LABEL = "transcriber.tests.standin"


def missing() -> str | None:
    """Why the Docker tests cannot run here, or None."""
    for tool, package in (("docker", "docker.io"), ("docker-compose", "docker-compose")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install {package})"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return "the Docker engine does not answer `docker info` (is dockerd running?)"
    if info.returncode != 0:
        return f"no Docker engine answers (start dockerd): {info.stderr.strip()[-300:]}"
    if not image_exists(BASE):
        if shutil.which("debootstrap") is None:
            return f"no {BASE} image and no debootstrap to make a stand-in (apt-get install debootstrap)"
        if os.geteuid() != 0:
            return f"no {BASE} image, and making a stand-in with debootstrap needs root"
    return None


def docker(
    *args: str, timeout: float = 600, check: bool = True, stdin: IO[bytes] | None = None
) -> subprocess.CompletedProcess[str]:
    if stdin is None:
        done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    else:  # a tar stream for `docker import -`: bytes in, text out
        raw = subprocess.run(["docker", *args], stdin=stdin, capture_output=True, timeout=timeout, check=False)
        done = subprocess.CompletedProcess(raw.args, raw.returncode, raw.stdout.decode(), raw.stderr.decode())
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {done.returncode}: {done.stderr[-3000:]}")
    return done


def image_exists(name: str) -> bool:
    return docker("image", "inspect", name, check=False, timeout=60).returncode == 0


@contextmanager
def machine_lock() -> Iterator[None]:
    """One test at a time on this machine builds or tags images (test processes run side by side)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "lock").open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_base() -> str:
    """``python:3.11-slim`` present; what it took ("present", or the stand-in made and how long)."""
    if image_exists(BASE):
        made = CACHE / "standin.txt"
        labels = docker("image", "inspect", "--format", "{{json .Config.Labels}}", BASE).stdout
        return f"{made.read_text()}, kept" if STANDIN_LABEL in labels and made.is_file() else "present"
    started = time.monotonic()
    made_rootfs = False
    if not (ROOTFS / ".complete").exists():
        shutil.rmtree(ROOTFS, ignore_errors=True)
        ROOTFS.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=python3,python3-pip,python3-venv,ca-certificates",
             "bookworm", str(ROOTFS)],
            capture_output=True, text=True, timeout=1800, check=True,
        )  # fmt: skip
        (ROOTFS / ".complete").touch()
        made_rootfs = True
    _adapt(ROOTFS)
    with subprocess.Popen(
        ["tar", "-C", str(ROOTFS), "--exclude=./.complete", "--exclude=./var/cache/apt/archives/*.deb", "-c", "."],
        stdout=subprocess.PIPE,
    ) as tar:
        docker(
            "import",
            "--change", "ENV LANG=C.UTF-8",
            "--change", "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--change", f"LABEL {STANDIN_LABEL}=debian-12-python3.11",
            "--change", 'CMD ["python3"]',
            "-", BASE,
            stdin=tar.stdout, timeout=600,
        )  # fmt: skip
    assert tar.returncode == 0
    took = time.monotonic() - started
    how = "debootstrap and import" if made_rootfs else "import of the kept rootfs"
    note = f"a stand-in, made in {took:.0f} s ({how}) on {time.strftime('%Y-%m-%d')}"
    (CACHE / "standin.txt").write_text(note)
    return note


def _adapt(rootfs: Path) -> None:
    """What the official image has that Debian's Python lacks, and the host's CA bundle for pip."""
    (rootfs / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)  # pip installs system-wide
    for name, target in (("python", "/usr/bin/python3"), ("pip", "/usr/bin/pip3")):
        link = rootfs / "usr/local/bin" / name
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    if HOST_CA.is_file():
        shutil.copyfile(HOST_CA, rootfs / "etc/ssl/certs/ca-certificates.crt")
    (rootfs / "etc/pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")


def compose(
    project: str, files: list[Path], env: dict[str, str], *args: str, timeout: float = 1200, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``docker-compose -p PROJECT -f FILE… ARGS`` with exactly ``env`` (and PATH, HOME) as its environment."""
    argv = ["docker-compose", "-p", project]
    for f in files:
        argv += ["-f", str(f)]
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"), **env}
    done = subprocess.run(
        [*argv, *args], env=full, cwd=files[0].parent, capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv[3:])} {' '.join(args)}: {done.returncode}:\n{done.stderr[-5000:]}")
    return done


def container_state(container: str) -> dict[str, Any]:
    """``docker inspect``'s State of a container, and its RestartCount."""
    data = json.loads(docker("inspect", container).stdout)[0]
    return {**data["State"], "RestartCount": data["RestartCount"]}
