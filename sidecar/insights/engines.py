"""The configured insights engine: ``offline`` (llama.cpp in a process of ours) or ``openai`` (a chat server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from sidecar.insights.chat import ChatServer
from sidecar.insights.summarize import Engine
from sidecar.runtime.clock import Clock
from sidecar.runtime.cpus import CpuGate
from sidecar.settings import InsightsSettings

__all__ = ["OpenAIEngine", "make_engine"]


class OpenAIEngine:
    """Any OpenAI-compatible chat-completions server (Ollama, llama.cpp's server, vLLM, OpenAI, …)."""

    name = "openai"

    def __init__(self, settings: InsightsSettings, clock: Clock, *, client: httpx.AsyncClient | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self._client = client

    @asynccontextmanager
    async def open(self) -> AsyncIterator[ChatServer]:
        s = self.settings
        chat = ChatServer(
            s.base_url,
            s.model,
            api_key=s.api_key.get_secret_value() if s.api_key else None,
            request_timeout=s.timeout,
            context_tokens=s.context_tokens,
            client=self._client,
            clock=self.clock,
            parallel=s.parallel,
        )
        try:
            yield chat
        finally:
            await chat.aclose()


def make_engine(settings: InsightsSettings, gate: CpuGate, clock: Clock) -> Engine | None:
    """The engine ``[insights] provider`` names, or None when insights are off."""
    if settings.provider == "openai":
        return OpenAIEngine(settings, clock)
    if settings.provider == "offline":
        from sidecar.insights.offline import OfflineEngine

        return OfflineEngine(
            Path(settings.model).expanduser(),
            context_tokens=settings.context_tokens,
            threads=settings.threads,
            gate=gate,
            clock=clock,
        )
    return None
