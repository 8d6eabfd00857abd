from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import respx

from sidecar.runtime.clock import FakeClock
from sidecar.storage.memory import InMemoryStorage
from tests.support.sidecar import twin


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start_ms=1_800_000_000_000)


@pytest.fixture
def storage(clock: FakeClock) -> InMemoryStorage:
    return twin(clock)


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    """The providers' HTTP APIs, mocked: every route a test sets up must be called, nothing else may be."""
    with respx.mock(assert_all_called=True, assert_all_mocked=True) as router:
        yield router


@pytest.fixture
def audio(tmp_path: Path) -> Path:
    """A small normalized copy: only its bytes and size matter to the providers under test."""
    path = tmp_path / "normalized.ogg"
    path.write_bytes(b"OggS" + b"\x01" * 3000)
    return path
