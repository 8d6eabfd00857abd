"""System programs some tests drive (Debian's Chromium, Prometheus's promtool).

``scripts/test`` installs them where it can (root with apt) and says loudly
when it cannot; such tests are then skipped with the reason. Under
``TESTS_STRICT=1`` (``.ci/run`` sets it) a missing program fails
the test instead: CI never passes by skipping them.
"""

from __future__ import annotations

import os

import pytest

STRICT_ENV = "TESTS_STRICT"


def require(missing: str | None) -> None:
    """Skips (or, strict, fails) the calling test when ``missing`` says why it cannot run."""
    if missing is None:
        return
    if os.environ.get(STRICT_ENV) == "1":
        pytest.fail(f"cannot run: {missing}", pytrace=False)
    pytest.skip(missing)
