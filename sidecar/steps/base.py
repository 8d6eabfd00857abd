"""What a step receives. Steps never import the pipeline."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from sidecar.clock import Clock
from sidecar.insights.summarize import Engine
from sidecar.outcome import StepResult
from sidecar.providers.base import Provider
from sidecar.settings import Settings
from sidecar.storage.model import AudioRecord
from sidecar.storage.session import ClaimSession


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
