"""The project's JavaScript (hooks, migrations, the sender's page) passes oxlint with .oxlintrc.json.

oxlint comes from PyPI with the dev extra, so the README's test command and CI
run this on a machine that has only Python; a missing oxlint skips here and,
under ``TESTS_STRICT=1`` (CI), fails.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.operator import ROOT
from tests.support.tools import require

CONFIG = ROOT / ".oxlintrc.json"
LINTED = ("pb_hooks", "pb_migrations", "pb_public")


def oxlint() -> str | None:
    """The oxlint beside this interpreter (the venv's), else one on PATH."""
    beside = Path(sys.executable).parent / "oxlint"
    return str(beside) if beside.is_file() else shutil.which("oxlint")


def configured_globals() -> set[str]:
    """The globals .oxlintrc.json declares (its // comments removed)."""
    text = "\n".join(line for line in CONFIG.read_text().splitlines() if not line.lstrip().startswith("//"))
    return set(json.loads(text)["globals"])


def test_the_javascript_has_no_lint_findings() -> None:
    exe = oxlint()
    require(None if exe else "oxlint is not installed (pip install -e '.[dev]')")
    assert exe is not None
    run = subprocess.run(
        [exe, "-c", str(CONFIG), "--deny-warnings", "-f", "unix", *LINTED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_finding_fails_the_lint(tmp_path: Path) -> None:
    """The configuration does find what it is there for (an undeclared name, an unused variable)."""
    exe = oxlint()
    require(None if exe else "oxlint is not installed (pip install -e '.[dev]')")
    assert exe is not None
    bad = tmp_path / "pb_hooks" / "bad.pb.js"
    bad.parent.mkdir()
    bad.write_text('routerAdd("GET", "/x", (e) => { const unused = 1; return e.json(200, undeclared); });\n')
    run = subprocess.run([exe, "-c", str(CONFIG), "-f", "unix", str(bad)], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert re.search(r"no-undef", run.stdout) and re.search(r"no-unused-vars", run.stdout), run.stdout
