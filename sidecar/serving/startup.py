"""Start-up checks: every mistake an operator can make in the settings or the host is found
before anything starts, and reported as one line naming the key, file or port at fault.

The CLI prints ``StartupError`` as ``error: …`` and exits 2, with no traceback.
What needs the real thing to be checked (the model's files, a free metrics
port) is checked by doing it early: the model is loaded and the metrics port
bound before PocketBase starts or the workers sign in.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from sidecar.pipeline.stages import declare
from sidecar.providers.offline import diarizer
from sidecar.settings import Settings


class StartupError(Exception):
    """The service cannot start as configured; the message is one line and names the culprit."""


# The exit status of a start refused by a check.
EXIT_STARTUP = 2


def check_settings(settings: Settings) -> None:
    """What can be known from the settings alone: stages, the provider's credentials, the extras."""
    try:
        declare(settings.pipeline)
    except ValueError as exc:
        raise StartupError(str(exc)) from None
    provider = settings.provider.name
    if provider == "speechkit":
        _check_speechkit(settings)
    elif provider == "openai":
        _check_openai(settings)
    if provider == "offline" and settings.offline.diarize and not diarizer.installed():
        raise StartupError(f"[offline] diarize = true needs the diarize extra: {diarizer.EXTRA_HINT}")


def _check_speechkit(settings: Settings) -> None:
    sk, store = settings.speechkit, settings.object_storage
    if not (sk.api_key or sk.service_account_key or sk.iam_token):
        raise StartupError(
            "[provider] name = speechkit needs credentials: set [speechkit] api_key, service_account_key or iam_token"
        )
    if not store.bucket:
        raise StartupError("[provider] name = speechkit needs a bucket: set [object_storage] bucket")
    if not (store.access_key_id and store.secret_access_key):
        raise StartupError(
            "[provider] name = speechkit needs the bucket's keys: set [object_storage] access_key_id and"
            " secret_access_key"
        )


# Servers that never answer without a key; a self-hosted server may run without one.
_KEYED_HOSTS = {"api.openai.com", "api.groq.com"}


def _check_openai(settings: Settings) -> None:
    oa = settings.openai
    host = urlsplit(oa.base_url).hostname or ""
    if not oa.api_key and host in _KEYED_HOSTS:
        raise StartupError(f"[provider] name = openai with base_url {oa.base_url} needs [openai] api_key")


def ensure_port_free(listen: str, what: str) -> None:
    """Refuses a ``HOST:PORT`` another program listens on, naming that program where it can be known."""
    host, _, port_text = listen.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104 (a check of the address the operator asked for)
    try:
        port = int(port_text)
    except ValueError:
        raise StartupError(f"{what} {listen!r} is not HOST:PORT") from None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As PocketBase and the metrics server bind: a port left in TIME_WAIT by a restart is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            holder = port_holder(port)
            why = f"is in use by {holder}" if holder else f"cannot be used ({exc.strerror})"
            raise StartupError(f"{what} {host}:{port} {why}") from None


def port_holder(port: int) -> str:
    """The process listening on ``port``, described ("" when it cannot be known, e.g. another user's)."""
    try:
        connections = psutil.net_connections(kind="inet")
    except psutil.Error:
        return ""
    for c in connections:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port:
            if c.pid is None:
                return "another program"
            try:
                proc = psutil.Process(c.pid)
                return f"PID {c.pid} ({' '.join(proc.cmdline())[:200] or proc.name()})"
            except psutil.Error:
                return f"PID {c.pid}"
    return ""


def resolved(path: Path) -> Path:
    """A directory setting as an absolute path: a start from another directory shows where it looks."""
    return path.expanduser().resolve()
