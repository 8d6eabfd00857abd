"""What a step receives. Steps never import the pipeline."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from sidecar.clock import Clock
from sidecar.outcome import Outcome
from sidecar.pocketbase.client import AudioRecord, Claim, PocketBaseClient
from sidecar.providers.base import Provider
from sidecar.settings import Settings


@dataclass
class StepContext:
    claim: Claim
    record: AudioRecord
    storage: PocketBaseClient
    provider: Provider  # the configured one: starts new work
    provider_for: Callable[[str], Provider]  # by name: finishes work an attempt row names
    settings: Settings
    clock: Clock
    workdir: Path  # private scratch space, removed after the step


Step = Callable[[StepContext], Awaitable[Outcome]]
