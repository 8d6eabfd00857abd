"""Prometheus metrics (P20): step runs by stage and outcome; records per stage."""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

log = logging.getLogger("transcriber.metrics")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.step_runs = Counter(
            "transcriber_step_runs",
            "Step runs by the stage the record was in and how they ended.",
            ["stage", "outcome"],
            registry=self.registry,
        )
        self.records = Gauge(
            "transcriber_records",
            "Records per stage; halted ones counted apart.",
            ["stage", "halted"],
            registry=self.registry,
        )
        self.claims = Counter(
            "transcriber_claims", "Claim calls by result (work, empty).", ["result"], registry=self.registry
        )

    def step_finished(self, stage: str, outcome: str) -> None:
        self.step_runs.labels(stage=stage, outcome=outcome).inc()

    def serve(self, host: str, port: int) -> None:
        start_http_server(port, addr=host, registry=self.registry)
        log.info("metrics on http://%s:%d/metrics", host, port)
