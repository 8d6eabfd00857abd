"""What a step receives. Steps never import the pipeline.

The pipeline hands the providers to the steps without knowing what they are:
it holds a ``Providers`` (built by ``sidecar.service``, the one place that
names a provider) and passes it on, so no pipeline module imports
``sidecar.providers``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from sidecar.clock import Clock
from sidecar.insights.summarize import Engine
from sidecar.outcome import StepResult
from sidecar.providers.base import Provider
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


@dataclass
class StepContext:
    session: ClaimSession  # the claimed record's reads and fenced writes, nothing else
    provider: Provider  # the configured one: starts new work
    provider_for: Callable[[str], Provider]  # by name: finishes work an attempt row names
    settings: Settings
    clock: Clock
    workdir: Path  # private scratch space, removed after the step
    # Usage: seconds of audio a provider accepted to recognize (the metrics count them by provider).
    audio_sent: Callable[[str, float], None] = field(default=lambda provider, seconds: None)
    # The insights step's engine (None: insights are off).
    insights: Engine | None = None

    @property
    def record(self) -> AudioRecord:
        """The record's queue fields as they were when it was claimed."""
        return self.session.record


Step = Callable[[StepContext], Awaitable[StepResult]]
