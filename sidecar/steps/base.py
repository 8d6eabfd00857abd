"""What a step receives. Steps never import the pipeline.

The pipeline hands the providers to the steps without knowing what they are:
it holds a ``Providers`` (built by ``sidecar.serving.assembly``, the one place that
names a provider) and passes it on, so no pipeline module imports
``sidecar.providers``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from sidecar.insights.summarize import Engine
from sidecar.outcome import StepResult
from sidecar.providers.base import Provider
from sidecar.runtime.clock import Clock
from sidecar.settings import Settings
from sidecar.storage.model import AttemptRow, AudioRecord
from sidecar.storage.session import ClaimSession


@dataclass(frozen=True)
class Providers:
    """The speech providers of this process: the configured one and any by name."""

    current: Provider  # starts new work
    by_name: Callable[[str], Provider]  # finishes work an attempt row names

    @property
    def name(self) -> str:
        return self.current.name

    async def remove_copies(self, attempt: AttemptRow) -> None:
        """Removes an attempt's provider-side copies (its provider's ``cleanup``)."""
        await self.by_name(attempt.provider).cleanup(attempt.operation_id, attempt.audio_uri)


@dataclass(frozen=True)
class StepKit:
    """What the assembly gives every step of this process; the runner passes it on unread."""

    providers: Providers
    settings: Settings
    clock: Clock
    # Usage: seconds of audio a provider accepted to recognize (the metrics count them by provider).
    audio_sent: Callable[[str, float], None] = field(default=lambda provider, seconds: None)
    # The insights step's engine (None: insights are off).
    insights: Engine | None = None


@dataclass
class StepContext:
    session: ClaimSession  # the claimed record's reads and fenced writes, nothing else
    kit: StepKit
    workdir: Path  # private scratch space, removed after the step

    @property
    def record(self) -> AudioRecord:
        """The record's queue fields as they were when it was claimed."""
        return self.session.record

    @property
    def provider(self) -> Provider:
        """The configured provider: starts new work."""
        return self.kit.providers.current

    def provider_for(self, name: str) -> Provider:
        """A provider by name: finishes work an attempt row names."""
        return self.kit.providers.by_name(name)

    @property
    def settings(self) -> Settings:
        return self.kit.settings

    @property
    def clock(self) -> Clock:
        return self.kit.clock

    def audio_sent(self, provider: str, seconds: float) -> None:
        self.kit.audio_sent(provider, seconds)

    @property
    def insights(self) -> Engine | None:
        return self.kit.insights


Step = Callable[[StepContext], Awaitable[StepResult]]
