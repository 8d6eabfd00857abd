"""The shipped Prometheus alert rules (deploy/prometheus/alerts.yml) cover the README's "alert when"
column and name only metrics the service exports; promtool checks and unit-tests them."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import yaml
from prometheus_client import generate_latest

from sidecar.pipeline.metrics import Metrics
from tests.support.operator import ROOT
from tests.support.tools import require

RULES = ROOT / "deploy" / "prometheus"


def _alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load((RULES / "alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _readme_metrics() -> list[str]:
    """The metrics of the README's table that have something in its "alert when" column."""
    rows = re.findall(
        r"^\| `(transcriber_\w+)(?:\{[^}]*\})?` \|[^|]*\| ([^|]+) \|$", (ROOT / "README.md").read_text(), re.M
    )
    return [name for name, when in rows if when.strip()]


def test_every_alert_in_the_readme_has_a_rule_and_every_rule_names_real_metrics() -> None:
    exported = set(re.findall(r"^# TYPE (\w+) ", generate_latest(Metrics().registry).decode(), re.M))
    counters = {name + "_total" for name in exported}
    alerts = _alerts()
    used = {m for rule in alerts for m in re.findall(r"\btranscriber_\w+", rule["expr"])}
    assert used <= exported | counters, used - exported - counters
    documented = _readme_metrics()
    assert documented, "the README's metrics table was not found"
    missing = [name for name in documented if name not in used]
    assert not missing, f"no alert rule for {missing}"
    assert any('up{job="transcriber"}' in rule["expr"] for rule in alerts)  # the worker's health
    for rule in alerts:
        assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"]


def test_promtool_checks_the_rules_and_their_unit_tests() -> None:
    require(
        None if shutil.which("promtool") else "no promtool (Debian's prometheus package: apt-get install prometheus)"
    )
    check = subprocess.run(["promtool", "check", "rules", "alerts.yml"], cwd=RULES, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run(["promtool", "test", "rules", "alerts_test.yml"], cwd=RULES, capture_output=True, text=True)
    assert test.returncode == 0, test.stdout + test.stderr
