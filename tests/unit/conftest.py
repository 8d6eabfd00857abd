from __future__ import annotations

import pytest

from sidecar.runtime.clock import FakeClock
from sidecar.storage.memory import InMemoryStorage
from tests.support.sidecar import twin


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start_ms=1_800_000_000_000)


@pytest.fixture
def storage(clock: FakeClock) -> InMemoryStorage:
    return twin(clock)
