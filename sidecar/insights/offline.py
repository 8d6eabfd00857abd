"""The offline insights engine: llama.cpp (the ``xllamacpp`` binding, extra ``transcriber[insights]``)
running a GGUF model the owner supplies, in a process of our own for the length of one step.

Why a child process and not the worker's own: its threads wait passively
(``OMP_WAIT_POLICY`` is read once, when OpenMP starts, and recognition's
threads must keep theirs); recognition stops it on the spot and continues it
after (SIGSTOP/SIGCONT, ``sidecar.runtime.cpus.CpuGate``); a cancelled step ends it at once
(a llama.cpp call cannot be interrupted from Python); and its memory (about
2 GB for a 1.5B model) goes back when the step ends. It listens on 127.0.0.1
only, behind a random key made for this run, and is spoken to as any
OpenAI-compatible server (``chat.ChatServer``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.abc import Process

from sidecar.insights.chat import ChatServer
from sidecar.outcome import RetryableError
from sidecar.runtime.clock import Clock
from sidecar.runtime.cpus import CpuGate
from sidecar.runtime.threads import usable_cpus

__all__ = ["LOAD_TIMEOUT", "EngineFailed", "OfflineEngine", "xllamacpp_missing"]

LOAD_TIMEOUT = 300.0
# One request may wait a long while: a stopped engine (recognition runs) does not answer meanwhile.
REQUEST_TIMEOUT = timedelta(hours=4)


class EngineFailed(RetryableError):
    """The engine's process could not start or died."""


def xllamacpp_missing() -> str | None:
    """Why the offline engine cannot run here (the extra not installed), or None."""
    import importlib.util

    if importlib.util.find_spec("xllamacpp") is None:
        return "the offline insights engine needs the insights extra: pip install 'transcriber[insights]'"
    return None


class _Child:
    """The engine's process, as the CPU gate stops and continues it."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.stopped = False

    def pause(self) -> None:
        if self.process.returncode is None and not self.stopped:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGSTOP)
            self.stopped = True

    def resume(self) -> None:
        if self.process.returncode is None and self.stopped:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGCONT)
            self.stopped = False


class OfflineChat(ChatServer):
    """The child's server, with its exact token count (llama.cpp's ``/tokenize``)."""

    def __init__(self, address: str, model: Path, key: str, context_tokens: int, clock: Clock) -> None:
        self._address = address.rstrip("/")
        self._key_value = key
        self._http_client = httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_TIMEOUT.total_seconds(), connect=10.0))
        super().__init__(
            self._address,
            model.name,
            api_key=key,
            request_timeout=REQUEST_TIMEOUT,
            context_tokens=context_tokens,
            client=self._http_client,
            clock=clock,
            name="offline",
        )

    async def aclose(self) -> None:
        await self._http_client.aclose()

    def _body(self, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
        body = super()._body(messages, schema, max_tokens)
        if self.structured == "json_schema":
            # The schema as llama.cpp's own grammar, without the whitespace a model pretty-prints JSON with:
            # every token written costs as much as five read (measured: 9 against 45 a second on 2 cores).
            del body["response_format"]
            compact = {**schema, "x-guidance": {"whitespace_flexible": False}}
            body["grammar"] = "%llguidance {}\nstart: %json " + json.dumps(compact)
        return body

    async def count_tokens(self, text: str) -> int:
        try:
            resp = await self._http_client.post(
                f"{self._address}/tokenize",
                json={"content": text},
                headers={"Authorization": f"Bearer {self._key_value}"},
            )
            resp.raise_for_status()
            return len(resp.json()["tokens"])
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise EngineFailed(f"the offline engine could not count tokens ({type(exc).__name__})") from exc


class OfflineEngine:
    """Starts the engine for one step: ``async with engine.open() as chat``."""

    name = "offline"

    def __init__(self, model: Path, *, context_tokens: int, threads: int, gate: CpuGate, clock: Clock) -> None:
        self.model = model
        self.context_tokens = context_tokens
        self.threads = threads or usable_cpus()
        self.gate = gate
        self.clock = clock

    @asynccontextmanager
    async def open(self) -> AsyncIterator[OfflineChat]:
        key = secrets.token_urlsafe(24)
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        with tempfile.TemporaryFile() as log:
            process = await anyio.open_process(
                [sys.executable, "-m", "sidecar.insights.llama_child"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
            )
            child = _Child(process)
            try:
                assert process.stdin is not None and process.stdout is not None
                cfg = {"model": str(self.model), "n_ctx": self.context_tokens, "threads": self.threads, "api_key": key}
                await process.stdin.send((json.dumps(cfg) + "\n").encode())
                with self.gate.engine(child):
                    address = await self._address(process, log)
                    chat = OfflineChat(address, self.model, key, self.context_tokens, self.clock)
                    try:
                        yield chat
                    finally:
                        with anyio.CancelScope(shield=True):
                            await chat.aclose()
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(process, child)

    async def _address(self, process: Process, log: object) -> str:
        assert process.stdout is not None
        line = b""
        with anyio.move_on_after(LOAD_TIMEOUT):
            while not line.endswith(b"\n"):
                try:
                    line += await process.stdout.receive()
                except anyio.EndOfStream:
                    break
        try:
            said = json.loads(line.decode() or "{}")
        except ValueError:
            said = {}
        if "address" in said:
            return str(said["address"])
        detail = said.get("error") or _tail(log) or "no answer"
        raise EngineFailed(f"the offline engine could not load {self.model.name}: {detail}")


def _tail(log: object) -> str:
    try:
        log.seek(0)  # type: ignore[attr-defined]
        text = log.read().decode(errors="replace")  # type: ignore[attr-defined]
    except (OSError, AttributeError):
        return ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " / ".join(lines[-3:])[-600:]


async def _stop(process: Process, child: _Child) -> None:
    """Ends the child: its input closed, then a terminate, then a kill (a stopped one is continued first)."""
    child.resume()
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    with anyio.move_on_after(2):
        await process.wait()
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        with anyio.move_on_after(3):
            await process.wait()
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
