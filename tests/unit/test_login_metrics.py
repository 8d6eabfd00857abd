"""What PocketBase's login guard saw, as the workers export it: PocketBase counts wrong passwords since it
started, so the worker's counter grows by what is new, and by all of it after PocketBase restarted."""

from __future__ import annotations

import re

import pytest
from prometheus_client import generate_latest

from sidecar.pipeline.metrics import Metrics
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import LoginFigures

pytestmark = pytest.mark.anyio


def exported(metrics: Metrics) -> dict[str, float]:
    text = generate_latest(metrics.registry).decode()
    pattern = r"^(transcriber_(?:failed_logins_total|accounts_under_attack)) (\S+)$"
    return {name: float(value) for name, value in re.findall(pattern, text, re.M)}


async def test_the_counter_follows_pocketbase_across_its_restart(storage: InMemoryStorage) -> None:
    metrics = Metrics()
    assert exported(metrics) == {"transcriber_failed_logins_total": 0.0, "transcriber_accounts_under_attack": 0.0}
    storage.logins = LoginFigures(failed_logins=20, refused_logins=980, accounts_under_attack=1)
    await metrics.refresh_logins(storage)
    assert exported(metrics) == {"transcriber_failed_logins_total": 20.0, "transcriber_accounts_under_attack": 1.0}
    storage.logins = LoginFigures(failed_logins=25, accounts_under_attack=1)
    await metrics.refresh_logins(storage)
    assert exported(metrics)["transcriber_failed_logins_total"] == 25.0  # 5 more, not 25 more
    # PocketBase restarted (its counts start again) and saw 3 more: those 3 are added, the attack forgotten.
    storage.logins = LoginFigures(failed_logins=3, accounts_under_attack=0)
    await metrics.refresh_logins(storage)
    assert exported(metrics) == {"transcriber_failed_logins_total": 28.0, "transcriber_accounts_under_attack": 0.0}
