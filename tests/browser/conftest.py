"""What every browser test needs: a browser (else it skips) and its own PocketBase."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.pocketbase import PocketBaseServer, running_pocketbase
from tests.browser.panel import missing_browser
from tests.support.tools import require


@pytest.fixture(autouse=True)
def _browser() -> None:
    require(missing_browser())


@pytest.fixture
def pb(tmp_path: Path) -> Iterator[PocketBaseServer]:
    """PocketBase in ``pb`` below the test's tmp dir: the browser and the screenshots have folders beside it."""
    with running_pocketbase(tmp_path / "pb") as server:
        yield server
