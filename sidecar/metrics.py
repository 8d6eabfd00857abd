"""Prometheus metrics (P20): step runs by stage and outcome; records per stage."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from sidecar.clock import Clock
from sidecar.outcome import Verdict
from sidecar.storage.protocol import Storage

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
            "transcriber_claims", "Claim calls by result (work, empty, refused).", ["result"], registry=self.registry
        )
        self.set_aside = Counter(
            "transcriber_records_set_aside",
            "Records the claim could not read and halted (unclaimable) so that the queue behind them moves on.",
            registry=self.registry,
        )
        self.copies = Counter(
            "transcriber_provider_copies",
            "Provider-side copies (uploaded audio, stored results) removed, or that failed to be removed.",
            ["result"],
            registry=self.registry,
        )
        self.normalized_removed = Counter(
            "transcriber_normalized_copies_removed",
            "Normalized copies of finished recordings removed after [pipeline] keep_normalized.",
            registry=self.registry,
        )
        self.normalized_removed_bytes = Counter(
            "transcriber_normalized_removed_bytes",
            "Bytes of normalized copies of finished recordings removed.",
            registry=self.registry,
        )
        self.credentials_refused = Counter(
            "transcriber_credentials_refused",
            "Steps postponed because a provider refused our credentials (401/403), by stage.",
            ["stage"],
            registry=self.registry,
        )

    def step_finished(self, stage: str, verdict: Verdict) -> None:
        self.step_runs.labels(stage=stage, outcome=verdict.value).inc()

    def serve(self, host: str, port: int) -> Callable[[], None]:
        """Serves /metrics in a thread; returns a function that stops it."""
        server, thread = start_http_server(port, addr=host, registry=self.registry)
        log.info("metrics on http://%s:%d/metrics", host, port)

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(5)

        return stop

    async def refresh_records(self, storage: Storage, stages: Iterable[str]) -> None:
        counts = await storage.count_records(list(stages))
        for (stage, halted), n in counts.items():
            self.records.labels(stage=stage, halted=str(halted).lower()).set(n)

    async def keep_records_fresh(
        self, storage: Storage, stages: Iterable[str], clock: Clock, every: float = 15.0
    ) -> None:
        names = list(stages)
        while True:
            try:
                await self.refresh_records(storage, names)
            except Exception as exc:  # metrics must never take the workers down
                log.debug("records gauge refresh failed: %s", type(exc).__name__)
            await clock.sleep(every)
